package scheduler

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/jobsched/jobsched/pkg/render"
)

func TestSummarizeJob(t *testing.T) {
	failed := job("f", batchv1.JobFailed, time.Hour)
	failed.Status.Conditions = append([]batchv1.JobCondition{{Type: batchv1.JobComplete, Status: corev1.ConditionFalse}}, failed.Status.Conditions...)
	tests := []struct {
		name   string
		job    *batchv1.Job
		mutate func(*batchv1.Job)
		want   JobSummary
	}{
		{name: "running, attempt 1 without a label", job: job("r", "", 0),
			want: JobSummary{Name: name("r"), UID: "uid-r", Key: "r", Attempt: 1, Active: 1, PodsPerJob: 1}},
		{name: "attempt label", job: job("r", "", 0), mutate: func(j *batchv1.Job) { j.Labels[render.LabelAttempt] = "3" },
			want: JobSummary{Name: name("r"), UID: "uid-r", Key: "r", Attempt: 3, Active: 1, PodsPerJob: 1}},
		{name: "a bad attempt label is attempt 1", job: job("r", "", 0), mutate: func(j *batchv1.Job) { j.Labels[render.LabelAttempt] = "x" },
			want: JobSummary{Name: name("r"), UID: "uid-r", Key: "r", Attempt: 1, Active: 1, PodsPerJob: 1}},
		{name: "the True condition counts, a False one does not", job: failed,
			want: JobSummary{Name: name("f"), UID: "uid-f", Key: "f", Attempt: 1, PodsPerJob: 1, Finished: &Condition{Type: batchv1.JobFailed,
				Reason: "BackoffLimitExceeded", Message: "Job has reached the specified backoff limit", At: now.Add(-time.Hour)}}},
		{name: "deleting, with parallelism", job: job("r", "", 0), mutate: func(j *batchv1.Job) {
			j.DeletionTimestamp = ptr(metav1.NewTime(now))
			j.Spec.Parallelism, j.Spec.Completions = ptr(int32(5)), ptr(int32(3))
		}, want: JobSummary{Name: name("r"), UID: "uid-r", Key: "r", Attempt: 1, Active: 1, PodsPerJob: 3, Deleting: true}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if tc.mutate != nil {
				tc.mutate(tc.job)
			}
			if diff := cmp.Diff(tc.want, SummarizeJob(tc.job)); diff != "" {
				t.Errorf("summary (-want +got):\n%s", diff)
			}
		})
	}
}

func TestSummarizePod(t *testing.T) {
	owner := job("r", "", 0)
	tests := []struct {
		name   string
		mutate func(*corev1.Pod)
		want   PodSummary
		wantOK bool
	}{
		{name: "bound", mutate: func(*corev1.Pod) {}, want: PodSummary{Job: "uid-r", Bound: true}, wantOK: true},
		{name: "unschedulable", mutate: func(p *corev1.Pod) {
			p.Spec.NodeName = ""
			p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable, Message: "full"}}
		}, want: PodSummary{Job: "uid-r", Unschedulable: true, Message: "full"}, wantOK: true},
		{name: "gated is not unschedulable", mutate: func(p *corev1.Pod) {
			p.Spec.NodeName = ""
			p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonSchedulingGated}}
		}, want: PodSummary{Job: "uid-r"}, wantOK: true},
		{name: "deleting holds nothing", mutate: func(p *corev1.Pod) { p.DeletionTimestamp = ptr(metav1.NewTime(now)) }},
		{name: "no controller holds nothing", mutate: func(p *corev1.Pod) { p.OwnerReferences = nil }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := pendingPod(owner, false)
			tc.mutate(p)
			got, ok := SummarizePod(p)
			if ok != tc.wantOK || got != tc.want {
				t.Errorf("SummarizePod = %+v, %v; want %+v, %v", got, ok, tc.want, tc.wantOK)
			}
		})
	}
}

// TestTask: status KEY says where one task stands, with its attempts, their pods and its row's variables.
func TestTask(t *testing.T) {
	failed := job("f", batchv1.JobFailed, 30*time.Second)
	pod := pendingPod(failed, false)
	pod.Labels[render.LabelTask] = render.TaskLabel("f")
	pod.Annotations = map[string]string{render.AnnotationTaskKey: "f"}
	pod.Status.Phase = corev1.PodFailed
	dead := attempt("d", 3, batchv1.JobFailed, time.Hour, "")
	g1, g2 := attempt("g", 1, batchv1.JobFailed, time.Hour, ""), attempt("g", 2, "", 0, "")
	tests := []struct {
		key, wantState, wantWhy string
		wantAttempts            int
		wantPods                int
		wantEnv                 bool
	}{
		{"f", "backoff", "attempt 1 of 3 failed (BackoffLimitExceeded: Job has reached the specified backoff limit); the next attempt may start at", 1, 1, true},
		{"d", "dead", "no attempt left (3 of 3;", 1, 0, true},
		{"w", "waiting", "its row waits for a Job: the next tick has 9 slot(s)", 0, 0, true},
		{"g", "running", "attempt 2 (Job " + render.AttemptName("reports", "g", 2) + ") is running", 2, 0, true},
		{"gone", "not selected", "the query does not return this key", 0, 0, false},
	}
	for _, tc := range tests {
		t.Run(tc.key, func(t *testing.T) {
			cfg := testConfig(t, nil)
			client := fake.NewClientset(failed, pod, dead, g1, g2)
			s := &Scheduler{Config: cfg, Kube: client, Source: &source{rows: rowsFor("f", "d", "w", "g")}, Renderer: render.New(cfg, nil), Now: func() time.Time { return now }}
			v, err := s.Task(context.Background(), tc.key)
			if err != nil {
				t.Fatal(err)
			}
			if v.State != tc.wantState || !strings.HasPrefix(v.Why, tc.wantWhy) {
				t.Errorf("state %q, why %q; want %q, %q…", v.State, v.Why, tc.wantState, tc.wantWhy)
			}
			pods := 0
			for _, a := range v.Attempts {
				pods += len(a.Pods)
			}
			if len(v.Attempts) != tc.wantAttempts || pods != tc.wantPods {
				t.Errorf("%d attempts with %d pods, want %d with %d", len(v.Attempts), pods, tc.wantAttempts, tc.wantPods)
			}
			if (v.Env != nil) != tc.wantEnv {
				t.Errorf("env %v, want one: %v", v.Env, tc.wantEnv)
			}
			for i := 1; i < len(v.Attempts); i++ {
				if v.Attempts[i-1].Attempt >= v.Attempts[i].Attempt {
					t.Errorf("attempts not in order: %d before %d", v.Attempts[i-1].Attempt, v.Attempts[i].Attempt)
				}
			}
			for _, e := range v.Env {
				if e.Name == render.EnvAttempt && tc.key == "f" && e.Value != "2" {
					t.Errorf("%s = %s, want the next attempt, 2", e.Name, e.Value)
				}
			}
		})
	}
}
