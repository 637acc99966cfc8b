//go:build integration

package e2e

import (
	"net"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"

	"github.com/jobsched/jobsched/pkg/render"
)

// blackhole is a TCP listener that accepts connections and never answers: a database host that hangs.
func blackhole(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var conns []net.Conn
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			c.Close()
		}
	})
	return ln.Addr().String()
}

// closedPort is an address where nothing listens: a database that is stopped.
func closedPort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

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

// start runs jobsched with DATABASE_URL set to dsn, in the background.
func (e *env) start(dsn string, args ...string) (*exec.Cmd, *lockedBuffer) {
	e.t.Helper()
	cmd := exec.Command(binary, append([]string{"--kubeconfig", e.kcfg, "--log-format", "json"}, args...)...)
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "DATABASE_URL=") {
			env = append(env, kv)
		}
	}
	cmd.Env = append(env, "DATABASE_URL="+dsn)
	errOut := &lockedBuffer{}
	cmd.Stderr = errOut
	if err := cmd.Start(); err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { _ = cmd.Process.Kill() })
	return cmd, errOut
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
		addr     func(*testing.T) string
		sigterm  bool
		timeout  string
		deadline time.Duration // the pass must have ended by then
	}{
		{name: "database stopped", addr: closedPort, timeout: "30s", deadline: 20 * time.Second},
		{name: "database never answers", addr: blackhole, timeout: "8s", deadline: 20 * time.Second},
		{name: "SIGTERM while the database never answers", addr: blackhole, sigterm: true, timeout: "2m", deadline: 8 * time.Second},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			e.addNode("n0", "8", "16Gi", 110, nil)
			cfg := e.writeConfig(config{duration: "1s", extra: "limits:\n  capacity: quota\n"})
			e.finished(cfg, 2)
			e.insert("new", 1)

			start := time.Now()
			cmd, stderr := e.start("postgres://jobsched:"+password+"@"+tc.addr(t)+"/app?sslmode=disable",
				"tick", "--config", cfg, "--timeout", tc.timeout)
			if tc.sigterm {
				e.eventually("the finished Jobs deleted", 30*time.Second, func() bool { return len(e.jobs()) == 0 })
				time.Sleep(time.Second) // the pass now waits on the database
				start = time.Now()
				if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
					t.Fatal(err)
				}
			}
			done := make(chan error, 1)
			go func() { done <- cmd.Wait() }()
			var err error
			select {
			case err = <-done:
			case <-time.After(tc.deadline):
				t.Fatalf("the pass did not end within %s:\n%s", tc.deadline, stderr)
			}
			r := result{code: exitCode(err), stderr: stderr.String()}
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
	e := newEnv(t)
	e.addNode("n0", "8", "16Gi", 110, nil)
	e.exec(`INSERT INTO ` + e.table + ` (id, url) SELECT 'bad-' || lpad(i::text, 2, '0'), repeat('x', 140000) FROM generate_series(1, 50) i`)
	e.exec(`INSERT INTO ` + e.table + ` (id, url) VALUES ('good', 'https://example.com/good')`)
	cfg := e.writeConfig(config{extra: "limits:\n  maxPerTick: 1\n  capacity: off\n"})
	s := e.tick(cfg).summary(t)
	if s.Created != 1 || s.Skipped != 50 {
		t.Fatalf("created %d and skipped %d, want the good row's Job and 50 skipped", s.Created, s.Skipped)
	}
	jobs := e.jobs()
	if len(jobs) != 1 || jobs[0].Annotations[render.AnnotationTaskKey] != "good" {
		t.Errorf("Jobs %v, want exactly the good row's", jobs)
	}
}
