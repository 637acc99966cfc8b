package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/watch"
	resourcehelper "k8s.io/component-helpers/resource"

	"github.com/jobsched/jobsched/pkg/jobmeta"
	"github.com/jobsched/jobsched/pkg/testkit/kwokkit"
)

// ---------------------------------------------------------------------------------------------------------------
// The mixed drain (issue 55, `jobsched help sizes`): a fixed cluster of BENCH_SIZES_NODES kwok nodes (2) of 8 CPU
// and 16Gi, and a backlog of BENCH_SIZES_ROWS rows (64) in the query's order, three small tasks (500m, 1Gi) then one
// eight times larger (4 CPU, 8Gi), over and over, each task pod running BENCH_SIZES_TASK_SECONDS (15). The node has
// the tasks' own ratio of CPU to memory (1 CPU : 2Gi), so that either resource may be filled, and the shares of both
// say the same thing. Side by side in one run, each on nodes, a namespace and a table of its own:
//   - A: job.requestsFrom {cpu: cpu, memory: mem} with job.maxRequests {cpu: 4, memory: 8Gi}: each Job asks its
//     row's size;
//   - B: the same rows and query, one template sized for the largest task (4 CPU, 8Gi), no requestsFrom;
//   - C: as A, with job.backfill {since: since, maxWait: BENCH_SIZES_MAX_WAIT_SECONDS (600)}: smaller rows pass a
//     large one that does not fit now (the column since is the row's insert time).
//
// Both with capacity nodes, and invoked as the drain's fill side is: `tick --fill-for` (BENCH_SIZES_FILL_SECONDS,
// 50) started every BENCH_SIZES_SCHEDULE_SECONDS (60) by a played CronJob (Forbid). A stand-in worker marks a row
// done once its pod runs. Measured per side, from watches of the side's Jobs and pods started before the first tick:
// the drain (first tick's start to the last Job's Complete), the pods ever Unschedulable, the Jobs per task (more
// than one is a duplicate), and, every half second while rows waited (from the first pod bound to a node until
// every row has its Job), the CPU and memory requested by the task pods bound to a node and not finished, as shares
// of the side's allocatable; beside it what those tasks need by their rows' sizes (on side B, less than they ask).
// The results go to BENCH_SIZES_RESULTS (default scripts/bench/results/sizes.md), with the targets judged.
// BENCH_SIZES_ROUNDS (default 1) runs the three sides that many times, alternated (A, B, C, A, B, C, …), and judges
// the targets on each side's median over the rounds, every round's figure beside it (sizesRoundsReport).

// taskSize is what a task of the mixed backlog needs.
type taskSize struct{ cpu, memory string }

var (
	sizesSmall = taskSize{cpu: "500m", memory: "1Gi"}
	sizesLarge = taskSize{cpu: "4", memory: "8Gi"} // eight times the small task
	// sizesNode is the kwok node of the mixed drain: two large tasks, or sixteen small ones.
	sizesNode = taskSize{cpu: "8", memory: "16Gi"}
)

// sizesSampleEvery is how often the mixed drain samples the requests of the pods that run.
const sizesSampleEvery = 500 * time.Millisecond

// mixedBacklog is n tasks in the query's order: three small, then one large, over and over.
func mixedBacklog(n int) []taskSize { return backlogOf(n, sizesSmall, sizesLarge) }

// backlogOf is n tasks in the query's order: three of small, then one of large, over and over.
func backlogOf(n int, small, large taskSize) []taskSize {
	out := make([]taskSize, n)
	for i := range out {
		out[i] = small
		if i%4 == 3 {
			out[i] = large
		}
	}
	return out
}

// amounts is CPU in millicores and memory in bytes.
type amounts struct{ cpu, memory int64 }

func (s taskSize) amounts() amounts {
	cpu, memory := resource.MustParse(s.cpu), resource.MustParse(s.memory)
	return amounts{cpu: cpu.MilliValue(), memory: memory.Value()}
}

