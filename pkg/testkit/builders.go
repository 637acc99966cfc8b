package testkit

import (
	"fmt"
	"strconv"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/jobsched/jobsched/pkg/jobmeta"
	"github.com/jobsched/jobsched/pkg/render"
)

// The builders of the objects unit tests list, in kueue's style (pkg/util/testing): MakeX gives the common case, each
// method changes one thing and returns the builder, Obj returns the object. A test says what differs in the chain
// instead of changing the result afterwards.

// Scheduler and Namespace are the install Config makes; the builders' objects belong to it unless told otherwise.
const (
	Scheduler = "reports"
	Namespace = "batch"
)

// Ago is the time d before Now.
func Ago(d time.Duration) time.Time { return Now.Add(-d) }

// JobWrapper builds a Job of the scheduler.
type JobWrapper struct {
	batchv1.Job
	key, prefix string
	attempt     int
}

// MakeJob is key's first attempt as the scheduler Scheduler makes it in Namespace (job.namePrefix Scheduler), with
// one active pod: running.
func MakeJob(key string) *JobWrapper {
	j := &JobWrapper{key: key, prefix: Scheduler, attempt: 1, Job: batchv1.Job{ObjectMeta: metav1.ObjectMeta{
		Name: render.JobName(Scheduler, key), Namespace: Namespace, UID: types.UID("uid-" + key),
		Labels:      map[string]string{jobmeta.LabelScheduler: Scheduler},
		Annotations: map[string]string{jobmeta.AnnotationTaskKey: key},
	}}}
	j.Status.Active = 1
	return j
}

// Obj is the Job built.
func (j *JobWrapper) Obj() *batchv1.Job { return &j.Job }

func (j *JobWrapper) rename() { j.ObjectMeta.Name = render.AttemptName(j.prefix, j.key, j.attempt) }

// Attempt makes it attempt n, with its name, UID and attempt label.
func (j *JobWrapper) Attempt(n int) *JobWrapper {
	j.attempt = n
	j.rename()
	j.UID = types.UID(fmt.Sprintf("uid-%s-%d", j.key, n))
	j.Labels[jobmeta.LabelAttempt] = strconv.Itoa(n)
	return j
}

// Prefix is the job.namePrefix its name is made with.
func (j *JobWrapper) Prefix(p string) *JobWrapper {
	j.prefix = p
	j.rename()
	return j
}

// Name sets its name outright (after Prefix and Attempt, which derive it).
func (j *JobWrapper) Name(name string) *JobWrapper {
	j.ObjectMeta.Name = name
	return j
}

// Scheduler is the scheduler label it carries.
func (j *JobWrapper) Scheduler(name string) *JobWrapper { return j.Label(jobmeta.LabelScheduler, name) }

// Queue is the jobsched queue label it carries.
func (j *JobWrapper) Queue(q string) *JobWrapper { return j.Label(jobmeta.LabelQueue, q) }

// Label sets a label.
func (j *JobWrapper) Label(k, v string) *JobWrapper {
	j.Labels[k] = v
	return j
}

// Annotation sets an annotation.
func (j *JobWrapper) Annotation(k, v string) *JobWrapper {
	j.Annotations[k] = v
	return j
}

// WithoutKey drops its task key annotation: a Job jobsched cannot tie to a row.
func (j *JobWrapper) WithoutKey() *JobWrapper {
	delete(j.Annotations, jobmeta.AnnotationTaskKey)
	return j
}

// Finished gives it a True cond ("Complete" or "Failed") at (zero: an unknown time), reason BackoffLimitExceeded and
// no active pod.
func (j *JobWrapper) Finished(cond batchv1.JobConditionType, at time.Time) *JobWrapper {
	var t metav1.Time
	if !at.IsZero() {
		t = metav1.NewTime(at)
	}
	j.Status.Active = 0
	j.Status.Conditions = append(j.Status.Conditions, batchv1.JobCondition{Type: cond, Status: corev1.ConditionTrue,
		Reason: "BackoffLimitExceeded", Message: "Job has reached the specified backoff limit", LastTransitionTime: t})
	return j
}

// Reason is the reason of its last condition (Finished's).
func (j *JobWrapper) Reason(r string) *JobWrapper {
	j.Status.Conditions[len(j.Status.Conditions)-1].Reason = r
	return j
}

// Condition adds a condition as it is.
func (j *JobWrapper) Condition(c batchv1.JobCondition) *JobWrapper {
	j.Status.Conditions = append(j.Status.Conditions, c)
	return j
}

// Active is its number of active pods.
func (j *JobWrapper) Active(n int32) *JobWrapper {
	j.Status.Active = n
	return j
}

