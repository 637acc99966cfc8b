package main

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/jobsched/jobsched/pkg/config"
	"github.com/jobsched/jobsched/pkg/jobmeta"
	"github.com/jobsched/jobsched/pkg/kube"
	"github.com/jobsched/jobsched/pkg/render"
	"github.com/jobsched/jobsched/pkg/scheduler"
	"github.com/jobsched/jobsched/pkg/testkit/apicalls"
	"github.com/jobsched/jobsched/pkg/testkit/kwokkit"
	"github.com/jobsched/jobsched/pkg/testkit/runinfo"
)

// ---------------------------------------------------------------------------------------------------------------
// Fill at cluster scale (`bench fill`, BENCH_ONLY=fill scripts/bench.sh): what `tick --fill-for` costs on a big
// cluster, this build beside a reference build (BENCH_FILL_REF, default a225b90: every refill a whole pass) in the
// same run. The bench grows one cluster of kwok nodes (bench-fill-node-*, 32 CPU, 110 pods each, Ready and
// heartbeating) with BENCH_FILL_PODS_PER_NODE (30) long-running pods bound to each (restartPolicy Always: kwok keeps
// them Running), size by size in ascending order:
//   - refill, at each of BENCH_FILL_NODES (default 500,5000): a fill run (`--fill-for`) of each build over
//     BENCH_FILL_ROWS (40) rows with capacity: nodes, maxActive 4 and tasks of 2 s that may run on every node, so
//     each Job that ends starts a refill pass, each pass's --timeout BENCH_FILL_TIMEOUT seconds (30; a reference run
//     that fails, as its whole-cluster lists may at 5,000 nodes, is said in its cells and this build's rows are still
//     written); each build's requests go through a counting proxy (proxy.go), which
//     reads the calls and bytes between two `pass done` lines: the first pass, then the median refill pass; and each
//     run's peak RSS (GNU time's, rss.go), beside one pass (`tick`, no --fill-for) of the reference at the smallest size;
//   - throughput, at BENCH_THROUGHPUT_NODES (1000): a fill run of this build draining BENCH_THROUGHPUT_ROWS (10,000)
//     rows of tasks of 1 s, capacity: nodes, maxActive BENCH_THROUGHPUT_ACTIVE (1,000; maxPerTick twice that: room
//     binds each pass), each pass's --timeout BENCH_THROUGHPUT_TIMEOUT seconds (60), with one queue and with five,
//     each between two bare client-go loops (16 workers, as jobsched's creates; no client-side limit; through a
//     counting proxy as jobsched's requests go) creating the same 10,000 Jobs: Jobs per second (created / from the
//     start to the last create), the ratio to the mean of those two loops, and the calls per refill pass; with
//     BENCH_THROUGHPUT_ROUNDS (1) above 1, that many rounds of both fills, each between two loops, and per number of
//     queues a row with the median of its rounds' ratios; with BENCH_THROUGHPUT_PLAIN=1, each round first runs one
//     pass without --fill-for (`tick`: it creates as a fill's first pass does and watches nothing) between two
//     loops, which parts the create path's cost from the fill's watches. Each run begins once the machine's CPU use
//     stops falling (settle), not in the tail of the one before. With maxActive 1,000 a fill creates as Jobs end (the
//     cluster's pace of completing them binds it); with maxActive 10,000 (and a --timeout a pass of 10,000
//     creates fits in) one pass creates them all, at the API server's pace, as the bare loop does.
// Growing the cluster stops at BENCH_FILL_BUDGET seconds (default 1800) per size; a size not reached is measured at
// what was made, and the results say so. The controller-manager must run (the Jobs make pods), so bench.sh runs this
// part before it stops it. Results: BENCH_FILL_RESULTS (default scripts/bench/results/fill.md), written by the run.

const (
	fillNodePrefix = "bench-fill-node-"
	fillFillerNS   = "bench-fill-filler"
	fillNodeCPU    = "32"
)

