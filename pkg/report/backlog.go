package report

import (
	"context"

	"github.com/jobsched/jobsched/pkg/scheduler"
)

// Backlog counts, up to BacklogCap, the rows the queries select that have no Job after the pass p (status's
// backlog, less the rows p created Jobs for): the sum of Backlogs.
func Backlog(ctx context.Context, s *scheduler.Scheduler, p *scheduler.Plan) (rows int, capped bool, err error) {
	bs, err := Backlogs(ctx, s, p)
	if err != nil {
		return 0, false, err
	}
	rows, capped = Total(bs)
	return rows, capped, nil
}

// Backlogs counts each queue's backlog after the pass p: the rows its query selects that have no Job, less the rows
// p created Jobs for, up to BacklogCap; one more bounded read per queue, which the metrics of a tick use. For a
// configuration without queues: it is one count, of queue "".
func Backlogs(ctx context.Context, s *scheduler.Scheduler, p *scheduler.Plan) ([]QueueBacklog, error) {
	return queueBacklogs(ctx, s, p, func(queue string) []string {
		var keys []string
		for _, c := range p.Creates {
			if c.Queue == queue {
				keys = append(keys, c.Key)
			}
		}
		return keys
	})
}