func (a amounts) plus(o amounts) amounts {
	return amounts{cpu: a.cpu + o.cpu, memory: a.memory + o.memory}
}

// sizesSample is, at one moment while rows waited, what the running task pods requested and what their rows need.
type sizesSample struct{ requested, needed amounts }

// shares are the means over the samples of each sample's share of the allocatable.
type shares struct {
	samples                 int
	cpu, memory             float64 // requested
	neededCPU, neededMemory float64 // what the rows of those pods need
}

// meanShares averages each sample's requested and needed amounts as shares of alloc (0 without samples).
func meanShares(samples []sizesSample, alloc amounts) shares {
	s := shares{samples: len(samples)}
	if len(samples) == 0 || alloc.cpu == 0 || alloc.memory == 0 {
		return s
	}
	for _, x := range samples {
		s.cpu += float64(x.requested.cpu) / float64(alloc.cpu)
		s.memory += float64(x.requested.memory) / float64(alloc.memory)
		s.neededCPU += float64(x.needed.cpu) / float64(alloc.cpu)
		s.neededMemory += float64(x.needed.memory) / float64(alloc.memory)
	}
	n := float64(len(samples))
	s.cpu, s.memory, s.neededCPU, s.neededMemory = s.cpu/n, s.memory/n, s.neededCPU/n, s.neededMemory/n
	return s
}

// sizesRun is what one side of the mixed drain measured.
type sizesRun struct {
	side, what    string
	drain         time.Duration
	shares        shares
	created       int
	duplicates    int
	unschedulable int
	cron          cronRun
}

func (r sizesRun) passes() int {
	n := 0
	for _, inv := range r.cron.invocations {
		n += inv.passes
	}
	return n
}

// sizesTarget is one of the targets, judged on the figures.
type sizesTarget struct {
	what, figure, target string
	met                  bool
}

// sizesTargets judges the targets for side a (named name: A or C): it drains in at most 0.6 of B's time, its
// pods request at least 85% of the allocatable CPU and memory while rows wait, and neither it nor B has an
// Unschedulable pod or a duplicate Job.
func sizesTargets(name string, a, b sizesRun) []sizesTarget {
	ratio := 0.0
	if b.drain > 0 {
		ratio = a.drain.Seconds() / b.drain.Seconds()
	}
	return []sizesTarget{
		{what: "drain time, " + name + " / B", figure: fmt.Sprintf("%.2f", ratio), target: "≤ 0.6", met: b.drain > 0 && ratio <= 0.6},
		{what: name + ": mean share of the allocatable CPU requested while rows waited", figure: percent(a.shares.cpu, a.shares.samples),
			target: "≥ 85%", met: a.shares.samples > 0 && a.shares.cpu >= 0.85},
		{what: name + ": mean share of the allocatable memory requested while rows waited", figure: percent(a.shares.memory, a.shares.samples),
			target: "≥ 85%", met: a.shares.samples > 0 && a.shares.memory >= 0.85},
		{what: "pods ever Unschedulable, " + name + " and B", figure: fmt.Sprintf("%d and %d", a.unschedulable, b.unschedulable),
			target: "0", met: a.unschedulable == 0 && b.unschedulable == 0},
		{what: "duplicate Jobs (more than one Job for a key), " + name + " and B", figure: fmt.Sprintf("%d and %d", a.duplicates, b.duplicates),
			target: "0", met: a.duplicates == 0 && b.duplicates == 0},
	}
}

func percent(share float64, samples int) string {
	if samples == 0 {
		return "no sample"
	}
	return fmt.Sprintf("%.1f%%", 100*share)
}

func metOrMissed(met bool) string {
	if met {
		return "met"
	}
	return "missed"
}

// sizesSetup is the mixed drain's sizes and invocation.
type sizesSetup struct {
	rows, nodes               int
	dur, every, fill, maxWait time.Duration
}

