package report

import (
	"context"

	"github.com/jobsched/jobsched/pkg/backlog"
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

// queueStatuses are the queues of status st's plan p (nil for a configuration without queues:), each with its
// backlog from bs and what the query doctor says of its next read.
func queueStatuses(ctx context.Context, s *scheduler.Scheduler, p *scheduler.Plan, bs []backlog.Count) []QueueStatus {
	if len(p.Queues) == 0 {
		return nil
	}
	out := make([]QueueStatus, len(p.Queues))
	for i, q := range p.Queues {
		qs := QueueStatus{Name: q.Name, Priority: q.Priority, Weight: q.Weight,
			Work:  work(p, q.Name, q.Unfinished, q.Slots, q.Limit, q.Blocked, q.Capacity),
			Retry: retryPolicy(s.Config.QueueConfig(i)), GroupsAtCap: q.GroupsAtCap}
		qs.Backlog, qs.BacklogCapped = bs[i].Rows, bs[i].Capped
		qs.Holds, qs.RowRequests = q.Holds, scheduler.RowRequestsOf(s.Config.QueueConfig(i))
		if g := s.Config.AllQueues()[i].Limits.PerGroup; g != nil {
			qs.GroupMax = g.MaxActive
		}
		qs.Query = s.ExplainQueue(ctx, p, i) // the queue's next read
		out[i] = qs
	}
	return out
}
