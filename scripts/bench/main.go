// Command bench measures jobsched on a real local control plane and PostgreSQL and prints one Markdown table:
// API calls per pass, pass time against the backlog, creates per second against a bare concurrent client, peak RSS
// of dry-run against the Jobs of one scheduler, and the read against the keys it excludes. scripts/bench.sh starts
// what it needs and runs it; see there for the environment.
package main

import (
	"bytes"
	"cmp"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/util/workqueue"

	"github.com/jobsched/jobsched/pkg/config"
	"github.com/jobsched/jobsched/pkg/jobmeta"
	"github.com/jobsched/jobsched/pkg/kube"
	"github.com/jobsched/jobsched/pkg/render"
	"github.com/jobsched/jobsched/pkg/rows"
	"github.com/jobsched/jobsched/pkg/scheduler"
	"github.com/jobsched/jobsched/pkg/testkit/apicalls"
	"github.com/jobsched/jobsched/pkg/testkit/runinfo"
)

const dsnEnv = "JOBSCHED_BENCH_DSN" // the variable the benchmark's configs name in source.dsnEnv

type bench struct {
	ctx    context.Context
	kcfg   string
	bin    string
	dir    string
	db     *sql.DB
	admin  kubernetes.Interface
	rows   []row
	budget time.Duration // the most that creating Jobs for the RSS rows may take

	fillOnePassAt string   // the cluster size of the fill part's one-pass reference
	fillNotes     []string // what the fill part's results must say besides the rows (a run run again)
	// tickLogs, when set, gets each tick's stderr (its JSON log) as the tick ends, after a line naming when it
	// started (the sizes part's BENCH_SIZES_TRACE).
	tickLogs io.Writer
}

// row is one line of the table.
type row struct{ what, jobsched, reference, ratio, load string }

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

func run() error {
	b := &bench{ctx: context.Background(), kcfg: os.Getenv("KUBECONFIG"), bin: os.Getenv("JOBSCHED_BIN")}
	dsn := os.Getenv(dsnEnv)
	if b.kcfg == "" || dsn == "" || b.bin == "" {
		return fmt.Errorf("KUBECONFIG, %s and JOBSCHED_BIN must be set: run scripts/bench.sh", dsnEnv)
	}
	b.budget = time.Duration(envInt("BENCH_CREATE_BUDGET", 900)) * time.Second
	var err error
	if b.dir, err = os.MkdirTemp("", "jobsched-bench-"); err != nil {
		return err
	}
	defer os.RemoveAll(b.dir)
	if b.db, err = sql.Open("postgres", dsn); err != nil {
		return err
	}
	defer b.db.Close()
	if b.admin, err = b.bareClient(); err != nil {
		return err
	}
	if os.Getenv("KEEP") != "1" { // the database is shared: leave none of the benchmark's tables behind
		defer func() {
			for _, t := range []string{"bench_calls", "bench_creates", "bench_backlog_100", "bench_drain_once", "bench_drain_fill", "bench_sizes_a", "bench_sizes_b", "bench_memory", "bench_fill", "bench_throughput", "bench_pickup_notify", "bench_pickup_poll", "bench_pickup_today", fmt.Sprintf("bench_backlog_%d", envInt("BENCH_BACKLOG", 1000000))} {
				_, _ = b.db.ExecContext(b.ctx, "DROP TABLE IF EXISTS "+t)
			}
		}()
	}
	// The commit before the run: the drain rewrites its own results file, which would mark the tree dirty.
	start, loadBefore, commit := time.Now(), runinfo.LoadAvg(1), runinfo.Commit()
	type step struct {
		name string
		fn   func() error
	}
	steps := []step{
		{"API calls per pass", b.apiCalls},
		{"pass time vs backlog", b.backlog},
		{"creates per second", b.creates},
		{"peak RSS vs Jobs", b.rss},
		{"pass and read vs excluded keys", b.excluded},
		{"memory vs the reference build", b.memory},
	}
	only, own := os.Getenv("BENCH_ONLY"), false
	// The drains, the mixed drain and the fill need the controller-manager (their Jobs make pods; the autoscaled drain's also
	// Karpenter), which bench.sh stops after them.
	if len(os.Args) > 1 && (os.Args[1] == "drain" || os.Args[1] == "fill" || os.Args[1] == "autoscale" || os.Args[1] == "pickup" || os.Args[1] == "sizes" || os.Args[1] == "sizes-autoscale" || os.Args[1] == "sizes-pass") {
		steps, only, own = []step{{"drain", b.drain}}, "", true
		switch os.Args[1] {
		case "pickup":
			steps = []step{{"pickup", b.pickup}}
		case "fill":
			steps = []step{{"fill", b.fill}}
		case "autoscale":
			steps = []step{{"autoscale", b.autoscale}}
		case "sizes":
			steps = []step{{"sizes", b.sizes}}
		case "sizes-autoscale":
			steps = []step{{"sizes-autoscale", b.sizesAutoscale}}
		case "sizes-pass":
			steps = []step{{"sizes-pass", b.sizesPass}}
		}
	}
	var errs []error
	for _, s := range steps {
		if only != "" && !slices.ContainsFunc(strings.Split(only, ","), func(o string) bool { return strings.Contains(s.name, o) }) {
			continue
		}
		progress("%s…", s.name)
		if err := s.fn(); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", s.name, err))
			b.add(row{what: s.name, jobsched: "failed: " + err.Error()})
		}
	}
	info := runInfo{date: start, commit: commit, cpus: runtime.NumCPU(), loadBefore: loadBefore, loadAfter: runinfo.LoadAvg(1), only: only}
	if len(b.rows) == 0 || own { // the parts run write their own results files (memory.md, drain.md, fill.md, sizes.md)
		return errors.Join(errs...)
	}
	table(os.Stdout, b.rows)
	if err := writeResults(cmp.Or(os.Getenv("BENCH_RESULTS"), "scripts/bench/results/bench.md"), info, b.rows); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// runInfo is what the results file says about the run besides its figures.
