package scheduler

import (
	"slices"
	"sort"
	"strings"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/jobsched/jobsched/pkg/capacity"
	"github.com/jobsched/jobsched/pkg/config"
)

// decideQueue is the pure part of the pass for one queue (cfg is its config.QueueConfig; its Jobs are those of
// obs.Jobs that mine says are the queue's, read in place rather than copied out per queue): from
// the configuration and one observation it decides what to delete, which
// keys to exclude from the read, which tasks are retried, how many Jobs the limits leave room for, and why not more.
// What the nodes and quotas hold narrows that room in a step of its own (Fit): a pass observes capacity only when
// the limits leave room, after its deletes. Decide puts the queues' decisions together.
//
// The Jobs of one task are its attempts. The newest decides: unfinished, it holds a slot and its key is excluded;
// succeeded, it is kept for gc.succeededRetention and its key is excluded; failed with attempts left, the key is
// excluded until backoff·2^(n-1) (at most maxBackoff) after the failure, then the row competes for a slot and gets
// attempt n+1; failed with none left, or by its podFailurePolicy (FailJob), the task is dead: its Job is kept as
// the record and its key excluded. Older finished attempts are deleted.
//
// A condition with a zero lastTransitionTime finished at an unknown time (the Job controller always sets it; a
// status written by hand or restored from a backup may not): no retention and no backoff counted from it ever
// passes, so the Job is kept and its task is not retried until someone deletes the Job (a dead one: jobsched
// retry), as Kubernetes' TTL-after-finished controller keeps such a Job. Deleting at once would let its row be
// retried, or its record go, on a time nobody knows.
//
// A Job in cancelled (its task's key is returned by the queue's source.cancelQuery, see Cancellation) is deleted by
// the pass (DeleteCancelled) and holds no slot: it is not counted as unfinished, its pods block nothing, and its key
// is excluded from the read, so the task gets no new attempt.
func decideQueue(cfg *config.Config, obs *Observation, mine func(*JobSummary) bool, cancelled map[types.UID]bool) *queuePart {
	p := &queuePart{
		queueName: cfg.QueueName,
		retry:     map[string]*JobStatus{},
	}
	podsByJob := map[types.UID][]capacity.PodSummary{}
	for _, pod := range obs.Pods {
		podsByJob[pod.Job] = append(podsByJob[pod.Job], pod)
	}
	newest := map[string]int{} // task key → its newest attempt, for the tasks retried at least once
	n := 0
	for i := range obs.Jobs {
		job := &obs.Jobs[i]
		if !mine(job) {
			continue
		}
		n++
		if job.Key != "" && job.Attempt > 1 {
			newest[job.Key] = max(newest[job.Key], job.Attempt)
		}
	}
	p.Jobs = make([]JobStatus, 0, n)
	for i := range obs.Jobs {
		job := &obs.Jobs[i] // not a copy per Job: with mine's closure it would be one on the heap
		if !mine(job) {
			continue
		}
		key := job.Key
		st := JobStatus{Queue: cfg.QueueName, Name: job.Name, Key: key, Attempt: job.Attempt, UID: job.UID, StartedAt: job.StartedAt}
		gone := job.Deleting // being deleted already: never again
		cond := job.Finished
		if cond == nil && cancelled[job.UID] && !gone {
			st.State, st.Delete = cancelledState(*job), DeleteCancelled
			p.exclude = append(p.exclude, key)
			p.Jobs = append(p.Jobs, st)
			continue
		}
		if cond == nil {
			p.unfinished(cfg, &st, *job, podsByJob[job.UID], obs)
			if job.HasGroup && cfg.PerGroup() != nil {
				if p.held == nil {
					p.held = map[string]int{}
				}
				p.held[job.Group]++
				if cfg.PerGroup().MaxRequests != nil {
					if p.heldRequests == nil {
						p.heldRequests = map[string]corev1.ResourceList{}
					}
					p.heldRequests[job.Group] = addTimes(p.heldRequests[job.Group], job.Demand, job.PodsPerJob)
				}
			}
			if key != "" {
				p.exclude = append(p.exclude, key)
			}
			p.Jobs = append(p.Jobs, st)
			continue
		}
		t := cond.At
		st.FinishedAt = &t
		// past says d has passed since the Job finished; never when its time is unknown (zero).
		past := func(d time.Duration) bool { return !t.IsZero() && !obs.Now.Before(t.Add(d)) }
		switch {
		case cond.Type == batchv1.JobComplete:
			st.State = StateSucceeded
		case cond.Reason == batchv1.JobReasonPodFailurePolicy || st.Attempt >= cfg.MaxAttempts():
			st.State, st.Reason = StateDead, strings.TrimSpace(cond.Reason+": "+cond.Message)
		default:
			st.State, st.Reason = StateBackoff, strings.TrimSpace(cond.Reason+": "+cond.Message)
			if !t.IsZero() { // else no RetryAt: its backoff never passes
				at := t.Add(cfg.BackoffAfter(st.Attempt))
				st.RetryAt = &at
			}
		}
		switch {
		case gone:
		case key != "" && st.Attempt < newest[key]:
			st.State, st.Delete, st.RetryAt = StateSuperseded, DeleteSuperseded, nil
		case st.State == StateSucceeded && past(cfg.GC.SucceededRetention.Duration):
			st.Delete = DeleteRetention
		case st.State == StateDead && cfg.Retry.DeadRetention.Duration > 0 && past(cfg.Retry.DeadRetention.Duration):
			st.Delete = DeleteDead
		case key == "" && st.State != StateSucceeded:
			// A failed Job without a task key (made by hand) has no row to retry: it is kept for
			// gc.succeededRetention like a succeeded one, then deleted.
			if past(cfg.GC.SucceededRetention.Duration) {
				st.Delete = DeleteRetention
			}
		}
		if key != "" && st.State != StateSuperseded {
			switch {
			case st.State == StateSucceeded:
				p.succeeded = append(p.succeeded, key)
				p.exclude = append(p.exclude, key) // kept or deleted now: never a second Job in this pass
			case st.State == StateDead:
				p.exclude = append(p.exclude, key)
				if st.Delete == "" && !gone {
					p.dead = append(p.dead, key)
				}
			case st.RetryAt == nil || st.RetryAt.After(obs.Now) || gone:
				p.exclude = append(p.exclude, key) // backoff: not yet (or never: its time is unknown)
			default:
				p.due = append(p.due, key) // its row competes for a slot and gets the next attempt
				retried := st              // its own copy: taking st's address would put every Job's st on the heap
				p.retry[key] = &retried
			}
		}
		p.Jobs = append(p.Jobs, st)
	}
	slices.SortFunc(p.Jobs, func(a, b JobStatus) int { return strings.Compare(a.Name, b.Name) })
	for _, keys := range [][]string{p.exclude, p.succeeded, p.dead, p.due} {
		sort.Strings(keys)
	}
	p.room(cfg, obs)
	return p
}