func (b *bench) fill() error {
	ref, refName := os.Getenv("JOBSCHED_FILL_REF_BIN"), cmp.Or(os.Getenv("BENCH_FILL_REF"), "reference")
	if ref == "" {
		return errors.New("JOBSCHED_FILL_REF_BIN is not set: run scripts/bench.sh, which builds BENCH_FILL_REF")
	}
	perNode := envInt("BENCH_FILL_PODS_PER_NODE", 30)
	sizes := ints(os.Getenv("BENCH_FILL_NODES"), []int{500, 5000})
	tput := envInt("BENCH_THROUGHPUT_NODES", 1000)
	budget := time.Duration(envInt("BENCH_FILL_BUDGET", 1800)) * time.Second
	type step struct {
		nodes      int
		throughput bool
	}
	var steps []step
	for _, n := range sizes {
		steps = append(steps, step{nodes: n})
	}
	if os.Getenv("BENCH_THROUGHPUT_ROWS") != "0" {
		steps = append(steps, step{nodes: tput, throughput: true})
	}
	slices.SortStableFunc(steps, func(a, b step) int { return a.nodes - b.nodes })
	var rows []row
	var notes []string
	var errs []error
	if n := os.Getenv("BENCH_FILL_NOTE"); n != "" { // what the person who ran it must say (a size left out, and why)
		notes = append(notes, n)
	}
	onePass := 0.0 // the reference's one pass at the smallest refill size: the RSS target
	for _, s := range steps {
		nodes, pods, note, err := b.growCluster(s.nodes, perNode, budget)
		if err != nil { // what was measured at the smaller sizes is written; the larger ones cannot be grown either
			rows = append(rows, row{what: fmt.Sprintf("growing the cluster to %s nodes, %s pods", thousands(s.nodes), thousands(s.nodes*perNode)),
				jobsched: "failed: " + cell(err), load: runinfo.LoadAvg(1)})
			errs = append(errs, fmt.Errorf("growing the cluster to %d nodes: %w", s.nodes, err))
			break
		}
		if note != "" {
			notes = append(notes, note)
		}
		size := fmt.Sprintf("%s nodes, %s pods", thousands(nodes), thousands(pods))
		if s.throughput {
			rs, err := b.throughput(size)
			rows = append(rows, rs...)
			if err != nil { // the rows measured so far are written, with why the rest are not
				rows = append(rows, row{what: "throughput at " + size, jobsched: "failed: " + cell(err), load: runinfo.LoadAvg(1)})
				errs = append(errs, fmt.Errorf("throughput: %w", err))
			}
			continue
		}
		rs, one, err := b.refill(ref, refName, size, onePass)
		if err != nil {
			rows = append(rows, row{what: "refill at " + size, jobsched: "failed: " + cell(err), load: runinfo.LoadAvg(1)})
			errs = append(errs, fmt.Errorf("refill at %s: %w", size, err))
			continue
		}
		if onePass == 0 {
			onePass = one
		}
		rows = append(rows, rs...)
	}
	table(os.Stdout, rows)
	if err := b.writeFillResults(refName, perNode, append(notes, b.fillNotes...), rows); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// cell is err as one table cell: one line, at most 300 characters (the run's log tail is in the bench's output).
func cell(err error) string {
	s := strings.Join(strings.Fields(strings.ReplaceAll(err.Error(), `\n`, " ")), " ")
	s = strings.ReplaceAll(s, "|", "/")
	if r := []rune(s); len(r) > 300 {
		s = string(r[:300]) + "…"
	}
	return s
}

// growCluster makes the fill nodes 0..nodes-1 (Ready and untainted) and perNode filler pods on each, unless they
// exist, within budget; it returns what the cluster holds and, when the budget ran out, a note saying so.
func (b *bench) growCluster(nodes, perNode int, budget time.Duration) (int, int, string, error) {
	if err := b.namespace(fillFillerNS); err != nil {
		return 0, 0, "", err
	}
	if err := wait.PollUntilContextTimeout(b.ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		_, err := b.admin.CoreV1().ServiceAccounts(fillFillerNS).Get(ctx, "default", metav1.GetOptions{})
		return err == nil, nil
	}); err != nil {
		return 0, 0, "", fmt.Errorf("no default ServiceAccount in %s: %w", fillFillerNS, err)
	}
	start := time.Now()
	rl := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(fillNodeCPU), corev1.ResourceMemory: resource.MustParse("128Gi"),
		corev1.ResourcePods: resource.MustParse("110")}
	if err := createWithin(nodes, start, budget, func(i int) error {
		_, err := b.admin.CoreV1().Nodes().Create(b.ctx, &corev1.Node{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s%d", fillNodePrefix, i), Labels: map[string]string{"jobsched.io/bench-fill": "true", "type": "kwok"},
				Annotations: map[string]string{"kwok.x-k8s.io/node": "fake"}},
			Status: corev1.NodeStatus{Capacity: rl, Allocatable: rl},
		}, metav1.CreateOptions{})
		return err
	}); err != nil {
		return 0, 0, "", err
	}
	usable := 0
	if err := wait.PollUntilContextTimeout(b.ctx, 2*time.Second, max(budget-time.Since(start), time.Minute), true, func(ctx context.Context) (bool, error) {
		usable = 0
		_, err := kube.List(ctx, b.admin.CoreV1().Nodes().List, metav1.ListOptions{LabelSelector: "jobsched.io/bench-fill=true", Limit: 1000}, func(n *corev1.Node) {
			if kwokkit.NodeUsable(n) {
				usable++
			}
		})
		return err == nil && usable >= nodes, nil
	}); err != nil && !wait.Interrupted(err) {
		return 0, 0, "", err
	}
	progress("  %d fill nodes usable after %s", usable, time.Since(start).Round(time.Second))
	n := min(usable, nodes)
	pods := n * perNode
	exists := map[string]bool{} // created by a run before: a create of each would cost the API server as much
	if _, err := kube.List(b.ctx, b.admin.CoreV1().Pods(fillFillerNS).List, metav1.ListOptions{Limit: 5000}, func(p *corev1.Pod) { exists[p.Name] = true }); err != nil {
		return 0, 0, "", err
	}
	if err := createWithin(pods, start, budget, func(i int) error {
		if exists[fmt.Sprintf("filler-%d", i)] {
			return nil
		}
		_, err := b.admin.CoreV1().Pods(fillFillerNS).Create(b.ctx, &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("filler-%d", i)},
			Spec: corev1.PodSpec{NodeName: fmt.Sprintf("%s%d", fillNodePrefix, i%n), AutomountServiceAccountToken: new(bool),
				Containers: []corev1.Container{{Name: "c", Image: "filler:1", Resources: corev1.ResourceRequirements{
					Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("128Mi")}}}}},
		}, metav1.CreateOptions{})
		return err
	}); err != nil {
		return 0, 0, "", err
	}
	have := 0
	if _, err := kube.List(b.ctx, b.admin.CoreV1().Pods(fillFillerNS).List, metav1.ListOptions{Limit: 5000}, func(*corev1.Pod) { have++ }); err != nil {
		return 0, 0, "", err
	}
	// Measured once kwok is done with them (each Running): until then it competes with the passes for the machine.
	// Every filler pod counts in its node's requests whatever its phase, so a budget that runs out first is measured
	// there, and the results say how many were not Running yet.
	notRunning := 0
	if err := wait.PollUntilContextTimeout(b.ctx, 5*time.Second, max(budget-time.Since(start), 5*time.Minute), true, func(ctx context.Context) (bool, error) {
		notRunning = 0
		_, err := kube.List(ctx, b.admin.CoreV1().Pods(fillFillerNS).List, metav1.ListOptions{FieldSelector: "status.phase!=Running", Limit: 5000},
			func(*corev1.Pod) { notRunning++ })
		return err == nil && notRunning == 0, nil
	}); err != nil && !wait.Interrupted(err) {
		return 0, 0, "", err
	}
	progress("  cluster: %d nodes, %d filler pods, %d of them not Running yet (%s)", n, have, notRunning, time.Since(start).Round(time.Second))
	note := ""
	if n < nodes || have < nodes*perNode || notRunning > 0 {
		note = fmt.Sprintf("asked for %s nodes and %s pods; BENCH_FILL_BUDGET (%s) ran out at %s nodes and %s pods (%s of them not Running yet), measured there",
			thousands(nodes), thousands(nodes*perNode), budget, thousands(n), thousands(have), thousands(notRunning))
	}
	return n, have, note, nil
}