type runInfo struct {
	date                  time.Time
	commit                string
	cpus                  int
	loadBefore, loadAfter string
	only                  string // BENCH_ONLY, if set
}

// writeResults writes the run's table, with its date, commit and machine load, to path (markdown): the figures are
// written by the run that measured them, never pasted.
func writeResults(path string, run runInfo, rows []row) error {
	var buf bytes.Buffer
	fmt.Fprintf(&buf, "# Bench results\n\nWritten by `scripts/bench.sh` (scripts/bench/main.go); do not edit by hand.\n\n")
	fmt.Fprintf(&buf, "- date: %s\n- commit: %s\n- machine: %d CPU(s), load average (1 min) %s at the start, %s at the end\n",
		run.date.UTC().Format(time.RFC3339), run.commit, run.cpus, run.loadBefore, run.loadAfter)
	if run.only != "" {
		fmt.Fprintf(&buf, "- parts run: BENCH_ONLY=%s\n", run.only)
	}
	buf.WriteString("\n")
	table(&buf, rows)
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		return fmt.Errorf("writing the results: %w", err)
	}
	progress("results written to %s", path)
	return nil
}

// table writes rows as a markdown table.
func table(w io.Writer, rows []row) {
	fmt.Fprintln(w, "| measure | jobsched | reference, same run | ratio | load avg (1 min) |")
	fmt.Fprintln(w, "|---|--:|--:|--:|--:|")
	for _, r := range rows {
		fmt.Fprintf(w, "| %s | %s | %s | %s | %s |\n", r.what, r.jobsched, r.reference, r.ratio, r.load)
	}
}

// benchConfig is the jobsched.yaml of a bench scheduler name in ns reading table's waiting rows (job.yaml beside
// it), with more (its limits, its gc) appended.
func benchConfig(name, ns, table, more string) string {
	return fmt.Sprintf(`name: %s
namespace: %s
source:
  dsnEnv: %s
  query: SELECT id, created_at FROM %s WHERE status = 'waiting' ORDER BY created_at
  key: id
job:
  template: job.yaml
env:
  prefix: TASK_
`, name, ns, dsnEnv, table) + more
}

func (b *bench) add(r row) {
	if r.load == "" {
		r.load = runinfo.LoadAvg(1)
	}
	b.rows = append(b.rows, r)
	progress("  %s: %s | %s | %s", r.what, r.jobsched, r.reference, r.ratio)
}

// ---------------------------------------------------------------------------------------------------------------
// API calls per pass: apiserver_request_total before and after one `jobsched tick` that creates 10 Jobs.

func (b *bench) apiCalls() error {
	const n = 10
	cfg, err := b.scenario("calls", "bench-calls", "bench_calls", n, n)
	if err != nil {
		return err
	}
	if err := b.fillTable("bench_calls", n); err != nil {
		return err
	}
	if err := b.clearJobs("bench-calls"); err != nil {
		return err
	}
	// Twice: the first tick creates the scheduler's Lease, the second finds it (the steady state); the Jobs of the
	// first are deleted in between, so the second creates the same 10 again.
	for round, what := range []string{"the first: it creates the Lease", "the next ones: the Lease exists"} {
		if round > 0 {
			if err := b.clearJobs("bench-calls"); err != nil {
				return err
			}
		}
		before, err := b.quiet()
		if err != nil {
			return err
		}
		sum, err := b.tick(cfg)
		if err != nil {
			return err
		}
		after, err := b.requests()
		if err != nil {
			return err
		}
		var calls []string
		total := 0
		for k, d := range apicalls.Between(before, after) {
			calls = append(calls, fmt.Sprintf("%s %d", k, d))
			total += d
		}
		slices.Sort(calls)
		b.add(row{what: fmt.Sprintf("API calls, one tick creating %d Jobs, %s (all clients; cluster-wide WATCHes, the other clients' informers, excluded)", sum.Created, what),
			jobsched: strings.Join(calls, ", "), reference: fmt.Sprintf("the least possible: one (streaming) list of Jobs, one of pods, POST jobs %d", n),
			ratio: fmt.Sprintf("%.2f", float64(total)/float64(n+2))})
	}
	return nil
}

