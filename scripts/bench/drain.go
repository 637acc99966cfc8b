package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/jobsched/jobsched/pkg/jobmeta"
	"github.com/jobsched/jobsched/pkg/kube"

	"github.com/jobsched/jobsched/pkg/testkit/kwokkit"
	"github.com/jobsched/jobsched/pkg/testkit/runinfo"
)

// ---------------------------------------------------------------------------------------------------------------
// The drain: the seed's scenario scaled to test time. A backlog of BENCH_DRAIN_ROWS rows (12), one kwok node of 6 CPU
// and task pods of 2500m (2 fit at once) that run 20 s (annotation jobsched.io/kwok-duration), and an invocation of
// `jobsched tick` started every 60 s as a `*/1` CronJob with concurrencyPolicy Forbid starts them (one still running
// at its time: that tick is skipped). A stand-in worker marks a row done once its pod runs. Side by side in one run:
// one pass per tick, and `--fill-for 50s` (with --timeout 8s, so that 50 s + 8 s stays below the schedule, as the
// CronJob's activeDeadlineSeconds must). Measured: the makespan (the first tick's start to the last Job's Complete
// as the bench's watch sees it) against the ideal (rows × duration / pods that fit), the pods that were ever
// Unschedulable, and the Jobs ever created per task (more than one is a duplicate). It needs the controller-manager
// (the Jobs make pods), so bench.sh runs it before it stops that. The results go to BENCH_DRAIN_RESULTS (default
// scripts/bench/results/drain.md) and to the table.

const (
	drainFit     = 2
	drainCPU     = "6"
	drainTaskCPU = "2500m"
)

type drainVariant struct {
	name string
	args []string // the tick's flags
	what string
}

// drainRun is what one variant measured.
type drainRun struct {
	variant        drainVariant
	makespan       time.Duration
	created        int
	duplicates     int
	unschedulable  int
	ticks, skipped int // invocations started; ticks skipped because the previous one still ran (Forbid)
	passes         int
	invocations    []invocation
	load           string
}

// invocation is one `jobsched tick` process of a drain.
type invocation struct {
	start, end time.Duration // from the first tick's start
	passes     int
	created    int
	code       int
	lastPass   string  // its last pass done line (refill, blocked)
	rssMB      float64 // its peak resident set (GNU time's: rss.go)
}

func (b *bench) drain() error {
	rows := envInt("BENCH_DRAIN_ROWS", 12)
	dur := time.Duration(envInt("BENCH_DRAIN_TASK_SECONDS", 20)) * time.Second
	every := time.Duration(envInt("BENCH_DRAIN_SCHEDULE_SECONDS", 60)) * time.Second
	fill := time.Duration(envInt("BENCH_DRAIN_FILL_SECONDS", 50)) * time.Second
	ideal := time.Duration(rows) * dur / drainFit
	variants := []drainVariant{
		{name: "once", what: "one pass per tick (today)", args: []string{"--timeout", "8s"}},
		{name: "fill", what: fmt.Sprintf("`--fill-for %s`", fill), args: []string{"--timeout", "8s", "--fill-for", fill.String()}},
	}
	var runs []drainRun
	for _, v := range variants {
		progress("  drain, %s…", v.what)
		r, err := b.drainOnce(v, rows, dur, every)
		if err != nil {
			return fmt.Errorf("%s: %w", v.what, err)
		}
		runs = append(runs, r)
		b.add(row{what: fmt.Sprintf("drain: %d rows, %d fit, %s tasks, a tick every %s; %s (%d ticks, %d passes, %d Unschedulable pods, %d duplicate Jobs)",
			rows, drainFit, dur, every, v.what, r.ticks, r.passes, r.unschedulable, r.duplicates),
			jobsched: fmt.Sprintf("makespan %.0f s", r.makespan.Seconds()), reference: fmt.Sprintf("ideal %.0f s (rows × duration / pods that fit)", ideal.Seconds()),
			ratio: fmt.Sprintf("%.2f", r.makespan.Seconds()/ideal.Seconds()), load: r.load})
	}
	return b.writeDrainResults(runs, rows, dur, every, ideal)
}

