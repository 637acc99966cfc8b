package report

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"k8s.io/utils/ptr"

	"github.com/google/go-cmp/cmp"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/jobsched/jobsched/pkg/backlog"
	"github.com/jobsched/jobsched/pkg/config"
	"github.com/jobsched/jobsched/pkg/render"
	"github.com/jobsched/jobsched/pkg/scheduler"
	"github.com/jobsched/jobsched/pkg/testkit"
)

// TestStatusCounts: status counts kept Jobs by state (not those this pass deletes) and caps the backlog.
func TestStatusCounts(t *testing.T) {
	many := make([]string, backlog.Cap+1)
	for i := range many {
		many[i] = fmt.Sprintf("r%05d", i)
	}
	tests := []struct {
		name        string
		rows        []string
		wantBacklog int
		wantCapped  bool
	}{
		{"exactly the cap", many[:backlog.Cap], backlog.Cap, false},
		{"one more", many, backlog.Cap, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg := testConfig(t, nil)
			client := testkit.NewFake(makeJob("old").Finished(batchv1.JobComplete, ago(time.Hour)).Obj(), makeJob("run").Obj(), makeJob("d").Attempt(3).Finished(batchv1.JobFailed, ago(time.Hour)).Obj())
			s := &scheduler.Scheduler{Config: cfg, Kube: client, Source: &source{Rows: rowsFor(tc.rows...)}, Renderer: render.New(cfg, nil), Now: func() time.Time { return now }}
			st, err := StatusOf(context.Background(), s)
			if err != nil {
				t.Fatal(err)
			}
			want := map[State]int{scheduler.StateRunning: 1, scheduler.StateStarting: 0, scheduler.StateUnschedulable: 0, scheduler.StateQueued: 0, scheduler.StateSucceeded: 0, scheduler.StateBackoff: 0, scheduler.StateDead: 1}
			if diff := cmp.Diff(want, st.States); diff != "" {
				t.Errorf("states (-want +got):\n%s", diff)
			}
			if !slices.IsSortedFunc(st.Jobs, func(a, b JobStatus) int { return strings.Compare(a.Name, b.Name) }) {
				t.Errorf("jobs are not sorted by name: %v", st.Jobs)
			}
			if st.Backlog != tc.wantBacklog || st.BacklogCapped != tc.wantCapped || len(st.Dead) != 1 {
				t.Errorf("backlog %d capped %v, %d dead; want %d, %v, 1", st.Backlog, st.BacklogCapped, len(st.Dead), tc.wantBacklog, tc.wantCapped)
			}
		})
	}
}

// TestBacklog: after a tick, the backlog is the rows selected that have no Job: neither those with a Job kept by
// the pass nor those it created; a task due for a retry is still backlog until its next attempt exists.
func TestBacklog(t *testing.T) {
	many := make([]string, backlog.Cap+5)
	for i := range many {
		many[i] = fmt.Sprintf("r%05d", i)
	}
	tests := []struct {
		name       string
		jobs       []runtime.Object
		rows       []string
		maxPerTick int
		wantRows   int
		wantCapped bool
	}{
		{"running and created excluded", []runtime.Object{makeJob("run").Obj()}, []string{"run", "a", "b", "c", "d"}, 2, 2, false},
		{"backoff not due excluded, due counted until created", []runtime.Object{makeJob("wait").Finished(batchv1.JobFailed, ago(time.Second)).Obj(), makeJob("due").Finished(batchv1.JobFailed, ago(time.Hour)).Obj()},
			[]string{"wait", "due", "a"}, 0, 2, false},
		{"nothing left", nil, []string{"a", "b"}, 10, 0, false},
		{"capped", nil, many, 1, backlog.Cap, true},
		{"exactly the cap is not capped", nil, many[:backlog.Cap+1], 1, backlog.Cap, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := testConfig(t, func(c *config.Config) { c.Limits.MaxPerTick = ptr.To(tt.maxPerTick) })
			s := &scheduler.Scheduler{Config: cfg, Kube: testkit.NewFake(tt.jobs...), Source: &source{Rows: rowsFor(tt.rows...)},
				Renderer: render.New(cfg, nil), Now: func() time.Time { return now }}
			res, err := s.Run(context.Background(), scheduler.Execute)
			p := res.Plan
			if err != nil {
				t.Fatal(err)
			}
			bs, err := backlog.AfterPass(context.Background(), s, p)
			if err != nil {
				t.Fatal(err)
			}
			rows, capped := backlog.Total(bs)
			if rows != tt.wantRows || capped != tt.wantCapped {
				t.Errorf("Backlog = %d, capped %v; want %d, capped %v", rows, capped, tt.wantRows, tt.wantCapped)
			}
		})
	}
}

