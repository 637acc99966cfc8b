package scheduler

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
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
	k8stesting "k8s.io/client-go/testing"

	"github.com/jobsched/jobsched/pkg/config"
	"github.com/jobsched/jobsched/pkg/render"
	"github.com/jobsched/jobsched/pkg/rows"
	"github.com/jobsched/jobsched/pkg/testkit"
)

func TestPass(t *testing.T) {
	tests := []struct {
		name        string
		mutate      func(*config.Config)
		objects     []runtime.Object
		rows        []string
		reactor     k8stesting.ReactionFunc // on create jobs
		wantActions []string
		wantExclude []string // of the first Select; nil = no Select
		wantSum     Summary
		wantBlocked string
	}{
		{
			name:        "maxActive 3 with 2 unfinished creates exactly one",
			mutate:      func(c *config.Config) { c.Limits.MaxActive = ptr.To(3) },
			objects:     []runtime.Object{makeJob("a").Obj(), makeJob("b").Obj()},
			rows:        []string{"c", "d", "e"},
			wantActions: []string{"list jobs", "list pods", "create jobs " + name("c")},
			wantExclude: []string{"a", "b"},
			wantSum:     Summary{Selected: 1, Created: 1},
		},
		{
			name:        "an Unschedulable pod blocks every create",
			objects:     []runtime.Object{makeJob("a").Obj(), makePod(makeJob("a").Obj()).Unschedulable("0/1 nodes are available: 1 Insufficient cpu.").Obj()},
			rows:        []string{"c"},
			wantActions: []string{"list jobs", "list pods"},
			wantSum:     Summary{Blocked: "1 pod(s) Unschedulable (" + name("a") + ": 0/1 nodes are available: 1 Insufficient cpu.)"},
			wantBlocked: "Unschedulable",
		},
		{
			name:        "a pod that is scheduled but starting does not block, and counts as active",
			mutate:      func(c *config.Config) { c.Limits.MaxActive = ptr.To(2) },
			objects:     []runtime.Object{makeJob("a").Obj(), makePod(makeJob("a").Obj()).Bound("node-0").Obj()},
			rows:        []string{"c", "d"},
			wantActions: []string{"list jobs", "list pods", "create jobs " + name("c")},
			wantExclude: []string{"a"},
			wantSum:     Summary{Selected: 1, Created: 1},
		},
		{
			name:        "blockOnUnschedulable false lets the pass create",
			mutate:      func(c *config.Config) { c.Limits.BlockOnUnschedulable = ptr.To(false) },
			objects:     []runtime.Object{makeJob("a").Obj(), makePod(makeJob("a").Obj()).Unschedulable("0/1 nodes are available: 1 Insufficient cpu.").Obj()},
			rows:        []string{"c"},
			wantActions: []string{"list jobs", "list pods", "create jobs " + name("c")},
			wantExclude: []string{"a"},
			wantSum:     Summary{Selected: 1, Created: 1},
		},
		{
			name: "finished Jobs past retention are deleted, with their pods, and only those",
			mutate: func(c *config.Config) {
				c.GC.SucceededRetention = metav1.Duration{Duration: 10 * time.Minute}
			},
			objects: []runtime.Object{
				makeJob("old-ok").Finished(batchv1.JobComplete, ago(11*time.Minute)).Obj(), makeJob("new-ok").Finished(batchv1.JobComplete, ago(time.Minute)).Obj(),
				makeJob("old-bad").Finished(batchv1.JobFailed, ago(2*time.Hour)).Obj(), makeJob("new-bad").Finished(batchv1.JobFailed, ago(30*time.Second)).Obj(),
			},
			rows: []string{"old-bad", "x"},
			wantActions: []string{"list jobs", "list pods",
				"delete jobs " + name("old-ok") + " Background uid=uid-old-ok", // beside the rest: besidePass
				"create jobs " + render.AttemptName("reports", "old-bad", 2),
				"delete jobs " + name("old-bad") + " Background uid=uid-old-bad", // only once attempt 2 exists (TestNextAttempt)
				"create jobs " + name("x")},
			// a failed Job in backoff: its row is not retried meanwhile; succeeded Jobs, kept or deleted now, are not read
			wantExclude: []string{"new-bad", "new-ok", "old-ok"},
			wantSum:     Summary{Selected: 2, Created: 2, Deleted: 2, Retried: 1},
		},
		{
			name:        "a row still selected after its Job succeeded gets no second Job",
			mutate:      func(c *config.Config) { c.GC.SucceededRetention = metav1.Duration{Duration: time.Hour} },
			objects:     []runtime.Object{makeJob("done").Finished(batchv1.JobComplete, ago(time.Minute)).Obj()},
			rows:        []string{"done", "next"},
			wantActions: []string{"list jobs", "list pods", "create jobs " + name("next")},
			wantExclude: []string{"done"},
			wantSum:     Summary{Selected: 2, Created: 1, Skipped: 1}, // skipped: the worker bug, said with its key, a row the check selected
		},
		{
			name:    "AlreadyExists from a concurrent pass is already present",
			rows:    []string{"c"},
			objects: []runtime.Object{},
			reactor: func(k8stesting.Action) (bool, runtime.Object, error) {
				return true, nil, apierrors.NewAlreadyExists(schema.GroupResource{Group: "batch", Resource: "jobs"}, name("c"))
			},
			wantActions: []string{"list jobs", "list pods", "create jobs " + name("c"), "get jobs " + name("c")},
			wantExclude: []string{},
			wantSum:     Summary{Selected: 1, AlreadyPresent: 1},
		},
		{
			name:        "a Job of this row's name made for another key is a collision: skipped, not created",
			objects:     []runtime.Object{makeJob("other").Finished(batchv1.JobComplete, ago(time.Minute)).Name(name("mine")).Obj()},
			mutate:      func(c *config.Config) { c.GC.SucceededRetention = metav1.Duration{Duration: time.Hour} },
			rows:        []string{"mine", "next"},
			wantActions: []string{"list jobs", "list pods", "create jobs " + name("next")},
			wantExclude: []string{"other"},
			wantSum:     Summary{Selected: 2, Created: 1, Skipped: 1},
		},
		{
			name:        "maxPerTick bounds the creates",
			mutate:      func(c *config.Config) { c.Limits.MaxPerTick = ptr.To(2) },
			rows:        []string{"a", "b", "c"},
			wantActions: []string{"list jobs", "list pods", "create jobs " + name("a"), "create jobs " + name("b")},
			wantExclude: []string{},
			wantSum:     Summary{Selected: 2, Created: 2},
		},
		{
			name:        "a row that cannot make a Job is skipped and another row is read in its place",
			mutate:      func(c *config.Config) { c.Limits.MaxPerTick = ptr.To(1) },
			rows:        []string{"", "b", "c"},
			wantActions: []string{"list jobs", "list pods", "create jobs " + name("b")},
			wantExclude: []string{},
			wantSum:     Summary{Selected: 2, Created: 1, Skipped: 1},
		},
		{
			name:        "capacity nodes: one more LIST each of nodes, pods cluster-wide and quotas; what fits bounds the creates",
			mutate:      func(c *config.Config) { c.Limits.Capacity = config.CapacityNodes },
			objects:     []runtime.Object{makeNode("node-0").Allocatable(corev1.ResourcePods, "1").Obj()},
			rows:        []string{"a", "b"},
			wantActions: []string{"list jobs", "list pods", "list limitranges", "list nodes", "list pods", "list resourcequotas", "create jobs " + name("a")},
			wantExclude: []string{},
			wantSum:     Summary{Selected: 1, Created: 1},
		},
		{
			name:        "no slots, no read",
			mutate:      func(c *config.Config) { c.Limits.MaxActive = ptr.To(1) },
			objects:     []runtime.Object{makeJob("a").Obj()},
			rows:        []string{"b"},
			wantActions: []string{"list jobs", "list pods"},
			wantSum:     Summary{Blocked: "limits.maxActive: 1 of 1 unfinished"},
			wantBlocked: "maxActive",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg := testConfig(t, tc.mutate)
			client := testkit.NewFake(tc.objects...)
			if tc.reactor != nil {
				existing := makeJob("c").Obj()
				client = testkit.NewFake(existing)
				client.PrependReactor("list", "jobs", func(k8stesting.Action) (bool, runtime.Object, error) {
					return true, &batchv1.JobList{}, nil // listed before the other pass created it
				})
				client.PrependReactor("create", "jobs", tc.reactor)
			}
			src := &source{Rows: rowsFor(tc.rows...)}
			s := &Scheduler{workers: 1, Config: cfg, Kube: client, Source: src, Renderer: render.New(cfg, nil), Now: func() time.Time { return now }}
			res, err := s.Run(context.Background(), Execute)
			plan, sum := res.Plan, res.Summary
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(plan.Blocked, tc.wantBlocked) || (tc.wantBlocked == "") != (plan.Blocked == "") {
				t.Errorf("Blocked = %q, want it to mention %q", plan.Blocked, tc.wantBlocked)
			}
			if diff := cmp.Diff(besidePass(tc.wantActions, name("old-ok")), besidePass(actions(client), name("old-ok"))); diff != "" {
				t.Errorf("actions (-want +got):\n%s", diff)
			}
			checkCreated(t, client, cfg, src.Rows)
			if diff := cmp.Diff(tc.wantSum, sum); diff != "" {
				t.Errorf("summary (-want +got):\n%s", diff)
			}
			var firstExclude []string
			if len(src.Calls) > 0 {
				firstExclude = src.Calls[0]
				slices.Sort(firstExclude)
			}
			if tc.wantExclude == nil && len(src.Calls) > 0 && len(firstExclude) > 0 {
				t.Errorf("Select excluded %v, want nothing", firstExclude)
			}
			if tc.wantExclude != nil && !slices.Equal(tc.wantExclude, firstExclude) {
				t.Errorf("Select excluded %v, want %v", firstExclude, tc.wantExclude)
			}
		})
	}
}