// Started is its status.startTime.
func (j *JobWrapper) Started(at time.Time) *JobWrapper {
	j.Status.StartTime = ptr.To(metav1.NewTime(at))
	return j
}

// Suspended is a Job Kueue holds: suspended, no active pod.
func (j *JobWrapper) Suspended() *JobWrapper {
	j.Spec.Suspend, j.Status.Active = ptr.To(true), 0
	return j
}

// Parallelism sets spec.parallelism and spec.completions.
func (j *JobWrapper) Parallelism(parallelism, completions int32) *JobWrapper {
	j.Spec.Parallelism, j.Spec.Completions = ptr.To(parallelism), ptr.To(completions)
	return j
}

// Requests gives its pod template one container, worker, that requests rl.
func (j *JobWrapper) Requests(rl corev1.ResourceList) *JobWrapper {
	j.Spec.Template.Spec.Containers = []corev1.Container{{Name: "worker", Resources: corev1.ResourceRequirements{Requests: rl}}}
	return j
}

// Deleting gives it a deletionTimestamp.
func (j *JobWrapper) Deleting(at time.Time) *JobWrapper {
	j.DeletionTimestamp = ptr.To(metav1.NewTime(at))
	return j
}

// PodWrapper builds a pod of a Job.
type PodWrapper struct{ corev1.Pod }

// MakePod is owner's pod, Pending, not bound to a node yet and with no condition, labelled as the scheduler's.
func MakePod(owner *batchv1.Job) *PodWrapper {
	return &PodWrapper{corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: owner.Name + "-abcde", Namespace: owner.Namespace,
			Labels:          map[string]string{jobmeta.LabelScheduler: Scheduler},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "batch/v1", Kind: "Job", Name: owner.Name, UID: owner.UID, Controller: ptr.To(true)}}},
		Status: corev1.PodStatus{Phase: corev1.PodPending},
	}}
}

// Obj is the pod built.
func (p *PodWrapper) Obj() *corev1.Pod { return &p.Pod }

// Requests gives it one container, worker, that requests rl.
func (p *PodWrapper) Requests(rl corev1.ResourceList) *PodWrapper {
	p.Spec.Containers = []corev1.Container{{Name: "worker", Resources: corev1.ResourceRequirements{Requests: rl}}}
	return p
}

// Bound binds it to node.
func (p *PodWrapper) Bound(node string) *PodWrapper {
	p.Spec.NodeName = node
	return p
}

// Unschedulable gives it the scheduler's PodScheduled=False condition, reason Unschedulable, with msg.
func (p *PodWrapper) Unschedulable(msg string) *PodWrapper {
	p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse,
		Reason: corev1.PodReasonUnschedulable, Message: msg}}
	return p
}

// Gated gives it PodScheduled=False with reason SchedulingGated.
func (p *PodWrapper) Gated() *PodWrapper {
	p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse,
		Reason: corev1.PodReasonSchedulingGated}}
	return p
}

// Phase is its status.phase.
func (p *PodWrapper) Phase(phase corev1.PodPhase) *PodWrapper {
	p.Status.Phase = phase
	return p
}

// Labels replaces its labels.
func (p *PodWrapper) Labels(l map[string]string) *PodWrapper {
	p.ObjectMeta.Labels = l
	return p
}

// Label sets a label.
func (p *PodWrapper) Label(k, v string) *PodWrapper {
	p.ObjectMeta.Labels[k] = v
	return p
}

// Annotation sets an annotation.
func (p *PodWrapper) Annotation(k, v string) *PodWrapper {
	if p.Annotations == nil {
		p.Annotations = map[string]string{}
	}
	p.Annotations[k] = v
	return p
}

// Deleting gives it a deletionTimestamp.
func (p *PodWrapper) Deleting(at time.Time) *PodWrapper {
	p.DeletionTimestamp = ptr.To(metav1.NewTime(at))
	return p
}

// Orphan drops its owner references: no controller.
func (p *PodWrapper) Orphan() *PodWrapper {
	p.OwnerReferences = nil
	return p
}

// NodeWrapper builds a node.
type NodeWrapper struct{ corev1.Node }

// MakeNode is a node called name, Ready, with nothing allocatable.
func MakeNode(name string) *NodeWrapper {
	return &NodeWrapper{corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}, Status: corev1.NodeStatus{
		Allocatable: corev1.ResourceList{},
		Conditions:  []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}}}}
}

// Obj is the node built.
func (n *NodeWrapper) Obj() *corev1.Node { return &n.Node }

// Allocatable sets the allocatable quantity of a resource ("4", "8Gi").
func (n *NodeWrapper) Allocatable(r corev1.ResourceName, q string) *NodeWrapper {
	n.Status.Allocatable[r] = resource.MustParse(q)
	return n
}
