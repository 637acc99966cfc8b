//go:build integration

package e2e

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/jobsched/jobsched/pkg/jobmeta"
	"github.com/jobsched/jobsched/pkg/scheduler"
)

// cancelMark is what a user appends to a row's url to cancel its task in these scenarios: the row stays 'waiting',
// so the main query still selects it, and the cancel query returns it too (the harder case: nothing but the cancel
// keeps it from a new attempt).
const cancelMark = "#cancel"

func (e *env) cancelQuery() string {
	return fmt.Sprintf("SELECT id FROM %s WHERE url LIKE '%%%s'", e.table, cancelMark)
}

// cancelRow is the user's cancel of key, from its row.
func (e *env) cancelRow(key string) {
	e.t.Helper()
	e.exec(`UPDATE `+e.table+` SET url = url || $2 WHERE id = $1`, key, cancelMark)
}

// row is the whole row of key, as JSON: a test compares it before and after jobsched's passes.
func (e *env) row(key string) string {
	e.t.Helper()
	var out string
	if err := e.db.QueryRowContext(e.ctx, `SELECT row_to_json(t)::text FROM `+e.table+` t WHERE id = $1`, key).Scan(&out); err != nil {
		e.t.Fatal(err)
	}
	return out
}

// jobOf is the name of key's Job ("" when it has none).
func (e *env) jobOf(key string) string {
	e.t.Helper()
	for _, j := range e.jobs() {
		if j.Annotations[jobmeta.AnnotationTaskKey] == key {
			return j.Name
		}
	}
	return ""
}

// podsOf are the pods of Job name.
func (e *env) podsOf(name string) []corev1.Pod {
	e.t.Helper()
	var out []corev1.Pod
	for _, p := range e.pods() {
		if p.Labels["job-name"] == name {
			out = append(out, p)
		}
	}
	return out
}

// runningPod says Job name has a Running pod.
func (e *env) runningPod(name string) bool {
	return slices.ContainsFunc(e.podsOf(name), func(p corev1.Pod) bool { return p.Status.Phase == corev1.PodRunning })
}