func (b *bench) sizes() error {
	set := sizesSetup{
		rows:  envInt("BENCH_SIZES_ROWS", 64),
		nodes: envInt("BENCH_SIZES_NODES", 2),
		dur:   time.Duration(envInt("BENCH_SIZES_TASK_SECONDS", 15)) * time.Second,
		every: time.Duration(envInt("BENCH_SIZES_SCHEDULE_SECONDS", 60)) * time.Second,
		fill:  time.Duration(envInt("BENCH_SIZES_FILL_SECONDS", 50)) * time.Second,
		// C's job.backfill.maxWait: longer than the drain, so that C shows backfill alone (the bound's own test is
		// pkg/e2e's TestSizedBackfill).
		maxWait: time.Duration(envInt("BENCH_SIZES_MAX_WAIT_SECONDS", 600)) * time.Second,
	}
	tasks := mixedBacklog(set.rows)
	var rounds [][3]sizesRun
	for k := range max(envInt("BENCH_SIZES_ROUNDS", 1), 1) {
		var runs [3]sizesRun
		for i, side := range []struct{ name, what string }{
			{"a", "A: job.requestsFrom (each row's size)"},
			{"b", "B: one template sized for the largest task"},
			{"c", "C: job.requestsFrom and job.backfill"},
		} {
			progress("  sizes, round %d, %s…", k+1, side.what)
			r, err := b.sizesOnce(side.name, side.what, set, tasks, k+1)
			if err != nil {
				return fmt.Errorf("%s: %w", side.what, err)
			}
			runs[i] = r
		}
		rounds = append(rounds, runs)
	}
	last := rounds[len(rounds)-1]
	report := sizesReport(os.Getenv("BENCH_MACHINE"), set, last[0], last[1], last[2])
	if len(rounds) > 1 {
		report = sizesRoundsReport(os.Getenv("BENCH_MACHINE"), set, rounds)
	}
	fmt.Print(report)
	return writeResultsFile("BENCH_SIZES_RESULTS", "scripts/bench/results/sizes.md", "sizes", report)
}

