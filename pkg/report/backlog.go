package report

import (
	"context"

	"github.com/jobsched/jobsched/pkg/scheduler"
)

// Backlog counts, up to BacklogCap, the rows the query selects that have no Job after the pass p (status's backlog,
// less the rows p created Jobs for): one more bounded read, which the metrics of a tick use.
func Backlog(ctx context.Context, s *scheduler.Scheduler, p *scheduler.Plan) (rows int, capped bool, err error) {
	exclude := p.Excluded()
	for _, c := range p.Creates {
		exclude = append(exclude, c.Key)
	}
	n, err := s.Source.Count(ctx, exclude, BacklogCap+1)
	if err != nil {
		return 0, false, err
	}
	return min(n, BacklogCap), n > BacklogCap, nil
}
