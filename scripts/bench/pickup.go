package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/jobsched/jobsched/pkg/jobmeta"
	"github.com/jobsched/jobsched/pkg/testkit/kwokkit"
	"github.com/jobsched/jobsched/pkg/testkit/runinfo"
)

// ---------------------------------------------------------------------------------------------------------------
// The pickup (issue 54): how long a row waits from its insert to its Job, in one run, side by side:
//   - notify: source.notify with the README's trigger, the shipped CronJob (every BENCH_PICKUP_PERIOD_SECONDS, 180,
//     --fill-for the period less 5 s, --timeout 20s);
//   - poll:   source.poll: 2s, the same CronJob;
//   - today:  the build before the issue (BENCH_PICKUP_REF, default de8d9ba) with its shipped CronJob (*/3,
//     --fill-for 2m: a run ends once the backlog is empty).
// The CronJob is played by the bench (kwok runs no container): an invocation at each period's start, held back while
// the last one runs and started when it ends (Forbid within startingDeadlineSeconds, as the controller does).
// BENCH_PICKUP_INSERTS (200) rows are inserted one at a time at random moments across BENCH_PICKUP_PERIODS (3)
// periods; each is timed by the database's clock at its statement's end (RETURNING clock_timestamp(), just before
// its commit) and its Job by a watch, on one machine. Then, with notify: the passes of a storm of 1,000 single-row
// inserts and of one 1,000-row insert (rows the query does not select), while a run waits; and the CPU time and peak
// RSS of a run that waits BENCH_PICKUP_IDLE_SECONDS (600; 0: neither the storm nor the idle run) with no work. Each
// row's latency is counted in all, and apart by whether an invocation was running at its insert (the issue's "while
// a run is active") or none was (between runs: the CronJob's gap). BENCH_PICKUP_MODES (notify,poll,today) picks the
// sides. The Jobs make no pods (bench.sh runs it with the controller-manager stopped; capacity off). Results:
// BENCH_PICKUP_RESULTS (scripts/bench/results/pickup.md).

// pickupMode is one side of the comparison.
type pickupMode struct {
	name, what string
	bin        string
	source     string // lines added to the config's source:
	fill       time.Duration
	trigger    bool
}

// pickupRun is what one mode measured.
type pickupRun struct {
	mode                   pickupMode
	latencies              []time.Duration
	missing, invocations   int
	p50, p99, max          time.Duration
	active, between        []time.Duration // the latencies of rows inserted while an invocation ran, and of the others
	stormSingle, stormBulk int             // passes
	idleCPU                time.Duration
	idleRSSMB              float64
	idleFor                time.Duration
	load                   string
}

func (b *bench) pickup() error {
	period := time.Duration(envInt("BENCH_PICKUP_PERIOD_SECONDS", 180)) * time.Second
	inserts, periods := envInt("BENCH_PICKUP_INSERTS", 200), envInt("BENCH_PICKUP_PERIODS", 3)
	refBin, ref := os.Getenv("JOBSCHED_PICKUP_REF_BIN"), os.Getenv("BENCH_PICKUP_REF")
	modes := []pickupMode{
		{name: "notify", what: "source.notify", bin: b.bin, source: "  notify: bench_pickup\n", fill: period - 5*time.Second, trigger: true},
		{name: "poll", what: "source.poll: 2s", bin: b.bin, source: "  poll: 2s\n", fill: period - 5*time.Second},
	}
	if refBin != "" {
		modes = append(modes, pickupMode{name: "today", what: "the build before, " + ref + " (--fill-for 2m)", bin: refBin, fill: 2 * time.Minute})
	}
	if only := os.Getenv("BENCH_PICKUP_MODES"); only != "" {
		modes = slices.DeleteFunc(modes, func(m pickupMode) bool { return !slices.Contains(strings.Split(only, ","), m.name) })
	}
	idle := time.Duration(envInt("BENCH_PICKUP_IDLE_SECONDS", 600)) * time.Second
	if os.Getenv("BENCH_PICKUP_IDLE_SECONDS") == "0" { // envInt reads 0 as unset
		idle = 0
	}
	var runs []pickupRun
	for _, m := range modes {
		progress("  pickup, %s…", m.what)
		r, err := b.pickupOnce(m, period, inserts, periods)
		if err != nil {
			return fmt.Errorf("%s: %w", m.what, err)
		}
		if m.trigger && idle > 0 {
			if r.stormSingle, r.stormBulk, err = b.pickupStorm(m); err != nil {
				return fmt.Errorf("storm: %w", err)
			}
			r.idleFor = idle
			if r.idleCPU, r.idleRSSMB, err = b.pickupIdle(m, r.idleFor); err != nil {
				return fmt.Errorf("idle: %w", err)
			}
		}
		runs = append(runs, r)
	}
	return writePickupResults(runs, period, inserts, periods)
}