// TestStatusDrain: status estimates the backlog's drain from the succeeded Jobs it lists (their startTime and
// Complete condition): two that each ran 10 minutes and ended 5 and 15 minutes ago, started 25 minutes ago at the
// earliest, make 2 in 25 minutes; 6 rows then take 75 minutes. A failed Job does not count.
func TestStatusDrain(t *testing.T) {
	cfg := testConfig(t, func(c *config.Config) { c.GC.SucceededRetention = metav1.Duration{Duration: time.Hour} })
	ran := func(key string, cond batchv1.JobConditionType, ended time.Duration) *batchv1.Job {
		return makeJob(key).Finished(cond, ago(ended)).Started(ago(ended + 10*time.Minute)).Obj()
	}
	client := testkit.NewFake(ran("a", batchv1.JobComplete, 5*time.Minute), ran("b", batchv1.JobComplete, 15*time.Minute),
		ran("f", batchv1.JobFailed, time.Minute))
	s := &scheduler.Scheduler{Config: cfg, Kube: client, Source: &source{Rows: rowsFor("r1", "r2", "r3", "r4", "r5", "r6")},
		Renderer: render.New(cfg, nil), Now: func() time.Time { return now }}
	st, err := StatusOf(context.Background(), s)
	if err != nil {
		t.Fatal(err)
	}
	want := "backlog 6 rows, about 75m at the rate of the last 25m (2 Jobs succeeded, 5 an hour)"
	if st.Drain.Message != want || st.Drain.Succeeded != 2 || st.Drain.Seconds == nil || *st.Drain.Seconds != 75*60 {
		t.Errorf("drain %+v, want %q", st.Drain, want)
	}
}

// TestStatusHoldsNoQueues: for a configuration without queues:, the document's top level is its one queue: what its
// unfinished Jobs hold (a finished or suspended one nothing; a Job of two pods at once twice its pod's requests) and,
// with job.requestsFrom, what its next rows may ask, the template's request for NULL and job.maxRequests at most.
func TestStatusHoldsNoQueues(t *testing.T) {
	cfg := testConfig(t, func(c *config.Config) {
		c.Job.RequestsFrom = map[corev1.ResourceName]string{corev1.ResourceCPU: "cpus"}
		c.Job.MaxRequests = map[corev1.ResourceName]resource.Quantity{corev1.ResourceCPU: resource.MustParse("8")}
		c.Template.Spec.Template.Spec.Containers[0].Resources.Requests = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}
	})
	cpu := func(q string) corev1.ResourceList {
		return corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(q)}
	}
	client := testkit.NewFake(makeJob("two").Parallelism(2, 2).Requests(cpu("1500m")).Obj(), makeJob("one").Requests(cpu("250m")).Obj(),
		makeJob("queued").Suspended().Requests(cpu("4")).Obj(), makeJob("done").Requests(cpu("6")).Finished(batchv1.JobComplete, ago(time.Minute)).Obj())
	s := &scheduler.Scheduler{Config: cfg, Kube: client, Source: &source{Rows: rowsFor("w")}, Renderer: render.New(cfg, nil), Now: func() time.Time { return now }}
	st, err := StatusOf(context.Background(), s)
	if err != nil {
		t.Fatal(err)
	}
	doc, err := json.Marshal(st)
	if err != nil {
		t.Fatal(err)
	}
	var got struct {
		Holds       map[string]string `json:"holds"`
		RowRequests struct {
			Default map[string]string `json:"default"`
			Max     map[string]string `json:"max"`
		} `json:"rowRequests"`
		Queues []any `json:"queues"`
	}
	if err := json.Unmarshal(doc, &got); err != nil {
		t.Fatal(err)
	}
	if want := map[string]string{"cpu": "3250m"}; !maps.Equal(got.Holds, want) || got.Queues != nil {
		t.Errorf("holds %v, queues %v; want %v at the top level, no queues", got.Holds, got.Queues, want)
	}
	if !maps.Equal(got.RowRequests.Default, map[string]string{"cpu": "1"}) || !maps.Equal(got.RowRequests.Max, map[string]string{"cpu": "8"}) {
		t.Errorf("rowRequests %+v, want default cpu 1, max cpu 8", got.RowRequests)
	}
}
