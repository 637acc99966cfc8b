package scheduler

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"

	"github.com/jobsched/jobsched/pkg/apitext"
	"github.com/jobsched/jobsched/pkg/capacity"
	"github.com/jobsched/jobsched/pkg/follow"
	"github.com/jobsched/jobsched/pkg/jobmeta"
)

// Observation is everything a pass knows about the cluster, read in one place (this file) by the pass, by the reports
// and by ResetDead. What could not be read is part of it (PodsErr, CapacityErr, GuardRefused): the decision says what
// that means (create nothing), and the deletes still happen.
type Observation struct {
	Now  time.Time
	Jobs []JobSummary // this scheduler's Jobs (label selector)
	// JobsResourceVersion is the resourceVersion Jobs were listed at ("" offline).
	JobsResourceVersion string
	Pods                []capacity.PodSummary // this scheduler's non-terminal pods that hold something (label and field selector)
	PodsErr             error                 // the pods could not be listed
	// PodsEnded are, per unfinished Job, its pods that an earlier pass of the fill run saw and this one does not
	// (Follow.podsEnded); nil in a pass that lists.
	PodsEnded map[types.UID]int
	// Capacity is what the nodes and quotas hold, for every queue's template (nil when limits.capacity is off, the pass is offline, or it has
	// not been observed: a pass observes it only when the limits leave room).
	Capacity    *capacity.Snapshot
	CapacityErr error
	// GuardRefused is the Guard's refusal, when a Guard is set and this pass did not get it.
	GuardRefused error
	// Waits is what the capacity mode read of our Unschedulable pods (a capacity.Waiter's: which of them wait rather
	// than block; nil in a mode where every one blocks); WaitsNote why it could not be told.
	Waits     capacity.Waits
	WaitsNote string
	// Windows is the rate record the pass decides from (limits.rate; rate.go).
	Windows Windows
	// Details are what the capacity mode's Inspect read (a capacity.Inspector's): read by the reports, never by a
	// pass, which decides from the Jobs alone.
	Details capacity.Details
}

// Observe reads the cluster once, whole (this scheduler's Jobs, its pods, then what capacity needs), or
// returns an empty observation when offline. The reports use it; any part that cannot be read is an error here.
func (s *Scheduler) Observe(ctx context.Context) (*Observation, error) {
	obs, err := s.observe(ctx, true)
	if err != nil {
		return nil, err
	}
	if obs.PodsErr != nil {
		return nil, obs.PodsErr
	}
	obs.Windows = s.readWindows(ctx, nil, len(obs.Jobs) > 0)
	if obs.Capacity, obs.CapacityErr = s.readCapacity(ctx); obs.CapacityErr != nil {
		return nil, obs.CapacityErr
	}
	if obs.Details, err = s.inspectCapacity(ctx); err != nil {
		return nil, err
	}
	return obs, nil
}

// observe lists this scheduler's Jobs and, with pods, their non-terminal pods (with s.Follow: reads what its watches keep,
// once the last pass's writes are seen). Only a failure to list the Jobs is an error: without them nothing can be
// decided.
func (s *Scheduler) observe(ctx context.Context, pods bool) (*Observation, error) {
	obs := &Observation{Now: s.Now().UTC()}
	if s.Kube == nil {
		return obs, nil
	}
	f := s.Follow
	if f == nil {
		f = &Follow{} // this pass's lists only
	}
	f.init(s, s.Follow != nil)
	ns, sel := s.Config.Namespace, s.selector()
	if err := f.jobs.Sync(ctx); err != nil {
		return nil, fmt.Errorf("listing Jobs in %s with %s: %w", ns, sel, err)
	}
	obs.Jobs, obs.JobsResourceVersion = follow.Sorted(f.jobs)
	f.observed()
	if pods {
		if obs.Pods, obs.PodsErr = s.readPods(ctx, f); obs.PodsErr == nil {
			obs.Waits, obs.WaitsNote = s.readWaits(ctx, obs.Pods)
			if s.Follow != nil {
				obs.PodsEnded = f.podsEnded(obs.Jobs, obs.Pods)
			}
		}
	}
	return obs, nil
}

