// Package scheduler holds the pass. Decide turns one observation of the cluster into a plan (what to delete, how many
// Jobs may be created and why not more); Run is the whole pass: it observes, decides, deletes, reads the rows there
// is room for and creates their Jobs, as far as its Mode lets it. tick and gc execute the pass, dry-run prints its
// plan, status describes it: one place decides, one place writes.
package scheduler

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/jobsched/jobsched/pkg/capacity"
	"github.com/jobsched/jobsched/pkg/config"
)

// State is where one of this scheduler's Jobs stands.
type State string

// Job states, as status reports them.
const (
	StateRunning       State = "running"       // a pod runs
	StateStarting      State = "starting"      // no pod yet, or a pod waits for the scheduler or starts on its node
	StateUnschedulable State = "unschedulable" // a pod is PodScheduled=False, reason Unschedulable
	StateSucceeded     State = "succeeded"     // condition Complete
	StateBackoff       State = "backoff"       // condition Failed, and the task has attempts left: it waits, then is retried
	StateDead          State = "dead"          // condition Failed, no attempt left (or failed by its podFailurePolicy)
	StateSuperseded    State = "superseded"    // finished, and a newer attempt of its task exists
)

// Why a Job is deleted.
const (
	DeleteRetention  = "gc.succeededRetention passed"
	DeleteSuperseded = "a newer attempt exists"
	DeleteDead       = "retry.deadRetention passed"
	DeleteRowGone    = "the query no longer selects its row"
	DeleteRetried    = "its next attempt was created"
)

// JobStatus is one of this scheduler's Jobs as the plan sees it.
type JobStatus struct {
	Name       string     `json:"name"`
	Key        string     `json:"key"`
	Attempt    int        `json:"attempt"`
	State      State      `json:"state"`
	Reason     string     `json:"reason,omitempty"`     // failure reason, or why a pod is unschedulable
	FinishedAt *time.Time `json:"finishedAt,omitempty"` // the Complete/Failed condition's time
	// RetryAt is when a task in backoff may get its next attempt (it then competes for a slot like any row).
	RetryAt *time.Time `json:"retryAt,omitempty"`
	// Delete says this pass deletes the Job, and why.
	Delete string    `json:"delete,omitempty"`
	UID    types.UID `json:"-"`
}

// Create is a Job the plan creates for a row. Supersedes is the failed attempt it retries: deleted once this one
// exists, never before (a pass killed in between loses no count).
type Create struct {
	Key        string       `json:"key"`
	Attempt    int          `json:"attempt"`
	Job        *batchv1.Job `json:"job"`
	Supersedes *JobStatus   `json:"supersedes,omitempty"`
}

// Skip is a row that gets no Job this pass, and why.
type Skip struct {
	Key    string `json:"key"`
	Reason string `json:"reason"`
}

// Plan is the whole decision of one pass, a plain value.
type Plan struct {
	Scheduler string      `json:"scheduler"`
	Namespace string      `json:"namespace"`
	Jobs      []JobStatus `json:"jobs"`
	// Unfinished counts Jobs with neither a Complete nor a Failed condition: they count against maxActive.
	Unfinished    int              `json:"unfinished"`
	Unschedulable int              `json:"unschedulablePods"`
	Capacity      *capacity.Report `json:"capacity,omitempty"`
	// Slots is how many Jobs this pass may create and Limit what bound it; Blocked is set when nothing may be created.
	Slots    int      `json:"slots"`
	Limit    string   `json:"limit"`
	Blocked  string   `json:"blocked,omitempty"`
	Selected int      `json:"selected"` // rows read from the source
	Creates  []Create `json:"creates"`
	Skipped  []Skip   `json:"skipped,omitempty"`
	// Query is what the query doctor says about the read (dry-run only; nil without a database).
	Query *QueryFinding `json:"query,omitempty"`

	// exclude are the keys that must not be read (a Job exists and is kept, or succeeded and is deleted by this
	// pass).
	exclude []string
	// retry maps the key of a task whose backoff has passed to its last failed attempt: its row gets the next one.
	retry map[string]*JobStatus
	// succeeded, dead and due are the keys this pass asks the source about in one read: a succeeded task whose row
	// is still selected is a worker bug; a dead task, or one due for a retry, whose row is gone loses its Job.
	succeeded, dead, due []string
	// unboundPods are this scheduler's pods bound to no node yet, podlessPods the pods its unfinished Jobs with no
	// pod yet will make: both will take room that the nodes still show as free.
	unboundPods, podlessPods int
}

