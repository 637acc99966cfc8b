package cmd

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/jobsched/jobsched/pkg/capacity"
	"github.com/jobsched/jobsched/pkg/config"
	"github.com/jobsched/jobsched/pkg/jobmeta"
	"github.com/jobsched/jobsched/pkg/querydoctor"
	"github.com/jobsched/jobsched/pkg/render"
	"github.com/jobsched/jobsched/pkg/report"
	"github.com/jobsched/jobsched/pkg/scheduler"
	"github.com/jobsched/jobsched/pkg/testkit"
)

// TestStatusGoldens pins `status` (the table and -o json|yaml) byte for byte for a scheduler of one queue with a Job
// in each state: it was written by the code of before several queues (issue 20), and a configuration without
// queues: must keep it. -update rewrites testdata/golden-status from the code under test.
func TestStatusGoldens(t *testing.T) {
	st := goldenStatus(t, nil)
	for _, f := range []struct{ format, file string }{{"table", "status.txt"}, {"json", "status.json"}, {"yaml", "status.yaml"}} {
		t.Run(f.format, func(t *testing.T) {
			var out bytes.Buffer
			var err error
			if f.format == "table" {
				err = printStatus(&out, st)
			} else {
				err = printDoc(&out, f.format, st)
			}
			if err != nil {
				t.Fatal(err)
			}
			checkGolden(t, filepath.Join("testdata", "golden-status", f.file), out.Bytes())
		})
	}
}