// readPods reads this scheduler's non-terminal pods: in a fill run whose capacity mode follows every pod in the cluster
// (capacity.FollowsPods: nodes, autoscale), from that one watch (capacity.Follow.Ours: the pods' events are sent and
// decoded once, and the pass and capacity see a binding in the same order); else from f's own feed (a LIST, or its
// watch in a fill run), as when that cluster-wide list is Forbidden (capacity then counts as quota, and says why).
func (s *Scheduler) readPods(ctx context.Context, f *Follow) ([]capacity.PodSummary, error) {
	ns, sel := s.Config.Namespace, s.selector()
	if s.Follow != nil && !f.ownPods && capacity.FollowsPods(capacity.ModeOf(s.Config.Limits.Capacity)) {
		pods, err := f.capacity.Ours(ctx, s.Kube, ns, s.capacityOptions())
		if !apierrors.IsForbidden(err) {
			if err != nil {
				return nil, fmt.Errorf("listing pods in all namespaces (to read those in %s with %s): %w", ns, sel, err)
			}
			return pods, nil
		}
		f.ownPods = true
	}
	if err := f.pods.Sync(ctx); err != nil {
		return nil, fmt.Errorf("listing pods in %s with %s: %w", ns, sel, err)
	}
	pods, _ := follow.Sorted(f.pods)
	return pods, nil
}

// readWaits asks the capacity mode which of the Unschedulable ones of pods wait (a capacity.Waiter's Waits; nothing
// is read in a mode where every one blocks).
func (s *Scheduler) readWaits(ctx context.Context, pods []capacity.PodSummary) (capacity.Waits, string) {
	w, ok := capacity.ModeOf(s.Config.Limits.Capacity).(capacity.Waiter)
	if !ok {
		return nil, ""
	}
	var names []string
	for _, p := range pods {
		if p.Unschedulable {
			names = append(names, p.Name)
		}
	}
	return w.Waits(ctx, s.clients(), s.Config, names)
}

func (s *Scheduler) selector() string {
	return labels.SelectorFromSet(labels.Set{jobmeta.LabelScheduler: s.Config.Name}).String()
}

// readCapacity reads what the capacity mode counts room on (capacity.Mode.Observe; nil when it counts none or the
// pass is offline): one observation for every queue's template. In a fill run whose mode follows every pod, it
// reads the feed the pass's pods came from (readPods), where they are or further on.
func (s *Scheduler) readCapacity(ctx context.Context) (*capacity.Snapshot, error) {
	if err := capacity.Check(s.Config.Limits.Capacity); err != nil {
		return nil, fmt.Errorf("observing capacity: %w", err) // also offline: an unknown mode never fits
	}
	if s.Kube == nil {
		return nil, nil
	}
	snap, err := capacity.ModeOf(s.Config.Limits.Capacity).Observe(ctx, s.clients(), s.Config.Namespace, s.capacityOptions())
	if err != nil {
		return nil, fmt.Errorf("observing capacity: %w", err)
	}
	return snap, nil
}

// capacityOptions is what the capacity mode observes with: one observation for every queue's template.
func (s *Scheduler) capacityOptions() capacity.Options {
	var templates []*batchv1.Job
	for i := range s.Config.AllQueues() {
		templates = append(templates, s.Config.QueueConfig(i).Template)
	}
	return capacity.Options{Templates: templates, Scheduler: s.Config.Name, Self: capacity.SelfPod(), NoNextPassRoom: !s.Config.ReserveForTick(),
		Config: s.Config, Follow: s.followCapacity()}
}

// inspectCapacity reads what status shows of the capacity mode beyond a pass's observation (a capacity.Inspector's
// Inspect), for the reports only; nil offline or in a mode that shows nothing more.
func (s *Scheduler) inspectCapacity(ctx context.Context) (capacity.Details, error) {
	i, ok := capacity.ModeOf(s.Config.Limits.Capacity).(capacity.Inspector)
	if s.Kube == nil || !ok {
		return nil, nil
	}
	return i.Inspect(ctx, s.clients(), s.Config)
}

// followCapacity is what capacity follows between the passes of s.Follow (nil: it lists).
func (s *Scheduler) followCapacity() *capacity.Follow {
	if s.Follow == nil {
		return nil
	}
	return &s.Follow.capacity
}

func (s *Scheduler) clients() capacity.Clients {
	return capacity.Clients{Kube: s.Kube, Dynamic: s.Dynamic}
}

