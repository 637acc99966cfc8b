package scheduler

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/jobsched/jobsched/pkg/config"
	"github.com/jobsched/jobsched/pkg/jobmeta"
	"github.com/jobsched/jobsched/pkg/render"
	"github.com/jobsched/jobsched/pkg/testkit"
)

func TestSummarizeJob(t *testing.T) {
	none := corev1.ResourceList{} // a template that requests nothing
	cpu := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("500m")}
	tests := []struct {
		name string
		job  *batchv1.Job
		want JobSummary
	}{
		{name: "running, attempt 1 without a label", job: makeJob("r").Obj(),
			want: JobSummary{Name: name("r"), UID: "uid-r", Key: "r", Attempt: 1, Active: 1, PodsPerJob: 1, Demand: none}},
		{name: "attempt label", job: makeJob("r").Label(jobmeta.LabelAttempt, "3").Obj(),
			want: JobSummary{Name: name("r"), UID: "uid-r", Key: "r", Attempt: 3, Active: 1, PodsPerJob: 1, Demand: none}},
		{name: "a bad attempt label is attempt 1", job: makeJob("r").Label(jobmeta.LabelAttempt, "x").Obj(),
			want: JobSummary{Name: name("r"), UID: "uid-r", Key: "r", Attempt: 1, Active: 1, PodsPerJob: 1, Demand: none}},
		{name: "the True condition counts, a False one does not", job: makeJob("f").Condition(batchv1.JobCondition{Type: batchv1.JobComplete, Status: corev1.ConditionFalse}).
			Finished(batchv1.JobFailed, ago(time.Hour)).Obj(),
			want: JobSummary{Name: name("f"), UID: "uid-f", Key: "f", Attempt: 1, PodsPerJob: 1, Finished: &Condition{Type: batchv1.JobFailed,
				Reason: "BackoffLimitExceeded", Message: "Job has reached the specified backoff limit", At: now.Add(-time.Hour)}}},
		{name: "deleting, with parallelism", job: makeJob("r").Deleting(now).Parallelism(5, 3).Obj(),
			want: JobSummary{Name: name("r"), UID: "uid-r", Key: "r", Attempt: 1, Active: 1, PodsPerJob: 3, Deleting: true, Demand: none}},
		{name: "unfinished, running: its demand is kept", job: makeJob("r").Requests(cpu).Obj(),
			want: JobSummary{Name: name("r"), UID: "uid-r", Key: "r", Attempt: 1, Active: 1, PodsPerJob: 1, Demand: cpu}},
		{name: "suspended: no demand kept", job: makeJob("q").Active(0).Suspended().Requests(cpu).Obj(),
			want: JobSummary{Name: name("q"), UID: "uid-q", Key: "q", Attempt: 1, PodsPerJob: 1, Suspended: true}},
		{name: "finished: no demand kept", job: makeJob("f").Requests(cpu).Finished(batchv1.JobComplete, ago(time.Hour)).Obj(),
			want: JobSummary{Name: name("f"), UID: "uid-f", Key: "f", Attempt: 1, PodsPerJob: 1, Finished: &Condition{Type: batchv1.JobComplete,
				Reason: "BackoffLimitExceeded", Message: "Job has reached the specified backoff limit", At: now.Add(-time.Hour)}}},
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

// TestUnknownCapacityMode: a limits.capacity no mode has (a configuration that was not validated: a programming
// error) creates nothing and says so, online or offline; it never fits as if capacity were counted.
func TestUnknownCapacityMode(t *testing.T) {
	for _, online := range []bool{false, true} {
		t.Run(map[bool]string{false: "offline", true: "online"}[online], func(t *testing.T) {
			cfg := testConfig(t, func(c *config.Config) { c.Limits.Capacity = "lots" })
			s := &Scheduler{Config: cfg, Source: &source{Rows: rowsFor("a", "b")}, Renderer: render.New(cfg, nil),
				Now: func() time.Time { return now }}
			if online {
				s.Kube = testkit.NewFake()
			}
			res, _ := s.Run(context.Background(), DryRun)
			if p := res.Plan; p == nil || len(p.Creates) != 0 || !strings.Contains(p.Blocked, `unknown mode "lots"`) ||
				p.Bound != BoundCapacityUnknown || p.Waits() {
				t.Errorf("plan: %d creates, blocked %q, bound %s; want none, blocked naming the unknown mode, capacityUnknown",
					len(p.Creates), p.Blocked, p.Bound)
			}
		})
	}
}
