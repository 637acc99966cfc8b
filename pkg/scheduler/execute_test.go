package scheduler

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/rs/zerolog"
	batchv1 "k8s.io/api/batch/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	k8stesting "k8s.io/client-go/testing"

	"github.com/jobsched/jobsched/pkg/render"
	"github.com/jobsched/jobsched/pkg/testkit"
)

// TestNextAttempt: a due task's next attempt is created first and only then is the failed attempt deleted; a failed create
// deletes nothing; a dead task, or one due, whose row the query no longer returns loses its Job.
func TestNextAttempt(t *testing.T) {
	a2 := render.AttemptName("reports", "f", 2)
	tests := []struct {
		name        string
		jobs        []runtime.Object
		rows        []string
		createErr   error
		deleteErr   error
		wantActions []string
		beside      []string // the Jobs deleted beside the pass (their rows gone): see besidePass
		wantSum     Summary
	}{
		{name: "due: attempt 2, then attempt 1 goes",
			jobs: []runtime.Object{makeJob("f").Finished(batchv1.JobFailed, ago(time.Hour)).Obj()}, rows: []string{"f"},
			wantActions: []string{"list jobs", "list pods", "create jobs " + a2, "delete jobs " + name("f") + " Background uid=uid-f"},
			wantSum:     Summary{Selected: 1, Created: 1, Retried: 1, Deleted: 1}},
		{name: "attempt 2 exists, deleting attempt 1 fails: counted as failed, not deleted",
			jobs: []runtime.Object{makeJob("f").Finished(batchv1.JobFailed, ago(time.Hour)).Obj()}, rows: []string{"f"},
			deleteErr:   apierrors.NewInternalError(errors.New("etcd down")),
			wantActions: []string{"list jobs", "list pods", "create jobs " + a2, "delete jobs " + name("f") + " Background uid=uid-f"},
			wantSum:     Summary{Selected: 1, Created: 1, Retried: 1, Failed: 1}},
		{name: "the create fails: attempt 1 stays",
			jobs: []runtime.Object{makeJob("f").Finished(batchv1.JobFailed, ago(time.Hour)).Obj()}, rows: []string{"f"},
			createErr:   apierrors.NewInternalError(errors.New("etcd down")),
			wantActions: []string{"list jobs", "list pods", "create jobs " + a2},
			wantSum:     Summary{Selected: 1, Failed: 1}},
		{name: "another pass created attempt 2: attempt 1 goes all the same",
			jobs: []runtime.Object{makeJob("f").Finished(batchv1.JobFailed, ago(time.Hour)).Obj()}, rows: []string{"f"},
			createErr:   apierrors.NewAlreadyExists(schema.GroupResource{Group: "batch", Resource: "jobs"}, a2),
			wantActions: []string{"list jobs", "list pods", "create jobs " + a2, "get jobs " + a2, "delete jobs " + name("f") + " Background uid=uid-f"},
			wantSum:     Summary{Selected: 1, AlreadyPresent: 1, Deleted: 1}},
		{name: "dead tasks: the one whose row is gone loses its record, the other is kept",
			jobs: []runtime.Object{makeJob("gone").Attempt(3).Finished(batchv1.JobFailed, ago(time.Hour)).Obj(), makeJob("still").Attempt(3).Finished(batchv1.JobFailed, ago(time.Hour)).Obj()},
			rows: []string{"still"},
			wantActions: []string{"list jobs", "list pods",
				"delete jobs " + render.AttemptName("reports", "gone", 3) + " Background uid=uid-gone-3"},
			wantSum: Summary{Deleted: 1, Dead: 1}},
		{name: "due, and its row is gone: the failed Job goes, no retry",
			jobs: []runtime.Object{makeJob("f").Finished(batchv1.JobFailed, ago(time.Hour)).Obj()}, rows: []string{"other"},
			wantActions: []string{"list jobs", "list pods", "delete jobs " + name("f") + " Background uid=uid-f",
				"create jobs " + name("other")},
			beside:  []string{name("f")},
			wantSum: Summary{Selected: 1, Created: 1, Deleted: 1}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg := testConfig(t, nil)
			client := testkit.NewFake(tc.jobs...)
			if tc.createErr != nil {
				client.PrependReactor("create", "jobs", func(a k8stesting.Action) (bool, runtime.Object, error) {
					if apierrors.IsAlreadyExists(tc.createErr) {
						obj := a.(k8stesting.CreateAction).GetObject().(*batchv1.Job).DeepCopy()
						_ = client.Tracker().Add(obj)
					}
					return true, nil, tc.createErr
				})
			}
			if tc.deleteErr != nil {
				client.PrependReactor("delete", "jobs", func(k8stesting.Action) (bool, runtime.Object, error) { return true, nil, tc.deleteErr })
			}
			s := &Scheduler{workers: 1, Config: cfg, Kube: client, Source: &source{Rows: rowsFor(tc.rows...)}, Renderer: render.New(cfg, nil), Now: func() time.Time { return now }}
			res, _ := s.Run(context.Background(), Execute)
			sum := res.Summary
			var got []string
			for _, a := range client.Actions() {
				got = append(got, action(a)) // in order: the delete must follow the create
			}
			if diff := cmp.Diff(besidePass(tc.wantActions, tc.beside...), besidePass(got, tc.beside...)); diff != "" {
				t.Errorf("actions (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantSum, sum); diff != "" {
				t.Errorf("summary (-want +got):\n%s", diff)
			}
		})
	}
}

// TestBeforeCreates: the command's hook runs once, before the first create, and only in a pass that creates.
func TestBeforeCreates(t *testing.T) {
	for _, tc := range []struct {
		name      string
		rows      []string
		wantCalls int
	}{
		{name: "creates", rows: []string{"a", "b"}, wantCalls: 1},
		{name: "nothing to create", wantCalls: 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := testConfig(t, nil)
			client := testkit.NewFake()
			calls, createsBefore := 0, -1
			s := &Scheduler{workers: 1, Config: cfg, Kube: client, Source: &source{Rows: rowsFor(tc.rows...)}, Renderer: render.New(cfg, nil),
				Now: func() time.Time { return now }, BeforeCreates: func() {
					calls++
					createsBefore = len(client.Actions()) - 2 // after list jobs, list pods
				}}
			if _, err := s.Run(context.Background(), Execute); err != nil {
				t.Fatal(err)
			}
			if calls != tc.wantCalls || (calls > 0 && createsBefore != 0) {
				t.Errorf("called %d times with %d writes before; want %d, before any", calls, createsBefore, tc.wantCalls)
			}
		})
	}
}

// TestSummaryLogLease: the pass done line names the lease and its wait when the pass ran under a Guard, and says
// nothing of a lease when it did not.
func TestSummaryLogLease(t *testing.T) {
	for _, tc := range []struct {
		sum  Summary
		want string // "": no lease field
	}{
		{Summary{}, ""},
		{Summary{Lease: "held", LeaseWait: 7}, `"lease":"held","leaseWait":7`},
	} {
		var logs bytes.Buffer
		log := zerolog.New(&logs)
		tc.sum.Log(&log, nil, time.Second)
		if line := logs.String(); tc.want == "" && strings.Contains(line, "lease") || !strings.Contains(line, tc.want) {
			t.Errorf("Lease %q: pass done line %s, want %q", tc.sum.Lease, line, tc.want)
		}
	}
}