// checkCreated compares each Job the client was asked to create, whole, with the Job its row renders for that
// attempt (sample-controller's checkAction): the pass sends what it planned, as the renderer made it.
func checkCreated(t *testing.T, client *testkit.Fake, cfg *config.Config, rs []rows.Row) {
	t.Helper()
	want := map[string]*batchv1.Job{}
	r := render.New(cfg, nil)
	for _, row := range rs {
		for n := 1; n <= cfg.MaxAttempts(); n++ {
			if j, err := r.Job(row, n); err == nil {
				want[j.Name] = j
			}
		}
	}
	for _, a := range client.Actions() {
		c, ok := a.(k8stesting.CreateAction)
		if !ok {
			continue
		}
		got := c.GetObject().(*batchv1.Job)
		if diff := cmp.Diff(want[got.Name], got); diff != "" {
			t.Errorf("created Job %s (-rendered +sent):\n%s", got.Name, diff)
		}
	}
}

// TestDryRunWritesNothing: a dry run is the whole pass without its writes.
func TestDryRunWritesNothing(t *testing.T) {
	cfg := testConfig(t, nil)
	client := testkit.NewFake(makeJob("old").Finished(batchv1.JobComplete, ago(3*time.Hour)).Obj(), makeJob("run").Obj())
	s := &Scheduler{workers: 1, Config: cfg, Kube: client, Source: &source{Rows: rowsFor("a", "b")}, Renderer: render.New(cfg, nil), Now: func() time.Time { return now }}
	res, err := s.Run(context.Background(), DryRun)
	plan, sum := res.Plan, res.Summary
	if err != nil {
		t.Fatal(err)
	}
	if len(plan.Creates) != 2 || len(plan.Deletes()) != 1 {
		t.Fatalf("plan has %d creates and %d deletes, want 2 and 1", len(plan.Creates), len(plan.Deletes()))
	}
	if diff := cmp.Diff([]string{"list jobs", "list pods"}, actions(client)); diff != "" {
		t.Errorf("actions (-want +got):\n%s", diff)
	}
	if want := (Summary{DryRun: true, Selected: 2, WouldCreate: 2}); sum != want {
		t.Errorf("summary = %+v, want %+v", sum, want)
	}
}

