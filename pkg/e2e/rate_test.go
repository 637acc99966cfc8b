//go:build integration

package e2e

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/jobsched/jobsched/pkg/lease"
	"github.com/jobsched/jobsched/pkg/rate"
)

// rateRun is a drain under limits.rate by tick --fill-for: a first fill alone, SIGKILLed at its first create of a
// later pass (mid-fill, holding the Lease, its creates reserved and not all made), then fills racing each other for
// the rest of the time. What it measured: every Job's creation time (from a watch, so the Jobs the retention
// deleted count too).
type rateRun struct {
	creates int
	per     time.Duration
	total   time.Duration // from the first fill's start to the racing fills' end
	racing  int
	rows    int
}

// rateResult is what a rateRun saw.
type rateResult struct {
	times    []time.Time // every Job's creationTimestamp, sorted
	worst    int         // the most creates in any window of per
	existing int         // Jobs left at the end (the rest were deleted: only the Lease's record remembers them)
	elapsed  time.Duration
}

// run runs r in a scenario of its own.
func (r rateRun) run(t *testing.T) rateResult {
	t.Helper()
	e, _, cfg := newTaskScenario(t, "64", "128Gi", r.rows, config{duration: "1s", extra: fmt.Sprintf(
		"limits:\n  maxActive: 1000\n  maxPerTick: 1000\n  capacity: off\n  rate: {creates: %d, per: %s}\ngc:\n  succeededRetention: 0s\n",
		r.creates, r.per)})
	l := e.ledger()
	e.worker()
	start := time.Now()
	fill := r.total.String()

	// The first fill: killed at its first create once it has made a window's worth (so in a later pass).
	killed := make(chan struct{})
	var armed sync.Once
	arm := make(chan struct{})
	cmd, out := e.startWith(e.kcfg, e.dsn, func(cmd *exec.Cmd, w io.Writer) io.Writer {
		return &killAtCreate{w: w, arm: arm, kill: func() {
			_ = cmd.Process.Signal(syscall.SIGKILL)
			close(killed)
		}}
	}, "tick", "--config", cfg, "--fill-for", fill)
	e.eventually(fmt.Sprintf("the first fill creating %d Jobs", r.creates), r.total, func() bool {
		return len(l.times()) >= r.creates
	})
	armed.Do(func() { close(arm) })
	select {
	case <-killed:
	case <-time.After(r.per + time.Minute):
		t.Fatalf("the first fill did not create again within its window:\n%s", out)
	}
	_ = cmd.Wait()
	t.Logf("the first fill was killed %s after it started, at its first create of a later pass", time.Since(start).Round(time.Second))

	// The racing fills, for the rest of the time.
	rest := r.total - time.Since(start)
	type started struct {
		cmd *exec.Cmd
		out *lockedBuffer
	}
	var fills []started
	for range r.racing { // started at once; they race for the Lease
		cmd, out := e.start(e.dsn, "tick", "--config", cfg, "--fill-for", rest.Round(time.Second).String())
		fills = append(fills, started{cmd, out})
	}
	var results []result
	for _, f := range fills {
		results = append(results, e.exited(f.cmd, f.out, rest+time.Minute, "its --fill-for and a pass"))
	}
	for i, res := range results {
		if res.code != 0 {
			t.Errorf("racing fill %d exited %d:\n%s", i, res.code, res.stderr)
		}
		passes, created := res.summaries(t), 0
		for _, s := range passes {
			created += s.Created
		}
		t.Logf("racing fill %d: %d passes created %d; %s", i, len(passes), created, fillReason(t, res))
	}
	e.sync(l)
	got := rateResult{times: l.times(), existing: len(e.jobs()), elapsed: time.Since(start)}
	for i := range got.times {
		j, _ := slices.BinarySearchFunc(got.times, got.times[i].Add(r.per), time.Time.Compare)
		got.worst = max(got.worst, j-i)
	}
	// status says when the next create is allowed, and why (rows still wait: the rate binds, not maxPerTick).
	st := e.jobsched("status", "--config", cfg)
	if want := fmt.Sprintf("(bound by limits.rate: %s, next create at ", rate.Limit{Creates: r.creates, Per: r.per}); st.code != 0 || !strings.Contains(st.stdout, want) {
		t.Errorf("status (exit %d) does not say %q:\n%s%s", st.code, want, st.stdout, st.stderr)
	}
	ls, err := e.kube.CoordinationV1().Leases(e.ns).Get(e.ctx, lease.Name("e2e"), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := rate.DecodeRecord(ls.Annotations[rate.Annotation]); err != nil {
		t.Errorf("the Lease's rate record: %v", err)
	}
	return got
}

// windows are the creates in each window of per from the first create on.
func (g rateResult) windows(per time.Duration) []int {
	if len(g.times) == 0 {
		return nil
	}
	var out []int
	for from := g.times[0]; !from.After(g.times[len(g.times)-1]); from = from.Add(per) {
		i, _ := slices.BinarySearchFunc(g.times, from, time.Time.Compare)
		j, _ := slices.BinarySearchFunc(g.times, from.Add(per), time.Time.Compare)
		out = append(out, j-i)
	}
	return out
}

// times are the creationTimestamps of every Job the ledger saw created, sorted (whole seconds: the API's
// resolution; with a per of whole seconds, N+1 creates less than per apart show less than per apart too).
func (l *ledger) times() []time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []time.Time
	for _, jobs := range l.byKey {
		for _, j := range jobs {
			out = append(out, j.CreationTimestamp.Time)
		}
	}
	slices.SortFunc(out, time.Time.Compare)
	return out
}

