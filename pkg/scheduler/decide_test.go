package scheduler

import (
	"strconv"
	"testing"
	"time"

	"k8s.io/utils/ptr"

	"github.com/google/go-cmp/cmp"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/jobsched/jobsched/pkg/config"
	"github.com/jobsched/jobsched/pkg/jobmeta"
	"github.com/jobsched/jobsched/pkg/render"
)

// decided is what a test compares of a plan: every Job's verdict and every number and key list the pass acts on.
type decided struct {
	Jobs                            map[string]string // name → "state attempt [delete: why] [retry at]"
	Unfinished, Unschedulable       int
	UnboundPods, PodlessPods, Slots int
	Limit, Blocked                  string
	Exclude, Succeeded, Dead, Due   []string
	Retry                           map[string]int // key → the attempt its next Job gets
}

// view is what a test compares of the plan of a configuration without queues: the install's Jobs and room, its one
// queue's keys and pods.
func view(p *Plan) decided {
	q := p.parts[0]
	d := decided{Jobs: map[string]string{}, Retry: map[string]int{}, Unfinished: p.Unfinished, Unschedulable: p.Unschedulable,
		UnboundPods: q.unboundPods, PodlessPods: q.podlessPods, Slots: p.Slots, Limit: p.Limit, Blocked: p.Blocked,
		Exclude: p.exclude, Succeeded: q.succeeded, Dead: q.dead, Due: q.due}
	for _, j := range p.Jobs {
		v := string(j.State) + " " + strconv.Itoa(j.Attempt)
		if j.Delete != "" {
			v += " delete: " + j.Delete
		}
		if j.RetryAt != nil {
			v += " retry in " + j.RetryAt.Sub(now).String()
		}
		d.Jobs[j.Name] = v
	}
	for k, last := range q.retry {
		d.Retry[k] = last.Attempt + 1
	}
	return d
}

func withPod(j *batchv1.Job, mutate func(*corev1.Pod)) []*corev1.Pod {
	p := pendingPod(j, false)
	p.Spec.NodeName = ""
	mutate(p)
	return []*corev1.Pod{p}
}