// failingSource fails every read, like a database that is down.
type failingSource struct{ err error }

func (f failingSource) Select(context.Context, rows.Selection) ([]rows.Row, error) { return nil, f.err }
func (f failingSource) Count(context.Context, []string, int) (int, error)          { return 0, f.err }
func (f failingSource) Selected(context.Context, []string) ([]string, error)       { return nil, f.err }
func (f failingSource) Lookup(context.Context, []string) ([]rows.Row, error)       { return nil, f.err }
func (f failingSource) Cancelled(context.Context, []string) ([]string, error)      { return nil, f.err }
func (f failingSource) Ping(context.Context) error                                 { return f.err }

// TestPassFailures: the deletes never wait on the database or the capacity LISTs; a failure there means "create
// nothing this pass" and a run-time error (exit 1); a query the database rejects as wrong is a configuration error.
func TestPassFailures(t *testing.T) {
	boom := errors.New("connection refused")
	tests := []struct {
		name        string
		mode        Action
		capacity    config.Capacity
		source      rows.Source
		failList    string // a resource whose LIST fails
		failDelete  bool   // every delete fails
		maxActive   int    // limits.maxActive when not 0 (one Job runs)
		onlyRunning bool   // no finished Job either: no row to check
		wantActions []string
		wantErr     string
		wantConfig  bool
		wantBlocked string
	}{
		{name: "database down: the deletes happen, nothing is created", mode: Execute, source: failingSource{boom},
			wantActions: []string{"list jobs", "list pods", "delete jobs " + name("old") + " Background uid=uid-old"},
			wantErr:     "connection refused", wantBlocked: "reading rows failed"},
		{name: "database down while maxActive is reached: no row to read, and the pass still fails", mode: Execute,
			source: failingSource{boom}, maxActive: 1, onlyRunning: true,
			wantActions: []string{"list jobs", "list pods"}, wantErr: "connection refused", wantBlocked: "reading rows failed"},
		{name: "a query the database rejects: configuration error, nothing created", mode: Execute,
			source:      failingSource{&config.Error{Err: errors.New("source.query: syntax error")}},
			wantActions: []string{"list jobs", "list pods", "delete jobs " + name("old") + " Background uid=uid-old"},
			wantErr:     "syntax error", wantConfig: true},
		{name: "capacity LIST fails: the deletes happen, nothing is created", mode: Execute, capacity: config.CapacityNodes,
			source: &source{Rows: rowsFor("a")}, failList: "nodes",
			wantActions: []string{"list jobs", "list pods", "delete jobs " + name("old") + " Background uid=uid-old", "list limitranges", "list nodes"},
			wantErr:     "observing capacity", wantBlocked: "capacity unknown"},
		{name: "quota LIST fails in quota mode", mode: Execute, capacity: config.CapacityQuota,
			source: &source{Rows: rowsFor("a")}, failList: "resourcequotas",
			wantActions: []string{"list jobs", "list pods", "delete jobs " + name("old") + " Background uid=uid-old", "list limitranges", "list resourcequotas"},
			wantErr:     "observing capacity", wantBlocked: "capacity unknown"},
		{name: "its pods cannot be listed: the deletes happen, nothing is created", mode: Execute,
			source: &source{Rows: rowsFor("a")}, failList: "pods",
			wantActions: []string{"list jobs", "list pods", "delete jobs " + name("old") + " Background uid=uid-old"},
			wantErr:     "listing pods", wantBlocked: "cannot list its pods"},
		{name: "Jobs cannot be listed: nothing at all", mode: Execute, source: &source{Rows: rowsFor("a")}, failList: "jobs",
			wantActions: []string{"list jobs"}, wantErr: "listing Jobs"},
		{name: "a delete fails: the pass still creates, and fails", mode: Execute, source: &source{Rows: rowsFor("a")}, failDelete: true,
			wantActions: []string{"list jobs", "list pods", "delete jobs " + name("old") + " Background uid=uid-old", "create jobs " + name("a")},
			wantErr:     "deleting Job " + name("old")},
		{name: "gc lists only Jobs and reads no row", mode: DeleteOnly, capacity: config.CapacityNodes,
			wantActions: []string{"list jobs", "delete jobs " + name("old") + " Background uid=uid-old"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg := testConfig(t, func(c *config.Config) {
				if tc.capacity != "" {
					c.Limits.Capacity = tc.capacity
				}
				if tc.maxActive != 0 {
					c.Limits.MaxActive = &tc.maxActive
				}
			})
			client := testkit.NewFake(makeJob("old").Finished(batchv1.JobComplete, ago(3*time.Hour)).Obj(), makeJob("run").Obj())
			if tc.onlyRunning {
				client = testkit.NewFake(makeJob("run").Obj())
			}
			if tc.failDelete {
				client.PrependReactor("delete", "jobs", func(k8stesting.Action) (bool, runtime.Object, error) {
					return true, nil, apierrors.NewInternalError(errors.New("etcd timeout"))
				})
			}
			if tc.failList != "" {
				client.PrependReactor("list", tc.failList, func(k8stesting.Action) (bool, runtime.Object, error) {
					return true, nil, apierrors.NewServiceUnavailable("etcd is down")
				})
			}
			var logs bytes.Buffer
			ctx := zerolog.New(&logs).WithContext(context.Background())
			s := &Scheduler{workers: 1, Config: cfg, Kube: client, Source: tc.source, Renderer: render.New(cfg, nil), Now: func() time.Time { return now }}
			res, err := s.Run(ctx, tc.mode)
			plan, sum := res.Plan, res.Summary
			if diff := cmp.Diff(besidePass(tc.wantActions, name("old")), besidePass(actions(client), name("old"))); diff != "" {
				t.Errorf("actions (-want +got):\n%s", diff)
			}
			if (err == nil) != (tc.wantErr == "") || err != nil && !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("err = %v, want one containing %q", err, tc.wantErr)
			}
			if config.IsConfigError(err) != tc.wantConfig {
				t.Errorf("IsConfigError(%v) = %v, want %v", err, !tc.wantConfig, tc.wantConfig)
			}
			if plan != nil && len(plan.Creates) > 0 && tc.wantErr != "" && !tc.failDelete {
				t.Errorf("a failed pass plans creates: %v", plan.Creates)
			}
			if plan != nil && !strings.Contains(plan.Blocked, tc.wantBlocked) {
				t.Errorf("Blocked = %q, want it to mention %q", plan.Blocked, tc.wantBlocked)
			}
			if n := strings.Count(logs.String(), `"message":"pass done"`); n != 1 {
				t.Errorf("%d pass done lines, want 1:\n%s", n, logs.String())
			}
			level := `"level":"info"`
			if tc.wantErr != "" {
				level = `"level":"error"`
			}
			if !strings.Contains(lastLine(logs.String()), level) {
				t.Errorf("the pass done line is not at %s:\n%s", level, lastLine(logs.String()))
			}
			if strings.Contains(lastLine(logs.String()), "notCreated") {
				t.Errorf("the pass done line says notCreated though every planned create was tried:\n%s", lastLine(logs.String()))
			}
			if tc.failDelete && sum.Failed != 1 {
				t.Errorf("failed = %d, want the failed delete counted", sum.Failed)
			}
		})
	}
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return lines[len(lines)-1]
}