// pickupScenario makes the mode's namespace, table (with the README's trigger for notify) and config.
func (b *bench) pickupScenario(m pickupMode) (ns, table, cfgFile string, err error) {
	ns, table = "bench-pickup-"+m.name, "bench_pickup_"+m.name
	if _, err := b.admin.CoreV1().Namespaces().Create(b.ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return "", "", "", err
	}
	if err := b.clearJobs(ns); err != nil {
		return "", "", "", err
	}
	stmts := []string{"DROP TABLE IF EXISTS " + table,
		"CREATE TABLE " + table + " (id text PRIMARY KEY, status text NOT NULL DEFAULT 'waiting', created_at timestamptz NOT NULL DEFAULT now())",
		"CREATE INDEX ON " + table + " (created_at) WHERE status = 'waiting'"}
	if m.trigger {
		stmts = append(stmts, `CREATE OR REPLACE FUNCTION bench_pickup_notify() RETURNS trigger LANGUAGE plpgsql AS
  $$BEGIN PERFORM pg_notify('bench_pickup', ''); RETURN NULL; END$$`,
			"CREATE TRIGGER jobsched_inserted AFTER INSERT ON "+table+" FOR EACH STATEMENT EXECUTE FUNCTION bench_pickup_notify()")
	}
	for _, s := range stmts {
		if _, err := b.db.ExecContext(b.ctx, s); err != nil {
			return "", "", "", fmt.Errorf("%s: %w", s, err)
		}
	}
	dir := filepath.Join(b.dir, "pickup-"+m.name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", "", "", err
	}
	tpl := kwokkit.Job{Duration: "1s", PodSpec: kwokkit.Task{Image: "registry.example/worker:1.0"}.PodSpec()}.YAML()
	cfg := strings.Replace(benchConfig("pickup", ns, table, "limits:\n  maxActive: 100000\n  maxPerTick: 1000\n  capacity: \"off\"\n"),
		"source:\n", "source:\n"+m.source, 1)
	if err := os.WriteFile(filepath.Join(dir, "job.yaml"), []byte(tpl), 0o644); err != nil {
		return "", "", "", err
	}
	cfgFile = filepath.Join(dir, "jobsched.yaml")
	return ns, table, cfgFile, os.WriteFile(cfgFile, []byte(cfg), 0o644)
}

