package scheduler

import (
	"context"
	"fmt"
	"strconv"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"

	"github.com/jobsched/jobsched/pkg/capacity"
	"github.com/jobsched/jobsched/pkg/jobmeta"
	"github.com/jobsched/jobsched/pkg/kube"
	"github.com/jobsched/jobsched/pkg/kueue"
)

// Observation is everything a pass knows about the cluster, read in one place (this file) by the pass, by the reports
// and by ResetDead. What could not be read is part of it (PodsErr, CapacityErr, GuardRefused): the decision says what
// that means (create nothing), and the deletes still happen.
type Observation struct {
	Now  time.Time
	Jobs []JobSummary // this scheduler's Jobs (label selector)
	// JobsResourceVersion is the resourceVersion Jobs were listed at ("" offline).
	JobsResourceVersion string
	Pods                []PodSummary // this scheduler's Pending pods that hold something (label and field selector)
	PodsErr             error        // the Pending pods could not be listed
	// Capacity is what the nodes and quotas hold, for every queue's template (nil when limits.capacity is off, the pass is offline, or it has
	// not been observed: a pass observes it only when the limits leave room).
	Capacity    *capacity.Snapshot
	CapacityErr error
	// GuardRefused is the Guard's refusal, when a Guard is set and this pass did not get it.
	GuardRefused error
	// Waits are what the cluster's autoscaler says of our Unschedulable pods, by name (capacity.Mode's Waits: with
	// limits.capacity: autoscale, whether it provides a node for each); WaitsNote why it could not be told.
	Waits     map[string]capacity.Wait
	WaitsNote string
	// Windows is the rate record the pass decides from (limits.rate; rate.go).
	Windows Windows
	// Kueue is what Kueue says of the Jobs (limits.capacity: kueue; the mode's Inspect): read by the reports, never
	// by a pass, which decides from the Jobs alone (a Job Kueue holds is suspended).
	Kueue *kueue.Snapshot
}

// Observe reads the cluster once, whole (this scheduler's Jobs, its Pending pods, then what capacity needs), or
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
	d, err := s.inspectCapacity(ctx)
	if err != nil {
		return nil, err
	}
	if d != nil {
		obs.Kueue = d.Kueue
	}
	return obs, nil
}

// observe lists this scheduler's Jobs and, with pods, its Pending pods. Only a failure to list the Jobs is an error:
// without them nothing can be decided.
func (s *Scheduler) observe(ctx context.Context, pods bool) (*Observation, error) {
	obs := &Observation{Now: s.Now().UTC()}
	if s.Kube == nil {
		return obs, nil
	}
	var err error
	if obs.Jobs, obs.JobsResourceVersion, err = s.listJobs(ctx); err != nil {
		return nil, err
	}
	if pods {
		obs.Pods, obs.PodsErr = s.listPendingPods(ctx)
		if obs.PodsErr == nil {
			obs.Waits, obs.WaitsNote = s.readWaits(ctx, obs.Pods)
		}
	}
	return obs, nil
}

// readWaits asks the capacity mode what the autoscaler says of the Unschedulable ones of pods (capacity.Mode's
// Waits; nothing is read in a mode where every one blocks).
func (s *Scheduler) readWaits(ctx context.Context, pods []PodSummary) (map[string]capacity.Wait, string) {
	var names []string
	for _, p := range pods {
		if p.Unschedulable {
			names = append(names, p.Name)
		}
	}
	return capacity.ModeOf(s.Config.Limits.Capacity).Waits(ctx, s.clients(), s.Config.Namespace, names)
}

// observeCapacity is the pass's capacity step: it reads what the nodes and quotas hold when the plan p has room by
// its limits (a full or blocked pass costs no capacity LIST), into a copy of obs.
func (s *Scheduler) observeCapacity(ctx context.Context, obs *Observation, p *Plan) *Observation {
	if p.Slots <= 0 {
		return obs
	}
	o := *obs
	o.Capacity, o.CapacityErr = s.readCapacity(ctx)
	return &o
}

func (s *Scheduler) selector() string {
	return labels.SelectorFromSet(labels.Set{jobmeta.LabelScheduler: s.Config.Name}).String()
}

