package scheduler

import (
	"github.com/jobsched/jobsched/pkg/capacity"
	"github.com/jobsched/jobsched/pkg/config"
)

// Queued counts the plan's queued Jobs (suspended: something, in a mode that queues Jobs, holds them).
func (p *Plan) Queued() int { return p.queued }

// queue fills st for a suspended Job: it is queued. It is no failure and costs no attempt, and it makes no pod until
// it is admitted; why it waits is the capacity mode's to say (a capacity.Queuer's, from what status read of it).
func (p *queuePart) queue(cfg *config.Config, st *JobStatus, job JobSummary, obs *Observation) {
	st.State = StateQueued
	p.queued++
	q, ok := capacity.ModeOf(cfg.Limits.Capacity).(capacity.Queuer)
	if !ok {
		st.Reason = "suspended"
		return
	}
	st.Reason, st.Holder = q.WhyQueued(obs.Details, job.UID)
}