// createWithin runs create(i) for i < n with 16 workers until budget has passed since start; an object that exists
// already is fine (a run before made it), and running out of budget is not an error (the caller counts what was made).
func createWithin(n int, start time.Time, budget time.Duration, create func(i int) error) error {
	err := parallel(16, n, func(i int) error {
		if time.Since(start) > budget {
			return errBudget
		}
		if err := create(i); !apierrors.IsAlreadyExists(err) {
			return err
		}
		return nil
	})
	if errors.Is(err, errBudget) {
		return nil
	}
	return err
}

// fillRun is what one counted fill run did.
type fillRun struct {
	passes  []tally // each pass's calls and bytes: from the previous pass done line (or the start) to its own
	created []int   // each pass's creates
	at      []time.Duration
	took    []time.Duration // each pass's duration (its pass done line)
	rssMB   float64
	heapMB  float64       // the largest heap its gctrace reported (BENCH_FILL_GODEBUG=gctrace=1), else 0
	cpu     time.Duration // user and system CPU time of the whole run
	start   time.Time
	slots   *slots // the worker's count of unfinished Jobs over the run
	code    int
	stderr  string
	retried string // why the run was run again, if it was
	// cpu0 is the machine's CPU use at the start, cpuAt at each pass done line (as at).
	cpu0  cpuSample
	cpuAt []cpuSample
}

// rss is the run's peak RSS, and its largest heap when it ran with gctrace.
func (r fillRun) rss() string {
	if r.heapMB == 0 {
		return fmt.Sprintf("%.1f MB", r.rssMB)
	}
	return fmt.Sprintf("%.1f MB (heap at most %.0f MiB by gctrace)", r.rssMB, r.heapMB)
}