// killAtCreate passes writes to w and calls kill at the first "created Job" line written after arm is closed.
type killAtCreate struct {
	w    io.Writer
	arm  chan struct{}
	once sync.Once
	kill func()
}

func (k *killAtCreate) Write(p []byte) (int, error) {
	n, err := k.w.Write(p)
	select {
	case <-k.arm:
		if bytes.Contains(p, []byte(`"message":"created Job"`)) {
			k.once.Do(k.kill)
		}
	default:
	}
	return n, err
}

// TestRateFill: limits.rate {creates: 10, per: 20s} over two minutes of tick --fill-for, with a fill SIGKILLed in
// the middle of its creates and three fills racing after it, the succeeded Jobs deleted at once (so that only the
// Lease's record remembers them): never more than 10 creates in any 20 s, as the Jobs' creation times show. The
// achieved rate is logged (no timing threshold). JOBSCHED_TEST_RATE=creates,per,total,rows runs other figures
// (scripts/bench-rate.sh: the 30 per 1m over 5m), and JOBSCHED_TEST_RATE_RESULTS names a file it writes its
// row of figures to.
func TestRateFill(t *testing.T) {
	t.Parallel()
	r := rateRun{creates: 10, per: 20 * time.Second, total: 2 * time.Minute, racing: 3, rows: 100}
	if v := os.Getenv("JOBSCHED_TEST_RATE"); v != "" {
		f := strings.Split(v, ",")
		if len(f) != 4 {
			t.Fatalf("JOBSCHED_TEST_RATE=%q: want creates,per,total,rows", v)
		}
		var errs [4]error
		r.creates, errs[0] = strconv.Atoi(f[0])
		r.per, errs[1] = time.ParseDuration(f[1])
		r.total, errs[2] = time.ParseDuration(f[2])
		r.rows, errs[3] = strconv.Atoi(f[3])
		if err := errors.Join(errs[:]...); err != nil {
			t.Fatalf("JOBSCHED_TEST_RATE=%q: %v", v, err)
		}
	}
	got := r.run(t)
	perMinute := float64(len(got.times)) / got.elapsed.Minutes()
	t.Logf("%d creates in %s (%.1f a minute; %d Jobs left: the rest deleted); most in any %s: %d; per window from the first: %v",
		len(got.times), got.elapsed.Round(time.Second), perMinute, got.existing, r.per, got.worst, got.windows(r.per))
	if got.worst > r.creates {
		t.Errorf("%d creates within %s, more than limits.rate's %d", got.worst, r.per, r.creates)
	}
	if got.existing >= len(got.times) {
		t.Errorf("%d Jobs left of %d created: the retention deleted none, so the record was not needed", got.existing, len(got.times))
	}
	if len(got.times) <= r.creates {
		t.Errorf("%d creates in all: the drain did not go past its first window", len(got.times))
	}
	if out := os.Getenv("JOBSCHED_TEST_RATE_RESULTS"); out != "" {
		row := fmt.Sprintf("| %d per %s | %s | %d | %.1f | %d | %v |\n", r.creates, r.per, got.elapsed.Round(time.Second),
			len(got.times), perMinute, got.worst, got.windows(r.per))
		if err := os.WriteFile(out, []byte(row), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
