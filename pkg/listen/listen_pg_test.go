//go:build integration

package listen

import (
	"bytes"
	"database/sql"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	_ "github.com/lib/pq"
	"github.com/rs/zerolog"
)

// syncBuffer is a log the listener writes from its goroutines while the test reads it.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}
func (s *syncBuffer) String() string { s.mu.Lock(); defer s.mu.Unlock(); return s.b.String() }

// start is a Listener on channel of the test run's PostgreSQL (JOBSCHED_TEST_DSN), with its log, and an admin
// connection; both are closed when the test ends.
func start(t *testing.T, channel string) (*Listener, *sql.DB, *syncBuffer) {
	t.Helper()
	dsn := os.Getenv("JOBSCHED_TEST_DSN")
	if dsn == "" {
		t.Fatal("JOBSCHED_TEST_DSN is not set: run scripts/test.sh")
	}
	db, err := sql.Open("postgres", dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	logs := &syncBuffer{}
	l, err := Start(dsn, channel, AppName("listen-test", channel), time.Second, zerolog.New(logs))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(l.Close)
	return l, db, logs
}

// next is the next wake, or the test fails after a minute.
func next(t *testing.T, l *Listener) string {
	t.Helper()
	select {
	case w := <-l.Wake:
		return w
	case <-time.After(time.Minute):
		t.Fatal("no wake within a minute")
		return ""
	}
}

// eventually waits until cond holds, checking every 50ms, for at most a minute.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for end := time.Now().Add(time.Minute); !cond(); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(end) {
			t.Fatalf("%s: not within a minute", what)
		}
	}
}

// TestListener: the LISTEN acknowledged is a wake (what was inserted before it); a notification is one, its payload
// never read; a killed session is seen (not listening, a wake, a warning), and once pq.Listener has re-connected it
// listens again, having woken the run to read what it may have missed; a notification after that wakes it again; a
// thousand notifications while nobody takes the wake are at most two wakes (one pending, one after it was taken).
func TestListener(t *testing.T) {
	l, db, logs := start(t, "listen_test_a")
	if w := next(t, l); w != WokeListener || !l.Listening() {
		t.Fatalf("first wake %q, listening %v; want %q and listening", w, l.Listening(), WokeListener)
	}
	if _, err := db.Exec(`SELECT pg_notify('listen_test_a', 'DROP TABLE x; ` + "\x1b[2J" + `')`); err != nil {
		t.Fatal(err)
	}
	if w := next(t, l); w != WokeNotify {
		t.Fatalf("wake %q, want %q", w, WokeNotify)
	}
	if strings.Contains(logs.String(), "DROP TABLE") {
		t.Errorf("the payload reached the log:\n%s", logs)
	}

	var killed int
	if err := db.QueryRow(`SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE application_name = $1`,
		AppName("listen-test", "listen_test_a")).Scan(&killed); err != nil || killed != 1 {
		t.Fatalf("terminated %d sessions (%v), want the listener's", killed, err)
	}
	if w := next(t, l); w != WokeListener {
		t.Fatalf("wake after the kill %q, want %q", w, WokeListener)
	}
	eventually(t, "listening again", func() bool { return strings.Contains(logs.String(), "listening again") })
	if !strings.Contains(logs.String(), "the listening connection is lost") || !l.Listening() {
		t.Errorf("listening %v; want a warning of the lost connection, then listening:\n%s", l.Listening(), logs)
	}
	select { // the re-connect's own wake, unless the run had not taken the loss's yet
	case w := <-l.Wake:
		if w != WokeListener {
			t.Errorf("wake %q, want %q", w, WokeListener)
		}
	default:
	}
	if _, err := db.Exec(`NOTIFY listen_test_a`); err != nil {
		t.Fatal(err)
	}
	if w := next(t, l); w != WokeNotify {
		t.Fatalf("wake %q, want %q", w, WokeNotify)
	}

	for range 1000 {
		if _, err := db.Exec(`NOTIFY listen_test_a`); err != nil {
			t.Fatal(err)
		}
	}
	if w := next(t, l); w != WokeNotify {
		t.Fatalf("wake %q, want %q", w, WokeNotify)
	}
	if n := len(l.Wake); n > 1 {
		t.Errorf("%d wakes pending, want at most 1", n)
	}
}

