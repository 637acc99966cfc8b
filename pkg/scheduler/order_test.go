package scheduler

import (
	"bytes"
	"context"
	"errors"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/utils/ptr"

	"github.com/google/go-cmp/cmp"
	"github.com/rs/zerolog"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	k8stesting "k8s.io/client-go/testing"

	"github.com/jobsched/jobsched/pkg/config"
	"github.com/jobsched/jobsched/pkg/kube"
	"github.com/jobsched/jobsched/pkg/render"
	"github.com/jobsched/jobsched/pkg/rows"
	"github.com/jobsched/jobsched/pkg/testkit"
)

// write is one recorded write, whole: what a create sent (the Job as it went to the API server) or what a delete
// named, with its options (like sample-controller's checkAction, which compares the object, not its name).
type write struct {
	Verb, Name string
	Job        *batchv1.Job          // create
	Options    *metav1.DeleteOptions // delete
}

// writes are the client's creates and deletes, in the order they were made.
func writes(client *testkit.Fake) []write {
	var out []write
	for _, a := range client.Actions() {
		switch a := a.(type) {
		case k8stesting.CreateAction:
			out = append(out, write{Verb: "create", Name: a.GetObject().(*batchv1.Job).Name, Job: a.GetObject().(*batchv1.Job)})
		case k8stesting.DeleteAction:
			opts := a.GetDeleteOptions()
			out = append(out, write{Verb: "delete", Name: a.GetName(), Options: &opts})
		}
	}
	return out
}

func deleteOf(name string, uid types.UID) write {
	bg := metav1.DeletePropagationBackground
	return write{Verb: "delete", Name: name, Options: &metav1.DeleteOptions{PropagationPolicy: &bg, Preconditions: &metav1.Preconditions{UID: &uid}}}
}