// TestDecide pins each rule of Decide with a case of its own.
func TestDecide(t *testing.T) {
	deleting := func(j *batchv1.Job) *batchv1.Job { j.DeletionTimestamp = ptr.To(metav1.NewTime(now)); return j }
	gated := func(p *corev1.Pod) {
		p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonSchedulingGated}}
	}
	unsched := func(p *corev1.Pod) {
		p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable, Message: "no room"}}
	}
	noKey := job("x", "", 0)
	delete(noKey.Annotations, jobmeta.AnnotationTaskKey)
	running := job("r", "", 0)
	podless := job("p", "", 0)
	podless.Status.Active = 0
	// untimed is j with a condition whose lastTransitionTime is zero: the time it finished is unknown.
	untimed := func(j *batchv1.Job) *batchv1.Job { j.Status.Conditions[0].LastTransitionTime = metav1.Time{}; return j }
	untimedNoKey := untimed(job("y", batchv1.JobFailed, 0))
	delete(untimedNoKey.Annotations, jobmeta.AnnotationTaskKey)

	tests := []struct {
		name   string
		mutate func(*config.Config)
		jobs   []*batchv1.Job
		pods   []*corev1.Pod
		want   decided
	}{
		{name: "nothing: maxPerTick bounds the slots",
			want: decided{Slots: 10, Limit: "limits.maxPerTick: 10"}},
		{name: "a running Job holds a slot under maxActive and its key is excluded",
			mutate: func(c *config.Config) { c.Limits.MaxActive = ptr.To(3) }, jobs: []*batchv1.Job{running},
			want: decided{Jobs: map[string]string{name("r"): "running 1"}, Unfinished: 1, Slots: 2,
				Limit: "limits.maxActive: 1 of 3 unfinished", Exclude: []string{"r"}}},
		{name: "maxActive reached blocks",
			mutate: func(c *config.Config) { c.Limits.MaxActive = ptr.To(1) }, jobs: []*batchv1.Job{running},
			want: decided{Jobs: map[string]string{name("r"): "running 1"}, Unfinished: 1, Slots: 0,
				Limit: "limits.maxActive: 1 of 1 unfinished", Blocked: "limits.maxActive: 1 of 1 unfinished", Exclude: []string{"r"}}},
		{name: "a Job without pods yet will take room: podless",
			jobs: []*batchv1.Job{podless},
			want: decided{Jobs: map[string]string{name("p"): "starting 1"}, Unfinished: 1, PodlessPods: 1, Slots: 9,
				Limit: "limits.maxActive: 1 of 10 unfinished", Exclude: []string{"p"}}},
		{name: "an unbound Pending pod will take room",
			jobs: []*batchv1.Job{running}, pods: withPod(running, func(*corev1.Pod) {}),
			want: decided{Jobs: map[string]string{name("r"): "starting 1"}, Unfinished: 1, UnboundPods: 1, Slots: 9,
				Limit: "limits.maxActive: 1 of 10 unfinished", Exclude: []string{"r"}}},
		{name: "an Unschedulable pod blocks",
			jobs: []*batchv1.Job{running}, pods: withPod(running, unsched),
			want: decided{Jobs: map[string]string{name("r"): "unschedulable 1"}, Unfinished: 1, Unschedulable: 1, UnboundPods: 1,
				Limit: "1 pod(s) Unschedulable (" + name("r") + ": no room)", Blocked: "1 pod(s) Unschedulable (" + name("r") + ": no room)", Exclude: []string{"r"}}},
		{name: "blockOnUnschedulable false: counted, not blocking",
			mutate: func(c *config.Config) { c.Limits.BlockOnUnschedulable = ptr.To(false) },
			jobs:   []*batchv1.Job{running}, pods: withPod(running, unsched),
			want: decided{Jobs: map[string]string{name("r"): "unschedulable 1"}, Unfinished: 1, Unschedulable: 1, UnboundPods: 1, Slots: 9,
				Limit: "limits.maxActive: 1 of 10 unfinished", Exclude: []string{"r"}}},
		{name: "SchedulingGated is not Unschedulable",
			jobs: []*batchv1.Job{running}, pods: withPod(running, gated),
			want: decided{Jobs: map[string]string{name("r"): "starting 1"}, Unfinished: 1, UnboundPods: 1, Slots: 9,
				Limit: "limits.maxActive: 1 of 10 unfinished", Exclude: []string{"r"}}},
		{name: "a terminating pod holds nothing and blocks nothing",
			jobs: []*batchv1.Job{running}, pods: withPod(running, func(p *corev1.Pod) { unsched(p); p.DeletionTimestamp = ptr.To(metav1.NewTime(now)) }),
			want: decided{Jobs: map[string]string{name("r"): "running 1"}, Unfinished: 1, Slots: 9,
				Limit: "limits.maxActive: 1 of 10 unfinished", Exclude: []string{"r"}}},
		{name: "a Job without a task key holds a slot, excludes nothing",
			jobs: []*batchv1.Job{noKey},
			want: decided{Jobs: map[string]string{name("x"): "running 1"}, Unfinished: 1, Slots: 9, Limit: "limits.maxActive: 1 of 10 unfinished"}},
		{name: "succeeded past gc.succeededRetention is deleted; its key stays excluded this pass",
			mutate: func(c *config.Config) { c.GC.SucceededRetention = metav1.Duration{Duration: 10 * time.Minute} },
			jobs:   []*batchv1.Job{job("old", batchv1.JobComplete, 11*time.Minute), job("new", batchv1.JobComplete, 9*time.Minute)},
			want: decided{Jobs: map[string]string{name("old"): "succeeded 1 delete: " + DeleteRetention, name("new"): "succeeded 1"},
				Slots: 10, Limit: "limits.maxPerTick: 10", Exclude: []string{"new", "old"}, Succeeded: []string{"new", "old"}}},
		{name: "a Job being deleted is not deleted again",
			jobs: []*batchv1.Job{deleting(job("old", batchv1.JobComplete, time.Hour))},
			want: decided{Jobs: map[string]string{name("old"): "succeeded 1"}, Slots: 10, Limit: "limits.maxPerTick: 10",
				Exclude: []string{"old"}, Succeeded: []string{"old"}}},
		{name: "backoff not yet due: kept, excluded",
			jobs: []*batchv1.Job{job("f", batchv1.JobFailed, 30*time.Second)},
			want: decided{Jobs: map[string]string{name("f"): "backoff 1 retry in 30s"}, Slots: 10, Limit: "limits.maxPerTick: 10",
				Exclude: []string{"f"}}},
		{name: "backoff due: the row competes for a slot and gets attempt 2; the failed Job is kept until then",
			jobs: []*batchv1.Job{job("f", batchv1.JobFailed, 61*time.Second)},
			want: decided{Jobs: map[string]string{name("f"): "backoff 1 retry in -1s"}, Slots: 10, Limit: "limits.maxPerTick: 10",
				Due: []string{"f"}, Retry: map[string]int{"f": 2}}},
		{name: "backoff doubles: attempt 2 waits 2m",
			jobs: []*batchv1.Job{attempt("f", 2, batchv1.JobFailed, 90*time.Second, "")},
			want: decided{Jobs: map[string]string{render.AttemptName("reports", "f", 2): "backoff 2 retry in 30s"}, Slots: 10,
				Limit: "limits.maxPerTick: 10", Exclude: []string{"f"}}},
		{name: "backoff is capped at maxBackoff",
			mutate: func(c *config.Config) {
				c.Retry.MaxAttempts = ptr.To(9)
				c.Retry.MaxBackoff = &metav1.Duration{Duration: 5 * time.Minute}
			},
			jobs: []*batchv1.Job{attempt("f", 8, batchv1.JobFailed, 6*time.Minute, "")},
			want: decided{Jobs: map[string]string{render.AttemptName("reports", "f", 8): "backoff 8 retry in -1m0s"}, Slots: 10,
				Limit: "limits.maxPerTick: 10", Due: []string{"f"}, Retry: map[string]int{"f": 9}}},
		{name: "the last attempt failed: dead, kept as the record, excluded",
			jobs: []*batchv1.Job{attempt("f", 3, batchv1.JobFailed, 2*time.Hour, "")},
			want: decided{Jobs: map[string]string{render.AttemptName("reports", "f", 3): "dead 3"}, Slots: 10,
				Limit: "limits.maxPerTick: 10", Exclude: []string{"f"}, Dead: []string{"f"}}},
		{name: "failed by its podFailurePolicy (FailJob): dead at once",
			jobs: []*batchv1.Job{attempt("f", 1, batchv1.JobFailed, 2*time.Hour, batchv1.JobReasonPodFailurePolicy)},
			want: decided{Jobs: map[string]string{name("f"): "dead 1"}, Slots: 10,
				Limit: "limits.maxPerTick: 10", Exclude: []string{"f"}, Dead: []string{"f"}}},
		{name: "failed for another reason with attempts left: backoff",
			jobs: []*batchv1.Job{attempt("f", 1, batchv1.JobFailed, 2*time.Hour, batchv1.JobReasonDeadlineExceeded)},
			want: decided{Jobs: map[string]string{name("f"): "backoff 1 retry in -1h59m0s"}, Slots: 10,
				Limit: "limits.maxPerTick: 10", Due: []string{"f"}, Retry: map[string]int{"f": 2}}},
		{name: "retry.deadRetention passed: the record goes",
			mutate: func(c *config.Config) { c.Retry.DeadRetention = metav1.Duration{Duration: time.Hour} },
			jobs:   []*batchv1.Job{attempt("f", 3, batchv1.JobFailed, 2*time.Hour, ""), attempt("g", 3, batchv1.JobFailed, 30*time.Minute, "")},
			want: decided{Jobs: map[string]string{render.AttemptName("reports", "f", 3): "dead 3 delete: " + DeleteDead,
				render.AttemptName("reports", "g", 3): "dead 3"}, Slots: 10, Limit: "limits.maxPerTick: 10",
				Exclude: []string{"f", "g"}, Dead: []string{"g"}}},
		// A zero lastTransitionTime is an unknown finish time: never past a retention or a backoff (the Job is kept and
		// its task not retried, as the TTL-after-finished controller keeps it); a newer attempt still supersedes it.
		{name: "finished at an unknown time: succeeded, kept past gc.succeededRetention",
			jobs: []*batchv1.Job{untimed(job("s", batchv1.JobComplete, 0))},
			want: decided{Jobs: map[string]string{name("s"): "succeeded 1"}, Slots: 10, Limit: "limits.maxPerTick: 10",
				Exclude: []string{"s"}, Succeeded: []string{"s"}}},
		{name: "finished at an unknown time: failed, its backoff never passes",
			jobs: []*batchv1.Job{untimed(job("f", batchv1.JobFailed, 0))},
			want: decided{Jobs: map[string]string{name("f"): "backoff 1"}, Slots: 10, Limit: "limits.maxPerTick: 10",
				Exclude: []string{"f"}}},
		{name: "finished at an unknown time: dead, kept past retry.deadRetention",
			mutate: func(c *config.Config) { c.Retry.DeadRetention = metav1.Duration{Duration: time.Second} },
			jobs:   []*batchv1.Job{untimed(attempt("d", 3, batchv1.JobFailed, 0, ""))},
			want: decided{Jobs: map[string]string{render.AttemptName("reports", "d", 3): "dead 3"}, Slots: 10,
				Limit: "limits.maxPerTick: 10", Exclude: []string{"d"}, Dead: []string{"d"}}},
		{name: "finished at an unknown time: failed without a task key, kept",
			jobs: []*batchv1.Job{untimedNoKey},
			want: decided{Jobs: map[string]string{name("y"): "backoff 1"}, Slots: 10, Limit: "limits.maxPerTick: 10"}},
		{name: "finished at an unknown time: an old attempt is still superseded",
			jobs: []*batchv1.Job{untimed(attempt("f", 1, batchv1.JobFailed, 0, "")), attempt("f", 2, batchv1.JobFailed, 10*time.Second, "")},
			want: decided{Jobs: map[string]string{render.AttemptName("reports", "f", 1): "superseded 1 delete: " + DeleteSuperseded,
				render.AttemptName("reports", "f", 2): "backoff 2 retry in 1m50s"}, Slots: 10, Limit: "limits.maxPerTick: 10",
				Exclude: []string{"f"}}},
		{name: "an old attempt next to a newer one is deleted",
			jobs: []*batchv1.Job{attempt("f", 1, batchv1.JobFailed, time.Hour, ""), attempt("f", 2, batchv1.JobFailed, 10*time.Second, "")},
			want: decided{Jobs: map[string]string{render.AttemptName("reports", "f", 1): "superseded 1 delete: " + DeleteSuperseded,
				render.AttemptName("reports", "f", 2): "backoff 2 retry in 1m50s"}, Slots: 10, Limit: "limits.maxPerTick: 10",
				Exclude: []string{"f"}}},
		{name: "a pass killed between creating attempt 2 and deleting attempt 1: attempt 1 goes, attempt 2 holds the key",
			jobs: []*batchv1.Job{attempt("f", 1, batchv1.JobFailed, time.Hour, ""), func() *batchv1.Job {
				j := attempt("f", 2, "", 0, "")
				j.Status.Active = 0
				return j
			}()},
			want: decided{Jobs: map[string]string{render.AttemptName("reports", "f", 1): "superseded 1 delete: " + DeleteSuperseded,
				render.AttemptName("reports", "f", 2): "starting 2"}, Unfinished: 1, PodlessPods: 1, Slots: 9,
				Limit: "limits.maxActive: 1 of 10 unfinished", Exclude: []string{"f"}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg := testConfig(t, tc.mutate)
			obs := &Observation{Now: now}
			for _, j := range tc.jobs {
				obs.Jobs = append(obs.Jobs, SummarizeJob(j))
			}
			for _, p := range tc.pods {
				if sum, ok := SummarizePod(p); ok {
					obs.Pods = append(obs.Pods, sum)
				}
			}
			want := tc.want
			if want.Jobs == nil {
				want.Jobs = map[string]string{}
			}
			if want.Retry == nil {
				want.Retry = map[string]int{}
			}
			if diff := cmp.Diff(want, view(Decide(cfg, obs))); diff != "" {
				t.Errorf("plan (-want +got):\n%s", diff)
			}
		})
	}
}