// drainOnce drains a fresh backlog through a fresh node with the variant's ticks.
func (b *bench) drainOnce(v drainVariant, rows int, dur, every time.Duration) (drainRun, error) {
	r := drainRun{variant: v}
	ns, table, pool := "bench-drain-"+v.name, "bench_drain_"+v.name, "drain-"+v.name
	if err := b.drainReset(ns, table, pool, rows); err != nil {
		return r, err
	}
	cfgFile, err := b.drainScenario(v.name, ns, table, pool, dur)
	if err != nil {
		return r, err
	}

	// What the cluster does, from informers started before the first tick.
	var mu sync.Mutex
	perKey := map[string]int{}
	complete := map[string]time.Time{} // Job name → when the bench saw it Complete
	unsched := map[string]bool{}
	worker := b.standIn(table)
	var lastComplete time.Time
	allDone := make(chan struct{})
	var closeOnce sync.Once
	ctx, cancel := context.WithCancel(b.ctx)
	defer cancel()
	onJob := func(typ watch.EventType, job *batchv1.Job) {
		added := typ == watch.Added
		mu.Lock()
		defer mu.Unlock()
		if added {
			perKey[job.Annotations[jobmeta.AnnotationTaskKey]]++
		}
		for _, c := range job.Status.Conditions {
			if c.Type == batchv1.JobComplete && c.Status == corev1.ConditionTrue {
				if _, seen := complete[job.Name]; !seen {
					complete[job.Name] = time.Now()
					lastComplete = time.Now()
				}
			}
		}
		if len(complete) >= rows {
			closeOnce.Do(func() { close(allDone) })
		}
	}
	if err := follow(ctx, b.admin.BatchV1().Jobs(ns), onJob); err != nil {
		return r, err
	}
	onPod := func(_ watch.EventType, pod *corev1.Pod) {
		mu.Lock()
		if kwokkit.Unschedulable(pod) {
			unsched[pod.Name] = true
		}
		mu.Unlock()
		worker.saw(pod)
	}
	if err := follow(ctx, b.admin.CoreV1().Pods(ns), onPod); err != nil {
		return r, err
	}

	c := b.cron(cfgFile, v.args, every, allDone)
	r.ticks, r.skipped, r.invocations, r.load = c.ticks, c.skipped, c.invocations, c.load
	mu.Lock()
	defer mu.Unlock()
	r.makespan = lastComplete.Sub(c.t0)
	for _, n := range perKey {
		r.created += n
		if n > 1 {
			r.duplicates += n - 1
		}
	}
	r.unschedulable = len(unsched)
	for _, inv := range r.invocations {
		r.passes += inv.passes
	}
	if len(complete) < rows {
		return r, fmt.Errorf("%d of %d Jobs completed", len(complete), rows)
	}
	return r, nil
}

// cronRun is what a played CronJob did.
type cronRun struct {
	t0             time.Time // the first tick's start
	ticks, skipped int       // invocations started; ticks skipped because the previous one still ran (Forbid)
	invocations    []invocation
	load           string // the machine's load average (1 min) once drained
}

// cron plays a CronJob whose schedule is every, with concurrencyPolicy Forbid: `jobsched tick args` at each time,
// skipped while the previous invocation runs, until allDone closes or 15 minutes have passed. The last invocation
// ends by itself once a pass finds the backlog empty; past a schedule after the drain, it gets SIGTERM.
func (b *bench) cron(cfgFile string, args []string, every time.Duration, allDone <-chan struct{}) cronRun {
	c := cronRun{t0: time.Now()}
	var proc *timedCmd
	var procDone chan invocation
	deadline := c.t0.Add(15 * time.Minute)
	for i := 0; ; i++ {
		if proc != nil {
			select {
			case inv := <-procDone:
				c.invocations, proc = append(c.invocations, inv), nil
			default:
			}
		}
		if proc == nil {
			c.ticks++
			proc, procDone = b.drainTick(cfgFile, args, c.t0)
		} else {
			c.skipped++
		}
		select {
		case <-allDone:
		case <-time.After(time.Until(c.t0.Add(time.Duration(i+1) * every))):
			if time.Now().Before(deadline) {
				continue
			}
			progress("    not drained after 15 minutes")
		}
		break
	}
	c.load = runinfo.LoadAvg(1)
	if proc != nil {
		select {
		case inv := <-procDone:
			c.invocations = append(c.invocations, inv)
		case <-time.After(every):
			progress("    the last invocation still runs a schedule after the drain: SIGTERM")
			_ = proc.terminate()
			c.invocations = append(c.invocations, <-procDone)
		}
	}
	return c
}