// job finds an existing Job by name (p.Jobs is sorted by name).
func (p *Plan) job(name string) (JobStatus, bool) {
	i, ok := slices.BinarySearchFunc(p.Jobs, name, func(j JobStatus, name string) int { return strings.Compare(j.Name, name) })
	if !ok {
		return JobStatus{}, false
	}
	return p.Jobs[i], true
}

// Deletes are the Jobs this pass deletes before it creates: past their retention, superseded, dead past
// retry.deadRetention, or (once the source was asked) whose row is gone. A retried attempt is deleted only after
// its next one exists: see Create.Supersedes.
func (p *Plan) Deletes() []JobStatus {
	var out []JobStatus
	for _, j := range p.Jobs {
		if j.Delete != "" {
			out = append(out, j)
		}
	}
	return out
}

// deletes are the Jobs this pass deletes for reason.
func (p *Plan) deletes(reason string) []JobStatus {
	var out []JobStatus
	for _, j := range p.Jobs {
		if j.Delete == reason {
			out = append(out, j)
		}
	}
	return out
}

// Count returns how many Jobs are in state s and kept.
func (p *Plan) Count(s State) int {
	n := 0
	for _, j := range p.Jobs {
		if j.State == s && j.Delete == "" {
			n++
		}
	}
	return n
}

// Decide is the pure part of the pass: from the configuration and one observation it decides what to delete, which
// keys to exclude from the read, which tasks are retried, how many Jobs may be created, and why not more.
//
// The Jobs of one task are its attempts. The newest decides: unfinished, it holds a slot and its key is excluded;
// succeeded, it is kept for gc.succeededRetention and its key is excluded; failed with attempts left, the key is
// excluded until backoff·2^(n-1) (at most maxBackoff) after the failure, then the row competes for a slot and gets
// attempt n+1; failed with none left, or by its podFailurePolicy (FailJob), the task is dead: its Job is kept as
// the record and its key excluded. Older finished attempts are deleted.
func Decide(cfg *config.Config, obs *Observation) *Plan {
	p := &Plan{
		Scheduler: cfg.Name,
		Namespace: cfg.Namespace,
		Jobs:      make([]JobStatus, 0, len(obs.Jobs)),
		retry:     map[string]*JobStatus{},
	}
	podsByJob := map[types.UID][]PodSummary{}
	for _, pod := range obs.Pods {
		podsByJob[pod.Job] = append(podsByJob[pod.Job], pod)
	}
	newest := map[string]int{} // task key → its newest attempt, for the tasks retried at least once
	for _, job := range obs.Jobs {
		if job.Key != "" && job.Attempt > 1 {
			newest[job.Key] = max(newest[job.Key], job.Attempt)
		}
	}
	for _, job := range obs.Jobs {
		key := job.Key
		st := JobStatus{Name: job.Name, Key: key, Attempt: job.Attempt, UID: job.UID}
		gone := job.Deleting // being deleted already: never again
		cond := job.Finished
		if cond == nil {
			p.unfinished(&st, job, podsByJob[job.UID])
			if key != "" {
				p.exclude = append(p.exclude, key)
			}
			p.Jobs = append(p.Jobs, st)
			continue
		}
		t := cond.At
		st.FinishedAt = &t
		switch {
		case cond.Type == batchv1.JobComplete:
			st.State = StateSucceeded
		case cond.Reason == batchv1.JobReasonPodFailurePolicy || st.Attempt >= cfg.MaxAttempts():
			st.State, st.Reason = StateDead, strings.TrimSpace(cond.Reason+": "+cond.Message)
		default:
			st.State, st.Reason = StateBackoff, strings.TrimSpace(cond.Reason+": "+cond.Message)
			at := t.Add(cfg.BackoffAfter(st.Attempt))
			st.RetryAt = &at
		}
		switch {
		case gone:
		case key != "" && st.Attempt < newest[key]:
			st.State, st.Delete, st.RetryAt = StateSuperseded, DeleteSuperseded, nil
		case st.State == StateSucceeded && !obs.Now.Before(t.Add(cfg.GC.SucceededRetention.Duration)):
			st.Delete = DeleteRetention
		case st.State == StateDead && cfg.Retry.DeadRetention.Duration > 0 && !obs.Now.Before(t.Add(cfg.Retry.DeadRetention.Duration)):
			st.Delete = DeleteDead
		case key == "" && st.State != StateSucceeded:
			// A failed Job without a task key (made by hand) has no row to retry: it is kept for
			// gc.succeededRetention like a succeeded one, then deleted.
			if !obs.Now.Before(t.Add(cfg.GC.SucceededRetention.Duration)) {
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
			case st.RetryAt.After(obs.Now) || gone:
				p.exclude = append(p.exclude, key) // backoff: not yet
			default:
				p.due = append(p.due, key) // its row competes for a slot and gets the next attempt
				p.retry[key] = &st
			}
		}
		p.Jobs = append(p.Jobs, st)
	}
	slices.SortFunc(p.Jobs, func(a, b JobStatus) int { return strings.Compare(a.Name, b.Name) })
	for _, keys := range [][]string{p.exclude, p.succeeded, p.dead, p.due} {
		sort.Strings(keys)
	}
	p.decideSlots(cfg, obs)
	return p
}

