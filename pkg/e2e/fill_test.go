//go:build integration

package e2e

import (
	"fmt"
	"os"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	"sigs.k8s.io/yaml"
)

// The end of a `tick --fill-for` invocation: one log line, "fill ended", says why.
const (
	fillEnded       = "fill ended"
	endBacklogEmpty = "the backlog is empty"
	endBlocked      = "blocked"
	endTerminated   = "terminated"
	endFailed       = "the pass failed"
)

// fillReason is the reason of the run's "fill ended" line ("" when it has none).
func fillReason(t *testing.T, r result) string {
	t.Helper()
	m := r.logLine(t, fillEnded)
	if m == nil {
		t.Fatalf("no %q line in:\n%s", fillEnded, r.stderr)
	}
	reason, _ := m["reason"].(string)
	return reason
}

// checkRefills: the pass done lines say which refill they are: 0, 1, 2, … in order.
func checkRefills(t *testing.T, passes []summary) {
	t.Helper()
	for i, s := range passes {
		if s.Refill != i {
			t.Errorf("pass %d says refill %d, want %d", i, s.Refill, i)
		}
	}
}

// TestFillDrains: with --fill-for, a backlog of 6 rows on a node that fits 2 task pods drains in one invocation:
// every row gets exactly one Job, no pod is ever Unschedulable, refills start at a task pod's end, and the
// invocation ends by itself once the backlog is empty, long before its --fill-for.
func TestFillDrains(t *testing.T) {
	t.Parallel()
	e, keys, cfg := newTaskScenario(t, "3", "8Gi", 6, config{cpu: "1200m", duration: "2s", extra: "gc:\n  succeededRetention: 0s\n"})
	l := e.ledger()
	unsched := e.unschedulableEver()
	e.worker()

	r := e.jobsched("tick", "--config", cfg, "--fill-for", "100s")
	if r.code != 0 {
		t.Fatalf("exit %d:\n%s", r.code, r.stderr)
	}
	if reason := fillReason(t, r); reason != endBacklogEmpty {
		t.Errorf("ended because %q, want %q:\n%s", reason, endBacklogEmpty, r.stderr)
	}
	passes := r.summaries(t)
	checkRefills(t, passes)
	created, atPodEnd := 0, 0
	for _, s := range passes {
		created += s.Created
		if s.Woke == "podEnd" {
			atPodEnd++
		}
	}
	if len(passes) < 3 || created != len(keys) {
		t.Errorf("%d passes created %d Jobs, want at least 3 passes (2 fit at once) creating %d:\n%s", len(passes), created, len(keys), r.stderr)
	}
	// The nodes bound each pass and a Job makes no pod after its pod's end (backoffLimit 0): a refill starts when
	// a task's pod leaves the node, about a second before the Job controller marks its Job Complete.
	if atPodEnd == 0 {
		t.Errorf("no refill woke at a pod's end (woke: podEnd):\n%s", r.stderr)
	}
	byKey := l.created()
	for _, k := range keys {
		if byKey[k] != 1 {
			t.Errorf("task %s had %d Jobs, want exactly 1", k, byKey[k])
		}
	}
	// (Unfinished Jobs may briefly be 3: a pod that succeeded frees its room before the Job controller marks its
	// Job Complete. The pods never overbook the node: none was Unschedulable.)
	t.Logf("peak unfinished Jobs: %d", l.peakUnfinished())
	if n := unsched(); n != 0 {
		t.Errorf("%d pods were Unschedulable, want none", n)
	}
}

// TestFillSIGTERM: SIGTERM while the invocation waits for a Job to finish ends it at once, with exit 0: its last
// line of a pass is the pass done line of the pass before the wait, and no pass starts after the signal. The task
// runs 10 minutes so that the wait cannot end any other way within the test.
func TestFillSIGTERM(t *testing.T) {
	t.Parallel()
	e, _, cfg := newTaskScenario(t, "2", "8Gi", 3, config{cpu: "1500m", duration: "10m"}) // 1 fits
	cmd, stderr := e.start(dsn, "tick", "--config", cfg, "--fill-for", "10m")
	e.eventually("the wait for a Job to finish", time.Minute, func() bool {
		return strings.Contains(stderr.String(), `"message":"waiting for a Job to finish"`)
	})
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	r := e.exited(cmd, stderr, 30*time.Second, "after SIGTERM (its --fill-for is 10m)")
	if r.code != 0 {
		t.Errorf("exit %d, want 0 (the pass before the wait did what it planned):\n%s", r.code, r.stderr)
	}
	passes := r.summaries(t)
	if len(passes) != 1 || passes[0].Created != 1 {
		t.Errorf("passes %+v, want the one pass that created the Job that fits:\n%s", passes, r.stderr)
	}
	if reason := fillReason(t, r); reason != endTerminated {
		t.Errorf("ended because %q, want %q", reason, endTerminated)
	}
	if n := len(e.jobs()); n != 1 {
		t.Errorf("%d Jobs, want 1", n)
	}
}