// follow watches the collection c from now on and calls fn with each change, until ctx ends; a watch that closes or
// fails is opened again from the last resourceVersion seen (the drain's namespaces are fresh: nothing is missed).
func follow[L metav1.ListInterface, T any](ctx context.Context, c kube.Collection[L], fn func(watch.EventType, *T)) error {
	l, err := c.List(ctx, metav1.ListOptions{Limit: 1})
	if err != nil {
		return err
	}
	rv := l.GetResourceVersion()
	// A watch that could not start, or that closed, is opened again 100ms later.
	go wait.UntilWithContext(ctx, func(ctx context.Context) {
		w, err := c.Watch(ctx, metav1.ListOptions{ResourceVersion: rv, AllowWatchBookmarks: true})
		if err != nil {
			return
		}
		defer w.Stop()
		for ev := range w.ResultChan() {
			if ev.Type == watch.Error && ctx.Err() != nil {
				return // the variant is over
			}
			if ev.Type == watch.Error { // expired, most likely: on from now (the bench misses what happened since)
				if l, err := c.List(ctx, metav1.ListOptions{Limit: 1}); err == nil {
					rv = l.GetResourceVersion()
				}
				progress("    the watch failed (%v): watching on from now", apierrors.FromObject(ev.Object))
				continue
			}
			if m, err := meta.Accessor(ev.Object); err == nil && m.GetResourceVersion() != "" {
				rv = m.GetResourceVersion()
			}
			if obj, ok := any(ev.Object).(*T); ok && ev.Type != watch.Bookmark {
				fn(ev.Type, obj)
			}
		}
	}, 100*time.Millisecond)
	return nil
}

// drainTick starts one invocation; its channel gets what it did once it exits.
func (b *bench) drainTick(cfgFile string, args []string, t0 time.Time) (*timedCmd, chan invocation) {
	done := make(chan invocation, 1)
	inv := invocation{start: time.Since(t0)}
	cmd, err := b.timedCommand(b.bin, append([]string{"--config", cfgFile, "--kubeconfig", b.kcfg, "--log-format", "json", "tick"}, args...)...)
	var stderr bytes.Buffer
	if err == nil {
		cmd.Stderr = &stderr
		err = cmd.Start()
	}
	if err != nil {
		inv.code = -1
		done <- inv
		return &timedCmd{}, done
	}
	go func() {
		err := cmd.Wait()
		inv.end = time.Since(t0)
		inv.rssMB, _ = cmd.rssMB() // 0 when time wrote none
		if ee, ok := err.(*exec.ExitError); ok {
			inv.code = ee.ExitCode()
		}
		if b.tickLogs != nil {
			fmt.Fprintf(b.tickLogs, "# the tick started at %.1fs\n%s", inv.start.Seconds(), stderr.Bytes())
		}
		sc := bufio.NewScanner(&stderr)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			var s struct {
				Message string `json:"message"`
				Created int    `json:"created"`
				Refill  *int   `json:"refill"`
				Blocked string `json:"blocked"`
			}
			if json.Unmarshal(sc.Bytes(), &s) == nil && s.Message == "pass done" {
				inv.passes++
				inv.created += s.Created
				inv.lastPass = fmt.Sprintf("created %d", s.Created)
				if s.Refill != nil {
					inv.lastPass += fmt.Sprintf(", refill %d", *s.Refill)
				}
				if s.Blocked != "" {
					inv.lastPass += ", blocked: " + s.Blocked
				}
			}
		}
		if inv.code != 0 {
			progress("    tick exited %d: %s", inv.code, tail(stderr.String()))
		}
		done <- inv
	}()
	return cmd, done
}

// drainReset makes the variant's namespace, table and node afresh.
func (b *bench) drainReset(ns, table, pool string, rows int) error {
	if _, err := b.admin.CoreV1().Namespaces().Create(b.ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	if err := b.clearJobs(ns); err != nil {
		return err
	}
	if err := b.fillTableFresh(table, rows); err != nil {
		return err
	}
	return b.kwokNode("bench-"+pool, pool, corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(drainCPU), corev1.ResourceMemory: resource.MustParse("16Gi"),
		corev1.ResourcePods: resource.MustParse("110")})
}

// kwokNode makes a kwok node name of pool (label jobsched.io/bench-pool) with rl as its capacity and allocatable,
// unless it exists, and waits until it is Ready and untainted.
func (b *bench) kwokNode(name, pool string, rl corev1.ResourceList) error {
	node := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"jobsched.io/bench-pool": pool, "type": "kwok"},
			Annotations: map[string]string{"kwok.x-k8s.io/node": "fake"}},
		Status: corev1.NodeStatus{Capacity: rl, Allocatable: rl},
	}
	if _, err := b.admin.CoreV1().Nodes().Create(b.ctx, node, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	// Ready, and untainted by the node lifecycle controller: until then neither kube-scheduler nor capacity uses it.
	if err := wait.PollUntilContextTimeout(b.ctx, 200*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		n, err := b.admin.CoreV1().Nodes().Get(ctx, node.Name, metav1.GetOptions{})
		return err == nil && kwokkit.NodeUsable(n), nil
	}); err != nil {
		return fmt.Errorf("node %s not Ready and untainted after 2 minutes: %w", node.Name, err)
	}
	return nil
}