// unfinished fills st for a Job with neither condition: it holds a slot.
func (p *Plan) unfinished(st *JobStatus, job JobSummary, pods []PodSummary) {
	p.Unfinished++
	switch {
	case len(pods) > 0:
		st.State = StateStarting // Pending: waiting for the scheduler, or pulling and starting on its node
	case job.Active > 0:
		st.State = StateRunning
	default:
		st.State = StateStarting // the Job controller has not made its pods yet
		p.podlessPods += job.PodsPerJob
	}
	for _, pod := range pods {
		if !pod.Bound {
			p.unboundPods++
		}
		if pod.Unschedulable {
			st.State, st.Reason = StateUnschedulable, pod.Message
			p.Unschedulable++
		}
	}
}

// rowsGone marks for deletion the Job of every dead task, and of every task due for a retry, whose row the query no
// longer selects (someone fixed or closed it); selected are the keys the query still returns.
func (p *Plan) rowsGone(selected []string) {
	still := map[string]bool{}
	for _, k := range selected {
		still[k] = true
	}
	gone := map[string]bool{}
	for _, k := range append(append([]string(nil), p.dead...), p.due...) {
		gone[k] = !still[k]
	}
	for i, j := range p.Jobs {
		if gone[j.Key] && j.Delete == "" && (j.State == StateDead || j.State == StateBackoff) {
			p.Jobs[i].Delete = DeleteRowGone
			delete(p.retry, j.Key)
		}
	}
}

// decideSlots sets Slots = min(maxActive − unfinished, maxPerTick, what fits now) and says what bound it; when no
// Job may be created, Blocked says why.
func (p *Plan) decideSlots(cfg *config.Config, obs *Observation) {
	p.Slots, p.Blocked, p.Capacity = 0, "", nil
	if cfg.BlockOnUnschedulable() && p.Unschedulable > 0 {
		p.block(fmt.Sprintf("%d pod(s) Unschedulable (%s)", p.Unschedulable, p.firstUnschedulable()))
		return
	}
	p.Slots = cfg.MaxPerTick()
	p.Limit = fmt.Sprintf("limits.maxPerTick: %d", p.Slots)
	if free := cfg.MaxActive() - p.Unfinished; free < p.Slots {
		p.Slots = max(free, 0)
		p.Limit = fmt.Sprintf("limits.maxActive: %d of %d unfinished", p.Unfinished, cfg.MaxActive())
	}
	if cfg.Limits.Capacity != config.CapacityOff && obs.Capacity != nil {
		rep := capacity.Fit(cfg.Template, obs.Capacity, p.unboundPods, p.podlessPods) // rep.Fit is in Jobs
		p.Capacity = &rep
		if rep.Fit >= 0 && rep.Fit < p.Slots {
			p.Slots = rep.Fit
			p.Limit = "capacity: " + rep.Binding
		}
	}
	if p.Slots <= 0 {
		p.block(p.Limit)
	}
}

// block makes the plan create nothing, for reason.
func (p *Plan) block(reason string) {
	p.Slots, p.Blocked = 0, reason
	if p.Limit == "" {
		p.Limit = reason
	}
}

func (p *Plan) firstUnschedulable() string {
	for _, j := range p.Jobs {
		if j.State == StateUnschedulable {
			return j.Name + ": " + j.Reason
		}
	}
	return ""
}