// requests reads apiserver_request_total as "VERB resource[/subresource]" → count (see apicalls.Parse).
func (b *bench) requests() (map[string]float64, error) { return apicalls.Get(b.ctx, b.admin) }

// quiet returns the request counts once the cluster is quiet: two readings a second apart count the same requests
// (the controllers are done with what came before, e.g. the cleared Jobs' pods), or fails after a minute.
func (b *bench) quiet() (map[string]float64, error) {
	last, err := b.requests()
	if err != nil {
		return nil, err
	}
	err = wait.PollUntilContextTimeout(b.ctx, time.Second, time.Minute, false, func(context.Context) (bool, error) {
		now, err := b.requests()
		if err != nil {
			return false, err
		}
		same := true
		for k, v := range now {
			if apicalls.Counted(k) && v != last[k] {
				same = false
			}
		}
		last = now
		return same, nil
	})
	if err != nil {
		return nil, fmt.Errorf("the cluster did not quieten (two readings of its requests a second apart the same): %w", err)
	}
	return last, nil
}

// ---------------------------------------------------------------------------------------------------------------
// Pass time vs backlog: a dry-run pass (the tick's pass without its writes) over 100 and over 1,000,000 waiting
// rows, with an index matching the query; the median of several passes, each with a new client and connection as
// each tick is a new process.

func (b *bench) backlog() error {
	big := envInt("BENCH_BACKLOG", 1000000)
	sizes := []int{100, big}
	cfgs := make([]*config.Config, len(sizes))
	for i, n := range sizes {
		table := fmt.Sprintf("bench_backlog_%d", n)
		if err := b.fillTable(table, n); err != nil {
			return err
		}
		file, err := b.scenario("backlog", "bench-backlog", table, 10, 10)
		if err != nil {
			return err
		}
		if cfgs[i], err = config.Load(file, ""); err != nil {
			return err
		}
	}
	ds, err := b.alternatePasses(cfgs)
	if err != nil {
		return err
	}
	small, large := median(ds[0]), median(ds[1])
	b.add(row{what: "pass time, 100 waiting rows (maxPerTick 10, indexed query; median of 9)", jobsched: ms(small)})
	b.add(row{what: fmt.Sprintf("pass time, %s waiting rows (same)", thousands(big)), jobsched: ms(large),
		reference: ms(small) + " (100 rows)", ratio: fmt.Sprintf("%.2f", float64(large)/float64(small))})
	return nil
}

// pass is one dry-run pass (the tick's pass without its writes) with a new client and connection, as each tick is
// a new process.
// alternatePasses times 10 rounds of one dry-run pass per config, alternating so that every config sees the same
// load, and returns the times of the last 9 per config (the first round warms the server's caches).
func (b *bench) alternatePasses(cfgs []*config.Config) ([][]time.Duration, error) {
	ds := make([][]time.Duration, len(cfgs))
	for round := range 10 {
		for i, cfg := range cfgs {
			d, err := b.pass(cfg)
			if err != nil {
				return nil, err
			}
			if round > 0 {
				ds[i] = append(ds[i], d)
			}
		}
	}
	return ds, nil
}

func (b *bench) pass(cfg *config.Config) (time.Duration, error) {
	c, _, err := kube.NewClient(kube.Options{Kubeconfig: b.kcfg, Burst: 100}) // the CLI's defaults
	if err != nil {
		return 0, err
	}
	src, err := rows.OpenPostgres(os.Getenv(dsnEnv), cfg.Source)
	if err != nil {
		return 0, err
	}
	defer src.Close()
	s := &scheduler.Scheduler{Config: cfg, Kube: c, Source: src, Renderer: render.New(cfg, nil), Now: time.Now}
	start := time.Now()
	res, err := s.Run(b.ctx, scheduler.DryRun)
	d := time.Since(start)
	p := res.Plan
	if err != nil {
		return 0, err
	}
	if len(p.Creates) != 10 {
		return 0, fmt.Errorf("the pass planned %d creates, want 10", len(p.Creates))
	}
	return d, nil
}

func median(ds []time.Duration) time.Duration {
	ds = slices.Clone(ds)
	slices.Sort(ds)
	return ds[len(ds)/2]
}

// ---------------------------------------------------------------------------------------------------------------
// Creates per second: `jobsched tick` with its default flags against a bare client (16 workers, as jobsched's creates; client-go with no
// client-side limit, plain POSTs of the same Jobs), side by side.