// pickupOnce inserts rows at random moments while the bench plays the CronJob, and times each row's Job.
func (b *bench) pickupOnce(m pickupMode, period time.Duration, inserts, periods int) (pickupRun, error) {
	r := pickupRun{mode: m}
	ns, table, cfgFile, err := b.pickupScenario(m)
	if err != nil {
		return r, err
	}
	ctx, cancel := context.WithCancel(b.ctx)
	defer cancel()
	var mu sync.Mutex
	seen := map[string]time.Time{}
	if err := follow(ctx, b.admin.BatchV1().Jobs(ns), func(typ watch.EventType, job *batchv1.Job) {
		if typ == watch.Added {
			mu.Lock()
			if k := job.Annotations[jobmeta.AnnotationTaskKey]; k != "" {
				if _, ok := seen[k]; !ok {
					seen[k] = time.Now()
				}
			}
			mu.Unlock()
		}
	}); err != nil {
		return r, err
	}
	// The CronJob: an invocation at each period's start (the first at once), Forbid: one at a time.
	type interval struct{ start, end time.Time }
	var ran []interval // the invocations' times, guarded by mu
	cron := make(chan struct{})
	go func() {
		defer close(cron)
		next := time.Now()
		for ctx.Err() == nil {
			if d := time.Until(next); d > 0 {
				select {
				case <-ctx.Done():
					return
				case <-time.After(d):
				}
			}
			for !next.After(time.Now()) {
				next = next.Add(period)
			}
			cmd := exec.CommandContext(ctx, m.bin, "--config", cfgFile, "--kubeconfig", b.kcfg, "--log-format", "json", "tick",
				"--fill-for", m.fill.String(), "--timeout", "20s")
			cmd.Env = append(os.Environ(), dsnEnv+"="+os.Getenv(dsnEnv))
			cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
			r.invocations++
			started := time.Now()
			_ = cmd.Run()
			mu.Lock()
			ran = append(ran, interval{started, time.Now()})
			mu.Unlock()
		}
	}()
	// The inserts, at random moments across the periods.
	start, span := time.Now(), time.Duration(periods)*period
	offsets := make([]time.Duration, inserts)
	for i := range offsets {
		offsets[i] = time.Duration(rand.Int64N(int64(span)))
	}
	slices.Sort(offsets)
	committed := map[string]time.Time{}
	for i, off := range offsets {
		time.Sleep(time.Until(start.Add(off)))
		key := fmt.Sprintf("row-%04d", i)
		var at time.Time
		if err := b.db.QueryRowContext(b.ctx, "INSERT INTO "+table+" (id) VALUES ($1) RETURNING clock_timestamp()", key).Scan(&at); err != nil {
			return r, err
		}
		committed[key] = at
	}
	// Every row's Job, within two periods of the last insert.
	for end := time.Now().Add(2 * period); time.Now().Before(end); time.Sleep(time.Second) {
		mu.Lock()
		n := len(seen)
		mu.Unlock()
		if n >= inserts {
			break
		}
	}
	cancel()
	<-cron
	mu.Lock()
	for k, at := range committed {
		s, ok := seen[k]
		if !ok {
			r.missing++
			continue
		}
		r.latencies = append(r.latencies, s.Sub(at))
		if slices.ContainsFunc(ran, func(sp interval) bool { return !at.Before(sp.start) && at.Before(sp.end) }) {
			r.active = append(r.active, s.Sub(at))
		} else {
			r.between = append(r.between, s.Sub(at))
		}
	}
	mu.Unlock()
	r.p50, r.p99, r.max = quantiles(r.latencies)
	r.load = runinfo.LoadAvg(1)
	a50, a99, _ := quantiles(r.active)
	progress("    p50 %s, p99 %s, max %s; while a run is active (%d rows) p50 %s, p99 %s; %d without a Job, %d invocations",
		r.p50, r.p99, r.max, len(r.active), a50, a99, r.missing, r.invocations)
	return r, nil
}

// quantiles sorts ds and returns its p50, p99 and max (zero when empty).
func quantiles(ds []time.Duration) (p50, p99, most time.Duration) {
	slices.Sort(ds)
	n := len(ds)
	if n == 0 {
		return 0, 0, 0
	}
	return ds[n/2], ds[min(n-1, n*99/100)], ds[n-1]
}

// pickupRunning starts one notify run that waits, and returns a func that counts its pass done lines so far, and one
// that stops it and returns its CPU time and peak RSS.
func (b *bench) pickupRunning(m pickupMode, fill time.Duration) (passes func() int, stop func() (time.Duration, float64, error), err error) {
	_, _, cfgFile, err := b.pickupScenario(m)
	if err != nil {
		return nil, nil, err
	}
	cmd := exec.Command(m.bin, "--config", cfgFile, "--kubeconfig", b.kcfg, "--log-format", "json", "tick", "--fill-for", fill.String())
	var mu sync.Mutex
	var stderr bytes.Buffer
	cmd.Stderr = writerFunc(func(p []byte) (int, error) { mu.Lock(); defer mu.Unlock(); return stderr.Write(p) })
	if err := cmd.Start(); err != nil {
		return nil, nil, err
	}
	passes = func() int {
		mu.Lock()
		defer mu.Unlock()
		n := 0
		sc := bufio.NewScanner(bytes.NewReader(stderr.Bytes()))
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			var s struct{ Message string }
			if json.Unmarshal(sc.Bytes(), &s) == nil && s.Message == "pass done" {
				n++
			}
		}
		return n
	}
	listening := func() bool {
		mu.Lock()
		defer mu.Unlock()
		return strings.Contains(stderr.String(), `"message":"listening for notifications`)
	}
	for end := time.Now().Add(time.Minute); !listening() || passes() == 0; time.Sleep(100 * time.Millisecond) {
		if time.Now().After(end) {
			_ = cmd.Process.Kill()
			return nil, nil, fmt.Errorf("the run does not listen after a minute: %s", tail(stderr.String()))
		}
	}
	stop = func() (time.Duration, float64, error) {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		err := cmd.Wait()
		var cpu time.Duration
		var rssMB float64
		if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok { // wait4's: the run's own
			cpu = time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
			rssMB = float64(ru.Maxrss) * 1024 / 1e6 // kilobytes on Linux
		}
		return cpu, rssMB, err
	}
	return passes, stop, nil
}