// sizesOnce drains the mixed backlog through the side's own nodes, in round (from 1). With BENCH_SIZES_TRACE=DIR it
// writes the round's trace there: SIDE-ROUND.samples, a line per sample (seconds from the first tick's start, the
// CPU requested in millicores, the rows with a Job), and SIDE-ROUND.log, each tick's log.
func (b *bench) sizesOnce(side, what string, set sizesSetup, tasks []taskSize, round int) (sizesRun, error) {
	r := sizesRun{side: side, what: what}
	ns, table, pool := "bench-sizes-"+side, "bench_sizes_"+side, "sizes-"+side
	if err := b.namespace(ns); err != nil {
		return r, err
	}
	if err := b.clearJobs(ns); err != nil {
		return r, err
	}
	if err := b.sizesTable(table, tasks); err != nil {
		return r, err
	}
	node := sizesNode.amounts()
	var alloc amounts
	for i := range set.nodes {
		rl := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(sizesNode.cpu), corev1.ResourceMemory: resource.MustParse(sizesNode.memory),
			corev1.ResourcePods: resource.MustParse("110")}
		if err := b.kwokNode(fmt.Sprintf("bench-%s-%d", pool, i), pool, rl); err != nil {
			return r, err
		}
		alloc = alloc.plus(node)
	}
	cfgFile, err := b.sizesScenario(side, ns, table, pool, set.rows, set.dur, "nodes", sizesSmall, sizesLarge, set.maxWait)
	if err != nil {
		return r, err
	}
	need := map[string]amounts{} // task key → what its row needs
	for i, t := range tasks {
		need[taskRow(i).Key] = t.amounts()
	}

	var mu sync.Mutex
	perKey := map[string]int{}
	complete := map[string]bool{}
	unsched := map[string]bool{}
	worker := b.standIn(table)
	type hold struct{ requested, needed amounts }
	held := map[string]hold{} // pod name → what it holds, while bound to a node and not finished
	var lastComplete time.Time
	bound := false // a pod has been bound: the drain has begun
	var samples []sizesSample
	var trace io.Writer // the samples' trace, if asked for
	if dir := os.Getenv("BENCH_SIZES_TRACE"); dir != "" {
		name := filepath.Join(dir, fmt.Sprintf("%s-%d", side, round))
		samplesFile, err := os.Create(name + ".samples")
		if err != nil {
			return r, err
		}
		defer samplesFile.Close()
		logFile, err := os.Create(name + ".log")
		if err != nil {
			return r, err
		}
		defer logFile.Close()
		trace, b.tickLogs = samplesFile, logFile
		defer func() { b.tickLogs = nil }()
	}
	allDone := make(chan struct{})
	var closeOnce sync.Once
	ctx, cancel := context.WithCancel(b.ctx)
	defer cancel()
	if err := follow(ctx, b.admin.BatchV1().Jobs(ns), func(typ watch.EventType, job *batchv1.Job) {
		mu.Lock()
		defer mu.Unlock()
		if typ == watch.Added {
			perKey[job.Annotations[jobmeta.AnnotationTaskKey]]++
		}
		for _, c := range job.Status.Conditions {
			if c.Type == batchv1.JobComplete && c.Status == corev1.ConditionTrue && !complete[job.Name] {
				complete[job.Name], lastComplete = true, time.Now()
			}
		}
		if len(complete) >= set.rows {
			closeOnce.Do(func() { close(allDone) })
		}
	}); err != nil {
		return r, err
	}
	if err := follow(ctx, b.admin.CoreV1().Pods(ns), func(typ watch.EventType, pod *corev1.Pod) {
		key := pod.Annotations[jobmeta.AnnotationTaskKey]
		mu.Lock()
		if kwokkit.Unschedulable(pod) {
			unsched[pod.Name] = true
		}
		finished := pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed
		if typ != watch.Deleted && pod.Spec.NodeName != "" && !finished {
			req := resourcehelper.PodRequests(pod, resourcehelper.PodResourcesOptions{})
			held[pod.Name] = hold{requested: amounts{cpu: req.Cpu().MilliValue(), memory: req.Memory().Value()}, needed: need[key]}
			bound = true
		} else {
			delete(held, pod.Name)
		}
		mu.Unlock()
		worker.saw(pod)
	}); err != nil {
		return r, err
	}
	// The sampler: while rows wait (some row has no Job yet), once the drain has begun.
	start := time.Now() // the first tick starts right after
	go func() {
		t := time.NewTicker(sizesSampleEvery)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			mu.Lock()
			if bound && len(perKey) < set.rows {
				var s sizesSample
				for _, h := range held {
					s.requested, s.needed = s.requested.plus(h.requested), s.needed.plus(h.needed)
				}
				samples = append(samples, s)
				if trace != nil {
					fmt.Fprintf(trace, "%.1f %d %d\n", time.Since(start).Seconds(), s.requested.cpu, len(perKey))
				}
			}
			mu.Unlock()
		}
	}()

	r.cron = b.cron(cfgFile, []string{"--timeout", "8s", "--fill-for", set.fill.String()}, set.every, allDone)
	cancel()
	mu.Lock()
	defer mu.Unlock()
	r.drain = lastComplete.Sub(r.cron.t0)
	r.shares = meanShares(samples, alloc)
	for _, n := range perKey {
		r.created += n
		if n > 1 {
			r.duplicates += n - 1
		}
	}
	r.unschedulable = len(unsched)
	if len(complete) < set.rows {
		return r, fmt.Errorf("%d of %d Jobs completed", len(complete), set.rows)
	}
	return r, nil
}