// TestFillBlocked: a pass blocked by an Unschedulable pod ends the invocation after that one pass, --fill-for or
// not: nothing can start until the pod does.
func TestFillBlocked(t *testing.T) {
	t.Parallel()
	// capacity off: the first tick creates 3 Jobs where 1 fits, and 2 pods go Unschedulable.
	e, _, cfg := newTaskScenario(t, "2", "8Gi", 6, config{cpu: "1500m", duration: "10m", extra: "limits:\n  capacity: \"off\"\n  maxPerTick: 3\n"})
	if s := e.tick(cfg).summary(t); s.Created != 3 {
		t.Fatalf("the first tick created %d, want 3", s.Created)
	}
	e.eventually("2 pods Unschedulable", time.Minute, func() bool {
		n := 0
		for _, p := range e.pods() {
			if unschedulable(&p) {
				n++
			}
		}
		return n == 2
	})
	r := e.jobsched("tick", "--config", cfg, "--fill-for", "10m")
	if r.code != 0 {
		t.Fatalf("exit %d:\n%s", r.code, r.stderr)
	}
	passes := r.summaries(t)
	if len(passes) != 1 || passes[0].Created != 0 || !strings.Contains(passes[0].Blocked, "Unschedulable") {
		t.Errorf("passes %+v, want one, blocked by the Unschedulable pods, creating nothing:\n%s", passes, r.stderr)
	}
	if reason := fillReason(t, r); !strings.HasPrefix(reason, endBlocked) {
		t.Errorf("ended because %q, want %q…", reason, endBlocked)
	}
}

// TestFillBacklogEnds: a pass that finds no row, or fewer rows than it had room for, ends the invocation after that
// one pass: nothing waits for room.
func TestFillBacklogEnds(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		rows    int
		created int
	}{
		{name: "no row", rows: 0, created: 0},
		{name: "fewer rows than room", rows: 1, created: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := newNodeEnv(t, "8", "16Gi")
			e.insert("task", tc.rows)
			cfg := e.writeConfig(config{duration: "3s"})
			r := e.jobsched("tick", "--config", cfg, "--fill-for", "10m")
			if r.code != 0 {
				t.Fatalf("exit %d:\n%s", r.code, r.stderr)
			}
			passes := r.summaries(t)
			if len(passes) != 1 || passes[0].Created != tc.created || passes[0].Refill != 0 {
				t.Errorf("passes %+v, want one (refill 0) creating %d:\n%s", passes, tc.created, r.stderr)
			}
			if reason := fillReason(t, r); reason != endBacklogEmpty {
				t.Errorf("ended because %q, want %q", reason, endBacklogEmpty)
			}
		})
	}
}

// TestFillRacing: two invocations with --fill-for started together (a manual pass next to the CronJob's) over 8
// rows with maxActive 2 create exactly one Job per row, and no pass creates more than maxActive. Without a
// coordination Lease, two passes that observe at the same moment do not see each other's creates, so what holds is
// the bound per overlapping pass: never more than 2 × maxActive unfinished Jobs at once (asserted here), not
// maxActive itself.
func TestFillRacing(t *testing.T) {
	t.Parallel()
	e := newNodeEnv(t, "8", "16Gi")
	keys := e.insert("task", 8)
	const maxActive = 2
	cfg := e.writeConfig(config{duration: "2s", extra: "limits:\n  maxActive: 2\ngc:\n  succeededRetention: 0s\n"})
	l := e.ledger()
	e.worker()
	cmdA, outA := e.start(dsn, "tick", "--config", cfg, "--fill-for", "100s")
	cmdB, outB := e.start(dsn, "tick", "--config", cfg, "--fill-for", "100s")
	doneA, doneB := make(chan error, 1), make(chan error, 1)
	go func() { doneA <- cmdA.Wait() }()
	go func() { doneB <- cmdB.Wait() }()
	var runs []result
	for i, c := range []struct {
		done chan error
		out  *lockedBuffer
	}{{doneA, outA}, {doneB, outB}} {
		select {
		case err := <-c.done:
			runs = append(runs, result{code: exitCode(err), stderr: c.out.String()})
		case <-time.After(2 * time.Minute):
			t.Fatalf("invocation %d still runs after 2 minutes (--fill-for 100s):\n%s", i, c.out)
		}
	}
	for i, r := range runs {
		if r.code != 0 {
			t.Errorf("invocation %d exited %d:\n%s", i, r.code, r.stderr)
		}
		passes := r.summaries(t)
		checkRefills(t, passes)
		for _, s := range passes {
			if s.Created > maxActive {
				t.Errorf("invocation %d: a pass created %d Jobs, maxActive is %d", i, s.Created, maxActive)
			}
		}
	}
	byKey := l.created()
	for _, k := range keys {
		if byKey[k] != 1 {
			t.Errorf("task %s had %d Jobs, want exactly 1", k, byKey[k])
		}
	}
	if p := l.peakUnfinished(); p > 2*maxActive {
		t.Errorf("%d Jobs were unfinished at once, want at most 2 × maxActive = %d", p, 2*maxActive)
	}
	t.Logf("peak unfinished Jobs: %d (maxActive %d)", l.peakUnfinished(), maxActive)
}