// TestCancelFromTheRow pins issue 31's cancel on the local cluster and PostgreSQL: a running task whose key the cancel
// query returns is cancelled by the next pass (its Job deleted before any create, with Background propagation, its
// slot given to the next row in that pass, its pod gone, a Cancelled Event), status and status KEY show the cancel
// before it happens, dry-run plans exactly the writes the tick makes, the task gets no new attempt while its key is
// returned although its row is still selected and a slot is free, and jobsched never writes the row.
func TestCancelFromTheRow(t *testing.T) {
	t.Parallel()
	e := newNodeEnv(t, "4", "8Gi")
	keys := e.insert("task", 3)
	c := config{duration: "10m", extra: "limits: {maxActive: 2}\n"}
	c.cancel = e.cancelQuery()
	cfg := e.writeConfig(c)
	if s := e.tick(cfg).summary(t); s.Created != 2 || s.Cancelled != 0 {
		t.Fatalf("the first tick: %+v, want task-0 and task-1 created, nothing cancelled", s)
	}
	job0 := e.jobOf(keys[0])
	e.eventually("task-0's pod Running", time.Minute, func() bool { return e.runningPod(job0) })

	e.cancelRow(keys[0])
	before := e.row(keys[0])

	// status and status KEY show what the next pass cancels.
	r := e.jobsched("status", "--config", cfg, "-o", "json")
	var st struct {
		Jobs []struct{ Name, Delete string } `json:"jobs"`
		Next string                          `json:"next"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &st); r.code != 0 || err != nil {
		t.Fatalf("status exited %d (%v):\n%s%s", r.code, err, r.stdout, r.stderr)
	}
	if !slices.ContainsFunc(st.Jobs, func(j struct{ Name, Delete string }) bool {
		return j.Name == job0 && j.Delete == scheduler.DeleteCancelled
	}) || !strings.Contains(st.Next, "cancel 1") {
		t.Errorf("status shows jobs %+v, next %q: want %s to be cancelled", st.Jobs, st.Next, job0)
	}
	r = e.jobsched("status", "--config", cfg, keys[0], "-o", "json")
	var task struct{ State, Why string }
	if err := json.Unmarshal([]byte(r.stdout), &task); r.code != 0 || err != nil || task.State != "cancelled" {
		t.Errorf("status %s: exit %d (%v), state %q (%s), want cancelled:\n%s", keys[0], r.code, err, task.State, task.Why, r.stderr)
	}

	// dry-run plans the cancel delete and the create of the slot it frees.
	r = e.jobsched("dry-run", "--config", cfg, "-o", "json")
	var plan dryRunPlan
	if err := json.Unmarshal([]byte(r.stdout), &plan); r.code != 0 || err != nil {
		t.Fatalf("dry-run exited %d (%v):\n%s%s", r.code, err, r.stdout, r.stderr)
	}
	var planned []string
	for _, j := range plan.Jobs {
		if j.Delete != "" {
			planned = append(planned, "delete "+j.Name+": "+j.Delete)
		}
	}
	for _, cr := range plan.Creates {
		planned = append(planned, "create "+cr.Job.Name)
	}

	// The tick, as the API server's watch of the Jobs shows its writes.
	cancelled := time.Now()
	var s summary
	writes, _ := e.writesOf(func() { s = e.tick(cfg).summary(t) })
	want := []string{"delete " + job0, "create " + e.jobOf(keys[2])}
	if !slices.Equal(writes, want) || !slices.Equal(planned, []string{want[0] + ": " + scheduler.DeleteCancelled, want[1]}) {
		t.Errorf("the tick wrote %v and dry-run planned %v; want both %v (the cancel first, its slot to task-2)", writes, planned, want)
	}
	if s.Cancelled != 1 || s.Deleted != 1 || s.Created != 1 {
		t.Errorf("the cancelling tick: %+v, want cancelled 1, deleted 1, created 1", s)
	}
	e.eventually("task-0's pod gone", time.Minute, func() bool { return len(e.podsOf(job0)) == 0 })
	t.Logf("task-0's Job and pod gone %v after the tick started", time.Since(cancelled).Round(time.Millisecond))

	// No new attempt while its key is returned, although its row is still selected and a slot is free.
	c.extra = "limits: {maxActive: 3}\n"
	cfg = e.writeConfig(c)
	if s := e.tick(cfg).summary(t); s.Created != 0 || s.Skipped != 1 || s.Cancelled != 0 {
		t.Errorf("the tick with a free slot: %+v, want task-0's row skipped as cancelled, nothing created", s)
	}
	if j := e.jobOf(keys[0]); j != "" {
		t.Errorf("task-0 has Job %s again, want none while it is cancelled", j)
	}
	if after := e.row(keys[0]); after != before {
		t.Errorf("jobsched changed the row: before %s, after %s", before, after)
	}
	e.eventually("a Cancelled Event regarding "+job0, 30*time.Second, func() bool {
		l, err := e.kube.EventsV1().Events(e.ns).List(e.ctx, metav1.ListOptions{})
		return err == nil && slices.ContainsFunc(l.Items, func(ev eventsv1.Event) bool {
			return ev.Reason == "Cancelled" && ev.Regarding.Name == job0
		})
	})
}

// TestCancelUnderFillFor: a cancel takes effect while `tick --fill-for` waits for a running Job to end, within the
// loop's poll for cancels (5s) and a pass: a refill of the same invocation cancels it, and the slot goes to the next
// row.
func TestCancelUnderFillFor(t *testing.T) {
	t.Parallel()
	e := newNodeEnv(t, "2", "8Gi")
	keys := e.insert("task", 2)
	c := config{cpu: "1500m", duration: "10m"} // one task pod fits
	c.cancel = e.cancelQuery()
	cfg := e.writeConfig(c)
	cmd, stderr := e.start(dsn, "tick", "--config", cfg, "--fill-for", "3m")
	e.eventually("the wait for a Job to finish", time.Minute, func() bool {
		return strings.Contains(stderr.String(), `"message":"waiting for a Job to finish"`)
	})
	job0 := e.jobOf(keys[0])
	e.cancelRow(keys[0])
	cancelled := time.Now()
	e.eventually("task-0's Job and pod gone, task-1 created", time.Minute, func() bool {
		return e.jobOf(keys[0]) == "" && len(e.podsOf(job0)) == 0 && e.jobOf(keys[1]) != ""
	})
	t.Logf("cancel to task-0 gone and task-1 created: %v", time.Since(cancelled).Round(time.Millisecond))
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	r := e.exited(cmd, stderr, 30*time.Second, "after SIGTERM")
	passes := r.summaries(t)
	checkRefills(t, passes)
	i := slices.IndexFunc(passes, func(s summary) bool { return s.Cancelled == 1 })
	if i < 1 {
		t.Errorf("passes %+v: want a refill of the invocation (not its first pass) to cancel task-0:\n%s", passes, r.stderr)
	}
}

// TestCancelCostsWhatItAsks measures a whole pass with and without 10,000 waiting rows marked cancelled (no Job, so
// never asked about): the rows of the table the pass's statements read (pg_stat_user_tables, flushed when its session
// ends), its duration and what it selected and cancelled. The cancel read asks only about the 3 unfinished Jobs' keys,
// so the rows read are the same, and at most 100, with the 10,000 cancelled rows as without them.
func TestCancelCostsWhatItAsks(t *testing.T) {
	t.Parallel()
	const cancelledRows = 10000
	e := newNodeEnv(t, "4", "8Gi")
	e.insert("task", 3)
	c := config{duration: "10m", extra: "limits: {maxActive: 3}\n"}
	c.cancel = fmt.Sprintf("SELECT id FROM %s WHERE status = 'cancelled'", e.table)
	cfg := e.writeConfig(c)
	app := "jobsched-cost-" + randHex(4)
	appDSN := e.dsn + "&application_name=" + app
	if !strings.Contains(e.dsn, "?") {
		appDSN = e.dsn + "?application_name=" + app
	}
	read := func() int64 {
		var n int64
		err := e.db.QueryRowContext(e.ctx, `SELECT coalesce(seq_tup_read, 0) + coalesce(idx_tup_fetch, 0) FROM pg_stat_user_tables
			WHERE relid = $1::regclass`, e.table).Scan(&n)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	// pass is one tick under app's name: the rows it read once its session has ended (its statistics flushed).
	pass := func() (summary, int64) {
		t.Helper()
		before := read()
		r := e.run([]string{"DATABASE_URL=" + appDSN}, "tick", "--config", cfg)
		if r.code != 0 {
			t.Fatalf("tick exited %d:\n%s", r.code, r.stderr)
		}
		e.eventually("the pass's session ended", 30*time.Second, func() bool {
			var n int
			err := e.db.QueryRowContext(e.ctx, `SELECT count(*) FROM pg_stat_activity WHERE application_name = $1`, app).Scan(&n)
			return err == nil && n == 0
		})
		return r.summary(t), read() - before
	}
	// The first tick under app's name too: its session's reads are flushed when it ends, and the measure waits
	// for that, so that they are not counted in the next pass's.
	if s, _ := pass(); s.Created != 3 {
		t.Fatalf("the first tick created %d, want 3", s.Created)
	}
	e.exec("ANALYZE " + e.table)
	s0, read0 := pass()
	e.exec(fmt.Sprintf(`INSERT INTO %s (id, url, status) SELECT 'cancelled-' || g, 'https://example.com/c', 'cancelled'
		FROM generate_series(1, %d) AS g`, e.table, cancelledRows))
	e.exec("ANALYZE " + e.table)
	s1, read1 := pass()
	t.Logf("a full pass with 3 running Jobs: %d rows read, %dms without the %d cancelled rows; %d rows read, %dms with them",
		read0, s0.Duration, cancelledRows, read1, s1.Duration)
	if s0.Cancelled != 0 || s1.Cancelled != 0 || s0.Selected != 0 || s1.Selected != 0 {
		t.Errorf("passes %+v and %+v: want nothing selected or cancelled (the pass is full, no running task is cancelled)", s0, s1)
	}
	if read1 > 100 || read1 != read0 {
		t.Errorf("the pass read %d rows of the table with %d cancelled rows, %d without: want the same, at most 100", read1, cancelledRows, read0)
	}
}
