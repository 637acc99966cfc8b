package scheduler

import "context"

// Backlog counts, up to BacklogCap, the rows the query selects that have no Job after the pass p (status's backlog,
// less the rows p created Jobs for): one more bounded read, which the metrics of a tick use.
func (s *Scheduler) Backlog(ctx context.Context, p *Plan) (rows int, capped bool, err error) {
	exclude := append([]string(nil), p.exclude...)
	for _, c := range p.Creates {
		exclude = append(exclude, c.Key)
	}
	n, err := s.Source.Count(ctx, exclude, BacklogCap+1)
	if err != nil {
		return 0, false, err
	}
	return min(n, BacklogCap), n > BacklogCap, nil
}