// quietPasses waits until passes stop growing for two seconds and returns how many were run.
func quietPasses(passes func() int) int {
	n := passes()
	for quiet := time.Now(); time.Since(quiet) < 2*time.Second; time.Sleep(200 * time.Millisecond) {
		if m := passes(); m != n {
			n, quiet = m, time.Now()
		}
	}
	return n
}

// pickupStorm counts the passes of a waiting notify run during 1,000 single-row inserts and during one insert of
// 1,000 rows (rows its query does not select, so the passes stay what they cost at rest).
func (b *bench) pickupStorm(m pickupMode) (single, bulk int, err error) {
	passes, stop, err := b.pickupRunning(m, 20*time.Minute)
	if err != nil {
		return 0, 0, err
	}
	defer func() { _, _, _ = stop() }()
	table := "bench_pickup_" + m.name
	before := quietPasses(passes)
	for i := range 1000 {
		if _, err := b.db.ExecContext(b.ctx, "INSERT INTO "+table+" (id, status) VALUES ($1, 'held')", "single-"+strconv.Itoa(i)); err != nil {
			return 0, 0, err
		}
	}
	mid := quietPasses(passes)
	if _, err := b.db.ExecContext(b.ctx, "INSERT INTO "+table+" (id, status) SELECT 'bulk-' || g, 'held' FROM generate_series(1, 1000) AS g"); err != nil {
		return 0, 0, err
	}
	after := quietPasses(passes)
	progress("    storm: %d passes for 1,000 single-row inserts, %d for one of 1,000 rows", mid-before, after-mid)
	return mid - before, after - mid, nil
}

// pickupIdle runs a notify run that waits for idle with no work, and returns its CPU time and peak RSS.
func (b *bench) pickupIdle(m pickupMode, idle time.Duration) (time.Duration, float64, error) {
	_, stop, err := b.pickupRunning(m, idle+time.Minute)
	if err != nil {
		return 0, 0, err
	}
	time.Sleep(idle)
	cpu, rss, err := stop()
	progress("    idle %s: CPU %s, peak RSS %.1f MB", idle, cpu, rss)
	return cpu, rss, err
}

// writerFunc is an io.Writer of a func.
type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }

// writePickupResults writes the pickup's results file.
func writePickupResults(runs []pickupRun, period time.Duration, inserts, periods int) error {
	var buf bytes.Buffer
	fmt.Fprintf(&buf, "# Pickup: insert → Job (issue 54)\n\nWritten by `BENCH_ONLY=pickup scripts/bench.sh` (scripts/bench/pickup.go); do not edit by hand.\n\n")
	fmt.Fprintf(&buf, "- %s\n- commit: %s; %d rows inserted at random moments across %d periods of %s, one run; the CronJob played by the bench (an invocation per period, Forbid)\n\n",
		os.Getenv("BENCH_MACHINE"), runinfo.Commit(), inserts, periods, period)
	buf.WriteString("All rows, then apart: those inserted while an invocation ran (a run active), and those inserted between two (the CronJob's gap).\n\n")
	buf.WriteString("| mode | p50 | p99 | max | a run active: rows, p50, p99 | between runs: rows, max | rows without a Job | invocations | load avg (1 min) |\n|---|--:|--:|--:|--:|--:|--:|--:|--:|\n")
	for _, r := range runs {
		a50, a99, _ := quantiles(r.active)
		_, _, bmax := quantiles(r.between)
		fmt.Fprintf(&buf, "| %s | %.2f s | %.2f s | %.2f s | %d, %.2f s, %.2f s | %d, %.2f s | %d | %d | %s |\n", r.mode.what, r.p50.Seconds(), r.p99.Seconds(), r.max.Seconds(),
			len(r.active), a50.Seconds(), a99.Seconds(), len(r.between), bmax.Seconds(), r.missing, r.invocations, r.load)
	}
	for _, r := range runs {
		if r.mode.trigger && r.idleFor > 0 {
			fmt.Fprintf(&buf, "\nWith source.notify, a run waiting: %d passes for 1,000 single-row inserts, %d for one 1,000-row insert; "+
				"waiting %s with no work: CPU %.2f s (%.3f%% of a core), peak RSS %.1f MB.\n", r.stormSingle, r.stormBulk, r.idleFor,
				r.idleCPU.Seconds(), 100*r.idleCPU.Seconds()/r.idleFor.Seconds(), r.idleRSSMB)
		}
	}
	path := os.Getenv("BENCH_PICKUP_RESULTS")
	if path == "" {
		path = "scripts/bench/results/pickup.md"
	}
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		return err
	}
	progress("results written to %s", path)
	return nil
}
