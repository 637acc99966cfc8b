package scheduler

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/jobsched/jobsched/pkg/jobmeta"
)

func TestSummarizeJob(t *testing.T) {
	tests := []struct {
		name string
		job  *batchv1.Job
		want JobSummary
	}{
		{name: "running, attempt 1 without a label", job: makeJob("r").Obj(),
			want: JobSummary{Name: name("r"), UID: "uid-r", Key: "r", Attempt: 1, Active: 1, PodsPerJob: 1}},
		{name: "attempt label", job: makeJob("r").Label(jobmeta.LabelAttempt, "3").Obj(),
			want: JobSummary{Name: name("r"), UID: "uid-r", Key: "r", Attempt: 3, Active: 1, PodsPerJob: 1}},
		{name: "a bad attempt label is attempt 1", job: makeJob("r").Label(jobmeta.LabelAttempt, "x").Obj(),
			want: JobSummary{Name: name("r"), UID: "uid-r", Key: "r", Attempt: 1, Active: 1, PodsPerJob: 1}},
		{name: "the True condition counts, a False one does not", job: makeJob("f").Condition(batchv1.JobCondition{Type: batchv1.JobComplete, Status: corev1.ConditionFalse}).
			Finished(batchv1.JobFailed, ago(time.Hour)).Obj(),
			want: JobSummary{Name: name("f"), UID: "uid-f", Key: "f", Attempt: 1, PodsPerJob: 1, Finished: &Condition{Type: batchv1.JobFailed,
				Reason: "BackoffLimitExceeded", Message: "Job has reached the specified backoff limit", At: now.Add(-time.Hour)}}},
		{name: "deleting, with parallelism", job: makeJob("r").Deleting(now).Parallelism(5, 3).Obj(),
			want: JobSummary{Name: name("r"), UID: "uid-r", Key: "r", Attempt: 1, Active: 1, PodsPerJob: 3, Deleting: true}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, SummarizeJob(tc.job)); diff != "" {
				t.Errorf("summary (-want +got):\n%s", diff)
			}
		})
	}
}

// TestTask: status KEY says where one task stands, with its attempts, their pods and its row's variables.