func (b *bench) creates() error {
	for _, n := range ints(os.Getenv("BENCH_CREATES"), []int{10, 1000, 10000}) {
		table := "bench_creates"
		if err := b.fillTable(table, n); err != nil {
			return err
		}
		cfgFile, err := b.scenario("creates", "bench-creates", table, n, n)
		if err != nil {
			return err
		}
		cfg, err := config.Load(cfgFile, "")
		if err != nil {
			return err
		}
		jobs := make([]*batchv1.Job, n)
		r := render.New(cfg, nil)
		for i := range jobs {
			if jobs[i], err = r.Job(taskRow(i), 1); err != nil {
				return err
			}
		}
		// Alternating rounds (the machine is shared, its load moves), the median of each side.
		rounds := envInt("BENCH_ROUNDS", 5)
		var refs, mines, walls []time.Duration
		for i := range rounds {
			order := []bool{true, false} // reference first, then jobsched; swapped every other round
			if i%2 == 1 {
				order = []bool{false, true}
			}
			for _, ref := range order {
				if err := b.clearJobs("bench-creates"); err != nil {
					return err
				}
				if ref {
					d, err := b.bareCreate("bench-creates", jobs)
					if err != nil {
						return err
					}
					refs = append(refs, d)
					continue
				}
				sum, err := b.tick(cfgFile)
				if err != nil {
					return err
				}
				if sum.Created != n {
					return fmt.Errorf("the tick created %d Jobs, want %d", sum.Created, n)
				}
				mines = append(mines, time.Duration(sum.Duration)*time.Millisecond)
				walls = append(walls, sum.wall)
			}
		}
		ref, d, wall := median(refs), median(mines), median(walls)
		mine, theirs := float64(n)/d.Seconds(), float64(n)/ref.Seconds()
		what := fmt.Sprintf("creates, %s Jobs in one tick (default flags; its whole pass)", thousands(n))
		if rounds > 1 {
			what += fmt.Sprintf(", median of %d", rounds)
		}
		b.add(row{what: what, jobsched: fmt.Sprintf("%.0f/s (%s; the process, with start-up, Events and exit: %s)", mine, ms(d), ms(wall)), reference: fmt.Sprintf("%.0f/s (%s)", theirs, ms(ref)),
			ratio: fmt.Sprintf("%.2f", mine/theirs)})
		if err := b.clearJobs("bench-creates"); err != nil {
			return err
		}
	}
	return nil
}

// bareClient is client-go's clientset on the bench's cluster, with no client-side limit (the bench's own: it creates
// namespaces and nodes, which jobsched's client does not).
func (b *bench) bareClient() (kubernetes.Interface, error) { return bareClientOf(b.kcfg) }

// bareClientOf is bareClient through the kubeconfig file kcfg.
func bareClientOf(kcfg string) (kubernetes.Interface, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", kcfg)
	if err != nil {
		return nil, err
	}
	cfg.QPS = -1
	return kubernetes.NewForConfig(cfg)
}

// dynamicClient is a dynamic client of the bench's cluster (Karpenter's NodePools and NodeClaims).
func (b *bench) dynamicClient() (dynamic.Interface, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", b.kcfg)
	if err != nil {
		return nil, err
	}
	return dynamic.NewForConfig(cfg)
}

// standIn stands in for the task's worker (kwok runs no container): the first time a task's pod runs, it marks the
// task's row of table done, as a real worker does before it exits. saw takes each pod a watch delivers.
type standIn struct {
	b     *bench
	table string
	mu    sync.Mutex
	ran   map[string]bool // task key → its pod has run
}

func (b *bench) standIn(table string) *standIn {
	return &standIn{b: b, table: table, ran: map[string]bool{}}
}

func (w *standIn) saw(pod *corev1.Pod) {
	key := pod.Annotations[jobmeta.AnnotationTaskKey]
	w.mu.Lock()
	mark := pod.Status.Phase == corev1.PodRunning && !w.ran[key]
	w.ran[key] = w.ran[key] || mark
	w.mu.Unlock()
	if !mark {
		return
	}
	if _, err := w.b.db.ExecContext(w.b.ctx, "UPDATE "+w.table+" SET status = 'done' WHERE id = $1", key); err != nil {
		progress("    marking %s done: %v", key, err)
	}
}

