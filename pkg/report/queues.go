package report

import (
	"context"
	"fmt"

	"github.com/jobsched/jobsched/pkg/scheduler"
)

// QueueStatus is one queue of an install with queues: in status (Status.Queues): its backlog, its Jobs, its slots
// and what bound them, its capacity, and its groups at their cap (limits.perGroup).
type QueueStatus struct {
	Name     string `json:"name"`
	Priority int    `json:"priority"`
	Weight   int    `json:"weight"`
	Work
	Retry RetryPolicy `json:"retry"`
	// GroupMax is limits.perGroup.maxActive (0 without a perGroup), and GroupsAtCap the groups holding that many
	// unfinished Jobs, sorted: the next pass reads no row of theirs.
	GroupMax    int      `json:"groupMaxActive,omitempty"`
	GroupsAtCap []string `json:"groupsAtCap,omitempty"`
	// Query is what the query doctor says about the queue's read (EXPLAIN, never run); nil without a database.
	Query *QueryFinding `json:"query,omitempty"`
}

// QueueBacklog is one queue's backlog: the rows its query selects that have no Job, counted up to BacklogCap.
type QueueBacklog struct {
	Queue  string
	Rows   int
	Capped bool
}

// queueBacklogs counts each queue's backlog, leaving out the keys the plan p excludes from the queue's read and
// those of extra (a queue's creates). For a plan of one queue (no Plan.Queues) it is one count, of the plan's
// exclusions, named "".
func queueBacklogs(ctx context.Context, s *scheduler.Scheduler, p *scheduler.Plan, extra func(queue string) []string) ([]QueueBacklog, error) {
	qs := s.AllQueues()
	type part struct {
		name    string
		exclude []string
	}
	parts := []part{{"", p.Excluded()}}
	if len(p.Queues) > 0 {
		if len(p.Queues) != len(qs) {
			return nil, fmt.Errorf("counting the backlog: %d queues planned, %d sources", len(p.Queues), len(qs))
		}
		parts = parts[:0]
		for _, q := range p.Queues {
			parts = append(parts, part{q.Name, q.Excluded()})
		}
	}
	out := make([]QueueBacklog, len(parts))
	for i, pt := range parts {
		exclude := pt.exclude
		if extra != nil {
			exclude = append(exclude, extra(pt.name)...)
		}
		n, err := qs[i].Source.Count(ctx, exclude, BacklogCap+1)
		if err != nil {
			if pt.name != "" {
				return nil, fmt.Errorf("queue %s: %w", pt.name, err)
			}
			return nil, err
		}
		out[i] = QueueBacklog{Queue: pt.name, Rows: min(n, BacklogCap), Capped: n > BacklogCap}
	}
	return out, nil
}

// Total is the install's backlog of the queues' backlogs: their sum, up to BacklogCap.
func Total(bs []QueueBacklog) (rows int, capped bool) {
	for _, b := range bs {
		rows += b.Rows
		capped = capped || b.Capped
	}
	return min(rows, BacklogCap), capped || rows > BacklogCap
}

// queueStatuses are the queues of status st's plan p (nil for a configuration without queues:), each with its
// backlog from bs and what the query doctor says of its next read.
func queueStatuses(ctx context.Context, s *scheduler.Scheduler, p *scheduler.Plan, bs []QueueBacklog) []QueueStatus {
	if len(p.Queues) == 0 {
		return nil
	}
	out := make([]QueueStatus, len(p.Queues))
	for i, q := range p.Queues {
		qs := QueueStatus{Name: q.Name, Priority: q.Priority, Weight: q.Weight,
			Work:  work(p, q.Name, q.Unfinished, q.Slots, q.Limit, q.Blocked, q.Capacity),
			Retry: retryPolicy(s.Config.QueueConfig(i)), GroupsAtCap: q.GroupsAtCap}
		qs.Backlog, qs.BacklogCapped = bs[i].Rows, bs[i].Capped
		if g := s.Config.AllQueues()[i].Limits.PerGroup; g != nil {
			qs.GroupMax = g.MaxActive
		}
		qs.Query = s.ExplainQueue(ctx, p, i) // the queue's next read
		out[i] = qs
	}
	return out
}