// standby starts a hot standby of the test run's PostgreSQL (pg_basebackup -R from dsn, as the postgres OS user
// when the test runs as root: the server refuses root) on a free port, stopped when the test ends, and returns its
// DSN.
func standby(t *testing.T, dsn string) string {
	t.Helper()
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	bins, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	if len(bins) == 0 {
		t.Fatal("no PostgreSQL server binaries under /usr/lib/postgresql")
	}
	slices.Sort(bins)
	bin := bins[len(bins)-1]
	dir, err := os.MkdirTemp("", "listen-standby-")
	if err != nil {
		t.Fatal(err)
	}
	as := func(name string, args ...string) *exec.Cmd {
		if os.Geteuid() == 0 {
			return exec.Command("runuser", append([]string{"-u", "postgres", "--", filepath.Join(bin, name)}, args...)...)
		}
		return exec.Command(filepath.Join(bin, name), args...)
	}
	if os.Geteuid() == 0 {
		if out, err := exec.Command("chown", "postgres", dir).CombinedOutput(); err != nil {
			t.Fatalf("chown: %v: %s", err, out)
		}
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	pw, _ := u.User.Password()
	// A slot of its own keeps the WAL the copy needs from its start (other tests may write a lot meanwhile); it is
	// dropped once the standby has stopped (cleanups run last-in first-out).
	slot := "listen_test_" + strconv.Itoa(os.Getpid())
	t.Cleanup(func() {
		if db, err := sql.Open("postgres", dsn); err == nil {
			_, _ = db.Exec(`SELECT pg_drop_replication_slot($1)`, slot)
			db.Close()
		}
	})
	backup := as("pg_basebackup", "-h", u.Hostname(), "-p", u.Port(), "-U", u.User.Username(), "-D", filepath.Join(dir, "data"),
		"-R", "-X", "stream", "-C", "-S", slot, "--checkpoint=fast")
	backup.Env = append(os.Environ(), "PGPASSWORD="+pw)
	if out, err := backup.CombinedOutput(); err != nil {
		t.Fatalf("pg_basebackup: %v: %s", err, out)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := strconv.Itoa(l.Addr().(*net.TCPAddr).Port)
	l.Close()
	if out, err := as("pg_ctl", "-D", filepath.Join(dir, "data"), "-o", "-p "+port+" -k "+dir+" -c listen_addresses=127.0.0.1",
		"-l", filepath.Join(dir, "log"), "-w", "start").CombinedOutput(); err != nil {
		t.Fatalf("pg_ctl start: %v: %s", err, out)
	}
	t.Cleanup(func() { _ = as("pg_ctl", "-D", filepath.Join(dir, "data"), "-m", "immediate", "stop").Run() })
	u.Host = "127.0.0.1:" + port
	return u.String()
}

// TestListenerStandby: a hot standby refuses LISTEN; the listener says so once, naming the cause and the fix, closes
// its connection and never listens (the run polls).
func TestListenerStandby(t *testing.T) {
	dsn := standby(t, os.Getenv("JOBSCHED_TEST_DSN"))
	logs := &syncBuffer{}
	l, err := Start(dsn, "listen_test_standby", AppName("listen-test", "standby"), 2*time.Second, zerolog.New(logs))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(l.Close)
	eventually(t, "the warning", func() bool { return strings.Contains(logs.String(), "the server refuses LISTEN") })
	if l.Listening() || !strings.Contains(logs.String(), "hot standby") || !strings.Contains(logs.String(), "Point the DSN at the primary") ||
		strings.Count(logs.String(), "the server refuses LISTEN") != 1 {
		t.Errorf("listening %v; want one warning naming the hot standby and the fix:\n%s", l.Listening(), logs)
	}
	db, err := sql.Open("postgres", dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	eventually(t, "its connection closed", func() bool {
		var n int
		return db.QueryRow(`SELECT count(*) FROM pg_stat_activity WHERE application_name = $1`, AppName("listen-test", "standby")).Scan(&n) == nil && n == 0
	})
}