// writeResultsFile writes a part's results file: the path in variable env, else def; what names the part.
func writeResultsFile(env, def, what, text string) error {
	path := os.Getenv(env)
	if path == "" {
		path = def
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	progress("  %s results: %s", what, path)
	return os.WriteFile(path, []byte(text), 0o644)
}

// bareCreate POSTs jobs with scheduler.Workers workers (as many as jobsched has creates in flight) and a client with no client-side limit, and says how long it took.
func (b *bench) bareCreate(ns string, jobs []*batchv1.Job) (time.Duration, error) {
	c, err := b.bareClient()
	if err != nil {
		return 0, err
	}
	return b.createAll(c, ns, jobs)
}

// createAll is bareCreate's loop with the client c.
func (b *bench) createAll(c kubernetes.Interface, ns string, jobs []*batchv1.Job) (time.Duration, error) {
	start := time.Now()
	err := parallel(scheduler.Workers, len(jobs), func(i int) error {
		_, err := c.BatchV1().Jobs(ns).Create(b.ctx, jobs[i], metav1.CreateOptions{})
		return err
	})
	return time.Since(start), err
}

// ---------------------------------------------------------------------------------------------------------------
// Peak RSS vs Jobs: the Jobs of one scheduler, made directly by a bare client (the exact Jobs jobsched renders; the
// controller-manager is stopped, so they make no pods), then `jobsched dry-run` under GNU time.

func (b *bench) rss() error {
	const ns = "bench-rss"
	if err := b.fillTable("bench_calls", 10); err != nil {
		return err
	}
	cfgFile, err := b.scenario("rss", ns, "bench_calls", 10, 10)
	if err != nil {
		return err
	}
	cfg, err := config.Load(cfgFile, "")
	if err != nil {
		return err
	}
	r := render.New(cfg, nil)
	// The reference: the same dry-run over a namespace with no Job (the process itself, its clients and one pass).
	emptyFile, err := b.scenario("rss-empty", "bench-rss-empty", "bench_calls", 10, 10)
	if err != nil {
		return err
	}
	empty, err := b.peakRSS(emptyFile, nil)
	if err != nil {
		return err
	}
	b.add(row{what: "peak RSS of `dry-run`, no Job (median of 3, as every RSS row)", jobsched: fmt.Sprintf("%.1f MB", empty)})
	have, err := b.countJobs(ns)
	if err != nil {
		return err
	}
	for _, n := range ints(os.Getenv("BENCH_JOBS"), []int{1000, 10000, 100000}) {
		if have < n {
			start := time.Now()
			err := parallel(32, n-have, func(i int) error {
				if time.Since(start) > b.budget {
					return errBudget
				}
				j, err := r.Job(taskRow(have+i), 1)
				if err != nil {
					return err
				}
				_, err = b.admin.BatchV1().Jobs(ns).Create(b.ctx, j, metav1.CreateOptions{})
				if apierrors.IsAlreadyExists(err) {
					return nil
				}
				return err
			})
			if errors.Is(err, errBudget) {
				made, err := b.countJobs(ns)
				if err != nil {
					return err
				}
				rate := float64(made-have) / time.Since(start).Seconds()
				b.add(row{what: fmt.Sprintf("peak RSS, %s Jobs: not measured", thousands(n)),
					jobsched: fmt.Sprintf("creating them ran past BENCH_CREATE_BUDGET (%s) at %.0f Jobs/s: measured at %s Jobs instead (next row)", b.budget, rate, thousands(made))})
				n = made
			} else if err != nil {
				return err
			}
			progress("  %d Jobs in %s made in %s", n, ns, time.Since(start).Round(time.Second))
			have = n
		}
		plain, err := b.peakRSS(cfgFile, nil)
		if err != nil {
			return err
		}
		limited, err := b.peakRSS(cfgFile, []string{"GOMEMLIMIT=268435456"})
		if err != nil {
			return err
		}
		ref := fmt.Sprintf("%.1f MB (no Job)", empty)
		switch n {
		case 10000:
			ref += "; target ≤ 48 MB"
		case 100000:
			ref += "; the CronJob's limit 256 MiB = 268 MB"
		}
		b.add(row{what: fmt.Sprintf("peak RSS of `dry-run`, %s Jobs of its scheduler", thousands(n)),
			jobsched: fmt.Sprintf("%.1f MB (GOMEMLIMIT=256MiB as in the CronJob: %.1f MB)", plain, limited), reference: ref,
			ratio: fmt.Sprintf("%.2f", plain/empty)})
	}
	return nil
}

var errBudget = errors.New("out of time budget")

// peakRSS runs jobsched dry-run (table output, discarded) three times and returns the median of its maximum resident
// set size in MB (one run moves by a megabyte or two with the timing of the collector happens to run).
func (b *bench) peakRSS(cfgFile string, env []string) (float64, error) {
	var mbs []float64
	for range 3 {
		mb, err := b.peakRSSOnce(cfgFile, env)
		if err != nil {
			return 0, err
		}
		mbs = append(mbs, mb)
	}
	slices.Sort(mbs)
	return mbs[1], nil
}

func (b *bench) peakRSSOnce(cfgFile string, env []string) (float64, error) {
	mb, _, _, err := b.maxRSS(b.bin, cfgFile, env, "dry-run")
	return mb, err
}

// maxRSS runs bin with cfgFile and args under GNU time (timedCommand) and returns its maximum resident set size in
// MB, its standard output and its standard error.
func (b *bench) maxRSS(bin, cfgFile string, env []string, args ...string) (float64, []byte, string, error) {
	cmd, err := b.timedCommand(bin, append([]string{"--config", cfgFile, "--kubeconfig", b.kcfg, "--log-format", "json"}, args...)...)
	if err != nil {
		return 0, nil, "", err
	}
	cmd.Env = append(os.Environ(), env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	runErr := cmd.Run()
	mb, err := cmd.rssMB() // also removes time's file
	if runErr != nil {
		return 0, nil, "", fmt.Errorf("%v: %s", runErr, tail(stderr.String()))
	}
	if err != nil {
		return 0, nil, "", err
	}
	return mb, stdout.Bytes(), stderr.String(), nil
}

func (b *bench) countJobs(ns string) (int, error) {
	n := 0
	_, err := kube.List(b.ctx, b.admin.BatchV1().Jobs(ns).List, metav1.ListOptions{Limit: 5000}, func(*batchv1.Job) { n++ })
	return n, err
}

// ---------------------------------------------------------------------------------------------------------------
// The read against excluded keys: the pass's read (Select, its whole READ ONLY transaction) over the 1,000,000-row
// backlog with 10 and with 5,000 keys excluded, alternating, median of many. When the excluded keys are the oldest
// rows, as they are while their Jobs run and the query still selects them, the read walks past them in the index,
// which no form of the exclusion avoids; when the query no longer selects them, it costs the array alone.

func (b *bench) excluded() error {
	big := envInt("BENCH_BACKLOG", 1000000)
	table := fmt.Sprintf("bench_backlog_%d", big)
	if err := b.fillTable(table, big); err != nil {
		return err
	}
	src, err := rows.OpenPostgres(os.Getenv(dsnEnv), config.Source{Key: "id",
		Query: "SELECT id, created_at FROM " + table + " WHERE status = 'waiting' ORDER BY created_at"})
	if err != nil {
		return err
	}
	defer src.Close()
	keys := func(n int) []string {
		out := make([]string, n)
		for i := range out {
			out[i] = taskRow(i).Key
		}
		return out
	}
	few, many := keys(10), keys(5000)
	// Keys of rows the query does not select: the read does not pass over them, so this is what the keys cost alone.
	gone := make([]string, 5000)
	for i := range gone {
		gone[i] = fmt.Sprintf("taken-%07d", i)
	}
	var dFew, dMany, dGone []time.Duration
	for i := range 101 {
		for _, c := range []struct {
			keys  []string
			first int
			d     *[]time.Duration
		}{{few, 10, &dFew}, {many, 5000, &dMany}, {gone, 0, &dGone}} {
			start := time.Now()
			got, err := src.Select(b.ctx, rows.Selection{Exclude: c.keys, Limit: 10})
			d := time.Since(start)
			if err != nil {
				return err
			}
			if len(got) != 10 || got[0].Key != taskRow(c.first).Key {
				return fmt.Errorf("src.Select returned %d rows from %v, want 10 from the first row not excluded", len(got), got)
			}
			if i > 0 {
				*c.d = append(*c.d, d)
			}
		}
	}
	f, m, g := median(dFew), median(dMany), median(dGone)
	b.add(row{what: fmt.Sprintf("the pass's read, 10 keys excluded (%s waiting rows; median of 100)", thousands(big)), jobsched: ms(f)})
	b.add(row{what: "the pass's read, 5,000 keys excluded, the oldest rows (their Jobs run, the rows are still selected)", jobsched: ms(m),
		reference: ms(f) + " (10 keys)", ratio: fmt.Sprintf("%.2f", float64(m)/float64(f))})
	b.add(row{what: "the pass's read, 5,000 keys excluded that the query does not select (the cost of the keys alone)", jobsched: ms(g),
		reference: ms(f) + " (10 keys)", ratio: fmt.Sprintf("%.2f", float64(g)/float64(f))})

	// Whole passes: 10 and 5,000 unfinished Jobs (made directly; their keys are the oldest rows), maxActive 10 above
	// that, so each pass lists its Jobs and reads 10 rows past the excluded ones.
	var cfgs []*config.Config
	for _, n := range []int{10, 5000} {
		ns := fmt.Sprintf("bench-excluded-%d", n)
		file, err := b.scenario("excluded", ns, table, n+10, 10)
		if err != nil {
			return err
		}
		cfg, err := config.Load(file, "")
		if err != nil {
			return err
		}
		cfgs = append(cfgs, cfg)
		if err := b.makeJobs(cfg, n); err != nil {
			return err
		}
	}
	passes, err := b.alternatePasses(cfgs)
	if err != nil {
		return err
	}
	pf, pm := median(passes[0]), median(passes[1])
	b.add(row{what: "pass time, 10 unfinished Jobs: 10 keys excluded (median of 9)", jobsched: ms(pf)})
	b.add(row{what: "pass time, 5,000 unfinished Jobs: 5,000 keys excluded, the oldest rows (it lists the 5,000 Jobs too)", jobsched: ms(pm),
		reference: ms(pf) + " (10)", ratio: fmt.Sprintf("%.2f", float64(pm)/float64(pf))})

	// The statement alone with 5,000 keys, as it is (NOT IN a hashed subplan) and as it was (NOT (key = ANY), which
	// the planner estimates key by key), alternating on one connection.
	now, args := src.SelectStatement(rows.Selection{Exclude: many, Limit: 10})
	before := notIn.ReplaceAllString(now, "NOT ($1 = ANY($2))")
	if before == now {
		return fmt.Errorf("the read's statement has no NOT IN (SELECT unnest(…)) to compare with NOT (key = ANY): %s", now)
	}
	conn, err := b.db.Conn(b.ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	var dNow, dBefore []time.Duration
	for i := range 101 {
		for _, c := range []struct {
			stmt string
			d    *[]time.Duration
		}{{now, &dNow}, {before, &dBefore}} {
			start := time.Now()
			rs, err := conn.QueryContext(b.ctx, c.stmt, args...)
			if err != nil {
				return err
			}
			n := 0
			for rs.Next() {
				n++
			}
			rs.Close()
			if err := rs.Err(); err != nil || n != 10 {
				return fmt.Errorf("%s: %d rows, %v", c.stmt, n, err)
			}
			if i > 0 {
				*c.d = append(*c.d, time.Since(start))
			}
		}
	}
	b.add(row{what: "the read's statement alone, 5,000 keys: `key NOT IN (SELECT unnest($1))` (now)", jobsched: ms(median(dNow)),
		reference: ms(median(dBefore)) + " (`NOT (key = ANY($1))`, before)", ratio: fmt.Sprintf("%.2f", float64(median(dNow))/float64(median(dBefore)))})
	return nil
}

// ---------------------------------------------------------------------------------------------------------------
// Helpers.

// notIn is the read's exclusion as rows writes it, `key NOT IN (SELECT unnest($1::type[]))`: the bench rewrites it into
// the form it replaced, `NOT (key = ANY($1::type[]))`, to compare the two.
var notIn = regexp.MustCompile(`(\S+) NOT IN \(SELECT unnest\((\$1::[^)]+)\)\)`)

// makeJobs creates the first n Jobs cfg would create (keys task-0000000…), directly, unless they exist.
func (b *bench) makeJobs(cfg *config.Config, n int) error {
	r := render.New(cfg, nil)
	return parallel(32, n, func(i int) error {
		j, err := r.Job(taskRow(i), 1)
		if err != nil {
			return err
		}
		_, err = b.admin.BatchV1().Jobs(cfg.Namespace).Create(b.ctx, j, metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) {
			return nil
		}
		return err
	})
}

// benchTemplate is the Job template of the bench's schedulers: pods that could never be scheduled, should a
// controller make them.
const benchTemplate = `apiVersion: batch/v1
kind: Job
spec:
  backoffLimit: 0
  template:
    spec:
      restartPolicy: Never
      nodeSelector:
        jobsched.io/bench: nowhere
      containers:
      - name: worker
        image: registry.example/worker:1.0
        command: ["/worker", "--task", "$(TASK_ID)"]
        resources:
          requests: {cpu: 100m, memory: 128Mi}
`

// scenario writes a config for scheduler name in ns reading table, and its template (pods that could never be
// scheduled, should a controller make them), and returns the config's path.
func (b *bench) scenario(name, ns, table string, maxActive, maxPerTick int) (string, error) {
	if err := b.namespace(ns); err != nil {
		return "", err
	}
	dir := filepath.Join(b.dir, name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	cfg := benchConfig(name, ns, table, fmt.Sprintf("limits:\n  maxActive: %d\n  maxPerTick: %d\n  capacity: \"off\"\n", maxActive, maxPerTick))
	if err := os.WriteFile(filepath.Join(dir, "job.yaml"), []byte(benchTemplate), 0o644); err != nil {
		return "", err
	}
	file := filepath.Join(dir, "jobsched.yaml")
	return file, os.WriteFile(file, []byte(cfg), 0o644)
}

// namespace creates ns unless it exists.
func (b *bench) namespace(ns string) error {
	_, err := b.admin.CoreV1().Namespaces().Create(b.ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		return nil
	}
	return err
}

func taskRow(i int) rows.Row {
	key := fmt.Sprintf("task-%07d", i)
	return rows.Row{Key: key, Columns: []rows.Column{{Name: "id", Value: key},
		{Name: "created_at", Value: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).Add(time.Duration(i) * time.Second).Format(time.RFC3339)}}}
}

// fillTable makes table hold exactly n waiting rows task-0000000… in created_at order, indexed for the query
// (kept between runs when it already does).
func (b *bench) fillTable(table string, n int) error {
	var have int
	if err := b.db.QueryRowContext(b.ctx, "SELECT count(*) FROM "+table).Scan(&have); err == nil && have == n {
		return nil
	}
	start := time.Now()
	for _, s := range []string{
		"DROP TABLE IF EXISTS " + table,
		"CREATE TABLE " + table + " (id text PRIMARY KEY, status text NOT NULL, created_at timestamptz NOT NULL)",
		fmt.Sprintf(`INSERT INTO %s SELECT 'task-' || lpad(g::text, 7, '0'), 'waiting',
			'2026-01-01 00:00:00+00'::timestamptz + g * interval '1 second' FROM generate_series(0, %d) AS g`, table, n-1),
		"CREATE INDEX ON " + table + " (created_at) WHERE status = 'waiting'",
		"ANALYZE " + table,
	} {
		if _, err := b.db.ExecContext(b.ctx, s); err != nil {
			return fmt.Errorf("%s: %w", s, err)
		}
	}
	progress("  table %s: %d rows in %s", table, n, time.Since(start).Round(time.Millisecond))
	return nil
}

// clearJobs deletes every Job in ns and waits until none is left.
func (b *bench) clearJobs(ns string) error {
	bg := metav1.DeletePropagationBackground
	// One DELETE per Job, 64 at once, asked again while Jobs are left: the API server deletes a collection one object
	// at a time (--delete-collection-workers 1) and ends a DeleteCollection of thousands at its request timeout. It
	// gives up after 5 minutes in which no Job went (10,000 Jobs, and their pods, take longer than that to go).
	left, since := -1, time.Now()
	err := wait.PollUntilContextCancel(b.ctx, 500*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		var names []string
		if _, err := kube.List(ctx, b.admin.BatchV1().Jobs(ns).List, metav1.ListOptions{Limit: 5000}, func(j *batchv1.Job) { names = append(names, j.Name) }); err != nil {
			return false, nil //nolint:nilerr // list again: progress, not one list, decides when to give up
		}
		if len(names) == 0 {
			return true, nil
		}
		if left < 0 || len(names) < left {
			left, since = len(names), time.Now()
		} else if time.Since(since) > 5*time.Minute {
			return false, errNoProgress
		}
		if err := parallel(64, len(names), func(i int) error {
			err := b.admin.BatchV1().Jobs(ns).Delete(ctx, names[i], metav1.DeleteOptions{PropagationPolicy: &bg})
			if apierrors.IsNotFound(err) {
				return nil
			}
			return err
		}); err != nil {
			progress("    deleting the Jobs of %s: %v (asking again)", ns, err)
		}
		return false, nil
	})
	if errors.Is(err, errNoProgress) {
		return fmt.Errorf("%d Jobs in %s, and none deleted in 5 minutes", left, ns)
	}
	return err
}

var errNoProgress = errors.New("no progress")

// summary is the pass done line of a tick.
type summary struct {
	Created  int           `json:"created"`
	Failed   int           `json:"failed"`
	Duration int64         `json:"duration"`
	Message  string        `json:"message"`
	wall     time.Duration // the whole process: start-up, the pass, then its Events and exit
}

// tick runs `jobsched tick` with its default flags and returns its pass done line.
func (b *bench) tick(cfgFile string) (summary, error) {
	cmd := exec.Command(b.bin, "--config", cfgFile, "--kubeconfig", b.kcfg, "--log-format", "json", "tick")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	start := time.Now()
	if err := cmd.Run(); err != nil {
		return summary{}, fmt.Errorf("jobsched tick: %v: %s", err, tail(stderr.String()))
	}
	wall := time.Since(start)
	for _, line := range strings.Split(stderr.String(), "\n") {
		var s summary
		if json.Unmarshal([]byte(line), &s) == nil && s.Message == "pass done" {
			s.wall = wall
			return s, nil
		}
	}
	return summary{}, fmt.Errorf("no pass done line in: %s", tail(stderr.String()))
}

// parallel runs fn(i) for i < n with workers goroutines; it stops at the first error.
func parallel(workers, n int, fn func(i int) error) error {
	ctx, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	workqueue.ParallelizeUntil(ctx, workers, n, func(i int) {
		if err := fn(i); err != nil {
			cancel(err)
		}
	})
	return context.Cause(ctx)
}

func ms(d time.Duration) string {
	if d >= time.Second {
		return fmt.Sprintf("%.1f s", d.Seconds())
	}
	return fmt.Sprintf("%.1f ms", float64(d.Microseconds())/1000)
}

func thousands(n int) string {
	s := strconv.Itoa(n)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}

// ints reads a comma-separated list of numbers, or returns def when s is empty.
func ints(s string, def []int) []int {
	if s == "" {
		return def
	}
	var out []int
	for _, f := range strings.Split(s, ",") {
		if n, err := strconv.Atoi(strings.TrimSpace(f)); err == nil && n > 0 {
			out = append(out, n)
		}
	}
	return out
}

func tail(s string) string {
	if len(s) > 2000 {
		return "…" + s[len(s)-2000:]
	}
	return s
}

func progress(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "[bench] "+format+"\n", args...)
}
