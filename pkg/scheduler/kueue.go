package scheduler

// Queued counts the plan's queued Jobs (suspended: Kueue holds them).
func (p *Plan) Queued() int { return p.queued }

// queue fills st for a suspended Job: it is queued. In the Kueue mode that is a Job Kueue has not admitted (its
// Workload has no quota reserved) or has evicted and requeued; either way it is no failure and costs no attempt,
// and it makes no pod until Kueue lets it. The reason is Kueue's, when the observation has its Workloads.
func (p *queuePart) queue(st *JobStatus, job JobSummary, obs *Observation) {
	st.State = StateQueued
	p.queued++
	switch {
	case obs.Kueue == nil:
		st.Reason = "suspended: waiting for Kueue to admit it"
	case obs.Kueue.Unavailable != "":
		st.Reason = "suspended (Kueue's Workloads cannot be read)"
	default:
		w := obs.Kueue.Workloads[job.UID]
		st.Reason = w.Why()
		if w != nil {
			st.Workload = w.Name
		}
	}
}
