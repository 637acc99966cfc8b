//go:build integration

package e2e

import (
	"encoding/json"
	"fmt"
	"net/url"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jobsched/jobsched/pkg/listen"
	"github.com/jobsched/jobsched/pkg/testkit"
)

// notifyRecipe runs the README's trigger recipe (recipe-notify) on the scenario's table, with the function and channel
// named after the table (scenarios run side by side in one database), and returns the channel.
func (e *env) notifyRecipe() string {
	e.t.Helper()
	block := readmeBlock(e.t, "README.md", "recipe-notify")
	channel := "jobsched_" + e.table
	block = regexp.MustCompile(`\btasks\b`).ReplaceAllString(block, e.table)
	block = strings.NewReplacer("jobsched_notify", e.table+"_notify", "jobsched_tasks", channel).Replace(block)
	setup, conf, ok := strings.Cut(block, "\n-- ")
	if !ok || !strings.Contains(conf, "notify: "+channel) {
		e.t.Fatalf("the README's recipe-notify has no `-- ` line followed by source.notify:\n%s", block)
	}
	for _, s := range strings.Split(setup, ";\n") {
		if s = strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(s), ";")); s != "" {
			e.exec(s)
		}
	}
	e.t.Cleanup(func() { _, _ = e.db.Exec(`DROP FUNCTION IF EXISTS ` + e.table + `_notify() CASCADE`) })
	return channel
}

// selectOnly is a role that may only SELECT the scenario's table, and its DSN: at most 3 connections (a fill run's
// pool and its listener, and a status beside it).
func (e *env) selectOnly() string {
	e.t.Helper()
	role := e.table + "_ro"
	e.exec(`CREATE ROLE ` + role + ` LOGIN PASSWORD 'ro-pw' CONNECTION LIMIT 3`)
	e.t.Cleanup(func() { _, _ = e.db.Exec(`DROP OWNED BY ` + role + `; DROP ROLE ` + role) })
	e.exec(`GRANT SELECT ON ` + e.table + ` TO ` + role)
	u, err := url.Parse(e.dsn)
	if err != nil {
		e.t.Fatal(err)
	}
	u.User = url.UserPassword(role, "ro-pw")
	return u.String()
}

// createdBy maps each task key a fill run created a Job for to the woke of the pass that created it.
func createdBy(stderr string) map[string]string {
	by := map[string]string{}
	var keys []string
	for _, line := range strings.Split(stderr, "\n") {
		var l struct{ Message, Task, Woke string }
		if json.Unmarshal([]byte(line), &l) != nil {
			continue
		}
		switch l.Message {
		case "created Job":
			keys = append(keys, l.Task)
		case "pass done":
			for _, k := range keys {
				by[k] = l.Woke
			}
			keys = nil
		}
	}
	return by
}

// wokeAfter says whether stderr has a pass done line of a pass woken by woke.
func wokeAfter(stderr, woke string) bool {
	for _, line := range strings.Split(stderr, "\n") {
		var l struct{ Message, Woke string }
		if json.Unmarshal([]byte(line), &l) == nil && l.Message == "pass done" && l.Woke == woke {
			return true
		}
	}
	return false
}

// passes counts the pass done lines of a running invocation's stderr.
func passes(t *testing.T, stderr *lockedBuffer) []summary {
	t.Helper()
	all, err := testkit.PassDones(stderr.String())
	if err != nil {
		t.Fatal(err)
	}
	return all
}

