package scheduler

import (
	"context"
	"fmt"

	"github.com/jobsched/jobsched/pkg/kueue"
)

// Queued counts the plan's queued Jobs (suspended: Kueue holds them).
func (p *Plan) Queued() int { return p.queued }

// queue fills st for a suspended Job: it is queued. In the Kueue mode that is a Job Kueue has not admitted (its
// Workload has no quota reserved) or has evicted and requeued; either way it is no failure and costs no attempt,
// and it makes no pod until Kueue lets it. The reason is Kueue's, when the observation has its Workloads.
func (p *Plan) queue(st *JobStatus, job JobSummary, obs *Observation) {
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

// readKueue reads the Workloads and the LocalQueue (limits.capacity: kueue), for the reports.
func (s *Scheduler) readKueue(ctx context.Context) (*kueue.Snapshot, error) {
	if !s.Config.KueueMode() || s.Kube == nil {
		return nil, nil
	}
	// With queues: the LocalQueue whose status is read is the first queue's (the Workloads are the namespace's).
	snap, err := kueue.Observe(ctx, s.Dynamic, s.Config.Namespace, s.Config.QueueConfig(0).Kueue.LocalQueue)
	if err != nil {
		return nil, fmt.Errorf("observing Kueue: %w", err)
	}
	return snap, nil
}