// TestDeadlineLeavesCreatesForTheNextPass: creates not started when the pass's deadline has passed are not tried,
// are counted as notCreated in the pass done line, and fail the pass.
func TestDeadlineLeavesCreatesForTheNextPass(t *testing.T) {
	for _, g := range []struct {
		name  string
		guard Guard
	}{
		{name: "no guard"},
		// A hold kept from pass to pass (lease.Guard.Keep): its context outlives the pass, the creates do not.
		{name: "a kept hold", guard: &guard{held: context.Background()}},
	} {
		t.Run(g.name, func(t *testing.T) { testDeadlineLeavesCreates(t, g.guard) })
	}
}

func testDeadlineLeavesCreates(t *testing.T, g Guard) {
	cfg := testConfig(t, nil)
	client := testkit.NewFake()
	var logs bytes.Buffer
	ctx := zerolog.New(&logs).WithContext(context.Background())
	s := &Scheduler{workers: 1, Config: cfg, Kube: client, Source: &source{Rows: rowsFor("a", "b")}, Renderer: render.New(cfg, nil),
		Now: func() time.Time { return now }, Timeout: time.Nanosecond, Guard: g} // the fake client and source ignore it
	res, err := s.Run(ctx, Execute)
	sum := res.Summary
	if err == nil || !strings.Contains(err.Error(), "2 planned Job(s) not created") || !strings.Contains(err.Error(), "--timeout") {
		t.Errorf("err = %v, want the 2 planned Jobs not created, naming --timeout", err)
	}
	if sum.NotCreated != 2 || sum.Created != 0 {
		t.Errorf("summary %+v, want 2 not created", sum)
	}
	if diff := cmp.Diff([]string{"list jobs", "list pods"}, actions(client)); diff != "" {
		t.Errorf("actions (-want +got):\n%s", diff)
	}
	if line := lastLine(logs.String()); !strings.Contains(line, `"notCreated":2`) || !strings.Contains(line, `"level":"error"`) {
		t.Errorf("pass done line %s, want notCreated 2 at level error", line)
	}
}

