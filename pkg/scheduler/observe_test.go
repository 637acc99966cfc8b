package scheduler

import (
	"testing"
	"time"

	"k8s.io/utils/ptr"

	"github.com/google/go-cmp/cmp"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/jobsched/jobsched/pkg/jobmeta"
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
		{name: "attempt label", job: job("r", "", 0), mutate: func(j *batchv1.Job) { j.Labels[jobmeta.LabelAttempt] = "3" },
			want: JobSummary{Name: name("r"), UID: "uid-r", Key: "r", Attempt: 3, Active: 1, PodsPerJob: 1}},
		{name: "a bad attempt label is attempt 1", job: job("r", "", 0), mutate: func(j *batchv1.Job) { j.Labels[jobmeta.LabelAttempt] = "x" },
			want: JobSummary{Name: name("r"), UID: "uid-r", Key: "r", Attempt: 1, Active: 1, PodsPerJob: 1}},
		{name: "the True condition counts, a False one does not", job: failed,
			want: JobSummary{Name: name("f"), UID: "uid-f", Key: "f", Attempt: 1, PodsPerJob: 1, Finished: &Condition{Type: batchv1.JobFailed,
				Reason: "BackoffLimitExceeded", Message: "Job has reached the specified backoff limit", At: now.Add(-time.Hour)}}},
		{name: "deleting, with parallelism", job: job("r", "", 0), mutate: func(j *batchv1.Job) {
			j.DeletionTimestamp = ptr.To(metav1.NewTime(now))
			j.Spec.Parallelism, j.Spec.Completions = ptr.To(int32(5)), ptr.To(int32(3))
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
		{name: "deleting holds nothing", mutate: func(p *corev1.Pod) { p.DeletionTimestamp = ptr.To(metav1.NewTime(now)) }},
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