// fillTableFresh makes table with n waiting rows, even when one of that size exists (the drain marks rows done).
func (b *bench) fillTableFresh(table string, n int) error {
	if _, err := b.db.ExecContext(b.ctx, "DROP TABLE IF EXISTS "+table); err != nil {
		return err
	}
	return b.fillTable(table, n)
}

// drainScenario writes the drain's config: capacity nodes (the bench runs jobsched outside a pod: no room kept for
// a tick pod), finished Jobs deleted at once, task pods of 2500m on the variant's node that run dur.
func (b *bench) drainScenario(name, ns, table, pool string, dur time.Duration) (string, error) {
	dir := filepath.Join(b.dir, "drain-"+name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	tpl := kwokkit.Job{Duration: dur.String(), PodSpec: kwokkit.Task{PoolLabel: "jobsched.io/bench-pool", Pool: pool,
		Image: "registry.example/worker:1.0", CPU: drainTaskCPU, Memory: "128Mi"}.PodSpec()}.YAML()
	cfg := benchConfig("drain", ns, table, `limits:
  maxActive: 10
  maxPerTick: 10
  capacity: nodes
  reserveForTick: false
gc:
  succeededRetention: 0s
`)
	if err := os.WriteFile(filepath.Join(dir, "job.yaml"), []byte(tpl), 0o644); err != nil {
		return "", err
	}
	file := filepath.Join(dir, "jobsched.yaml")
	return file, os.WriteFile(file, []byte(cfg), 0o644)
}

// writeDrainResults writes the drain's results file: the figures, then each invocation of each variant.
func (b *bench) writeDrainResults(runs []drainRun, rows int, dur, every, ideal time.Duration) error {
	var w strings.Builder
	fmt.Fprintf(&w, "# The drain (written by `BENCH_ONLY=drain scripts/bench.sh`; do not edit)\n\n")
	fmt.Fprintf(&w, "%s\n\n", os.Getenv("BENCH_MACHINE"))
	fmt.Fprintf(&w, "%d rows, one kwok node of %s CPU, task pods of %s (%d fit at once) that run %s, a tick every %s "+
		"(concurrencyPolicy Forbid: a tick whose predecessor still runs is skipped). Ideal makespan: rows × duration / pods that fit = %.0f s. "+
		"Makespan: from the first tick's start to the last Job's Complete condition as the bench's watch saw it.\n\n",
		rows, drainCPU, drainTaskCPU, drainFit, dur, every, ideal.Seconds())
	fmt.Fprintln(&w, "| ticks | makespan | × ideal | ticks started (skipped) | passes | Jobs created | duplicate Jobs | Unschedulable pods | load avg (1 min) |")
	fmt.Fprintln(&w, "|---|--:|--:|--:|--:|--:|--:|--:|--:|")
	for _, r := range runs {
		fmt.Fprintf(&w, "| %s | %.0f s | %.2f | %d (%d) | %d | %d | %d | %d | %s |\n", r.variant.what, r.makespan.Seconds(),
			r.makespan.Seconds()/ideal.Seconds(), r.ticks, r.skipped, r.passes, r.created, r.duplicates, r.unschedulable, r.load)
	}
	for _, r := range runs {
		writeInvocations(&w, r.variant.what, r.invocations)
	}
	return writeResultsFile("BENCH_DRAIN_RESULTS", "scripts/bench/results/drain.md", "drain", w.String())
}

// writeInvocations writes the table of a run's invocations, under what (the run's name).
func writeInvocations(w io.Writer, what string, invocations []invocation) {
	fmt.Fprintf(w, "\n%s, each invocation (seconds from the first tick's start):\n\n", what)
	fmt.Fprintln(w, "| started | ended | exit | passes | Jobs created | peak RSS | its last pass |")
	fmt.Fprintln(w, "|--:|--:|--:|--:|--:|--:|---|")
	for _, inv := range invocations {
		fmt.Fprintf(w, "| %.1f | %.1f | %d | %d | %d | %.1f MB | %s |\n", inv.start.Seconds(), inv.end.Seconds(), inv.code, inv.passes, inv.created, inv.rssMB, inv.lastPass)
	}
}
