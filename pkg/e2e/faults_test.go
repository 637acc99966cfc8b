//go:build integration

package e2e

import (
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"

	"github.com/jobsched/jobsched/pkg/jobmeta"
	"github.com/jobsched/jobsched/pkg/testkit/tcpkit"
)

// finished makes n succeeded Jobs of the scheduler in config (succeededRetention 0: the next pass deletes them).
func (e *env) finished(config string, n int) {
	e.t.Helper()
	e.insert("t", n)
	if s := e.tick(config).summary(e.t); s.Created != n {
		e.t.Fatalf("created %d, want %d", s.Created, n)
	}
	e.exec(`UPDATE ` + e.table + ` SET status = 'done'`)
	e.waitJobs(batchv1.JobComplete, n)
}

func exitCode(err error) int {
	if ee, ok := err.(*exec.ExitError); ok {
		return ee.ExitCode()
	}
	if err != nil {
		return -1
	}
	return 0
}

// TestDeletesNeverWaitOnTheDatabase: with the database stopped, or replaced by a host that accepts and never
// answers, a tick still deletes the finished Jobs, creates nothing, exits 1 within its --timeout and ends with its
// `pass done` line; SIGTERM ends such a pass within a few seconds, also with its line.
func TestDeletesNeverWaitOnTheDatabase(t *testing.T) {
	t.Parallel()
	const password = "S3cr3tPw-e2e"
	tests := []struct {
		name     string
		silent   bool // the database host accepts and never answers (else nothing listens)
		sigterm  bool
		timeout  string
		deadline time.Duration // the pass must have ended by then
	}{
		{name: "database stopped", timeout: "30s", deadline: 20 * time.Second},
		{name: "database never answers", silent: true, timeout: "8s", deadline: 20 * time.Second},
		{name: "SIGTERM while the database never answers", silent: true, sigterm: true, timeout: "2m", deadline: 8 * time.Second},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := newNodeEnv(t, "8", "16Gi")
			cfg := e.writeConfig(config{duration: "1s", extra: "limits:\n  capacity: quota\n"})
			e.finished(cfg, 2)
			e.insert("new", 1)

			addr, accepted := tcpkit.ClosedPort(t), func() int { return 0 }
			if tc.silent {
				l := tcpkit.NewSilent(t)
				addr, accepted = l.Addr(), l.Accepted
			}
			start := time.Now()
			cmd, stderr := e.start("postgres://jobsched:"+password+"@"+addr+"/app?sslmode=disable",
				"tick", "--config", cfg, "--timeout", tc.timeout)
			if tc.sigterm {
				// The pass has nothing left to do but wait on the database once its deletes are done and it has
				// connected to the host that never answers.
				e.eventually("the finished Jobs deleted and the pass connected to the database", 30*time.Second, func() bool {
					return len(e.jobs()) == 0 && accepted() > 0
				})
				start = time.Now()
				if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
					t.Fatal(err)
				}
			}
			by := "after the pass started"
			if tc.sigterm {
				by = "after SIGTERM"
			}
			r := e.exited(cmd, stderr, tc.deadline, by)
			t.Logf("ended after %s with exit %d", time.Since(start).Round(time.Millisecond), r.code)
			if r.code != 1 {
				t.Errorf("exit %d, want 1:\n%s", r.code, r.stderr)
			}
			s := r.summary(t)
			if s.Deleted != 2 || s.Created != 0 {
				t.Errorf("deleted %d and created %d, want 2 and 0:\n%s", s.Deleted, s.Created, r.stderr)
			}
			if strings.Contains(r.stderr, password) {
				t.Errorf("the output shows the DSN's password:\n%s", r.stderr)
			}
			if n := len(e.jobs()); n != 0 {
				t.Errorf("%d Jobs left, want the 2 finished ones deleted and none created", n)
			}
		})
	}
}

// TestBadRowsAheadOfAGoodOne: 50 rows that cannot make a Job (a value over 128 KiB) ahead of one good row,
// maxPerTick 1: the good row gets its Job in one pass, on the real database.
func TestBadRowsAheadOfAGoodOne(t *testing.T) {
	t.Parallel()
	e := newNodeEnv(t, "8", "16Gi")
	e.exec(`INSERT INTO ` + e.table + ` (id, url) SELECT 'bad-' || lpad(i::text, 2, '0'), repeat('x', 140000) FROM generate_series(1, 50) i`)
	e.exec(`INSERT INTO ` + e.table + ` (id, url) VALUES ('good', 'https://example.com/good')`)
	cfg := e.writeConfig(config{extra: "limits:\n  maxPerTick: 1\n  capacity: off\n"})
	s := e.tick(cfg).summary(t)
	if s.Created != 1 || s.Skipped != 50 {
		t.Fatalf("created %d and skipped %d, want the good row's Job and 50 skipped", s.Created, s.Skipped)
	}
	jobs := e.jobs()
	if len(jobs) != 1 || jobs[0].Annotations[jobmeta.AnnotationTaskKey] != "good" {
		t.Errorf("Jobs %v, want exactly the good row's", jobs)
	}
}