// unfinished fills st for a Job with neither condition: it holds a slot.
func (p *queuePart) unfinished(cfg *config.Config, st *JobStatus, job JobSummary, pods []capacity.PodSummary, obs *Observation) {
	p.Unfinished++
	if job.Suspended {
		p.queue(cfg, st, job, obs)
		return
	}
	p.hold(job)
	switch {
	case slices.ContainsFunc(pods, func(pod capacity.PodSummary) bool { return !pod.Running }):
		st.State = StateStarting // Pending: waiting for the scheduler, or pulling and starting on its node
	case len(pods) > 0 || job.Active > 0:
		st.State = StateRunning
	default:
		st.State = StateStarting // the Job controller has not made its pods yet
	}
	// ahead are its pods that no node counts yet and this pass did not see: none made yet (the Job controller has not
	// made them), or fewer seen than its status.active counts: made, but not in the pods the pass read yet (the Jobs
	// and the pods are read apart, and a fill run's two watches deliver in no common order). They will take room.
	// Those a pass of the fill run saw that have ended since are not among them (Observation.PodsEnded).
	ended := obs.PodsEnded[job.UID]
	ahead := int(job.Active) - len(pods) - ended
	if len(pods) == 0 && job.Active == 0 && ended == 0 {
		ahead = job.PodsPerJob
	}
	if ahead > 0 {
		if cfg.Job.Sized() && job.Demand != nil {
			p.unboundOfSize(job.Demand).podless += ahead // its pods will ask its own size
		} else {
			p.podlessPods += ahead
		}
	}
	for _, pod := range pods {
		var size *unboundSize // its size's, for a sized queue's pod bound to no node
		if !pod.Bound {
			p.unboundPods++
			if cfg.Job.Sized() && pod.Demand != nil {
				size = p.unboundOfSize(pod.Demand)
				size.pods++
			}
		}
		if !pod.Unschedulable {
			continue
		}
		var v capacity.Verdict // what the capacity mode says of it (a Waiter's): nothing, it blocks
		if obs.Waits != nil {
			v = obs.Waits.Judge(pod, obs.Now)
		}
		if !v.Due.IsZero() && (p.waitDue.IsZero() || v.Due.Before(p.waitDue)) {
			p.waitDue = v.Due
		}
		if v.Waits { // it waits for what the mode says (a new node): a signal, not a stop
			p.Waiting++
			if size != nil {
				size.waiting++
			}
			if st.State != StateUnschedulable {
				st.Reason = v.Reason
			}
			continue
		}
		st.State, st.Reason = StateUnschedulable, pod.Message
		if v.Reason != "" {
			st.Reason += " (" + v.Reason + ")"
		}
		p.Unschedulable++
	}
}