// sizesTable makes table afresh with tasks as waiting rows task-0000000… in created_at order, each with its cpu and
// mem columns, and since: when it was inserted (now).
func (b *bench) sizesTable(table string, tasks []taskSize) error {
	for _, s := range []string{
		"DROP TABLE IF EXISTS " + table,
		"CREATE TABLE " + table + " (id text PRIMARY KEY, status text NOT NULL, created_at timestamptz NOT NULL, cpu text NOT NULL, mem text NOT NULL, " +
			"since timestamptz NOT NULL DEFAULT now())",
	} {
		if _, err := b.db.ExecContext(b.ctx, s); err != nil {
			return fmt.Errorf("%s: %w", s, err)
		}
	}
	for i, t := range tasks {
		row := taskRow(i)
		if _, err := b.db.ExecContext(b.ctx, "INSERT INTO "+table+" (id, status, created_at, cpu, mem) VALUES ($1, 'waiting', $2, $3, $4)",
			row.Key, row.Columns[1].Value, t.cpu, t.memory); err != nil {
			return err
		}
	}
	return nil
}

// sizesScenario writes the side's config and template, with limits.capacity capacity and tasks that run dur: A takes
// each Job's requests from the row (the template's are small's, the default for a NULL), B asks large's for every
// row, C is A with job.backfill (maxWait).
func (b *bench) sizesScenario(side, ns, table, pool string, rows int, dur time.Duration, capacity string, small, large taskSize,
	maxWait time.Duration) (string, error) {
	dir := filepath.Join(b.dir, "sizes-"+capacity+"-"+side)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	task, sized := large, ""
	if side == "a" || side == "c" {
		task = small
		sized = fmt.Sprintf("  requestsFrom: {cpu: cpu, memory: mem}\n  maxRequests: {cpu: %q, memory: %q}\n", large.cpu, large.memory)
	}
	if side == "c" {
		sized += fmt.Sprintf("  backfill: {since: since, maxWait: %s}\n", maxWait)
	}
	tpl := kwokkit.Job{Duration: dur.String(), PodSpec: kwokkit.Task{PoolLabel: "jobsched.io/bench-pool", Pool: pool,
		Image: "registry.example/worker:1.0", CPU: task.cpu, Memory: task.memory}.PodSpec()}.YAML()
	cfg := fmt.Sprintf(`name: sizes
namespace: %s
source:
  dsnEnv: %s
  query: SELECT id, created_at, cpu, mem, since FROM %s WHERE status = 'waiting' ORDER BY created_at
  key: id
job:
  template: job.yaml
%senv:
  prefix: TASK_
limits:
  maxActive: %d
  maxPerTick: %d
  capacity: %s
  reserveForTick: false
gc:
  succeededRetention: 0s
`, ns, dsnEnv, table, sized, rows, rows, capacity)
	if err := os.WriteFile(filepath.Join(dir, "job.yaml"), []byte(tpl), 0o644); err != nil {
		return "", err
	}
	file := filepath.Join(dir, "jobsched.yaml")
	return file, os.WriteFile(file, []byte(cfg), 0o644)
}