// TestPassOrder pins the order of the pass's writes, a promise of the design: each create in the plan's order, a
// retry's failed attempt deleted right after its next one exists; beside them, in no order with them, the deletes
// of the finished Jobs the decision marked (3) and of those whose row is gone (5), each once (TestDeletesBeside).
// The Jobs are compared whole.
func TestPassOrder(t *testing.T) {
	cfg := testConfig(t, func(c *config.Config) { c.GC.SucceededRetention = metav1.Duration{Duration: 10 * time.Minute} })
	gone := makeJob("gone").Attempt(3).Finished(batchv1.JobFailed, ago(time.Hour)).Obj()
	client := testkit.NewFake(makeJob("old-ok").Finished(batchv1.JobComplete, ago(11*time.Minute)).Obj(), gone, makeJob("f").Finished(batchv1.JobFailed, ago(time.Hour)).Obj())
	src := &source{Rows: rowsFor("f", "x")}
	s := &Scheduler{workers: 1, Config: cfg, Kube: client, Source: src, Renderer: render.New(cfg, nil), Now: func() time.Time { return now }}
	res, err := s.Run(context.Background(), Execute)
	if err != nil {
		t.Fatal(err)
	}
	rendered := func(row rows.Row, attempt int) *batchv1.Job {
		j, err := render.New(cfg, nil).Job(row, attempt)
		if err != nil {
			t.Fatal(err)
		}
		return j
	}
	wantBeside := []write{
		deleteOf(name("old-ok"), "uid-old-ok"), // 3: decided
		deleteOf(gone.Name, gone.UID),          // 5: its row is gone
	}
	wantInLine := []write{
		{Verb: "create", Name: render.AttemptName("reports", "f", 2), Job: rendered(src.Rows[0], 2)}, // 8
		deleteOf(name("f"), "uid-f"), // the attempt it supersedes
		{Verb: "create", Name: name("x"), Job: rendered(src.Rows[1], 1)},
	}
	// split is ws as the deletes of finished Jobs beside the pass (in name order) and the rest, in order.
	split := func(ws []write) (beside, inLine []write) {
		for _, w := range ws {
			if w.Verb == "delete" && (w.Name == name("old-ok") || w.Name == gone.Name) {
				beside = append(beside, w)
			} else {
				inLine = append(inLine, w)
			}
		}
		slices.SortFunc(beside, func(a, b write) int { return strings.Compare(a.Name, b.Name) })
		return beside, inLine
	}
	slices.SortFunc(wantBeside, func(a, b write) int { return strings.Compare(a.Name, b.Name) })
	beside, inLine := split(writes(client))
	if diff := cmp.Diff(wantInLine, inLine); diff != "" {
		t.Errorf("creates and retirements, in order (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(wantBeside, beside); diff != "" {
		t.Errorf("deletes beside the pass (-want +got):\n%s", diff)
	}
	if want := (Summary{Selected: 2, Created: 2, Retried: 1, Deleted: 3}); res.Summary != want {
		t.Errorf("summary %+v, want %+v", res.Summary, want)
	}
	// What the plan holds is what was written: its deletes of finished Jobs, and each create with after it the
	// attempt it supersedes (in Deletes too, marked DeleteRetried).
	var planned []write
	for _, d := range res.Plan.Deletes() {
		if d.Delete != DeleteRetried {
			planned = append(planned, deleteOf(d.Name, d.UID))
		}
	}
	retired := 0
	for _, c := range res.Plan.Creates {
		planned = append(planned, write{Verb: "create", Name: c.Job.Name, Job: c.Job})
		if c.Supersedes != nil {
			planned = append(planned, deleteOf(c.Supersedes.Name, c.Supersedes.UID))
			retired++
		}
	}
	if n := len(res.Plan.Deletes()); len(planned) != n+len(res.Plan.Creates) || retired != 1 {
		t.Errorf("the plan's %d deletes are not each written once: %v", n, planned)
	}
	plannedBeside, plannedInLine := split(planned)
	if diff := cmp.Diff(wantInLine, plannedInLine); diff != "" {
		t.Errorf("the plan's creates (-written +planned):\n%s", diff)
	}
	if diff := cmp.Diff(wantBeside, plannedBeside); diff != "" {
		t.Errorf("the plan's deletes (-written +planned):\n%s", diff)
	}
}

// TestDeletesBeside: a finished Job's delete holds no create back (it holds no slot, and its key is excluded), and
// the pass still ends only once it is answered, counted in its summary. The delete here reaches the API server only
// after the create was made: a pass that deleted first would wait for it (until the bound below) and fail the test.
func TestDeletesBeside(t *testing.T) {
	cfg := testConfig(t, nil)
	client := testkit.NewFake(makeJob("old").Finished(batchv1.JobComplete, ago(3*time.Hour)).Obj())
	createdJob := make(chan struct{})
	client.PrependReactor("create", "jobs", func(k8stesting.Action) (bool, runtime.Object, error) {
		close(createdJob)
		return false, nil, nil
	})
	slow := &slowDeletes{Fake: client, until: createdJob}
	s := &Scheduler{workers: 1, Config: cfg, Kube: slow, Source: &source{Rows: rowsFor("a")}, Renderer: render.New(cfg, nil), Now: func() time.Time { return now }}
	res, err := s.Run(context.Background(), Execute)
	if err != nil {
		t.Fatal(err)
	}
	if !slow.sawIt.Load() {
		t.Error("the create waited for the finished Job's delete")
	}
	if res.Summary.Deleted != 1 || res.Summary.Created != 1 {
		t.Errorf("summary %+v: want the delete and the create both counted", res.Summary)
	}
	if _, err := client.Tracker().Get(batchv1.SchemeGroupVersion.WithResource("jobs"), cfg.Namespace, name("old")); !apierrors.IsNotFound(err) {
		t.Errorf("the finished Job is still there when the pass ended: %v", err)
	}
}

// slowDeletes is a client whose Job deletes wait until until is closed (at most 10 s, the bound of a pass whose
// creates wait for its deletes) before they reach the fake; sawIt says until was closed by then. The wait is
// outside the fake, whose reactors all run under one lock.
type slowDeletes struct {
	*testkit.Fake
	until <-chan struct{}
	sawIt atomic.Bool
}

func (c *slowDeletes) BatchV1() kube.BatchV1 { return slowBatch{c.Fake.BatchV1(), c} }

type slowBatch struct {
	kube.BatchV1
	c *slowDeletes
}

func (b slowBatch) Jobs(ns string) kube.Jobs { return slowJobs{b.BatchV1.Jobs(ns), b.c} }

type slowJobs struct {
	kube.Jobs
	c *slowDeletes
}

func (j slowJobs) Delete(ctx context.Context, name string, opts metav1.DeleteOptions) error {
	select {
	case <-j.c.until:
		j.c.sawIt.Store(true)
	case <-time.After(10 * time.Second):
	}
	return j.Jobs.Delete(ctx, name, opts)
}

// guard is a Guard for tests: it refuses with err, or hands out held.
type guard struct {
	held     context.Context
	err      error
	released bool
}

func (g *guard) Take(ctx context.Context) (context.Context, func(), error) {
	if g.err != nil {
		return nil, nil, g.err
	}
	if g.held == nil {
		g.held = ctx
	}
	return g.held, func() { g.released = true }, nil
}

// TestGuard: a Guard is taken before the Jobs are listed, only by a pass that creates; refused, the pass still
// deletes and creates nothing; lost (its context ended), no create is started.
func TestGuard(t *testing.T) {
	lost, cancel := context.WithCancelCause(context.Background())
	cancel(errors.New("lease lost"))
	tests := []struct {
		name        string
		mode        Action
		guard       *guard
		wantCreates int
		wantBlocked string
		wantErr     bool
	}{
		{name: "held", mode: Execute, guard: &guard{}, wantCreates: 1},
		{name: "refused: deletes, no create", mode: Execute, guard: &guard{err: errors.New("held by pod tick-2")},
			wantBlocked: "not the holder: held by pod tick-2"},
		{name: "lost: no create started", mode: Execute, guard: &guard{held: lost}, wantErr: true},
		{name: "a dry run does not take it", mode: DryRun, guard: &guard{err: errors.New("held")}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg := testConfig(t, nil)
			client := testkit.NewFake(makeJob("old").Finished(batchv1.JobComplete, ago(3*time.Hour)).Obj())
			var order []string
			client.PrependReactor("*", "*", func(a k8stesting.Action) (bool, runtime.Object, error) {
				order = append(order, a.GetVerb()+" "+a.GetResource().Resource)
				return false, nil, nil
			})
			s := &Scheduler{workers: 1, Config: cfg, Kube: client, Source: &source{Rows: rowsFor("a")}, Renderer: render.New(cfg, nil),
				Now: func() time.Time { return now }, Guard: tc.guard}
			res, err := s.Run(context.Background(), tc.mode)
			if (err != nil) != tc.wantErr {
				t.Fatalf("err = %v, want one: %v", err, tc.wantErr)
			}
			if res.Summary.Created != tc.wantCreates || res.Blocked() != tc.wantBlocked {
				t.Errorf("created %d, blocked %q; want %d, %q", res.Summary.Created, res.Blocked(), tc.wantCreates, tc.wantBlocked)
			}
			if tc.mode == Execute && (!slices.Contains(order, "delete jobs") || res.Summary.Deleted != 1) {
				t.Errorf("writes %v, deleted %d: the finished Job must go whatever the guard says", order, res.Summary.Deleted)
			}
			if tc.mode == Execute && tc.guard.err == nil && !tc.guard.released {
				t.Error("the guard was not released at the end of the pass")
			}
		})
	}
}