// countedTick runs bin tick with args through a fresh counting proxy, reading the counts at each pass done line.
func (b *bench) countedTick(bin, cfgFile string, args ...string) (fillRun, error) {
	var r fillRun
	c, err := newCounter(b.kcfg)
	if err != nil {
		return r, err
	}
	defer c.Close()
	kcfg, err := c.Kubeconfig(b.dir)
	if err != nil {
		return r, err
	}
	global := []string{"--config", cfgFile, "--kubeconfig", kcfg, "--log-format", "json"}
	logFile := os.Getenv("BENCH_FILL_DEBUG_LOG") // keep each run's debug log (where a pass's time goes: "pass steps")
	if logFile != "" {
		global = append(global, "--log-level", "debug")
	}
	cmd, err := b.timedCommand(bin, append(append(global, "tick"), args...)...)
	if err != nil {
		return r, err
	}
	if v := os.Getenv("BENCH_FILL_GODEBUG"); v != "" { // e.g. gctrace=1: each collection's heap, into the debug log
		cmd.Env = append(os.Environ(), "GODEBUG="+v)
	}
	pipe, err := cmd.StderrPipe()
	if err != nil {
		return r, err
	}
	if r.cpu0, err = sampleCPU(); err != nil {
		return r, err
	}
	start := time.Now()
	r.start = start
	if err := cmd.Start(); err != nil {
		return r, err
	}
	var all bytes.Buffer
	last := c.snapshot()
	sc := bufio.NewScanner(pipe)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		all.Write(sc.Bytes())
		all.WriteByte('\n')
		var s summary
		if json.Unmarshal(sc.Bytes(), &s) != nil || s.Message != "pass done" {
			continue
		}
		now := c.snapshot()
		r.passes = append(r.passes, now.minus(last))
		r.created = append(r.created, s.Created)
		r.at = append(r.at, time.Since(start))
		r.took = append(r.took, time.Duration(s.Duration)*time.Millisecond)
		cpu, _ := sampleCPU() // read the moment before; a failure to read /proc shows as nothing used
		r.cpuAt = append(r.cpuAt, cpu)
		last = now
	}
	waitErr := cmd.Wait()
	r.stderr = all.String()
	if logFile != "" {
		f, ferr := os.OpenFile(logFile, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
		if ferr != nil {
			return r, ferr
		}
		_, ferr = f.WriteString(r.stderr)
		if ferr = errors.Join(ferr, f.Close()); ferr != nil {
			return r, ferr
		}
	}
	if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok { // time's and, once waited for, the run's
		r.cpu = time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	if r.rssMB, err = cmd.rssMB(); err != nil {
		return r, err
	}
	r.heapMB = gcTraceHeapMB(r.stderr)
	if ee, ok := waitErr.(*exec.ExitError); ok {
		r.code = ee.ExitCode()
	} else if waitErr != nil {
		return r, waitErr
	}
	if len(r.passes) == 0 {
		return r, fmt.Errorf("no pass done line (exit %d): %s", r.code, tail(r.stderr))
	}
	return r, nil
}

// refill measures one fill run of each build at the cluster's current size, and the reference's one pass.
func (b *bench) refill(ref, refName, size string, onePass float64) ([]row, float64, error) {
	const ns, table = "bench-fill", "bench_fill"
	rowsN := envInt("BENCH_FILL_ROWS", 40)
	if err := b.namespace(ns); err != nil {
		return nil, 0, err
	}
	cfgFile, err := b.fillScenario("fill", ns, table, 4, 100, "2s", 0)
	if err != nil {
		return nil, 0, err
	}
	timeout := fmt.Sprintf("%ds", envInt("BENCH_FILL_TIMEOUT", 30)) // a pass's: the reference lists the whole cluster in each
	// A run's --fill-for: at 5,000 nodes, a cluster whose filler pods are not all Running yet may end no Job in 3 minutes.
	fillArgs := []string{"--fill-for", fmt.Sprintf("%ds", envInt("BENCH_FILL_FOR_SECONDS", 180)), "--timeout", timeout}
	runs := map[string]fillRun{}
	var refErr error // the reference's run failed (at 5,000 nodes its pass may not list the cluster in time): said in its cells
	for _, who := range []string{"mine", "ref"} {
		bin := map[string]string{"ref": ref, "mine": b.bin}[who]
		progress("  refill at %s: %s…", size, filepath.Base(bin))
		r, err := b.fillRunOf(bin, cfgFile, ns, table, rowsN, 3, fillArgs...)
		if err != nil && who == "ref" {
			refErr = fmt.Errorf("%s: %w", filepath.Base(bin), err)
			continue
		}
		if err != nil {
			return nil, 0, fmt.Errorf("%s: %w", filepath.Base(bin), err)
		}
		if r.retried != "" {
			b.fillNotes = append(b.fillNotes, fmt.Sprintf("refill at %s, %s: run again, as its first run failed: %s", size, filepath.Base(bin), r.retried))
		}
		runs[who] = r
	}
	if onePass == 0 { // the target of the RSS row: one pass of the reference (no --fill-for), at the smallest size
		if err := b.clearJobs(ns); err != nil {
			return nil, 0, err
		}
		if err := b.fillTableFresh(table, rowsN); err != nil {
			return nil, 0, err
		}
		r, err := b.countedTick(ref, cfgFile, "--timeout", timeout)
		if err != nil {
			return nil, 0, err
		}
		onePass = r.rssMB
		b.fillOnePassAt = size
	}
	mine, theirs := runs["mine"], runs["ref"]
	first := func(r fillRun) string { return callsBytes(r.passes[0]) }
	refills := func(r fillRun) (string, float64, float64) {
		calls, bytes := make([]float64, 0, len(r.passes)-1), make([]float64, 0, len(r.passes)-1)
		for _, p := range r.passes[1:] {
			calls, bytes = append(calls, float64(p.total())), append(bytes, float64(p.bytes))
		}
		c, by := medianOf(calls), medianOf(bytes)
		return fmt.Sprintf("%.0f calls, %s (median of %d refills; %s)", c, kb(by), len(calls), kinds(medianPass(r.passes[1:]))), c, by
	}
	ms, mc, mb := refills(mine)
	load := runinfo.LoadAvg(1)
	if refErr != nil {
		failed := "failed: " + cell(refErr)
		return []row{
			{what: fmt.Sprintf("fill run at %s: the first pass", size), jobsched: first(mine), reference: failed, load: load},
			{what: fmt.Sprintf("fill run at %s: a refill pass (calls and response bytes between two pass done lines)", size), jobsched: ms, reference: failed, load: load},
			{what: fmt.Sprintf("fill run at %s: peak RSS of the whole run (%d passes)", size, len(mine.passes)), jobsched: mine.rss(),
				reference: fmt.Sprintf("target: ≤ %.1f MB, one pass (no --fill-for) at %s at %s", onePass, refName, b.fillOnePassAt),
				ratio:     fmt.Sprintf("%.2f of the target", mine.rssMB/max(onePass, 1)), load: load},
		}, onePass, nil
	}
	ts, tc, tb := refills(theirs)
	return []row{
		{what: fmt.Sprintf("fill run at %s: the first pass", size), jobsched: first(mine), reference: first(theirs) + " at " + refName, load: load},
		{what: fmt.Sprintf("fill run at %s: a refill pass (calls and response bytes between two pass done lines)", size),
			jobsched: ms, reference: ts + " at " + refName, ratio: fmt.Sprintf("%.2f calls, %.2f bytes", mc/max(tc, 1), mb/max(tb, 1)), load: load},
		{what: fmt.Sprintf("fill run at %s: peak RSS of the whole run (%d and %d passes)", size, len(mine.passes), len(theirs.passes)),
			jobsched: mine.rss(), reference: fmt.Sprintf("%s at %s; target: ≤ %.1f MB, one pass (no --fill-for) at %s at %s", theirs.rss(), refName, onePass, refName, b.fillOnePassAt),
			ratio: fmt.Sprintf("%.2f of the target", mine.rssMB/onePass), load: load},
	}, onePass, nil
}

// medianPass is the pass of the median total calls.
func medianPass(ps []tally) tally {
	s := slices.Clone(ps)
	slices.SortFunc(s, func(a, b tally) int { return a.total() - b.total() })
	return s[len(s)/2]
}

func callsBytes(t tally) string {
	return fmt.Sprintf("%d calls, %s (%s)", t.total(), kb(float64(t.bytes)), kinds(t))
}

// kinds lists a pass's calls by kind.
func kinds(t tally) string {
	var out []string
	for k, v := range t.calls {
		out = append(out, fmt.Sprintf("%s %d", k, v))
	}
	slices.Sort(out)
	return strings.Join(out, ", ")
}

func kb(n float64) string {
	if n >= 1e6 {
		return fmt.Sprintf("%.1f MB", n/1e6)
	}
	return fmt.Sprintf("%.1f kB", n/1e3)
}

// throughput drains BENCH_THROUGHPUT_ROWS rows with one queue and with five, each after a bare client creating the
// same Jobs.
func (b *bench) throughput(size string) ([]row, error) {
	const ns, table = "bench-throughput", "bench_throughput"
	n := envInt("BENCH_THROUGHPUT_ROWS", 10000)
	active := envInt("BENCH_THROUGHPUT_ACTIVE", 1000)
	if err := b.namespace(ns); err != nil {
		return nil, err
	}
	fillFor := fmt.Sprintf("%ds", envInt("BENCH_THROUGHPUT_FILL_SECONDS", 1800))
	timeout := fmt.Sprintf("%ds", envInt("BENCH_THROUGHPUT_TIMEOUT", 60)) // a pass's: a maxActive of all the rows makes them in one

	// Each fill between two bare loops, in the same cluster: each round of Jobs (their pods, Events and deletes)
	// leaves the API server slower for the next (the bare loop has run 51, then 39 Jobs/s, one fill apart), so a fill
	// is compared with the mean of the loop just before and the loop just after it, and the row gives both. The bare
	// loops run as a fill does, with the rows' worker (a watch of the Jobs, and each Job's row marked done in
	// PostgreSQL, on the same 2 cores).
	bareWhat := fmt.Sprintf("a bare client-go loop (%d workers, as jobsched's creates; no client-side limit) creating the same Jobs with the rows' worker running, as in a fill", scheduler.Workers)
	var rows []row
	var bareRates []float64 // each bare loop's, in order
	type fillAt struct {
		row    int     // its row
		queues int     // 0: none; plainKey: the pass without --fill-for
		rate   float64 // Jobs/s
		before int     // bare loops run before it
	}
	var fills []fillAt
	err := func() error {
		for _, v := range throughputRuns(bareWhat, envInt("BENCH_THROUGHPUT_ROUNDS", 1), os.Getenv("BENCH_THROUGHPUT_PLAIN") == "1") {
			if err := b.clearJobs(ns); err != nil {
				return err
			}
			if err := b.clearPods(ns); err != nil {
				return err
			}
			cfgFile, err := b.fillScenario(fmt.Sprintf("throughput-%d", v.queues), ns, table, active, 2*active, "1s", v.queues)
			if err != nil {
				return err
			}
			settled, err := settle(machineNow, time.Sleep)
			if err != nil {
				return err
			}
			api0, err := b.apiNow()
			if err != nil {
				return err
			}
			load := runinfo.LoadAvg(1)
			if v.bare {
				cfg, err := config.Load(cfgFile, "")
				if err != nil {
					return err
				}
				r := render.New(cfg, nil)
				jobs := make([]*batchv1.Job, n)
				for i := range jobs {
					if jobs[i], err = r.Job(taskRow(i), 1); err != nil {
						return err
					}
				}
				progress("  throughput at %s: %s…", size, v.what)
				d, used, unfinished, err := b.bareRun(ns, table, jobs)
				if err != nil {
					return err
				}
				rate := float64(n) / d.Seconds()
				bareRates = append(bareRates, rate)
				api, err := b.apiNow()
				if err != nil {
					return err
				}
				rows = append(rows, row{what: fmt.Sprintf("throughput at %s, %s Jobs: %s", size, thousands(n), v.what), jobsched: fmt.Sprintf("%.0f Jobs/s (%s; unfinished Jobs %.0f of %d on average; CPU meanwhile: %s; %s; %s)", rate, ms(d), unfinished, n, used, api.since(api0), settled), load: load})
				continue
			}
			progress("  throughput at %s: %s, %d rows…", size, v.what, n)
			minPasses := 2 // a refill at least: fewer says the first pass failed
			if active >= n {
				minPasses = 1 // one pass may make them all and read the backlog empty
			}
			args, how := []string{"--fill-for", fillFor, "--timeout", timeout}, "`tick --fill-for --timeout "+timeout+"`"
			if v.plain {
				args, how, minPasses = []string{"--timeout", timeout}, "`tick --timeout "+timeout+"` (one pass, nothing watched)", 1
			}
			r, err := b.fillRunOf(b.bin, cfgFile, ns, table, n, minPasses, args...)
			if err != nil {
				return err
			}
			api, err := b.apiNow()
			if err != nil {
				return err
			}
			if r.retried != "" {
				b.fillNotes = append(b.fillNotes, fmt.Sprintf("throughput, %s: run again, as its first run failed: %s", v.what, r.retried))
			}
			created, last := 0, 0
			for i, c := range r.created {
				created += c
				if c > 0 {
					last = i
				}
			}
			lastAt, inPasses := r.at[last], time.Duration(0)
			for _, d := range r.took[:last+1] {
				inPasses += d
			}
			rate := float64(created) / lastAt.Seconds()
			var calls, other []float64
			for _, p := range r.passes[1:] {
				calls = append(calls, float64(p.total()))
				other = append(other, float64(p.total()-p.calls["create jobs"]-p.calls["create events"]-p.calls["delete jobs"]))
			}
			per := "no refill"
			if len(calls) > 0 {
				per = fmt.Sprintf("%.0f calls per refill pass, %.0f of them not a Job's create or delete nor an Event (median of %d)", medianOf(calls), medianOf(other), len(calls))
			}
			fills = append(fills, fillAt{row: len(rows), queues: v.key(), rate: rate, before: len(bareRates)})
			rows = append(rows, row{what: fmt.Sprintf("throughput at %s, %s rows of 1 s tasks, maxActive %s, capacity nodes: %s, %s (%d passes)", size, thousands(n), thousands(active), how, v.what, len(r.passes)),
				jobsched: fmt.Sprintf("%.0f Jobs/s (%d created in %s, %.0f%% of it in passes, the rest waiting for a Job to end; unfinished Jobs %.0f of %d on average until the last create; %s; peak RSS %.1f MB, CPU %.1f s; CPU until the last create's pass ended: %s; the whole run's %s)",
					rate, created, ms(lastAt), 100*inPasses.Seconds()/lastAt.Seconds(), r.slots.mean(r.start, r.start.Add(lastAt)), active, per, r.rssMB, r.cpu.Seconds(), r.cpuAt[last].since(r.cpu0), api.since(api0)) + "; " + settled, load: load})
			if created < n {
				rows[len(rows)-1].jobsched += fmt.Sprintf("; drained %d of %d rows (exit %d)", created, n, r.code)
			}
		}
		return nil
	}()
	// A fill's reference: the bare loops on either side of it (one, if the other failed).
	ratios := map[int][]float64{} // each fill's ratio, by its queues
	for _, f := range fills {
		around := bareRates[:min(f.before+1, len(bareRates))][max(f.before-1, 0):]
		rows[f.row].reference, rows[f.row].ratio = bareReference(f.rate, around)
		if len(around) > 0 {
			ratios[f.queues] = append(ratios[f.queues], f.rate/meanOf(around))
		}
	}
	rows = append(rows, roundsMedians(size, ratios)...)
	if err != nil {
		return rows, err
	}
	return rows, b.clearJobs(ns)
}

// throughputRun is one run of the throughput part: a bare loop, or a fill with queues queues (0: none), or with
// plain one pass without --fill-for.
type throughputRun struct {
	what   string
	queues int
	bare   bool
	plain  bool
}

// plainKey is the key of the pass without --fill-for among the fills' ratios (theirs: their number of queues).
const plainKey = -1

func (r throughputRun) key() int {
	if r.plain {
		return plainKey
	}
	return r.queues
}

// throughputRuns is the order of the throughput part's runs: a bare loop, then each round's two fills, each followed
// by a bare loop, so each fill has a bare loop on either side. Round 1 runs one queue first, round 2 five queues
// first, and so on: neither fill always comes after the other. With plain, each round begins with one pass without
// --fill-for (one queue), followed by a bare loop too.
func throughputRuns(bareWhat string, rounds int, plain bool) []throughputRun {
	fills := map[int]string{0: "one queue", 5: "five queues"}
	runs := []throughputRun{{what: bareWhat + ", before the first fill", bare: true}}
	for r := 1; r <= max(rounds, 1); r++ {
		round := ""
		if rounds > 1 {
			round = fmt.Sprintf(", round %d", r)
		}
		order := []int{0, 5}
		if r%2 == 0 {
			order = []int{5, 0}
		}
		if plain {
			what := "one queue, one pass" + round
			runs = append(runs, throughputRun{what: what, plain: true},
				throughputRun{what: bareWhat + ", after " + what, bare: true})
		}
		for _, q := range order {
			runs = append(runs, throughputRun{what: fills[q] + round, queues: q},
				throughputRun{what: bareWhat + ", after " + fills[q] + round, bare: true})
		}
	}
	return runs
}

// roundsMedians is a row per number of queues with more than one fill: the median of their ratios to the bare loops
// around each.
func roundsMedians(size string, ratios map[int][]float64) []row {
	var rows []row
	for _, q := range slices.Sorted(maps.Keys(ratios)) {
		rs := ratios[q]
		if len(rs) < 2 {
			continue
		}
		what := "one queue"
		switch {
		case q == plainKey:
			what = "one queue, one pass without --fill-for"
		case q > 0:
			what = fmt.Sprintf("%d queues", q)
		}
		each := make([]string, len(rs))
		for i, r := range rs {
			each[i] = fmt.Sprintf("%.2f", r)
		}
		rows = append(rows, row{what: fmt.Sprintf("throughput at %s, %s: the median over %d rounds", size, what, len(rs)),
			jobsched: "each round's ratio to the bare loops around it: " + strings.Join(each, ", "),
			ratio:    fmt.Sprintf("%.2f of bare", medianOf(rs))})
	}
	return rows
}

// meanOf is the mean of xs (not empty).
func meanOf(xs []float64) float64 {
	sum := 0.0
	for _, x := range xs {
		sum += x
	}
	return sum / float64(len(xs))
}

// bareReference is a fill's reference and ratio cells: the target, the bare loops' rates around it and their mean.
func bareReference(rate float64, bare []float64) (string, string) {
	ref := "target ≥ 43 Jobs/s (Kueue's scheduler test)"
	if len(bare) == 0 {
		return ref, ""
	}
	mean, each := meanOf(bare), make([]string, len(bare))
	for i, r := range bare {
		each[i] = fmt.Sprintf("%.0f", r)
	}
	ref += fmt.Sprintf("; bare client, just before and just after: %s Jobs/s, mean %.0f", strings.Join(each, " and "), mean)
	return ref, fmt.Sprintf("%.2f of bare", rate/mean)
}

// bareRun runs bareCreateCounted over jobs, with the rows' worker of a fill run over table, and says how long it
// took, the CPU used meanwhile and how many Jobs were unfinished on average meanwhile, as the worker saw them.
func (b *bench) bareRun(ns, table string, jobs []*batchv1.Job) (time.Duration, string, float64, error) {
	ctx, stop := context.WithCancel(b.ctx)
	defer stop()
	sl := &slots{}
	if err := b.fillTableFresh(table, len(jobs)); err != nil {
		return 0, "", 0, err
	}
	if err := b.worker(ctx, ns, table, sl); err != nil {
		return 0, "", 0, err
	}
	cpu0, err := sampleCPU()
	if err != nil {
		return 0, "", 0, err
	}
	start := time.Now()
	d, err := b.bareCreateCounted(ns, jobs)
	if err != nil {
		return 0, "", 0, err
	}
	end := time.Now()
	cpu, err := sampleCPU()
	if err != nil {
		return 0, "", 0, err
	}
	return d, cpu.since(cpu0), sl.mean(start, end), nil
}

// bareCreateCounted is bareCreate through a counting proxy, as each fill run's requests go: the proxy is one more
// hop and more work on the same 2 cores, and a bare loop that skipped it would be compared with a client that did not.
func (b *bench) bareCreateCounted(ns string, jobs []*batchv1.Job) (time.Duration, error) {
	c, err := newCounter(b.kcfg)
	if err != nil {
		return 0, err
	}
	defer c.Close()
	kcfg, err := c.Kubeconfig(b.dir)
	if err != nil {
		return 0, err
	}
	client, err := bareClientOf(kcfg)
	if err != nil {
		return 0, err
	}
	return b.createAll(client, ns, jobs)
}

// fillRunOf runs a counted fill run of bin over a fresh table of rows (a worker marking them done) and no Job, and
// runs it once more when its first pass failed or it made fewer than minPasses passes (under load the API server
// may end a streaming list early); retried says why, when it was.
func (b *bench) fillRunOf(bin, cfgFile, ns, table string, rows, minPasses int, args ...string) (fillRun, error) {
	var first string
	for attempt := 0; ; attempt++ {
		if err := b.clearJobs(ns); err != nil {
			return fillRun{}, err
		}
		if err := b.fillTableFresh(table, rows); err != nil {
			return fillRun{}, err
		}
		ctx, cancel := context.WithCancel(b.ctx)
		sl := &slots{}
		if err := b.worker(ctx, ns, table, sl); err != nil {
			cancel()
			return fillRun{}, err
		}
		r, err := b.countedTick(bin, cfgFile, args...)
		cancel()
		r.slots = sl
		if err == nil && len(r.passes) >= minPasses && r.created[0] > 0 {
			r.retried = first
			return r, nil
		}
		why := fmt.Sprint(err)
		if err == nil {
			why = fmt.Sprintf("%d passes, the first created %d", len(r.passes), r.created[0])
		}
		if m := regexp.MustCompile(`"error":"([^"]*)"`).FindStringSubmatch(r.stderr); m != nil {
			why += ": " + m[1]
		}
		if attempt > 0 {
			return r, fmt.Errorf("%s; before, %s: %s", why, first, tail(r.stderr))
		}
		first = why
		progress("    run again: %s", why)
	}
}

// worker marks a row done as soon as its Job exists, as a worker that takes its task at once would (a row still
// waiting when its finished Job is deleted would be run again), until ctx ends.
func (b *bench) worker(ctx context.Context, ns, table string, sl *slots) error {
	return follow(ctx, b.admin.BatchV1().Jobs(ns), func(typ watch.EventType, job *batchv1.Job) {
		sl.see(typ, job)
		if typ != watch.Added {
			return
		}
		if _, err := b.db.ExecContext(b.ctx, "UPDATE "+table+" SET status = 'done' WHERE id = $1", job.Annotations[jobmeta.AnnotationTaskKey]); err != nil {
			progress("    marking %s done: %v", job.Name, err)
		}
	})
}

// slots counts the unfinished Jobs (created, neither Complete nor Failed, not deleted) as the worker's watch sees
// them, over time: how full a fill run kept its maxActive slots.
type slots struct {
	mu         sync.Mutex
	unfinished map[string]bool
	at         []time.Time // when the count changed
	count      []int       // to what
}

func (s *slots) see(typ watch.EventType, job *batchv1.Job) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.unfinished == nil {
		s.unfinished = map[string]bool{}
	}
	done := typ == watch.Deleted
	for _, c := range job.Status.Conditions {
		done = done || (c.Type == batchv1.JobComplete || c.Type == batchv1.JobFailed) && c.Status == corev1.ConditionTrue
	}
	if done {
		delete(s.unfinished, job.Name)
	} else {
		s.unfinished[job.Name] = true
	}
	s.at, s.count = append(s.at, time.Now()), append(s.count, len(s.unfinished))
}

