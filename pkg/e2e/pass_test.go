//go:build integration

package e2e

import (
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestFullClusterBlocks: one node that fits 2 task pods and capacity off: the third pod is Unschedulable (the real
// scheduler says so), the next tick creates nothing and says why, and once pods finish the passes resume.
func TestFullClusterBlocks(t *testing.T) {
	t.Parallel()
	e, keys, cfg := newTaskScenario(t, "6", "16Gi", 4, config{cpu: "2500m", duration: "6s", extra: "limits:\n  maxActive: 10\n  maxPerTick: 3\n  capacity: off\n"})
	l := e.ledger()
	e.worker()

	if s := e.tick(cfg).summary(t); s.Created != 3 {
		t.Fatalf("first tick created %d, want 3", s.Created)
	}
	e.eventually("one pod Unschedulable", time.Minute, func() bool {
		for _, p := range e.pods() {
			if unschedulable(&p) {
				return true
			}
		}
		return false
	})
	s := e.tick(cfg).summary(t)
	if s.Created != 0 || !strings.Contains(s.Blocked, "Unschedulable") || !strings.Contains(s.Blocked, "Insufficient cpu") {
		t.Fatalf("tick while a pod is Unschedulable: created %d, blocked %q; want 0 and the scheduler's reason", s.Created, s.Blocked)
	}
	st := e.jobsched("status", "--config", cfg)
	if st.code != 0 || !strings.Contains(st.stdout, "Unschedulable") {
		t.Errorf("status does not say why the next tick is blocked (exit %d):\n%s", st.code, st.stdout)
	}
	// The first pods finish, the third is scheduled, and the passes go on until the backlog is drained.
	if !e.passUntil(cfg, l, 2*time.Minute, func(int) bool { return len(l.created()) == len(keys) && len(e.jobs()) == 0 }) {
		t.Fatalf("did not resume: Jobs ever %v, Jobs now %d", l.created(), len(e.jobs()))
	}
	for k, n := range l.created() {
		if n != 1 {
			t.Errorf("task %s had %d Jobs", k, n)
		}
	}
}

// TestGC: succeeded Jobs and their pods are gone (the real garbage collector), by tick and by gc; gc needs no
// database. (Failed Jobs are kept while their task is retried: see retry_test.go.)
func TestGC(t *testing.T) {
	t.Parallel()
	e := newNodeEnv(t, "8", "16Gi")
	e.insert("ok", 2)
	ok := e.writeConfig(config{name: "ok", where: "id LIKE 'ok-%'", duration: "1s"})

	if s := e.tick(ok).summary(t); s.Created != 2 {
		t.Fatalf("created %d, want 2", s.Created)
	}
	e.exec(`UPDATE ` + e.table + ` SET status = 'done' WHERE id LIKE 'ok-%'`) // what the workers would do
	e.waitJobs(batchv1.JobComplete, 2)

	r := e.jobsched("gc", "--config", ok)
	if r.code != 0 || r.summary(t).Deleted != 2 {
		t.Fatalf("gc: exit %d, %s", r.code, r.stderr)
	}
	e.eventually("succeeded Jobs and their pods gone", time.Minute, func() bool {
		for _, p := range e.pods() {
			if strings.HasPrefix(p.Annotations["jobsched.io/task-key"], "ok-") {
				return false
			}
		}
		for _, j := range e.jobs() {
			if strings.HasPrefix(j.Annotations["jobsched.io/task-key"], "ok-") {
				return false
			}
		}
		return true
	})
	if s := e.tick(ok).summary(t); s.Created != 0 || s.Deleted != 0 {
		t.Errorf("after gc, a tick created %d and deleted %d, want nothing (the rows are done)", s.Created, s.Deleted)
	}
}

// TestConcurrentTicks: 10 ticks started at the same moment on the same backlog, 10 times: never two Jobs for one key.
func TestConcurrentTicks(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.addNode("n0", "16", "32Gi", 200, nil)
	keys := e.insert("task", 40)
	cfg := e.writeConfig(config{duration: "1s", extra: "limits:\n  maxActive: 100\n  maxPerTick: 4\n"})
	l := e.ledger()
	e.worker()
	seen := func() int { // the creates the Jobs watch has seen
		n := 0
		for _, c := range l.created() {
			n += c
		}
		return n
	}
	reported := 0 // the creates the ticks' pass done lines report
	for round := range 10 {
		var wg sync.WaitGroup
		results := make([]result, 10)
		start := make(chan struct{})
		for i := range results {
			wg.Go(func() {
				<-start
				results[i] = e.jobsched("tick", "--config", cfg)
			})
		}
		close(start)
		wg.Wait()
		created := 0
		for _, r := range results {
			if r.code != 0 {
				t.Fatalf("round %d: a tick exited %d:\n%s", round, r.code, r.stderr)
			}
			created += r.summary(t).Created
		}
		t.Logf("round %d: %d created", round, created)
		reported += created
		e.eventually("the watch saw the round's creates", 30*time.Second, func() bool { return seen() >= reported })
	}
	total := 0
	for k, n := range l.created() {
		total += n
		if n != 1 {
			t.Errorf("task %s had %d Jobs", k, n)
		}
	}
	if total < len(keys)/2 {
		t.Errorf("only %d Jobs were created in 10 rounds; the test did not exercise much", total)
	}
}

// snapshot is every object of the namespace that jobsched could change, with its resourceVersion.
func (e *env) snapshot() map[string]string {
	e.t.Helper()
	out := map[string]string{}
	for _, j := range e.jobs() {
		if !isMarker(&j) {
			out["job/"+j.Name] = j.ResourceVersion
		}
	}
	for _, p := range e.pods() {
		out["pod/"+p.Name] = p.ResourceVersion
	}
	for k, v := range e.statuses() {
		out["row/"+k] = v
	}
	return out
}

// TestReadOnlyCommands: dry-run and status change nothing on the server or in the database; dry-run --server
// rejects a template the API server would reject, with the server's message.
func TestReadOnlyCommands(t *testing.T) {
	t.Parallel()
	e, _, cfg := newTaskScenario(t, "8", "16Gi", 6, config{duration: "10m", extra: "limits:\n  maxPerTick: 2\ngc:\n  succeededRetention: 0s\n"})
	e.tick(cfg)
	l := e.ledger()
	// Wait until the controllers are done with the two Jobs (pods Running, Job status counts them Ready), so that
	// any change seen later is jobsched's.
	e.eventually("pods running and counted ready", time.Minute, func() bool {
		pods, jobs := e.pods(), e.jobs()
		for _, p := range pods {
			if p.Status.Phase != corev1.PodRunning {
				return false
			}
		}
		for _, j := range jobs {
			if j.Status.Ready == nil || *j.Status.Ready != 1 {
				return false
			}
		}
		return len(pods) == 2 && len(jobs) == 2
	})
	// The controllers write nothing more until the pods end: the namespace reads the same before and after a marker
	// Job's round trip through the watch.
	var before map[string]string
	e.eventually("the namespace unchanged across a marker's round trip", time.Minute, func() bool {
		before = e.snapshot()
		e.sync(l)
		return reflect.DeepEqual(before, e.snapshot())
	})
	for _, args := range [][]string{
		{"dry-run", "-o", "json"}, {"dry-run", "-o", "yaml"}, {"dry-run"}, {"dry-run", "--server"},
		{"status"}, {"status", "-o", "json"},
	} {
		r := e.jobsched(append(args, "--config", cfg)...)
		if r.code != 0 {
			t.Fatalf("%v exited %d:\n%s", args, r.code, r.stderr)
		}
	}
	e.sync(l) // the watch has delivered every Job written before the marker, the commands' included
	if after := e.snapshot(); !reflect.DeepEqual(before, after) {
		t.Errorf("read-only commands changed something:\nbefore %v\nafter  %v", before, after)
	}
	if n := len(l.created()); n != 0 {
		t.Errorf("read-only commands created %d Jobs", n)
	}

	bad := e.writeConfig(config{name: "bad", containerNm: "Not_A_DNS_Name"})
	r := e.jobsched("dry-run", "--server", "--config", bad)
	if r.code != 1 || !strings.Contains(r.stderr, "Invalid value") || !strings.Contains(r.stderr, "Not_A_DNS_Name") {
		t.Errorf("dry-run --server with an invalid template: exit %d, want 1 with the server's message:\n%s", r.code, r.stderr)
	}
	if list, _ := e.kube.BatchV1().Jobs(e.ns).List(e.ctx, metav1.ListOptions{LabelSelector: "jobsched.io/scheduler=bad"}); len(list.Items) != 0 {
		t.Errorf("dry-run --server stored %d Jobs", len(list.Items))
	}
}

// TestWorkerNeverUpdatesRow: the Job succeeds but the row stays waiting: warned with its key, no second Job while the
// first is kept.
func TestWorkerNeverUpdatesRow(t *testing.T) {
	t.Parallel()
	e := newNodeEnv(t, "8", "16Gi")
	e.insert("lazy", 1)
	cfg := e.writeConfig(config{duration: "1s", extra: "gc:\n  succeededRetention: 1h\n"})
	l := e.ledger()
	e.tick(cfg)
	e.waitJobs(batchv1.JobComplete, 1)
	for range 3 {
		r := e.tick(cfg)
		if s := r.summary(t); s.Created != 0 || s.Skipped != 1 {
			t.Fatalf("created %d skipped %d, want 0 and 1", s.Created, s.Skipped)
		}
		if !strings.Contains(r.stderr, `"task":"lazy-0"`) || !strings.Contains(r.stderr, "worker bug") {
			t.Fatalf("no warning naming the task:\n%s", r.stderr)
		}
	}
	if n := l.created()["lazy-0"]; n != 1 {
		t.Errorf("lazy-0 had %d Jobs, want 1", n)
	}
}

// TestWritingQueryTouchesNothing: a query that tries to write fails in the READ ONLY transaction with the database's
// message, exit 2, and nothing is created or changed.
func TestWritingQueryTouchesNothing(t *testing.T) {
	t.Parallel()
	e := newNodeEnv(t, "8", "16Gi")
	e.insert("task", 3)
	before := e.statuses()
	for _, tc := range []struct{ name, query, message string }{
		{"writable-cte", "WITH u AS (UPDATE " + e.table + " SET status = 'taken' WHERE status = 'waiting' RETURNING id, url) SELECT id, url FROM u",
			"data-modifying statement"},
		{"nextval", "SELECT nextval('" + e.table + "_n_seq')::text AS id", "cannot execute nextval() in a read-only transaction"},
		{"setval-in-where", "SELECT id FROM " + e.table + " WHERE setval('" + e.table + "_n_seq', 100) > 0", "read-only transaction"},
	} {
		r := e.jobsched("tick", "--config", e.writeConfig(config{name: tc.name, query: tc.query}))
		if r.code != 2 || !strings.Contains(r.stderr, "pq: ") || !strings.Contains(r.stderr, tc.message) {
			t.Errorf("%s: exit %d, want 2 with the database's message %q:\n%s", tc.name, r.code, tc.message, r.stderr)
		}
	}
	if jobs := e.jobs(); len(jobs) != 0 {
		t.Errorf("%d Jobs were created", len(jobs))
	}
	if after := e.statuses(); !reflect.DeepEqual(before, after) {
		t.Errorf("rows changed: %v → %v", before, after)
	}
	var last int64
	if err := e.db.QueryRow(`SELECT last_value FROM ` + e.table + `_n_seq`).Scan(&last); err != nil || last != 3 {
		t.Errorf("sequence moved to %d (%v), want 3", last, err)
	}
}