// TestBadRowsDoNotStallTheQueue: 50 rows that cannot make a Job ahead of one good row, one slot: the good row gets
// its Job in one pass, and the source is asked for a growing number of rows, not the same head each time.
func TestBadRowsDoNotStallTheQueue(t *testing.T) {
	cfg := testConfig(t, func(c *config.Config) { c.Limits.MaxPerTick = ptr.To(1) })
	var all []rows.Row
	for i := range 50 {
		bad := rows.Row{Key: fmt.Sprintf("bad-%02d", i), Columns: []rows.Column{{Name: "v", Value: "\xff"}}}
		if i%2 == 1 {
			bad.Columns[0].Value = strings.Repeat("x", render.MaxEnvBytes)
		}
		all = append(all, bad)
	}
	all = append(all, rowsFor("good")...)
	src := &source{Rows: all}
	client := testkit.NewFake()
	s := &Scheduler{workers: 1, Config: cfg, Kube: client, Source: src, Renderer: render.New(cfg, nil), Now: func() time.Time { return now }}
	res, err := s.Run(context.Background(), Execute)
	plan, sum := res.Plan, res.Summary
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"list jobs", "list pods", "create jobs " + name("good")}, actions(client)); diff != "" {
		t.Errorf("actions (-want +got):\n%s", diff)
	}
	if sum.Created != 1 || sum.Skipped != 50 || len(plan.Skipped) != 50 {
		t.Errorf("summary %+v, want 1 created and 50 skipped", sum)
	}
	if len(src.Calls) > 7 {
		t.Errorf("%d reads for 51 rows, want the number of rows asked for to grow (at most 7 reads)", len(src.Calls))
	}
}

