package scheduler

import (
	"context"

	"github.com/jobsched/jobsched/pkg/querydoctor"
)

// QueryFinding is what the query doctor says about the pass's read (see querydoctor.Explainer): status and dry-run
// carry it.
type QueryFinding = querydoctor.Finding

// Explain asks the source's query doctor about the first read of this pass: the keys p excludes and its slots as
// the LIMIT (maxPerTick when it has none, as the next pass with room would read). nil when the source has no doctor
// (a rows file). A doctor that cannot check says so in the finding; it never fails the pass or the report.
func (s *Scheduler) Explain(ctx context.Context, p *Plan) *QueryFinding {
	d, ok := s.Source.(querydoctor.Explainer)
	if !ok {
		return nil
	}
	limit := p.Slots
	if limit <= 0 {
		limit = s.Config.MaxPerTick()
	}
	return d.Explain(ctx, p.exclude, limit)
}
