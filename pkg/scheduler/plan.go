// Package scheduler holds the pass: Decide turns one observation of the cluster into a plan (what to delete, how many
// Jobs may be created and why not more), Plan fills it with rows, and Execute carries it out. dry-run prints the plan,
// status describes it, tick executes it: one place decides, one place writes.
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

	// exclude are the keys that must not be read again (a Job exists and is kept); succeeded are the keys whose Job
	// has succeeded (kept, or deleted by this pass): a row still selected for one is a worker bug, not a new task.
	exclude   []string
	succeeded map[string]bool
	names     map[string]string // existing Job name → its task key
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
		succeeded: map[string]bool{},
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
	unbound, podless := 0, 0
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
				p.succeeded[key] = true
			} else {
				st.State, st.Reason = StateFailed, strings.TrimSpace(cond.Reason+": "+cond.Message)
				retention = cfg.GC.FailedRetention.Duration
			}
			st.Delete = job.DeletionTimestamp == nil && !obs.Now.Before(t.Add(retention))
			if st.State == StateFailed && !st.Delete && key != "" {
				p.exclude = append(p.exclude, key) // kept: its row is not retried meanwhile
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
			st.State = StateStarting // the Job controller has not made its pod yet
			podless++
		}
		for _, pod := range pods {
			if pod.Spec.NodeName == "" {
				unbound++
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
	p.decideSlots(cfg, obs, unbound+podless, podless)
	if p.Slots <= 0 {
		p.Slots, p.Blocked = 0, p.Limit
	}
	return p
}

// decideSlots sets Slots = min(maxActive − unfinished, maxPerTick, what fits now) and says what bound it.
func (p *Plan) decideSlots(cfg *config.Config, obs *Observation, unbound, podless int) {
	if cfg.BlockOnUnschedulable() && p.Unschedulable > 0 {
		p.Limit = fmt.Sprintf("%d pod(s) Unschedulable (%s)", p.Unschedulable, p.firstUnschedulable())
		return
	}
	p.Slots = cfg.MaxPerTick()
	p.Limit = fmt.Sprintf("limits.maxPerTick: %d", p.Slots)
	if free := cfg.MaxActive() - p.Unfinished; free < p.Slots {
		p.Slots = max(free, 0)
		p.Limit = fmt.Sprintf("limits.maxActive: %d of %d unfinished", p.Unfinished, cfg.MaxActive())
	}
	if cfg.Limits.Capacity != config.CapacityOff && obs.Capacity != nil {
		spec := &cfg.Template.Spec.Template.Spec
		perJob := 1
		if par := cfg.Template.Spec.Parallelism; par != nil && *par > 1 {
			perJob = int(*par)
		}
		rep := capacity.Fit(spec, obs.Capacity, unbound, podless)
		p.Capacity = &rep
		if rep.Fit >= 0 && rep.Fit/perJob < p.Slots {
			p.Slots = rep.Fit / perJob
			p.Limit = "capacity: " + rep.Binding
		}
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