// TestSkipBudget: a pass skips at most its budget of rows, then stops reading and says so; the rows behind wait for
// the next pass.
func TestSkipBudget(t *testing.T) {
	bad := func(n int) []rows.Row {
		var out []rows.Row
		for i := range n {
			out = append(out, rows.Row{Key: fmt.Sprintf("bad-%d", i), Columns: []rows.Column{{Name: "v", Value: "\xff"}}})
		}
		return out
	}
	tests := []struct {
		name                     string
		rows                     []rows.Row
		wantCreated, wantSkipped int
		wantWarning              bool
		wantReads                int // asking 1, then 1+1, then 1+3 capped by the budget: no read once it is spent
	}{
		{"4 bad rows within a budget of 5", append(bad(4), rowsFor("good")...), 1, 4, false, 3},
		{"5 bad rows use up a budget of 5", append(bad(5), rowsFor("good")...), 0, 5, true, 3},
		{"7 bad rows past a budget of 5", append(bad(7), rowsFor("good")...), 0, 5, true, 3},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg := testConfig(t, func(c *config.Config) { c.Limits.MaxPerTick = ptr.To(1) })
			var logs bytes.Buffer
			ctx := zerolog.New(&logs).WithContext(context.Background())
			src := &source{Rows: tc.rows}
			s := &Scheduler{workers: 1, Config: cfg, Kube: testkit.NewFake(), Source: src, Renderer: render.New(cfg, nil),
				Now: func() time.Time { return now }, maxSkipped: 5}
			res, err := s.Run(ctx, Execute)
			sum := res.Summary
			if err != nil {
				t.Fatal(err)
			}
			if sum.Created != tc.wantCreated || sum.Skipped != tc.wantSkipped {
				t.Errorf("created %d, skipped %d; want %d, %d", sum.Created, sum.Skipped, tc.wantCreated, tc.wantSkipped)
			}
			if len(src.Calls) != tc.wantReads {
				t.Errorf("%d reads, want %d", len(src.Calls), tc.wantReads)
			}
			if got := strings.Contains(logs.String(), "stopped reading"); got != tc.wantWarning {
				t.Errorf("warned %v, want %v:\n%s", got, tc.wantWarning, logs.String())
			}
		})
	}
}

