package scheduler

import (
	"context"

	"github.com/jobsched/jobsched/pkg/querydoctor"
	"github.com/jobsched/jobsched/pkg/rows"
)

// QueryFinding is what the query doctor says about the pass's read (see querydoctor.Explainer): status and dry-run
// carry it.
type QueryFinding = querydoctor.Finding

// ExplainQueue asks queue i's query doctor about its read of this pass: the keys p excludes and its slots as the
// LIMIT (maxPerTick when it has none, as the next pass with room would read). nil when the source has no doctor (a
// rows file). A doctor that cannot check says so in the finding; it never fails the pass or the report.
func (s *Scheduler) ExplainQueue(ctx context.Context, p *Plan, i int) *QueryFinding {
	return explain(ctx, s.AllQueues()[i].Source, p.parts[i], s.Config.QueueConfig(i).MaxPerTick())
}

// explain is ExplainQueue for one queue's part and source; maxPerTick is the queue's.
func explain(ctx context.Context, src rows.Source, part *queuePart, maxPerTick int) *QueryFinding {
	d, ok := src.(querydoctor.Explainer)
	if !ok {
		return nil
	}
	limit := part.Slots
	if limit <= 0 {
		limit = maxPerTick
	}
	return d.Explain(ctx, part.exclude, limit)
}