// listJobs lists this scheduler's Jobs, keeping a summary of each, and the resourceVersion of the list.
func (s *Scheduler) listJobs(ctx context.Context) ([]JobSummary, string, error) {
	ns, sel := s.Config.Namespace, s.selector()
	var jobs []JobSummary
	rv, err := kube.EachAt(ctx, s.Kube, s.Kube.BatchV1().Jobs(ns), metav1.ListOptions{LabelSelector: sel},
		func(job *batchv1.Job) { jobs = append(jobs, SummarizeJob(job)) })
	if err != nil {
		return nil, "", fmt.Errorf("listing Jobs in %s with %s: %w", ns, sel, err)
	}
	return jobs, rv, nil
}

// listPendingPods lists this scheduler's Pending pods, keeping a summary of each that holds something.
func (s *Scheduler) listPendingPods(ctx context.Context) ([]PodSummary, error) {
	ns, sel := s.Config.Namespace, s.selector()
	pending := fields.OneTermEqualSelector("status.phase", string(corev1.PodPending)).String()
	var pods []PodSummary
	err := kube.Each(ctx, s.Kube, s.Kube.CoreV1().Pods(ns), metav1.ListOptions{LabelSelector: sel, FieldSelector: pending},
		func(pod *corev1.Pod) {
			if pod.Status.Phase != corev1.PodPending { // the server filtered already; a fake client does not
				return
			}
			if sum, ok := SummarizePod(pod); ok {
				pods = append(pods, sum)
			}
		})
	if err != nil {
		return nil, fmt.Errorf("listing Pending pods in %s with %s: %w", ns, sel, err)
	}
	return pods, nil
}

// readCapacity reads what the capacity mode counts room on (capacity.Mode.Observe; nil when it counts none or the
// pass is offline): one observation for every queue's template.
func (s *Scheduler) readCapacity(ctx context.Context) (*capacity.Snapshot, error) {
	if s.Kube == nil {
		return nil, nil
	}
	var templates []*batchv1.Job
	for i := range s.Config.AllQueues() {
		templates = append(templates, s.Config.QueueConfig(i).Template)
	}
	snap, err := capacity.ModeOf(s.Config.Limits.Capacity).Observe(ctx, s.clients(), s.Config.Namespace, capacity.Options{Templates: templates, Scheduler: s.Config.Name, Self: capacity.SelfPod(), NoNextPassRoom: !s.Config.ReserveForTick(), MaxPending: s.Config.MaxPending()})
	if err != nil {
		return nil, fmt.Errorf("observing capacity: %w", err)
	}
	return snap, nil
}

// inspectCapacity reads what status shows of the capacity mode beyond a pass's observation (capacity.Mode.Inspect:
// with Kueue its Workloads and LocalQueue), for the reports only; nil offline.
func (s *Scheduler) inspectCapacity(ctx context.Context) (*capacity.Details, error) {
	if s.Kube == nil {
		return nil, nil
	}
	return capacity.ModeOf(s.Config.Limits.Capacity).Inspect(ctx, s.clients(), s.Config)
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
}

// Condition is a Job's Complete or Failed condition.
type Condition struct {
	Type            batchv1.JobConditionType
	Reason, Message string
	At              time.Time // lastTransitionTime, UTC
}

// PodSummary is what a pass keeps of one of its Pending pods.
type PodSummary struct {
	Name          string
	Job           types.UID // its controlling Job
	Bound         bool      // spec.nodeName is set
	Unschedulable bool      // PodScheduled=False with reason Unschedulable (not SchedulingGated or any other)
	Message       string    // the scheduler's message when Unschedulable
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
			s.Finished = &Condition{Type: c.Type, Reason: c.Reason, Message: c.Message, At: c.LastTransitionTime.UTC()}
			break
		}
	}
	return s
}

// SummarizePod keeps what the plan needs of a Pending pod; ok is false for a pod that holds nothing: being deleted
// (its Job is gone or going) or controlled by no Job.
func SummarizePod(pod *corev1.Pod) (s PodSummary, ok bool) {
	owner := metav1.GetControllerOf(pod)
	if pod.DeletionTimestamp != nil || owner == nil {
		return PodSummary{}, false
	}
	s = PodSummary{Name: pod.Name, Job: owner.UID, Bound: pod.Spec.NodeName != ""}
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable {
			s.Unschedulable, s.Message = true, c.Message
		}
	}
	return s, true
}