// JobSummary is what a pass keeps of one of its Jobs. Each LIST page is summarised as it arrives and then dropped,
// so a pass holds a few hundred bytes per Job, not the Job with its pod template.
type JobSummary struct {
	Name       string
	UID        types.UID
	Key        string // annotation jobsched.io/task-key ("" on a Job made by hand)
	Queue      string // label jobsched.io/queue ("" on a Job of a configuration without queues:)
	Group      string // annotation jobsched.io/group (a queue with limits.perGroup)
	HasGroup   bool   // the annotation is there
	Attempt    int    // label jobsched.io/attempt; 1 when absent (Jobs made before retries existed)
	Deleting   bool   // it has a deletionTimestamp
	Suspended  bool   // spec.suspend: Kueue holds it (or, in another mode, whoever suspended it)
	Active     int32
	PodsPerJob int        // min(parallelism, completions): the pods it runs at once
	Finished   *Condition // its Complete or Failed condition, when True
	StartedAt  *time.Time // status.startTime, UTC (nil before the Job controller starts it)
	Created    time.Time  // metadata.creationTimestamp (limits.rate counts it)
	// Demand is what each of its pods requests (its pod template's, capacity.Demand), kept while it is neither
	// suspended nor finished: status sums it per queue (QueuePlan.Holds), and a sized queue counts a Job whose pod
	// is not made yet by it. Read only: equal demands may share one map (demands.summarize).
	Demand corev1.ResourceList
}

// Condition is a Job's Complete or Failed condition.
type Condition struct {
	Type            batchv1.JobConditionType
	Reason, Message string
	At              time.Time // lastTransitionTime, UTC
}

// SummarizeJob keeps what the plan needs of job.
func SummarizeJob(job *batchv1.Job) JobSummary {
	s := JobSummary{Name: job.Name, UID: job.UID, Key: job.Annotations[jobmeta.AnnotationTaskKey], Queue: job.Labels[jobmeta.LabelQueue], Attempt: 1,
		Deleting: job.DeletionTimestamp != nil, Suspended: job.Spec.Suspend != nil && *job.Spec.Suspend,
		Active: job.Status.Active, PodsPerJob: capacity.PodsPerJob(job), Created: job.CreationTimestamp.UTC()}
	s.Group, s.HasGroup = job.Annotations[jobmeta.AnnotationGroup]
	if n, err := strconv.Atoi(job.Labels[jobmeta.LabelAttempt]); err == nil && n > 1 {
		s.Attempt = n
	}
	if st := job.Status.StartTime; st != nil {
		t := st.UTC()
		s.StartedAt = &t
	}
	for _, c := range job.Status.Conditions {
		if (c.Type == batchv1.JobComplete || c.Type == batchv1.JobFailed) && c.Status == corev1.ConditionTrue {
			s.Finished = &Condition{Type: c.Type, Reason: apitext.Quote(c.Reason), Message: apitext.Quote(c.Message), At: c.LastTransitionTime.UTC()}
			break
		}
	}
	if !s.Suspended && s.Finished == nil {
		s.Demand = capacity.Demand(&corev1.Pod{Spec: job.Spec.Template.Spec})
	}
	return s
}

// maxDemands bounds the distinct demands a demands table keeps (past it, it starts afresh).
const maxDemands = 256

// demands keeps one map per distinct JobSummary.Demand among the Jobs a pass (or a fill run) summarises: every
// unfinished Job keeps its demand, and 10,000 Jobs of a few sizes then hold a few maps, not 10,000. The zero value
// is ready; it is safe for concurrent use (a watch summarises while a pass applies its creates).
type demands struct {
	mu sync.Mutex
	m  map[string]corev1.ResourceList // by capacity.Quantities
}

// summarize is SummarizeJob with its Demand shared with an equal one summarised before.
func (d *demands) summarize(job *batchv1.Job) JobSummary {
	s := SummarizeJob(job)
	if s.Demand == nil {
		return s
	}
	key := capacity.Quantities(s.Demand)
	d.mu.Lock()
	defer d.mu.Unlock()
	if own, ok := d.m[key]; ok {
		s.Demand = own
		return s
	}
	if d.m == nil || len(d.m) >= maxDemands { // sizes come and go in a long run: start afresh rather than grow
		d.m = map[string]corev1.ResourceList{}
	}
	d.m[key] = s.Demand
	return s
}