// sizesHeader is the results file's title, machine and setup; rounds above 1 say how many, alternated.
func sizesHeader(machine string, set sizesSetup, rounds int) string {
	order := ""
	if rounds > 1 {
		order = fmt.Sprintf(", %d rounds (A, B, C, A, B, C, …)", rounds)
	}
	var w strings.Builder
	fmt.Fprintf(&w, "# Per-row sizes, with and without backfill, against one template (written by `BENCH_ONLY=sizes scripts/bench.sh`; do not edit)\n\n")
	if machine != "" {
		fmt.Fprintf(&w, "%s\n\n", machine)
	}
	large := 0
	for _, t := range mixedBacklog(set.rows) {
		if t == sizesLarge {
			large++
		}
	}
	fmt.Fprintf(&w, "%d kwok nodes of %s CPU and %s; %d rows in the query's order, three small tasks (%s CPU, %s) then one large "+
		"(%s CPU, %s), over and over (%d small, %d large), each task pod running %s. A: `job.requestsFrom: {cpu: cpu, memory: mem}`, "+
		"`job.maxRequests: {cpu: %s, memory: %s}`; B: one template of %s CPU and %s, no requestsFrom; C (when run): A with "+
		"`job.backfill: {since: since, maxWait: %s}`, since being each row's insert time. All `capacity: nodes`, "+
		"`tick --timeout 8s --fill-for %s` started every %s (concurrencyPolicy Forbid), one side after the other%s. "+
		"Drain: from the first tick's start to the last Job's Complete condition as the bench's watch saw it. "+
		"Shares: every %s while rows waited (from the first pod bound to a node until every row had its Job), the requests of the "+
		"task pods bound to a node and not finished (kube-scheduler's sum, from the bench's pod watch) over the side's allocatable, "+
		"averaged; \"needed\" is the same for what those pods' rows need (on B, less than they ask).\n\n",
		set.nodes, sizesNode.cpu, sizesNode.memory, set.rows, sizesSmall.cpu, sizesSmall.memory, sizesLarge.cpu, sizesLarge.memory,
		set.rows-large, large, set.dur, sizesLarge.cpu, sizesLarge.memory, sizesLarge.cpu, sizesLarge.memory, set.maxWait, set.fill, set.every, order, sizesSampleEvery)
	return w.String()
}

// sizesReport is the mixed drain's results file: the setup, the sides (c: none when its what is empty), the targets
// judged, each invocation.
func sizesReport(machine string, set sizesSetup, a, b, c sizesRun) string {
	runs := []sizesRun{a, b}
	if c.what != "" {
		runs = append(runs, c)
	}
	var w strings.Builder
	w.WriteString(sizesHeader(machine, set, 1))
	fmt.Fprintln(&w, "| side | drain | × B | CPU requested | memory requested | CPU needed | memory needed | samples | ticks started (skipped) | passes | Jobs created | duplicate Jobs | Unschedulable pods | load avg (1 min) |")
	fmt.Fprintln(&w, "|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|")
	for _, r := range runs {
		ratio := "–"
		if b.drain > 0 {
			ratio = fmt.Sprintf("%.2f", r.drain.Seconds()/b.drain.Seconds())
		}
		fmt.Fprintf(&w, "| %s | %.0f s | %s | %s | %s | %s | %s | %d | %d (%d) | %d | %d | %d | %d | %s |\n", r.what, r.drain.Seconds(), ratio,
			percent(r.shares.cpu, r.shares.samples), percent(r.shares.memory, r.shares.samples),
			percent(r.shares.neededCPU, r.shares.samples), percent(r.shares.neededMemory, r.shares.samples), r.shares.samples,
			r.cron.ticks, r.cron.skipped, r.passes(), r.created, r.duplicates, r.unschedulable, r.cron.load)
	}
	fmt.Fprintln(&w, "\nThe issue's targets, judged on these figures:")
	fmt.Fprintln(&w, "\n| target | figure | issue's target | |")
	fmt.Fprintln(&w, "|---|--:|--:|---|")
	for _, t := range sizesTargets("A", a, b) {
		fmt.Fprintf(&w, "| %s | %s | %s | %s |\n", t.what, t.figure, t.target, metOrMissed(t.met))
	}
	if c.what != "" {
		for _, t := range sizesTargets("C", c, b) {
			fmt.Fprintf(&w, "| %s | %s | %s | %s |\n", t.what, t.figure, t.target, metOrMissed(t.met))
		}
	}
	for _, r := range runs {
		writeInvocations(&w, r.what, r.cron.invocations)
	}
	return w.String()
}