// TestResult: what a caller deciding on another pass at once reads of a pass.
func TestResult(t *testing.T) {
	tests := []struct {
		name                 string
		maxPerTick           int
		rows                 []string
		wantRowsWait         bool
		wantLimit, wantBlock string
	}{
		{name: "the slots were used up, rows wait", maxPerTick: 1, rows: []string{"a", "b"}, wantRowsWait: true, wantLimit: "limits.maxPerTick: 1"},
		{name: "the source ran out", maxPerTick: 5, rows: []string{"a", "b"}, wantLimit: "limits.maxPerTick: 5"},
		{name: "blocked: no read, nothing known to wait", maxPerTick: 0, rows: []string{"a"}, wantLimit: "limits.maxPerTick: 0", wantBlock: "limits.maxPerTick: 0"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg := testConfig(t, func(c *config.Config) { c.Limits.MaxPerTick = ptr.To(tc.maxPerTick) })
			client := testkit.NewFake()
			client.PrependReactor("list", "jobs", func(k8stesting.Action) (bool, runtime.Object, error) {
				return true, &batchv1.JobList{ListMeta: metav1.ListMeta{ResourceVersion: "4711"}}, nil
			})
			s := &Scheduler{workers: 1, Config: cfg, Kube: client, Source: &source{Rows: rowsFor(tc.rows...)}, Renderer: render.New(cfg, nil), Now: func() time.Time { return now }}
			res, err := s.Run(context.Background(), Execute)
			if err != nil {
				t.Fatal(err)
			}
			if res.RowsWait != tc.wantRowsWait || res.Limit() != tc.wantLimit || res.Blocked() != tc.wantBlock || res.JobsResourceVersion != "4711" {
				t.Errorf("rowsWait %v, limit %q, blocked %q, resourceVersion %q; want %v, %q, %q, 4711",
					res.RowsWait, res.Limit(), res.Blocked(), res.JobsResourceVersion, tc.wantRowsWait, tc.wantLimit, tc.wantBlock)
			}
		})
	}
}