// goldenStatus is the status of the scheduler "reports" (testkit.Config changed by mutate) over a fake cluster with
// a running Job, one starting whose pod is Unschedulable, a succeeded one (deleted by the next pass), one in backoff
// and a dead one, and rows for each of them and two more.
func goldenStatus(t *testing.T, mutate func(*config.Config)) *report.Status {
	t.Helper()
	cfg := testkit.Config(t, mutate)
	stuck := testkit.MakeJob("stuck").Active(0).Obj()
	client := testkit.NewFake(
		testkit.MakeJob("run").Obj(), stuck, testkit.MakePod(stuck).Unschedulable("0/1 nodes are available: 1 Insufficient cpu.").Obj(),
		testkit.MakeJob("ok").Finished(batchv1.JobComplete, testkit.Ago(time.Hour)).Obj(),
		testkit.MakeJob("b").Attempt(1).Finished(batchv1.JobFailed, testkit.Ago(time.Second)).Reason("DeadlineExceeded").Obj(),
		testkit.MakeJob("d").Attempt(3).Finished(batchv1.JobFailed, testkit.Ago(time.Hour)).Obj())
	s := &scheduler.Scheduler{Config: cfg, Kube: client, Source: &testkit.Source{Rows: testkit.RowsFor("run", "stuck", "b", "d", "w1", "w2")},
		Renderer: render.New(cfg, nil), Now: func() time.Time { return testkit.Now }}
	st, err := report.StatusOf(context.Background(), s)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// checkGolden compares got with the file at path byte for byte, or rewrites the file with -update.
func checkGolden(t *testing.T, path string, got []byte) {
	t.Helper()
	if *updateGoldens {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (go test ./cmd/ -update writes it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs (-want +got):\n%s", path, cmp.Diff(string(want), string(got)))
	}
}

// TestStatusQueuesGoldens pins `status` for an install with two queues (testdata/golden-status/queues): the
// install's totals, then each queue's backlog, Jobs, slots and what bound them, its query doctor's finding and its
// groups at their cap; -o json carries them as queues[].
func TestStatusQueuesGoldens(t *testing.T) {
	s, doctor := queuesScheduler(t)
	st, err := report.StatusOf(context.Background(), s)
	if err != nil {
		t.Fatal(err)
	}
	type queue struct {
		name             string
		backlog, running int
		slots            int
	}
	var got []queue
	for _, q := range st.Queues {
		got = append(got, queue{q.Name, q.Backlog, q.States[scheduler.StateRunning], q.Slots})
	}
	want := []queue{{"daily", 3, 2, 0}, {"exports", 1, 1, 3}}
	if diff := cmp.Diff(want, got, cmp.AllowUnexported(queue{})); diff != "" {
		t.Errorf("queues (-want +got):\n%s", diff)
	}
	if g := st.Queues[1].GroupsAtCap; !slices.Equal(g, []string{"acme\n"}) {
		t.Errorf("exports: groups at their cap %q, want acme\\n", g)
	}
	if st.Queues[0].Query != nil || st.Queues[1].Query != doctor.Finding || !slices.Equal(doctor.Exclude, []string{"e1", "e2"}) || doctor.Limit != 3 {
		t.Errorf("query findings %v and %v, exports asked with exclude %q, limit %d; want none, the doctor's, [e1 e2], 3",
			st.Queues[0].Query, st.Queues[1].Query, doctor.Exclude, doctor.Limit)
	}
	if st.Backlog != 4 || st.Unfinished != 3 {
		t.Errorf("install: backlog %d, unfinished %d; want 4 and 3 (the queues' sums)", st.Backlog, st.Unfinished)
	}
	// What each queue's unfinished Jobs hold (the dead one nothing), the install the sum; what exports' rows ask.
	holds := []string{capacity.Quantities(st.Holds), capacity.Quantities(st.Queues[0].Holds), capacity.Quantities(st.Queues[1].Holds)}
	if want := []string{"cpu=3500m memory=4Gi", "cpu=1500m memory=3Gi", "cpu=2 memory=1Gi"}; !slices.Equal(holds, want) {
		t.Errorf("holds: install, daily, exports %q; want %q", holds, want)
	}
	if r := st.Queues[1].RowRequests; st.Queues[0].RowRequests != nil || r == nil ||
		capacity.Quantities(r.Default) != "cpu=500m" || capacity.Quantities(r.Max) != "cpu=4" {
		t.Errorf("row requests: daily %v, exports %v; want none, cpu 500m by default and at most 4", st.Queues[0].RowRequests, r)
	}
	for _, f := range []struct{ format, file string }{{"table", "status.txt"}, {"json", "status.json"}} {
		t.Run(f.format, func(t *testing.T) {
			var out bytes.Buffer
			if f.format == "table" {
				err = printStatus(&out, st)
			} else {
				err = printDoc(&out, f.format, st)
			}
			if err != nil {
				t.Fatal(err)
			}
			checkGolden(t, filepath.Join("testdata", "golden-status", "queues", f.file), out.Bytes())
		})
	}
}

// TestTaskViewQueues: `status KEY` of an install with queues shows the task's queue and judges it by that queue's
// slots and attempts: a dead Job's queue (exports: 1 attempt), a row without a Job found in the second queue's
// source, one in the first, and a key no queue selects.
func TestTaskViewQueues(t *testing.T) {
	s, _ := queuesScheduler(t)
	for _, tc := range []struct{ key, queue, state, why string }{
		{"e2", "exports", "dead", "no attempt left (1 of 1; "},
		{"e3", "exports", "waiting", "the next tick has 3 slot(s) (bound by limits.maxActive: 3 of 6 unfinished)"},
		{"d3", "daily", "waiting", "the next tick creates nothing: limits.maxActive: 2 of 2 unfinished"},
		{"nope", "daily", "not selected", "the query does not return this key"},
	} {
		t.Run(tc.key, func(t *testing.T) {
			v, err := report.TaskViewOf(context.Background(), s, tc.key)
			if err != nil {
				t.Fatal(err)
			}
			if v.Queue != tc.queue || v.State != tc.state || !strings.Contains(v.Why, tc.why) {
				t.Errorf("queue %q, state %q, why %q; want %q, %q, %q", v.Queue, v.State, v.Why, tc.queue, tc.state, tc.why)
			}
			var out bytes.Buffer
			if err := printTask(&out, v); err != nil {
				t.Fatal(err)
			}
			if want := fmt.Sprintf("(scheduler reports, queue %s, namespace batch)", tc.queue); !strings.Contains(out.String(), want) {
				t.Errorf("the table lacks %q:\n%s", want, out.String())
			}
		})
	}
}

// queuesScheduler is the install of testdata/golden-status/queues over a fake cluster: daily holds its maxActive
// (d1, d2 running, of 500m cpu and 1Gi a pod, d2 two pods at once), exports a running Job of tenant "acme\n" (its
// cap 1; its row's 2 cpu) and a dead one; daily's rows d1-d5, exports' e1-e3 from a source with a query doctor
// (returned).
func queuesScheduler(t *testing.T) (*scheduler.Scheduler, *testkit.DoctorSource) {
	t.Helper()
	cfg, err := config.Load(filepath.Join("testdata", "golden-status", "queues", "jobsched.yaml"), "")
	if err != nil {
		t.Fatal(err)
	}
	queueJob := func(queue, key string) *testkit.JobWrapper {
		return testkit.MakeJob(key).Prefix("reports-" + queue).Queue(queue)
	}
	cpu := func(q string) corev1.ResourceList {
		return corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(q), corev1.ResourceMemory: resource.MustParse("1Gi")}
	}
	client := testkit.NewFake(queueJob("daily", "d1").Requests(cpu("500m")).Obj(), queueJob("daily", "d2").Parallelism(2, 4).Requests(cpu("500m")).Obj(),
		queueJob("exports", "e1").Annotation(jobmeta.AnnotationGroup, "acme\n").Requests(cpu("2")).Obj(), // a row's value: the table quotes it
		queueJob("exports", "e2").Finished(batchv1.JobFailed, testkit.Ago(time.Hour)).Requests(cpu("3")).Obj())
	s := &scheduler.Scheduler{Config: cfg, Kube: client, Now: func() time.Time { return testkit.Now }}
	doctor := &testkit.DoctorSource{Source: testkit.Source{Rows: testkit.RowsFor("e1", "e2", "e3")},
		Finding: &querydoctor.Finding{Problems: []querydoctor.Problem{{Kind: "sort", Table: "exports", EstimatedRows: 200000,
			Message: "every pass sorts all ~200000 rows", Fix: "an index on exports (id)"}}}}
	s.Queues = []scheduler.Queue{
		{Source: &testkit.Source{Rows: testkit.RowsFor("d1", "d2", "d3", "d4", "d5")}, Renderer: render.New(cfg.QueueConfig(0), nil)},
		{Source: doctor, Renderer: render.New(cfg.QueueConfig(1), nil)},
	}
	s.Source, s.Renderer = s.Queues[0].Source, s.Queues[0].Renderer
	return s, doctor
}

// TestStatusCancelled: the table lists the Jobs the next tick cancels (source.cancelQuery) in a section of their own.
func TestStatusCancelled(t *testing.T) {
	st := goldenStatus(t, nil)
	st.Jobs = append(st.Jobs, scheduler.JobStatus{Name: "reports-c", Key: "c", Attempt: 2, State: scheduler.StateRunning,
		Delete: scheduler.DeleteCancelled})
	var out bytes.Buffer
	if err := printStatus(&out, st); err != nil {
		t.Fatal(err)
	}
	want := "\nCancelled (source.cancelQuery returns their key; the next tick deletes them):\n  JOB        TASK  ATTEMPT  STATE\n" +
		"  reports-c  \"c\"   2        running\n"
	if !strings.Contains(out.String(), want) {
		t.Errorf("status:\n%s\nwant it to hold:\n%s", out.String(), want)
	}
}
