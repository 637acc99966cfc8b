package scheduler

import (
	"bytes"
	"context"
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/rs/zerolog"
	batchv1 "k8s.io/api/batch/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"

	"github.com/jobsched/jobsched/pkg/config"
	"github.com/jobsched/jobsched/pkg/render"
	"github.com/jobsched/jobsched/pkg/rows"
	"github.com/jobsched/jobsched/pkg/testkit"
)

// failingCancel is a source whose cancel query fails (the database went away between the reads).
type failingCancel struct {
	*source
	err error
}

func (f failingCancel) Cancelled(context.Context, []string) ([]string, error) { return nil, f.err }

// TestCancel: the cancel step of a pass (source.cancelQuery). Each case pins one rule, by the exact write actions in
// order (the cancel deletes before any create), what the cancel query was asked, and the plan's counts.
func TestCancel(t *testing.T) {
	running := func(key string) *batchv1.Job { return makeJob(key).Active(1).Obj() }
	tests := []struct {
		name        string
		noCancelQ   bool // the configuration has no cancelQuery
		maxActive   int
		jobs        []runtime.Object
		rows        []rows.Row
		cancel      []string // the keys the cancel query returns
		cancelErr   error
		wantActions []string
		wantAsked   [][]string // what Cancelled was asked, in order
		wantSkipped []Skip
		wantSum     Summary
		wantBlocked string
		wantErr     string
		wantConfig  bool
	}{
		{name: "a running task cancelled: its Job deleted before the create its freed slot allows",
			maxActive: 1, jobs: []runtime.Object{running("a")}, rows: rowsFor("b"), cancel: []string{"a"},
			wantActions: []string{"list jobs", "list pods", "delete jobs " + name("a") + " Background uid=uid-a", "create jobs " + name("b")},
			wantAsked:   [][]string{{"a"}},
			wantSum:     Summary{Selected: 1, Created: 1, Deleted: 1, Cancelled: 1}},
		{name: "a cancelled task gets no new attempt: its key is excluded while its Job goes",
			jobs: []runtime.Object{running("a")}, rows: rowsFor("a"), cancel: []string{"a"},
			wantActions: []string{"list jobs", "list pods", "delete jobs " + name("a") + " Background uid=uid-a"},
			wantAsked:   [][]string{{"a"}},
			wantSum:     Summary{Deleted: 1, Cancelled: 1}},
		{name: "only unfinished Jobs are asked about: no unfinished Job, no cancel read",
			jobs: []runtime.Object{makeJob("done").Finished(batchv1.JobComplete, ago(time.Minute)).Obj()}, cancel: []string{"x", "done"},
			wantActions: []string{"list jobs", "list pods", "delete jobs " + name("done") + " Background uid=uid-done"},
			wantSum:     Summary{Deleted: 1}},
		{name: "a key the cancel query does not return keeps its Job and its slot",
			maxActive: 1, jobs: []runtime.Object{running("a")}, rows: rowsFor("b"), cancel: []string{"z"},
			wantActions: []string{"list jobs", "list pods"}, wantAsked: [][]string{{"a"}},
			wantSum: Summary{Blocked: "limits.maxActive: 1 of 1 unfinished"}, wantBlocked: "limits.maxActive: 1 of 1 unfinished"},
		{name: "a Job being deleted already is not asked about",
			jobs: []runtime.Object{makeJob("a").Active(1).Deleting(ago(time.Second)).Obj()}, cancel: []string{"a"},
			wantActions: []string{"list jobs", "list pods"}},
		{name: "a waiting row the cancel query returns gets no Job: skipped, and the next row takes its slot",
			maxActive: 1, rows: rowsFor("a", "b"), cancel: []string{"a"},
			wantActions: []string{"list jobs", "list pods", "create jobs " + name("b")},
			wantSkipped: []Skip{{Key: "a", Reason: SkipCancelled}},
			wantSum:     Summary{Selected: 2, Created: 1, Skipped: 1}},
		{name: "without a cancelQuery the source is never asked", noCancelQ: true,
			jobs: []runtime.Object{running("a")}, cancel: []string{"a"},
			wantActions: []string{"list jobs", "list pods"}},
		{name: "the cancel read fails: the queue creates nothing, and the pass fails",
			jobs: []runtime.Object{running("a"), makeJob("old").Finished(batchv1.JobComplete, ago(3*time.Hour)).Obj()},
			rows: rowsFor("b"), cancelErr: errors.New("connection refused"),
			wantActions: []string{"list jobs", "list pods", "delete jobs " + name("old") + " Background uid=uid-old"},
			wantSum:     Summary{Deleted: 1, Blocked: "reading rows failed"}, wantBlocked: "reading rows failed",
			wantErr: "connection refused"},
		{name: "a wrong cancel query is a configuration error",
			jobs: []runtime.Object{running("a")}, cancelErr: &config.Error{Err: errors.New("source.cancelQuery: syntax error")},
			wantActions: []string{"list jobs", "list pods"}, wantErr: "source.cancelQuery", wantConfig: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg := testConfig(t, func(c *config.Config) {
				if !tc.noCancelQ {
					c.Source.CancelQuery = "SELECT id FROM tasks WHERE status = 'cancelled'"
				}
				if tc.maxActive != 0 {
					c.Limits.MaxActive = ptr.To(tc.maxActive)
				}
			})
			client := testkit.NewFake(tc.jobs...)
			src := &source{Rows: tc.rows, Cancel: tc.cancel}
			var s rows.Source = src
			if tc.cancelErr != nil {
				s = failingCancel{src, tc.cancelErr}
			}
			var logs bytes.Buffer
			ctx := zerolog.New(&logs).WithContext(context.Background())
			sched := &Scheduler{workers: 1, Config: cfg, Kube: client, Source: s, Renderer: render.New(cfg, nil), Now: func() time.Time { return now }}
			res, err := sched.Run(ctx, Execute)
			if diff := cmp.Diff(tc.wantActions, actions(client)); diff != "" {
				t.Errorf("actions (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantAsked, src.CancelCalls); diff != "" {
				t.Errorf("the cancel query was asked (-want +got):\n%s", diff)
			}
			if (err == nil) != (tc.wantErr == "") || err != nil && !bytes.Contains([]byte(err.Error()), []byte(tc.wantErr)) {
				t.Errorf("err = %v, want one containing %q", err, tc.wantErr)
			}
			if config.IsConfigError(err) != tc.wantConfig {
				t.Errorf("IsConfigError(%v) = %v, want %v", err, !tc.wantConfig, tc.wantConfig)
			}
			if tc.wantConfig {
				return
			}
			if diff := cmp.Diff(tc.wantSkipped, res.Plan.Skipped); diff != "" {
				t.Errorf("skipped (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantSum, res.Summary); diff != "" {
				t.Errorf("summary (-want +got):\n%s", diff)
			}
			if res.Plan.Blocked != tc.wantBlocked {
				t.Errorf("Blocked = %q, want %q", res.Plan.Blocked, tc.wantBlocked)
			}
		})
	}
}

// TestCancelQueues: each queue asks its own cancel query about its own unfinished Jobs only (a queue without one is
// never asked, even for the same key), and the slot a cancel frees is the install's, shared as any slot.
func TestCancelQueues(t *testing.T) {
	cfg := queuesConfig(t, "maxActive: 2", queue("x", "")+
		"- name: y\n  source: {query: q, key: id, cancelQuery: c}\n  job: {template: job.yaml}\n")
	jx, jy := queueJob(t, cfg, 0, "k"), queueJob(t, cfg, 1, "k")
	jx.UID, jy.UID = "uid-x", "uid-y"
	client := testkit.NewFake(jx, jy)
	sx := &source{Rows: rowsFor("k", "x1"), Cancel: []string{"k"}}
	sy := &source{Rows: rowsFor("k", "y1"), Cancel: []string{"k"}}
	s := &Scheduler{workers: 1, Config: cfg, Kube: client, Now: func() time.Time { return now },
		Queues: []Queue{{Source: sx, Renderer: render.New(cfg.QueueConfig(0), nil)}, {Source: sy, Renderer: render.New(cfg.QueueConfig(1), nil)}}}
	res, err := s.Run(zerolog.New(&bytes.Buffer{}).WithContext(context.Background()), Execute)
	if err != nil {
		t.Fatal(err)
	}
	y1, _ := render.New(cfg.QueueConfig(1), nil).Job(rowsFor("y1")[0], 1)
	want := []string{"list jobs", "list pods", "delete jobs " + jy.Name + " Background uid=uid-y", "create jobs " + y1.Name}
	if diff := cmp.Diff(want, actions(client)); diff != "" {
		t.Errorf("actions (-want +got):\n%s", diff)
	}
	if len(sx.CancelCalls) != 0 || !cmp.Equal(sy.CancelCalls, [][]string{{"k"}}) {
		t.Errorf("asked: x %v, y %v; want x never, y about k", sx.CancelCalls, sy.CancelCalls)
	}
	if res.Summary.Cancelled != 1 {
		t.Errorf("cancelled %d, want 1", res.Summary.Cancelled)
	}
}