// mean is the time-weighted mean of the count from start to end.
func (s *slots) mean(start, end time.Time) float64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	area, n, last := 0.0, 0, start
	for i, t := range s.at {
		if t.After(end) {
			break
		}
		if t.After(last) {
			area += float64(n) * t.Sub(last).Seconds()
			last = t
		}
		n = s.count[i]
	}
	area += float64(n) * end.Sub(last).Seconds()
	return area / end.Sub(start).Seconds()
}

// clearPods waits until ns has no pod left (a deleted Job's pods go after it).
func (b *bench) clearPods(ns string) error {
	return wait.PollUntilContextTimeout(b.ctx, time.Second, 10*time.Minute, true, func(ctx context.Context) (bool, error) {
		l, err := b.admin.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{Limit: 1})
		return err == nil && len(l.Items) == 0, err
	})
}

// fillScenario writes a fill config: capacity nodes, finished Jobs deleted at once, task pods of 100m that run dur
// on any node; queues 0: none, else that many, row i going to queue i mod queues.
func (b *bench) fillScenario(name, ns, table string, maxActive, maxPerTick int, dur string, queues int) (string, error) {
	dir := filepath.Join(b.dir, name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	tpl := kwokkit.Job{Duration: dur, PodSpec: kwokkit.Task{Image: "registry.example/worker:1.0", CPU: "100m", Memory: "64Mi"}.PodSpec()}.YAML()
	limits := fmt.Sprintf("limits:\n  maxActive: %d\n  maxPerTick: %d\n  capacity: nodes\n  reserveForTick: false\ngc:\n  succeededRetention: 0s\n", maxActive, maxPerTick)
	doc := benchConfig(name, ns, table, limits)
	if queues > 0 {
		var q strings.Builder
		for i := range queues {
			fmt.Fprintf(&q, "- name: q%d\n  source: {query: \"SELECT id, created_at FROM %s WHERE status = 'waiting' AND right(id, 1)::int %% %d = %d ORDER BY created_at\", key: id}\n  job: {template: job.yaml}\n",
				i, table, queues, i)
		}
		doc = fmt.Sprintf("name: %s\nnamespace: %s\nsource:\n  dsnEnv: %s\nenv:\n  prefix: TASK_\n%squeues:\n%s", name, ns, dsnEnv, limits, q.String())
	}
	if err := os.WriteFile(filepath.Join(dir, "job.yaml"), []byte(tpl), 0o644); err != nil {
		return "", err
	}
	file := filepath.Join(dir, "jobsched.yaml")
	return file, os.WriteFile(file, []byte(doc), 0o644)
}

// writeFillResults writes the fill part's own results file.
func (b *bench) writeFillResults(ref string, perNode int, notes []string, rows []row) error {
	about := fmt.Sprintf("kwok nodes of %s CPU and 110 pods, %d long-running pods bound to each; jobsched's requests counted by a proxy "+
		"in front of the API server (calls, and response bytes on the wire as the client reads them, a watch's as its events come), "+
		"between two `pass done` lines; peak RSS by GNU time (the run's own). Refill: capacity nodes, maxActive 4, tasks of 2 s that may run on "+
		"every node, each build in turn. See scripts/bench/README.md.", fillNodeCPU, perNode)
	if k, sc := os.Getenv("KCM_ARGS"), os.Getenv("SCHEDULER_ARGS"); k != "" || sc != "" {
		about += fmt.Sprintf(" The controller-manager ran with `%s`, the scheduler with `%s` (their defaults, 20 QPS and 5 Job syncs, complete a few Jobs a second).", k, sc)
	}
	if k := os.Getenv("KWOK_ARGS"); k != "" {
		about += " kwok ran with bench.sh's KwokConfiguration: 64 pod changes at once (its default, 4, runs a few pods a second to completion under load) and a node Lease renewed every 150 s (its default, every 10 s, is 500 writes a second at 5,000 nodes); nodes stay Ready by their status heartbeat (20–45 s)."
	}
	for _, n := range notes {
		about += "\n- " + n
	}
	return writeOwnResults(cmp.Or(os.Getenv("BENCH_FILL_RESULTS"), "scripts/bench/results/fill.md"),
		fmt.Sprintf("Fill at cluster scale, this build against %s (written by `BENCH_ONLY=fill scripts/bench.sh`; do not edit)", ref), about, rows)
}

// apiReading is the API server's counters that say whether a client fell behind during a run: a watcher it closed
// as unresponsive (its client watches again from where it was, or lists when that is too old) and the pod LISTs
// and WATCHes (a WATCH is counted when it ends: an informer's relist, a streaming list or a watch ended).
type apiReading struct{ reqs, closed map[string]float64 }

func (b *bench) apiNow() (apiReading, error) {
	data, err := apicalls.Read(b.ctx, b.admin)
	if err != nil {
		return apiReading{}, err
	}
	var r apiReading
	if r.reqs, err = apicalls.Parse(data); err != nil {
		return r, err
	}
	r.closed, err = apicalls.Unresponsive(data)
	return r, err
}

// since says what the API server counted between r0 and r.
func (r apiReading) since(r0 apiReading) string {
	var closed []string
	for _, k := range slices.Sorted(maps.Keys(r.closed)) {
		if d := r.closed[k] - r0.closed[k]; d > 0 {
			closed = append(closed, fmt.Sprintf("%s %.0f", k, d))
		}
	}
	if len(closed) == 0 {
		closed = []string{"none"}
	}
	grew := func(k string) float64 { return r.reqs[k] - r0.reqs[k] }
	return fmt.Sprintf("API server meanwhile: watches closed as unresponsive: %s; pod LISTs %.0f, pod WATCHes ended %.0f",
		strings.Join(closed, ", "), grew("LIST pods"), grew("WATCH pods")+grew("cluster-wide WATCH pods"))
}