// TestCapacityWarningIsLogged: what capacity could not see (here LimitRanges, forbidden) is warned in the pass's log.
func TestCapacityWarningIsLogged(t *testing.T) {
	cfg := testConfig(t, func(c *config.Config) { c.Limits.Capacity = config.CapacityNodes })
	client := testkit.NewFake(makeNode("node-0").Allocatable(corev1.ResourcePods, "1").Obj())
	client.PrependReactor("list", "limitranges", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewForbidden(schema.GroupResource{Resource: "limitranges"}, "", errors.New("no"))
	})
	var logs bytes.Buffer
	ctx := zerolog.New(&logs).WithContext(context.Background())
	s := &Scheduler{workers: 1, Config: cfg, Kube: client, Source: &source{Rows: rowsFor("a")}, Renderer: render.New(cfg, nil), Now: func() time.Time { return now }}
	if _, err := s.Run(ctx, DryRun); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(logs.String(), `"message":"cannot list LimitRanges`) {
		t.Errorf("no capacity warning in the log:\n%s", logs.String())
	}
}

// TestRowsFileDuplicates: the rows a --rows file left out as repeated keys are skips of the plan the pass made,
// counted in its summary, not added to it afterwards.
func TestRowsFileDuplicates(t *testing.T) {
	f, err := rows.ReadFrom(strings.NewReader(`{"id": "a"}`+"\n"+`{"id": "a"}`+"\n"), "standard input", "id")
	if err != nil {
		t.Fatal(err)
	}
	cfg := testConfig(t, nil)
	s := &Scheduler{workers: 1, Config: cfg, Source: f, Renderer: render.New(cfg, nil), Now: func() time.Time { return now }}
	res, err := s.Run(context.Background(), DryRun)
	if err != nil {
		t.Fatal(err)
	}
	want := []Skip{{Key: "a", Reason: "--rows line 2 repeats the key of line 1: no second Job"}}
	if diff := cmp.Diff(want, res.Plan.Skipped); diff != "" || res.Summary.Skipped != 1 || len(res.Plan.Creates) != 1 {
		t.Errorf("skipped %d, %d creates; skips (-want +got):\n%s", res.Summary.Skipped, len(res.Plan.Creates), diff)
	}
}
