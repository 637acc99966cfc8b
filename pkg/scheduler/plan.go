// Package scheduler holds the pass. Decide turns one observation of the cluster into a plan (what to delete, how many
// Jobs may be created and why not more); Run is the whole pass: it observes, decides, deletes, reads the rows there
// is room for and creates their Jobs, as far as its Mode lets it. tick and gc execute the pass, dry-run prints its
// plan, status describes it: one place decides, one place writes.
package scheduler

import (
	"fmt"
	"sort"
	"strings"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/jobsched/jobsched/pkg/capacity"
	"github.com/jobsched/jobsched/pkg/config"
	"github.com/jobsched/jobsched/pkg/render"
)

// State is where one of this scheduler's Jobs stands.
type State string

// Job states, as status reports them.
const (
	StateRunning       State = "running"       // a pod runs
	StateStarting      State = "starting"      // no pod yet, or a pod waits for the scheduler or starts on its node
	StateUnschedulable State = "unschedulable" // a pod is PodScheduled=False, reason Unschedulable
	StateSucceeded     State = "succeeded"     // condition Complete
	StateFailed        State = "failed"        // condition Failed
)

// JobStatus is one of this scheduler's Jobs as the plan sees it.
type JobStatus struct {
	Name       string     `json:"name"`
	Key        string     `json:"key"`
	State      State      `json:"state"`
	Reason     string     `json:"reason,omitempty"`     // failure reason, or why a pod is unschedulable
	FinishedAt *time.Time `json:"finishedAt,omitempty"` // the Complete/Failed condition's time
	Delete     bool       `json:"delete,omitempty"`     // past its retention: this pass deletes it
	UID        types.UID  `json:"-"`
}

// Create is a Job the plan creates for a row.
type Create struct {
	Key string       `json:"key"`
	Job *batchv1.Job `json:"job"`
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

	// exclude are the keys that must not be read again (a Job exists and is kept, or succeeded and is deleted by
	// this pass); names maps each existing Job's name to its task key.
	exclude []string
	names   map[string]string
	// succeeded are the keys of succeeded Jobs (kept, or deleted by this pass): a row the query still selects for one
	// is a worker bug.
	succeeded []string
	// unboundPods are this scheduler's pods bound to no node yet, podlessJobs its unfinished Jobs with no pod yet:
	// both will take room that the nodes still show as free.
	unboundPods, podlessJobs int
}

// Deletes are the Jobs this pass deletes.
func (p *Plan) Deletes() []JobStatus {
	var out []JobStatus
	for _, j := range p.Jobs {
		if j.Delete {
			out = append(out, j)
		}
	}
	return out
}

// Count returns how many Jobs are in state s (kept ones only for finished states).
func (p *Plan) Count(s State) int {
	n := 0
	for _, j := range p.Jobs {
		if j.State == s && !j.Delete {
			n++
		}
	}
	return n
}

// Decide is the pure part of the pass: from the configuration and one observation it decides what to delete, which
// keys to exclude from the read, how many Jobs may be created, and why not more.
func Decide(cfg *config.Config, obs *Observation) *Plan {
	p := &Plan{
		Scheduler: cfg.Name,
		Namespace: cfg.Namespace,
		names:     map[string]string{},
	}
	podsByJob := map[types.UID][]corev1.Pod{}
	for _, pod := range obs.Pods {
		if pod.DeletionTimestamp != nil {
			continue // its Job is gone or going; it holds no slot
		}
		if owner := metav1.GetControllerOf(&pod); owner != nil {
			podsByJob[owner.UID] = append(podsByJob[owner.UID], pod)
		}
	}
	for _, job := range obs.Jobs {
		key := job.Annotations[render.AnnotationTaskKey]
		p.names[job.Name] = key
		st := JobStatus{Name: job.Name, Key: key, UID: job.UID}
		if cond, ok := finished(&job); ok {
			t := cond.LastTransitionTime.UTC()
			st.FinishedAt = &t
			retention := cfg.GC.SucceededRetention.Duration
			if cond.Type == batchv1.JobComplete {
				st.State = StateSucceeded
			} else {
				st.State, st.Reason = StateFailed, strings.TrimSpace(cond.Reason+": "+cond.Message)
				retention = cfg.GC.FailedRetention.Duration
			}
			st.Delete = job.DeletionTimestamp == nil && !obs.Now.Before(t.Add(retention))
			// A kept Job's row is not read again: a failed one waits for its retention, and a succeeded one whose
			// row is still selected is a worker bug that gets no second Job. A row whose succeeded Job this pass
			// deletes is not read in this pass either.
			if key != "" && (!st.Delete || st.State == StateSucceeded) {
				p.exclude = append(p.exclude, key)
			}
			if key != "" && st.State == StateSucceeded {
				p.succeeded = append(p.succeeded, key)
			}
			p.Jobs = append(p.Jobs, st)
			continue
		}
		p.Unfinished++
		if key != "" {
			p.exclude = append(p.exclude, key)
		}
		pods := podsByJob[job.UID]
		switch {
		case len(pods) > 0:
			st.State = StateStarting // Pending: waiting for the scheduler, or pulling and starting on its node
		case job.Status.Active > 0:
			st.State = StateRunning
		default:
			st.State = StateStarting // the Job controller has not made its pods yet
			p.podlessJobs++
		}
		for _, pod := range pods {
			if pod.Spec.NodeName == "" {
				p.unboundPods++
			}
			if msg, ok := unschedulable(&pod); ok {
				st.State, st.Reason = StateUnschedulable, msg
				p.Unschedulable++
			}
		}
		p.Jobs = append(p.Jobs, st)
	}
	sort.Slice(p.Jobs, func(i, j int) bool { return p.Jobs[i].Name < p.Jobs[j].Name })
	sort.Strings(p.exclude)
	p.decideSlots(cfg, obs)
	return p
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
		rep := capacity.Fit(cfg.Template, obs.Capacity, p.unboundPods, p.podlessJobs*podsPerJob(cfg.Template)) // rep.Fit is in Jobs
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

// podsPerJob is how many pods one Job of the template runs at once: min(parallelism, completions), parallelism
// defaulting to 1 and completions unset meaning parallelism.
func podsPerJob(tpl *batchv1.Job) int {
	n := 1
	if par := tpl.Spec.Parallelism; par != nil {
		n = int(*par)
	}
	if c := tpl.Spec.Completions; c != nil && int(*c) < n {
		n = int(*c)
	}
	return max(n, 1)
}

func (p *Plan) firstUnschedulable() string {
	for _, j := range p.Jobs {
		if j.State == StateUnschedulable {
			return j.Name + ": " + j.Reason
		}
	}
	return ""
}

// finished returns the Job's Complete or Failed condition when it is True.
func finished(job *batchv1.Job) (batchv1.JobCondition, bool) {
	for _, c := range job.Status.Conditions {
		if (c.Type == batchv1.JobComplete || c.Type == batchv1.JobFailed) && c.Status == corev1.ConditionTrue {
			return c, true
		}
	}
	return batchv1.JobCondition{}, false
}

// unschedulable reports whether the scheduler has marked the pod Unschedulable, with its message.
func unschedulable(pod *corev1.Pod) (string, bool) {
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable {
			return c.Message, true
		}
	}
	return "", false
}
