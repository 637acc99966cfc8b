//go:build integration

package e2e

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/jobsched/jobsched/pkg/render"
)

// TestWholeLoop: 20 waiting rows, maxActive 5, a worker that marks a row done when its pod runs; repeated ticks drain
// the backlog, every row has exactly one Job ever, with its columns as env, and every finished Job is cleaned up.
func TestWholeLoop(t *testing.T) {
	t.Parallel()
	e, keys, cfg := newTaskScenario(t, "8", "16Gi", 20, config{extra: "limits:\n  maxActive: 5\n"})
	l := e.ledger()
	e.worker()

	done := 0
	if !e.passUntil(cfg, l, 3*time.Minute, func(int) bool {
		if active := len(e.jobs()); active > 5 {
			t.Fatalf("%d Jobs exist, maxActive is 5", active)
		}
		done = 0
		for _, st := range e.statuses() {
			if st == "done" {
				done++
			}
		}
		return done == len(keys) && len(e.jobs()) == 0
	}) {
		t.Fatalf("backlog not drained: %d of %d done, %d Jobs left", done, len(keys), len(e.jobs()))
	}
	created := l.created()
	for _, k := range keys {
		if created[k] != 1 {
			t.Errorf("task %s had %d Jobs, want exactly 1", k, created[k])
		}
	}
	if len(created) != len(keys) {
		t.Errorf("Jobs were created for %d keys, want %d: %v", len(created), len(keys), created)
	}
	job := l.first("task-7")
	env := map[string]string{}
	for _, v := range job.Spec.Template.Spec.Containers[0].Env {
		env[v.Name] = v.Value
	}
	want := map[string]string{"TASK_ID": "task-7", "TASK_URL": "https://example.com/task-7",
		render.EnvTaskKey: "task-7", render.EnvScheduler: "e2e"}
	for k, v := range want {
		if env[k] != v {
			t.Errorf("env %s = %q, want %q (env %v)", k, env[k], v, env)
		}
	}
	if _, err := time.Parse(time.RFC3339Nano, env["TASK_CREATED_AT"]); err != nil {
		t.Errorf("TASK_CREATED_AT %q is not RFC 3339: %v", env["TASK_CREATED_AT"], err)
	}
	// The garbage collector removed the pods of the deleted Jobs.
	e.eventually("no pods left", time.Minute, func() bool { return len(e.pods()) == 0 })
	_ = corev1.PodRunning
}
