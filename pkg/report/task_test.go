package report

import (
	"context"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/jobsched/jobsched/pkg/jobmeta"
	"github.com/jobsched/jobsched/pkg/render"
	"github.com/jobsched/jobsched/pkg/rows"
	"github.com/jobsched/jobsched/pkg/scheduler"
	"github.com/jobsched/jobsched/pkg/testkit"
)

func TestTask(t *testing.T) {
	failed := makeJob("f").Finished(batchv1.JobFailed, ago(30*time.Second)).Obj()
	pod := makePod(failed).Bound("node-0").Label(jobmeta.LabelTask, render.TaskLabel("f")).Annotation(jobmeta.AnnotationTaskKey, "f").
		Phase(corev1.PodFailed).Obj()
	dead := makeJob("d").Attempt(3).Finished(batchv1.JobFailed, ago(time.Hour)).Obj()
	g1, g2 := makeJob("g").Attempt(1).Finished(batchv1.JobFailed, ago(time.Hour)).Obj(), makeJob("g").Attempt(2).Obj()
	untimed := makeJob("u").Finished(batchv1.JobFailed, time.Time{}).Obj()
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
		{"u", "backoff", "attempt 1 of 3 failed (BackoffLimitExceeded: Job has reached the specified backoff limit) at an unknown time " +
			"(its condition has no lastTransitionTime): it is not retried while its Job " + name("u") + " exists", 1, 0, true},
		{"gone", "not selected", "the query does not return this key", 0, 0, false},
	}
	for _, tc := range tests {
		t.Run(tc.key, func(t *testing.T) {
			cfg := testConfig(t, nil)
			client := testkit.NewFake(failed, pod, dead, g1, g2, untimed)
			s := &scheduler.Scheduler{Config: cfg, Kube: client, Source: &source{Rows: rowsFor("f", "d", "w", "g", "u")}, Renderer: render.New(cfg, nil), Now: func() time.Time { return now }}
			v, err := TaskViewOf(context.Background(), s, tc.key)
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

// TestTaskOversizedRow: status KEY of a row PostgreSQL sent as its key only (over rows.MaxRowBytes) shows the task
// and says why its row gets no Job, rather than failing the command.
func TestTaskOversizedRow(t *testing.T) {
	cfg := testConfig(t, nil)
	big := rows.Row{Key: "big", Oversize: 2 << 20}
	s := &scheduler.Scheduler{Config: cfg, Kube: testkit.NewFake(), Source: &source{Rows: []rows.Row{big}},
		Renderer: render.New(cfg, nil), Now: func() time.Time { return now }}
	v, err := TaskViewOf(context.Background(), s, "big")
	if err != nil {
		t.Fatal(err)
	}
	if want := "; its row gets no Job: the row is 2097152 bytes as text"; v.State != "waiting" || !strings.Contains(v.Why, want) || v.Env != nil {
		t.Errorf("state %q, why %q, env %v; want waiting, a why with %q, no env", v.State, v.Why, v.Env, want)
	}
}

// TestTaskCancelled: status KEY of a task whose key source.cancelQuery returns, and the status that lists the Job
// the next pass cancels. A finished task is not cancelled: it keeps its state.
func TestTaskCancelled(t *testing.T) {
	running := makeJob("r").Active(1).Obj()
	failed := makeJob("f").Finished(batchv1.JobFailed, ago(30*time.Second)).Obj()
	dead := makeJob("d").Attempt(3).Finished(batchv1.JobFailed, ago(time.Hour)).Obj()
	tests := []struct{ key, wantState, wantWhy string }{
		{"r", "cancelled", "source.cancelQuery returns its key: the next tick deletes attempt 1 (Job " + name("r") + ", running) and its pods"},
		{"f", "cancelled", "source.cancelQuery returns its key: attempt 1 failed; no new attempt while it does"},
		{"w", "cancelled", "source.cancelQuery returns its key: it gets no Job while it does"},
		{"d", "dead", "no attempt left (3 of 3;"},
	}
	for _, tc := range tests {
		t.Run(tc.key, func(t *testing.T) {
			cfg := testConfig(t, nil)
			cfg.Source.CancelQuery = "c"
			s := &scheduler.Scheduler{Config: cfg, Kube: testkit.NewFake(running, failed, dead),
				Source:   &source{Rows: rowsFor("r", "f", "w", "d"), Cancel: []string{"r", "f", "w", "d"}},
				Renderer: render.New(cfg, nil), Now: func() time.Time { return now }}
			v, err := TaskViewOf(context.Background(), s, tc.key)
			if err != nil {
				t.Fatal(err)
			}
			if v.State != tc.wantState || !strings.HasPrefix(v.Why, tc.wantWhy) {
				t.Errorf("state %q, why %q; want %q, %q…", v.State, v.Why, tc.wantState, tc.wantWhy)
			}
			st, err := StatusOf(context.Background(), s)
			if err != nil {
				t.Fatal(err)
			}
			if want := "delete 0 finished Job(s), cancel 1 (source.cancelQuery)"; !strings.HasPrefix(st.Next, want) || st.States[scheduler.StateRunning] != 0 {
				t.Errorf("status next %q, running %d; want %q…, the cancelled Job not counted as running", st.Next, st.States[scheduler.StateRunning], want)
			}
		})
	}
}