// sizesRoundsReport is the report of several rounds of the three sides: each round's figures, then per side the
// median over the rounds with every round's figure beside it, and the targets judged on the medians (a
// ratio to B is each round's own); the invocations of the last round.
func sizesRoundsReport(machine string, set sizesSetup, rounds [][3]sizesRun) string {
	var w strings.Builder
	w.WriteString(sizesHeader(machine, set, len(rounds)))
	fmt.Fprintln(&w, "| round | side | drain | × B | CPU requested | memory requested | passes | Jobs created | duplicate Jobs | Unschedulable pods | load avg (1 min) |")
	fmt.Fprintln(&w, "|--:|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|")
	for k, runs := range rounds {
		for _, r := range runs {
			fmt.Fprintf(&w, "| %d | %s | %.0f s | %s | %s | %s | %d | %d | %d | %d | %s |\n", k+1, r.what, r.drain.Seconds(), ratioTo(r, runs[1]),
				percent(r.shares.cpu, r.shares.samples), percent(r.shares.memory, r.shares.samples), r.passes(), r.created, r.duplicates,
				r.unschedulable, r.cron.load)
		}
	}
	fmt.Fprintf(&w, "\nThe issue's targets, judged on the median of the %d rounds (each round's figure beside it, in round order):\n", len(rounds))
	fmt.Fprintln(&w, "\n| target | median | rounds | issue's target | |")
	fmt.Fprintln(&w, "|---|--:|---|--:|---|")
	for _, side := range []struct {
		name string
		i    int
	}{{"A", 0}, {"C", 2}} {
		var ratios, cpu, memory, unsched, dups []float64
		for _, runs := range rounds {
			a, b := runs[side.i], runs[1]
			if b.drain > 0 {
				ratios = append(ratios, a.drain.Seconds()/b.drain.Seconds())
			}
			cpu, memory = append(cpu, 100*a.shares.cpu), append(memory, 100*a.shares.memory)
			unsched = append(unsched, float64(a.unschedulable+b.unschedulable))
			dups = append(dups, float64(a.duplicates+b.duplicates))
		}
		// row is one target: xs each round's figure, printed with format.
		row := func(what, format string, xs []float64, target string, met func(float64) bool) {
			if len(xs) == 0 {
				fmt.Fprintf(&w, "| %s | – | – | %s | missed |\n", what, target)
				return
			}
			m := medianOf(xs)
			each := make([]string, len(xs))
			for i, x := range xs {
				each[i] = fmt.Sprintf(format, x)
			}
			fmt.Fprintf(&w, "| %s | "+format+" | %s | %s | %s |\n", what, m, strings.Join(each, ", "), target, metOrMissed(met(m)))
		}
		row("drain time, "+side.name+" / B", "%.2f", ratios, "≤ 0.6", func(m float64) bool { return m <= 0.6 })
		row(side.name+": mean share of the allocatable CPU requested while rows waited", "%.1f%%", cpu, "≥ 85%", func(m float64) bool { return m >= 85 })
		row(side.name+": mean share of the allocatable memory requested while rows waited", "%.1f%%", memory, "≥ 85%", func(m float64) bool { return m >= 85 })
		row("pods ever Unschedulable, "+side.name+" and B", "%.0f", unsched, "0", func(m float64) bool { return m == 0 })
		// A duplicate is a fault, not a figure: judged on every round.
		row("duplicate Jobs (more than one Job for a key), "+side.name+" and B, in any round", "%.0f", dups, "0",
			func(float64) bool { return slices.Max(dups) == 0 })
	}
	last := rounds[len(rounds)-1]
	for _, r := range last {
		writeInvocations(&w, fmt.Sprintf("%s (round %d)", r.what, len(rounds)), r.cron.invocations)
	}
	return w.String()
}

// ratioTo is r's drain over b's, "–" without b's.
func ratioTo(r, b sizesRun) string {
	if b.drain <= 0 {
		return "–"
	}
	return fmt.Sprintf("%.2f", r.drain.Seconds()/b.drain.Seconds())
}
