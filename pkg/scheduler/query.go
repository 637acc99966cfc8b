package scheduler

import (
	"context"

	"github.com/jobsched/jobsched/pkg/querydoctor"
	"github.com/jobsched/jobsched/pkg/rows"
)

// QueryFinding is what the query doctor says about the pass's read (see querydoctor.Explainer): status and dry-run
// carry it.
type QueryFinding = querydoctor.Finding

// Explain asks the (first) queue's query doctor about its first read of this pass: the keys p excludes and its slots as
// the LIMIT (maxPerTick when it has none, as the next pass with room would read). nil when the source has no doctor
// (a rows file). A doctor that cannot check says so in the finding; it never fails the pass or the report.
func (s *Scheduler) Explain(ctx context.Context, p *Plan) *QueryFinding {
	part := p
	if len(p.parts) > 0 {
		part = p.parts[0]
	}
	return explain(ctx, s.queues()[0].Source, part, s.Config.QueueConfig(0).MaxPerTick())
}

// explain is Explain for one queue's plan p and source; maxPerTick is the queue's.
func explain(ctx context.Context, src rows.Source, p *Plan, maxPerTick int) *QueryFinding {
	d, ok := src.(querydoctor.Explainer)
	if !ok {
		return nil
	}
	limit := p.Slots
	if limit <= 0 {
		limit = maxPerTick
	}
	return d.Explain(ctx, p.exclude, limit)
}
