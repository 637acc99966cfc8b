// Package backlog counts the rows the queries select that have no Job.
package backlog

import (
	"context"
	"fmt"

	"github.com/jobsched/jobsched/pkg/scheduler"
)

// Cap is how far a backlog is counted: status shows it, a tick pushes it to the metrics.
const Cap = 10000

// AfterPass counts each queue's backlog after the pass p: the rows its query selects that have no Job, less the rows
// p created Jobs for, up to Cap; one more bounded read per queue, which the metrics of a tick use. For a
// configuration without queues: it is one count, of queue "".
func AfterPass(ctx context.Context, s *scheduler.Scheduler, p *scheduler.Plan) ([]Count, error) {
	return Counts(ctx, s, p, func(queue string) []string {
		var keys []string
		for _, c := range p.Creates {
			if c.Queue == queue {
				keys = append(keys, c.Key)
			}
		}
		return keys
	})
}

// Count is one queue's backlog: the rows its query selects that have no Job, counted up to Cap.
type Count struct {
	Queue  string
	Rows   int
	Capped bool
}

// Counts counts each queue's backlog, leaving out the keys the plan p excludes from the queue's read and
// those of extra (a queue's creates). For a plan of one queue (no Plan.Queues) it is one count, of the plan's
// exclusions, named "".
func Counts(ctx context.Context, s *scheduler.Scheduler, p *scheduler.Plan, extra func(queue string) []string) ([]Count, error) {
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
	out := make([]Count, len(parts))
	for i, pt := range parts {
		exclude := pt.exclude
		if extra != nil {
			exclude = append(exclude, extra(pt.name)...)
		}
		n, err := qs[i].Source.Count(ctx, exclude, Cap+1)
		if err != nil {
			if pt.name != "" {
				return nil, fmt.Errorf("queue %s: %w", pt.name, err)
			}
			return nil, err
		}
		out[i] = Count{Queue: pt.name, Rows: min(n, Cap), Capped: n > Cap}
	}
	return out, nil
}

// Total is the install's backlog of the queues' backlogs: their sum, up to Cap.
func Total(bs []Count) (rows int, capped bool) {
	for _, b := range bs {
		rows += b.Rows
		capped = capped || b.Capped
	}
	return min(rows, Cap), capped || rows > Cap
}