// TestCronJobCoversTheSchedule: the shipped CronJob runs tick with --fill-for that leaves a few seconds of its period
// (so that with source.notify or source.poll consecutive runs leave gaps of seconds: TestCronJobGaps measures them),
// its activeDeadlineSeconds lies above what a run may last (--fill-for, then a last pass of at most --timeout, then its
// reports: the backlog count and the metrics push, 10 s each, and the Events, 5 s), and a run that ends past the next
// one's time holds that one back by less than startingDeadlineSeconds (Forbid then starts it late, never skips it).
func TestCronJobCoversTheSchedule(t *testing.T) {
	t.Parallel()
	cj := shippedCronJob(t)
	fill, timeout := cronFlag(t, cj, "--fill-for"), cronFlag(t, cj, "--timeout")
	period := cronPeriod(t, cj)
	const reports = 25 * time.Second
	deadline := time.Duration(*cj.Spec.JobTemplate.Spec.ActiveDeadlineSeconds) * time.Second
	if fill <= 0 || deadline <= fill+timeout+reports {
		t.Errorf("activeDeadlineSeconds %s: want above --fill-for %s + --timeout %s + reports %s", deadline, fill, timeout, reports)
	}
	if gap := period - fill; gap <= 0 || gap > 10*time.Second {
		t.Errorf("--fill-for %s leaves %s of the schedule's %s: want a few seconds (at most 10s)", fill, gap, period)
	}
	starting := time.Duration(*cj.Spec.StartingDeadlineSeconds) * time.Second
	if cj.Spec.ConcurrencyPolicy != batchv1.ForbidConcurrent || deadline-period >= starting {
		t.Errorf("%s, a run ending up to %s past the next one's time, startingDeadlineSeconds %s: want Forbid and the "+
			"overrun below the starting deadline", cj.Spec.ConcurrencyPolicy, deadline-period, starting)
	}
}

// shippedCronJob is manifests/base/cronjob.yaml.
func shippedCronJob(t *testing.T) batchv1.CronJob {
	t.Helper()
	data, err := os.ReadFile("../../manifests/base/cronjob.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var cj batchv1.CronJob
	if err := yaml.UnmarshalStrict(data, &cj); err != nil {
		t.Fatal(err)
	}
	return cj
}

// cronFlag is the duration the CronJob's container passes with the flag name.
func cronFlag(t *testing.T, cj batchv1.CronJob, name string) time.Duration {
	t.Helper()
	args := cj.Spec.JobTemplate.Spec.Template.Spec.Containers[0].Args
	i := slices.Index(args, name)
	if i < 0 || i+1 == len(args) {
		t.Fatalf("the CronJob's args %v lack %s", args, name)
	}
	d, err := time.ParseDuration(args[i+1])
	if err != nil {
		t.Fatalf("%s %q: %v", name, args[i+1], err)
	}
	return d
}

// cronPeriod is the period of the CronJob's schedule, */N * * * *.
func cronPeriod(t *testing.T, cj batchv1.CronJob) time.Duration {
	t.Helper()
	var every int
	if _, err := fmt.Sscanf(cj.Spec.Schedule, "*/%d * * * *", &every); err != nil {
		t.Fatalf("schedule %q is not */N * * * *: %v", cj.Spec.Schedule, err)
	}
	return time.Duration(every) * time.Minute
}