// recorder is an Events that records what it was told.
type recorder struct{ created, deleted, blocked []string }

func (r *recorder) JobCreated(job *batchv1.Job, c Create, room string) {
	r.created = append(r.created, fmt.Sprintf("%s %s %d %s", job.Name, c.Key, c.Attempt, room))
}
func (r *recorder) JobDeleted(j JobStatus) { r.deleted = append(r.deleted, j.Name+" "+j.Delete) }
func (r *recorder) PassBlocked(reason string, waits bool) {
	if !waits {
		reason += " (a fault)"
	}
	r.blocked = append(r.blocked, reason)
}

// TestEventsAndCapacityLists: a pass reports each create and delete and, when it creates nothing for a reason, that
// reason once; a pass with no slots makes no capacity LIST.
func TestEventsAndCapacityLists(t *testing.T) {
	tests := []struct {
		name        string
		maxActive   int
		wantActions []string
		want        recorder
	}{
		{name: "room for one", maxActive: 2,
			wantActions: []string{"list jobs", "list pods", "delete jobs " + name("old") + " Background uid=uid-old",
				"list limitranges", "list nodes", "list pods", "list resourcequotas", "create jobs " + name("a")},
			want: recorder{created: []string{name("a") + " a 1 1 slot(s) this pass, bound by limits.maxActive: 1 of 2 unfinished"},
				deleted: []string{name("old") + " " + DeleteRetention}}},
		{name: "no slots: no capacity LIST, one Blocked", maxActive: 1,
			wantActions: []string{"list jobs", "list pods", "delete jobs " + name("old") + " Background uid=uid-old"},
			want: recorder{deleted: []string{name("old") + " " + DeleteRetention},
				blocked: []string{"limits.maxActive: 1 of 1 unfinished"}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg := testConfig(t, func(c *config.Config) {
				c.Limits.MaxActive, c.Limits.Capacity = ptr.To(tc.maxActive), config.CapacityNodes
			})
			node := makeNode("n").Allocatable(corev1.ResourcePods, "10").Allocatable(corev1.ResourceCPU, "4").Obj()
			client := testkit.NewFake(makeJob("old").Finished(batchv1.JobComplete, ago(time.Hour)).Obj(), makeJob("run").Obj(), node)
			ev := &recorder{}
			var logs bytes.Buffer
			ctx := zerolog.New(&logs).WithContext(context.Background())
			s := &Scheduler{workers: 1, Config: cfg, Kube: client, Source: &source{Rows: rowsFor("a", "b")}, Renderer: render.New(cfg, nil),
				Now: func() time.Time { return now }, Events: ev}
			if _, err := s.Run(ctx, Execute); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(besidePass(tc.wantActions, name("old")), besidePass(actions(client), name("old"))); diff != "" {
				t.Errorf("actions (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.want, *ev, cmp.AllowUnexported(recorder{})); diff != "" {
				t.Errorf("events (-want +got):\n%s", diff)
			}
			for _, line := range strings.Split(strings.TrimSpace(logs.String()), "\n") {
				if strings.Contains(line, `"level":"warn"`) && !strings.Contains(line, `"message":"`) {
					t.Errorf("a warning without a message was logged: %s", line)
				}
			}
		})
	}
}

// TestCause: an error that happened because the pass's deadline passed says so, once.
func TestCause(t *testing.T) {
	deadline := errors.New("the pass ran out of its --timeout of 1s")
	ctx, cancel := context.WithCancelCause(context.Background())
	if err := cause(ctx, errors.New("boom")); err.Error() != "boom" {
		t.Errorf("cause before the deadline = %q, want the error as is", err)
	}
	cancel(deadline)
	if err := cause(ctx, errors.New("boom")); err.Error() != "boom (the pass ran out of its --timeout of 1s)" {
		t.Errorf("cause = %q, want the deadline named", err)
	}
	if err := cause(ctx, fmt.Errorf("listing: %w", deadline)); strings.Count(err.Error(), "--timeout") != 1 {
		t.Errorf("cause = %q, want the deadline named once", err)
	}
}

// TestCapacityBoundsTheSlots: what fits bounds the slots only when it is fewer; none fitting blocks.
func TestCapacityBoundsTheSlots(t *testing.T) {
	tests := []struct {
		pods      string // the node's allocatable pods
		wantSlots int
		wantLimit string
	}{
		{"3", 2, "limits.maxPerTick: 2"},
		{"2", 2, "limits.maxPerTick: 2"}, // as many fit as maxPerTick allows: maxPerTick binds
		{"1", 1, "capacity: "},
		{"0", 0, "capacity: "},
	}
	for _, tc := range tests {
		t.Run(tc.pods+" pods allocatable", func(t *testing.T) {
			cfg := testConfig(t, func(c *config.Config) { c.Limits.MaxPerTick, c.Limits.Capacity = ptr.To(2), config.CapacityNodes })
			node := makeNode("n").Allocatable(corev1.ResourcePods, tc.pods).Allocatable(corev1.ResourceCPU, "4").Obj()
			s := &Scheduler{workers: 1, Config: cfg, Kube: testkit.NewFake(node), Source: &source{Rows: rowsFor("a", "b", "c")},
				Renderer: render.New(cfg, nil), Now: func() time.Time { return now }}
			res, err := s.Run(context.Background(), DryRun)
			p := res.Plan
			if err != nil {
				t.Fatal(err)
			}
			if p.Slots != tc.wantSlots || !strings.HasPrefix(p.Limit, tc.wantLimit) || (p.Slots == 0) != (p.Blocked != "") {
				t.Errorf("slots %d, limit %q, blocked %q; want %d, %q…", p.Slots, p.Limit, p.Blocked, tc.wantSlots, tc.wantLimit)
			}
		})
	}
}
