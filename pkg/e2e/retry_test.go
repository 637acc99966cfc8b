//go:build integration

package e2e

import (
	"encoding/json"
	"fmt"
	"sort"
	"sync"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/jobsched/jobsched/pkg/render"
)

// status runs `jobsched status -o json` and decodes it.
func (e *env) status(config string) (st struct {
	Dead []struct {
		Key     string `json:"key"`
		Attempt int    `json:"attempt"`
		Job     string `json:"job"`
		Reason  string `json:"reason"`
	} `json:"dead"`
	Backoff []struct {
		Key     string `json:"key"`
		Attempt int    `json:"attempt"`
	} `json:"backoff"`
}) {
	e.t.Helper()
	r := e.jobsched("status", "--config", config, "-o", "json")
	if r.code != 0 {
		e.t.Fatalf("status exited %d: %s", r.code, r.stderr)
	}
	if err := json.Unmarshal([]byte(r.stdout), &st); err != nil {
		e.t.Fatalf("status -o json: %v\n%s", err, r.stdout)
	}
	return st
}

// attempts are the names of the Jobs created for key, in the order they were created.
func (l *ledger) attempts(key string) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for _, j := range l.byKey[key] {
		out = append(out, j.Name)
	}
	return out
}

// TestPoisonTask: a task that always fails gets exactly retry.maxAttempts Jobs, each after its backoff, then is dead
// in status; `retry` revives it at attempt 1.
func TestPoisonTask(t *testing.T) {
	t.Parallel()
	e := newNodeEnv(t, "8", "16Gi")
	e.insert("poison", 1)
	cfg := e.writeConfig(config{fail: true, duration: "1s", extra: "retry:\n  maxAttempts: 3\n  backoff: 4s\n"})
	l := e.ledger()
	e.eventually("the task dead", 2*time.Minute, func() bool {
		e.tick(cfg)
		st := e.status(cfg)
		return len(st.Dead) == 1
	})
	st := e.status(cfg)
	want := []string{render.AttemptName("e2e", "poison-0", 1), render.AttemptName("e2e", "poison-0", 2), render.AttemptName("e2e", "poison-0", 3)}
	if got := l.attempts("poison-0"); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("Jobs created %v, want exactly %v", got, want)
	}
	if d := st.Dead[0]; d.Key != "poison-0" || d.Attempt != 3 || d.Job != want[2] || d.Reason == "" {
		t.Errorf("dead = %+v, want poison-0 at attempt 3 in %s with a reason", d, want[2])
	}
	l.mu.Lock()
	jobs := l.byKey["poison-0"]
	l.mu.Unlock()
	for n := 1; n < len(jobs); n++ {
		gap := jobs[n].CreationTimestamp.Sub(jobs[n-1].CreationTimestamp.Time)
		if min := time.Duration(1<<(n-1)) * 4 * time.Second; gap < min {
			t.Errorf("attempt %d came %s after attempt %d, want at least its backoff %s", n+1, gap, n, min)
		}
	}
	// More ticks make no fourth Job.
	for range 3 {
		if s := e.tick(cfg).summary(t); s.Created != 0 {
			t.Fatalf("a dead task got a Job: %+v", s)
		}
	}
	r := e.jobsched("retry", "--config", cfg, "poison-0")
	if r.code != 0 {
		t.Fatalf("retry exited %d: %s", r.code, r.stderr)
	}
	if r := e.jobsched("retry", "--config", cfg, "poison-0"); r.code != 2 {
		t.Errorf("retry of a task that is no longer dead exited %d, want 2", r.code)
	}
	e.eventually("attempt 1 again", time.Minute, func() bool {
		e.tick(cfg)
		got := l.attempts("poison-0")
		return len(got) == 4 && got[3] == want[0]
	})
}

// TestFailOnceThenSucceed: a task whose first attempt fails and whose second succeeds ends done, with 2 Jobs, and
// its Jobs are cleaned up.
func TestFailOnceThenSucceed(t *testing.T) {
	t.Parallel()
	e := newNodeEnv(t, "8", "16Gi")
	e.insert("flaky", 1)
	cfg := e.writeConfig(config{failFirst: true, duration: "1s", extra: "retry:\n  maxAttempts: 3\n  backoff: 2s\n"})
	l := e.ledger()
	e.workerOn(corev1.PodSucceeded) // a worker closes its row only when it succeeds
	e.eventually("the row done and its Jobs gone", 2*time.Minute, func() bool {
		e.tick(cfg)
		return e.statuses()["flaky-0"] == "done" && len(e.jobs()) == 0
	})
	want := []string{render.AttemptName("e2e", "flaky-0", 1), render.AttemptName("e2e", "flaky-0", 2)}
	if got := l.attempts("flaky-0"); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("Jobs created %v, want %v", got, want)
	}
}

// TestDeadRowClosed: a dead task whose row the worker closes loses its record on the next pass.
func TestDeadRowClosed(t *testing.T) {
	t.Parallel()
	e := newNodeEnv(t, "8", "16Gi")
	e.insert("bad", 1)
	cfg := e.writeConfig(config{fail: true, duration: "1s", extra: "retry:\n  maxAttempts: 1\n"})
	e.eventually("the task dead", time.Minute, func() bool {
		e.tick(cfg)
		return len(e.status(cfg).Dead) == 1
	})
	e.tick(cfg)
	if n := len(e.jobs()); n != 1 {
		t.Fatalf("%d Jobs while the row is still selected, want the record kept", n)
	}
	e.exec(`UPDATE ` + e.table + ` SET status = 'done'`)
	if s := e.tick(cfg).summary(t); s.Deleted != 1 {
		t.Errorf("deleted %d, want the record of the closed row", s.Deleted)
	}
	e.eventually("the record gone", 30*time.Second, func() bool { return len(e.jobs()) == 0 })
}

// TestRacingRetries: 10 ticks at once, again and again, while tasks fail and are retried: every (task, attempt)
// gets exactly one Job, no task more than maxAttempts, never two unfinished Jobs for one task.
func TestRacingRetries(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.addNode("n0", "16", "32Gi", 200, nil)
	keys := e.insert("race", 6)
	cfg := e.writeConfig(config{fail: true, duration: "1s", extra: "retry:\n  maxAttempts: 3\n  backoff: 2s\n"})
	l := e.ledger()
	e.eventually("every task dead", 3*time.Minute, func() bool {
		var wg sync.WaitGroup
		for range 10 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				e.jobsched("tick", "--config", cfg)
			}()
		}
		wg.Wait()
		return len(e.status(cfg).Dead) == len(keys)
	})
	e.sync(l) // the ledger has seen every Job event, so every overlap
	for _, k := range keys {
		got := l.attempts(k)
		sort.Strings(got)
		want := []string{render.AttemptName("e2e", k, 1), render.AttemptName("e2e", k, 2), render.AttemptName("e2e", k, 3)}
		sort.Strings(want)
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("task %s: Jobs %v, want exactly %v", k, got, want)
		}
	}
	if overlap := l.overlapping(); len(overlap) > 0 {
		t.Errorf("two unfinished Jobs at once for %v", overlap)
	}
}

func jobFinished(j *batchv1.Job) bool {
	for _, c := range j.Status.Conditions {
		if (c.Type == batchv1.JobComplete || c.Type == batchv1.JobFailed) && c.Status == corev1.ConditionTrue {
			return true
		}
	}
	return false
}