// TestNotify: with the README's trigger and source.notify, a fill run as a role that may only SELECT waits with
// nothing to do (the backlog is empty: it does not end) and creates the Job of a row inserted then, in a pass woken
// by the notification; status says it listens; a storm of 1,000 single-row inserts (rows the query does not select)
// costs far fewer passes than notifications; SIGTERM ends it with exit 0, every pass without an error (the role can
// write nothing: an attempt would fail the pass).
func TestNotify(t *testing.T) {
	t.Parallel()
	e := newNodeEnv(t, "4", "8Gi")
	channel := e.notifyRecipe()
	roleDSN := e.selectOnly()
	cfg := e.writeConfig(config{notify: channel, duration: "600s", extra: "limits:\n  maxActive: 10\n  maxPerTick: 10\n"})
	l := e.ledger()

	cmd, stderr := e.start(roleDSN, "tick", "--config", cfg, "--fill-for", "10m")
	e.eventually("the run listens after its first pass", time.Minute, func() bool {
		return strings.Contains(stderr.String(), `"message":"listening for notifications`) && len(passes(t, stderr)) >= 1
	})

	r := e.run([]string{"DATABASE_URL=" + roleDSN}, "status", "--config", cfg, "-o", "json")
	var st struct {
		Wake struct {
			Channel   string `json:"channel"`
			Listening int    `json:"listening"`
		} `json:"wake"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &st); r.code != 0 || err != nil {
		t.Fatalf("status: exit %d, %v:\n%s%s", r.code, err, r.stdout, r.stderr)
	}
	if st.Wake.Channel != channel || st.Wake.Listening != 1 {
		t.Errorf("status wake %+v, want channel %s with 1 run listening", st.Wake, channel)
	}

	e.insert("n", 1)
	e.eventually("the Job of the row inserted while the run waits", time.Minute, func() bool { return l.created()["n-0"] == 1 })
	e.eventually("its pass done line", 30*time.Second, func() bool { _, ok := createdBy(stderr.String())["n-0"]; return ok })
	if woke := createdBy(stderr.String())["n-0"]; woke != listen.WokeNotify {
		t.Errorf("the pass that created n-0 was woken by %q, want %q:\n%s", woke, listen.WokeNotify, stderr)
	}

	before := len(passes(t, stderr))
	const storm = 1000
	for i := range storm {
		e.exec(`INSERT INTO `+e.table+` (id, url, status) VALUES ($1, 'u', 'held')`, fmt.Sprintf("storm-%d", i))
	}
	e.exec(`INSERT INTO ` + e.table + ` (id, url) VALUES ('after-storm', 'u')`)
	e.eventually("the Job of the row inserted after the storm", time.Minute, func() bool { return l.created()["after-storm"] == 1 })
	e.eventually("its pass done line", 30*time.Second, func() bool { _, ok := createdBy(stderr.String())["after-storm"]; return ok })
	stormPasses := len(passes(t, stderr)) - before
	t.Logf("%d single-row inserts, then one more: %d passes", storm, stormPasses)
	if stormPasses >= storm {
		t.Errorf("%d passes for %d notifications: they did not coalesce", stormPasses, storm+1)
	}

	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	res := e.exited(cmd, stderr, 30*time.Second, "after SIGTERM")
	// A late notification of the storm may have started a pass just before the signal: SIGTERM cuts that pass,
	// which fails (exit 1, "the pass failed", as a pass cut by SIGTERM always has). Between passes it is exit 0,
	// "terminated". Either way no other pass may fail.
	sums := res.summaries(t)
	if n := len(sums); n > 0 && fillReason(t, res) == endFailed && strings.Contains(sums[n-1].Error, "terminated signal received") {
		if res.code != 1 {
			t.Errorf("exit %d after a pass cut by SIGTERM, want 1", res.code)
		}
		sums = sums[:n-1]
	} else if res.code != 0 || fillReason(t, res) != endTerminated {
		t.Errorf("exit %d, ended %q; want 0, %q:\n%s", res.code, fillReason(t, res), endTerminated, res.stderr)
	}
	for i, s := range sums {
		if s.Error != "" || s.Level == "error" {
			t.Errorf("pass %d failed: %s", i, s.Error)
		}
	}
	for k, n := range l.created() {
		if n != 1 {
			t.Errorf("task %s had %d Jobs, want 1", k, n)
		}
	}
}

// TestNotifyListenerKilled: the listening session killed (pg_terminate_backend) loses no row: one inserted while it
// is gone gets its Job (the run polls meanwhile, and reads again once it listens again), and one inserted after it
// is back gets its Job in a pass woken by its notification.
func TestNotifyListenerKilled(t *testing.T) {
	t.Parallel()
	e := newNodeEnv(t, "4", "8Gi")
	channel := e.notifyRecipe()
	cfg := e.writeConfig(config{notify: channel, duration: "600s", extra: "limits:\n  maxActive: 10\n  maxPerTick: 10\n"})
	l := e.ledger()
	cmd, stderr := e.start(e.dsn, "tick", "--config", cfg, "--fill-for", "10m")
	e.eventually("the run listens after its first pass", time.Minute, func() bool {
		return strings.Contains(stderr.String(), `"message":"listening for notifications`) && len(passes(t, stderr)) >= 1
	})

	var killed int
	if err := e.db.QueryRowContext(e.ctx, `SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE application_name = $1`,
		listen.AppName(e.ns, "e2e")).Scan(&killed); err != nil || killed != 1 {
		t.Fatalf("terminated %d listening sessions (%v), want 1", killed, err)
	}
	e.insert("lost", 1)
	e.eventually("the Job of the row inserted while the listener was lost", time.Minute, func() bool { return l.created()["lost-0"] == 1 })
	// Losing the listener and listening again each wake a pass (either may come during the other's pass and start
	// one more), and a poll due while it was lost may start one: a row inserted before those passes read is theirs,
	// not its notification's. So rows are inserted one at a time, each once the last has its Job, until a pass its
	// notification woke creates one; those wakes can take at most three.
	e.eventually("the listener back", time.Minute, func() bool {
		return strings.Contains(stderr.String(), `"message":"listening again`)
	})
	var by map[string]string
	var key string
	for i := range 4 {
		key = fmt.Sprintf("back%d-0", i)
		e.insert(fmt.Sprintf("back%d", i), 1)
		e.eventually("the Job of the row inserted after", time.Minute, func() bool { return l.created()[key] == 1 })
		e.eventually("its pass done line", 30*time.Second, func() bool { _, ok := createdBy(stderr.String())[key]; return ok })
		if by = createdBy(stderr.String()); by[key] != listen.WokeListener && by[key] != "poll" {
			break
		}
	}
	t.Logf("lost-0 created by a pass woken by %q, %s by %q", by["lost-0"], key, by[key])
	if by[key] != listen.WokeNotify {
		t.Errorf("the pass that created %s was woken by %q, want %q:\n%s", key, by[key], listen.WokeNotify, stderr)
	}
	if !strings.Contains(stderr.String(), `"message":"the listening connection is lost`) {
		t.Errorf("no warning of the lost listener:\n%s", stderr)
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if res := e.exited(cmd, stderr, 30*time.Second, "after SIGTERM"); res.code != 0 {
		t.Errorf("exit %d:\n%s", res.code, res.stderr)
	}
}