// hold adds what job holds to p.Holds: its pod template's demand for each pod it runs at once (PodsPerJob),
// as kube-scheduler counts a pod's requests (capacity.Demand).
func (p *queuePart) hold(job JobSummary) {
	p.Holds = addTimes(p.Holds, job.Demand, job.PodsPerJob)
}

// addTimes adds n times each of l to sum (nil: a new list), and returns sum. l is not changed (a JobSummary.Demand
// is shared: Mul and Add write through a big value's pointer).
func addTimes(sum, l corev1.ResourceList, n int) corev1.ResourceList {
	if len(l) == 0 {
		return sum
	}
	if sum == nil {
		sum = corev1.ResourceList{}
	}
	for r, q := range l {
		q = q.DeepCopy()
		q.Mul(int64(n))
		if s, ok := sum[r]; ok {
			s.Add(q)
			q = s
		}
		sum[r] = q
	}
	return sum
}

// cancelledState is what a cancelled Job was doing when its cancel was decided, as the plan shows it.
func cancelledState(job JobSummary) State {
	switch {
	case job.Suspended:
		return StateQueued
	case job.Active > 0:
		return StateRunning
	}
	return StateStarting
}

// room sets Slots = min(maxActive − unfinished, maxPerTick) and says what bound it; when no Job may be created,
// Blocked says why. (An Unschedulable pod, of any queue, and with Kueue limits.maxQueued − queued are the
// install's: see Decide and roomOf.)
func (p *queuePart) room(cfg *config.Config, obs *Observation) {
	r := activeRoom(cfg, p.Unfinished)
	p.Slots, p.Limit, p.Bound, p.roomBound = r.slots, r.limit, r.bound, r.roomBound
	switch {
	case obs.GuardRefused != nil: // another pass holds the guard (a Lease): this one creates nothing
		p.block(BoundLease, "not the holder: "+obs.GuardRefused.Error())
		p.hard = true
	case obs.PodsErr != nil: // without the pods the pass cannot tell what is unschedulable
		p.block(BoundPodsUnknown, "cannot list its pods")
		p.hard = true
	case p.Slots <= 0:
		p.block(p.Bound, p.Limit)
	}
}

// fitQueue is the step after the deletes, for queue i's plan p: it bounds p's slots by the room its capacity mode
// gives the queue's template on what obs holds (room: the install's, nil when there is none), and returns the new
// plan (p is not changed). A plan blocked for a reason capacity cannot change (an Unschedulable pod, pods or guard
// unknown), or without room (a mode that bounds no template: off; with Kueue, Kueue decides what fits), is returned
// as it is; capacity that could not be observed blocks it.
func (p *queuePart) fitQueue(obs *Observation, room capacity.Room, i int) *queuePart {
	if p.hard || room == nil && obs.CapacityErr == nil {
		return p
	}
	q := *p
	switch {
	case obs.CapacityErr != nil:
		q.block(BoundCapacityUnknown, "capacity unknown: "+obs.CapacityErr.Error())
		q.hard = true
	default:
		rep := room.Report(i) // rep.Fit is in Jobs: capacity.Fit of the queue's template, the other queues' claims counted
		q.Capacity = &rep
		if rep.Fit >= 0 && rep.Fit < q.Slots {
			q.Slots = rep.Fit
			q.Limit, q.Bound = "capacity: "+rep.Binding, BoundCapacity
			q.roomBound, q.capacityBound, q.awaitsBinds = true, true, rep.AwaitsBinds > 0
		}
		if q.Slots <= 0 && q.Blocked == "" { // a queue blocked already (its cancel query failed) keeps its reason
			q.block(q.Bound, q.Limit)
		}
	}
	return &q
}

// block makes the plan create nothing, for reason, bound by b.
func (p *queuePart) block(b Bound, reason string) {
	p.Slots, p.Blocked, p.Bound = 0, reason, b
	if p.Limit == "" {
		p.Limit = reason
	}
}

func (p *queuePart) firstUnschedulable() string {
	for _, j := range p.Jobs {
		if j.State == StateUnschedulable {
			return j.Name + ": " + j.Reason
		}
	}
	return ""
}
