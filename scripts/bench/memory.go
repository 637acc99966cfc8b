package main

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"golang.org/x/sys/unix"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/jobsched/jobsched/pkg/config"
	"github.com/jobsched/jobsched/pkg/render"
	"github.com/jobsched/jobsched/pkg/testkit/runinfo"
)

// The memory part: the peak RSS of this build against a reference build (BENCH_REF, default be8acfe: before queues,
// the Lease and Kueue; bench.sh builds it in the same run, as it builds this one), over the same suspended Jobs, in
// alternating rounds (BENCH_MEMORY_ROUNDS, at least 5): each figure is the median of its rounds, and the ratio the
// median of the rounds' ratios, each taken side by side. Results: BENCH_MEMORY_RESULTS (default
// scripts/bench/results/memory.md), written by the run.
//
// Two namespaces of BENCH_MEMORY_JOBS (10,000) suspended Jobs, made directly: one made by a configuration without
// queues:, one by a configuration of five queues (a fifth of the Jobs each, each queue reading its fifth of the
// rows). The reference has no queues: it runs the configuration without queues: over both. In each:
//   - `dry-run -o json` and `dry-run` with limits.maxActive = the Jobs: it lists them all, is blocked by maxActive,
//     and prints the plan (the JSON document holds every Job);
//   - `tick` with limits.maxActive 100 above the Jobs and maxPerTick 100, over a table with 100 rows more than the
//     Jobs: it lists the Jobs, reads 100 rows past their 10,000 excluded keys, creates 100 Jobs and their Events (the
//     Jobs it created are deleted after each round, so every round is the same pass).
// limits.capacity is off: on this control plane with no node, capacity would block the creates.

const (
	memoryCreates = 100                      // the Jobs each measured tick creates
	memoryQueues  = 5                        // the queues of the second namespace
	memoryBase    = "jobsched.io/bench-base" // the label of the Jobs the bench made (a tick's are deleted after it)
)

// memoryCase is one measured command over one namespace: this build's configuration and the reference's.
type memoryCase struct {
	what         string
	ns           string
	mine, theirs string   // config files
	args         []string // the command after the global flags
	tick         bool
	noJobs       bool // the command reads no Job (what a build pays before any work)
}

func (b *bench) memory() error {
	ref, refName := os.Getenv("JOBSCHED_REF_BIN"), cmp.Or(os.Getenv("BENCH_REF"), "reference")
	if ref == "" {
		return errors.New("JOBSCHED_REF_BIN is not set: run scripts/bench.sh, which builds BENCH_REF")
	}
	n := envInt("BENCH_MEMORY_JOBS", 10000)
	rounds := max(envInt("BENCH_MEMORY_ROUNDS", 5), 5)
	const tbl = "bench_memory"
	if err := b.fillTable(tbl, n+memoryCreates); err != nil {
		return err
	}
	const one, five = "bench-memory", "bench-memory-queues"
	oneDry, oneTick, err := memoryConfigs(filepath.Join(b.dir, one), one, tbl, n, 0)
	if err != nil {
		return err
	}
	fiveDry, fiveTick, err := memoryConfigs(filepath.Join(b.dir, five), five, tbl, n, memoryQueues)
	if err != nil {
		return err
	}
	refDry, refTick, err := memoryConfigs(filepath.Join(b.dir, five+"-ref"), five, tbl, n, 0)
	if err != nil {
		return err
	}
	if err := b.memoryJobs(oneDry, n); err != nil {
		return err
	}
	if err := b.memoryJobs(fiveDry, n); err != nil {
		return err
	}
	cases := []memoryCase{
		{what: "`version`, before any work", ns: one, mine: oneDry, theirs: oneDry, args: []string{"version"}, noJobs: true},
		{what: "`dry-run -o json`, no queues:", ns: one, mine: oneDry, theirs: oneDry, args: []string{"dry-run", "-o", "json"}},
		{what: "`dry-run` (table), no queues:", ns: one, mine: oneDry, theirs: oneDry, args: []string{"dry-run"}},
		{what: fmt.Sprintf("`tick` creating %d, no queues:", memoryCreates), ns: one, mine: oneTick, theirs: oneTick, args: []string{"tick"}, tick: true},
		{what: fmt.Sprintf("`dry-run -o json`, %d queues", memoryQueues), ns: five, mine: fiveDry, theirs: refDry, args: []string{"dry-run", "-o", "json"}},
		{what: fmt.Sprintf("`tick` creating %d, %d queues", memoryCreates, memoryQueues), ns: five, mine: fiveTick, theirs: refTick, args: []string{"tick"}, tick: true},
	}
	for _, c := range cases {
		if err := b.clearCreated(c.ns); err != nil {
			return err
		}
	}
	mine, theirs := make([][]float64, len(cases)), make([][]float64, len(cases))
	for round := range rounds {
		for i, c := range cases {
			order := []bool{true, false} // the reference first, then this build; swapped every other round
			if round%2 == 1 {
				order = []bool{false, true}
			}
			for _, isRef := range order {
				bin, cfg, into := b.bin, c.mine, &mine[i]
				if isRef {
					bin, cfg, into = ref, c.theirs, &theirs[i]
				}
				mb, err := b.measureRSS(bin, cfg, c, n)
				if err != nil {
					return fmt.Errorf("%s, %s: %w", c.what, filepath.Base(bin), err)
				}
				*into = append(*into, mb)
			}
		}
		progress("  round %d of %d done", round+1, rounds)
	}
	var rows []row
	for i, c := range cases {
		ratios := make([]float64, rounds)
		for r := range rounds {
			ratios[r] = mine[i][r] / theirs[i][r]
		}
		over := fmt.Sprintf(", %s Jobs", thousands(n))
		if c.noJobs {
			over = ""
		}
		rows = append(rows, row{what: fmt.Sprintf("peak RSS, %s%s (median of %d alternating rounds; ratio: the median of the rounds' ratios)", c.what, over, rounds),
			jobsched: fmt.Sprintf("%.1f MB (%s)", medianOf(mine[i]), mbs(mine[i])), reference: fmt.Sprintf("%.1f MB at %s (%s)", medianOf(theirs[i]), refName, mbs(theirs[i])),
			ratio: fmt.Sprintf("%.2f", medianOf(ratios)), load: runinfo.LoadAvg(1)})
	}
	for _, r := range rows {
		progress("  %s: %s | %s | %s", r.what, r.jobsched, r.reference, r.ratio)
	}
	table(os.Stdout, rows)
	return b.writeMemoryResults(refName, n, rounds, rows)
}

// memoryConfigs writes, in dir, the dry-run and tick configurations of scheduler bench-memory in namespace ns
// reading table (queues: 0 for none, else that many, row i going to queue i mod queues) and their template.
func memoryConfigs(dir, ns, table string, n, queues int) (dryRun, tick string, err error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", "", err
	}
	if err := os.WriteFile(filepath.Join(dir, "job.yaml"), []byte(benchTemplate), 0o644); err != nil {
		return "", "", err
	}
	doc := func(maxActive int) string {
		limits := fmt.Sprintf("limits:\n  maxActive: %d\n  maxPerTick: %d\n  capacity: \"off\"\n", maxActive, memoryCreates)
		if queues == 0 {
			return benchConfig("bench-memory", ns, table, limits)
		}
		var q strings.Builder
		for i := range queues {
			// By the key's last digit: row i is queue i mod 5 (10 is a multiple of 5).
			fmt.Fprintf(&q, "- name: q%d\n  source: {query: \"SELECT id, created_at FROM %s WHERE status = 'waiting' AND right(id, 1)::int %% %d = %d ORDER BY created_at\", key: id}\n  job: {template: job.yaml}\n",
				i, table, queues, i)
		}
		return fmt.Sprintf("name: bench-memory\nnamespace: %s\nsource:\n  dsnEnv: %s\nenv:\n  prefix: TASK_\n%squeues:\n%s", ns, dsnEnv, limits, q.String())
	}
	dryRun, tick = filepath.Join(dir, "dry-run.yaml"), filepath.Join(dir, "tick.yaml")
	if err := os.WriteFile(dryRun, []byte(doc(n)), 0o644); err != nil {
		return "", "", err
	}
	return dryRun, tick, os.WriteFile(tick, []byte(doc(n+memoryCreates)), 0o644)
}

// memoryJobs makes in cfgFile's namespace the suspended Jobs of its first n rows (row i by the renderer of queue i
// mod its queues), labelled memoryBase, unless they exist.
func (b *bench) memoryJobs(cfgFile string, n int) error {
	cfg, err := config.Load(cfgFile, "")
	if err != nil {
		return err
	}
	if err := b.namespace(cfg.Namespace); err != nil {
		return err
	}
	var renderers []*render.Renderer
	for i := range cfg.AllQueues() {
		renderers = append(renderers, render.New(cfg.QueueConfig(i), nil))
	}
	have, err := b.countJobs(cfg.Namespace)
	if err != nil || have >= n {
		return err
	}
	start := time.Now()
	err = parallel(32, n, func(i int) error {
		j, err := renderers[i%len(renderers)].Job(taskRow(i), 1)
		if err != nil {
			return err
		}
		j.Labels[memoryBase] = "true"
		suspend := true // as Kueue holds a Job; a template may not be suspended
		j.Spec.Suspend = &suspend
		_, err = b.admin.BatchV1().Jobs(cfg.Namespace).Create(b.ctx, j, metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) {
			return nil
		}
		return err
	})
	progress("  %d suspended Jobs in %s made in %s", n, cfg.Namespace, time.Since(start).Round(time.Second))
	return err
}

// measureRSS runs one command of case c with bin and cfg under GNU time (maxRSS), checks that it did what c says
// (dry-run: saw the n Jobs; tick: created memoryCreates Jobs, which it then deletes), and returns its peak RSS in MB.
func (b *bench) measureRSS(bin, cfg string, c memoryCase, n int) (float64, error) {
	if err := evict(bin); err != nil {
		return 0, err
	}
	mb, stdout, stderr, err := b.maxRSS(bin, cfg, nil, c.args...)
	if err != nil {
		return 0, err
	}
	switch {
	case c.tick:
		made, err := b.countCreated(c.ns)
		if err != nil {
			return 0, err
		}
		if made != memoryCreates {
			return 0, fmt.Errorf("the tick created %d Jobs, want %d: %s", made, memoryCreates, tail(stderr))
		}
		if err := b.clearCreated(c.ns); err != nil {
			return 0, err
		}
	case slices.Contains(c.args, "json"):
		var p struct{ Unfinished int }
		if err := json.Unmarshal(stdout, &p); err != nil || p.Unfinished != n {
			return 0, fmt.Errorf("the plan counts %d unfinished Jobs, want %d (%v)", p.Unfinished, n, err)
		}
	}
	return mb, nil
}

// evict drops file's pages from the page cache, once written back (pages still dirty would stay).
func evict(file string) error {
	f, err := os.Open(file)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := f.Sync(); err != nil {
		return fmt.Errorf("writing %s back: %w", file, err)
	}
	if err := unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED); err != nil {
		return fmt.Errorf("dropping %s from the page cache: %w", file, err)
	}
	return nil
}

// notBase selects the Jobs a tick created (not made by the bench).
const notBase = "!" + memoryBase

func (b *bench) countCreated(ns string) (int, error) {
	l, err := b.admin.BatchV1().Jobs(ns).List(b.ctx, metav1.ListOptions{LabelSelector: notBase})
	if err != nil {
		return 0, err
	}
	return len(l.Items), nil
}

// clearCreated deletes the Jobs ticks created in ns and waits until none is left.
func (b *bench) clearCreated(ns string) error {
	bg := metav1.DeletePropagationBackground
	if err := b.admin.BatchV1().Jobs(ns).DeleteCollection(b.ctx, metav1.DeleteOptions{PropagationPolicy: &bg}, metav1.ListOptions{LabelSelector: notBase}); err != nil {
		return err
	}
	for start := time.Now(); ; time.Sleep(200 * time.Millisecond) {
		left, err := b.countCreated(ns)
		if err != nil || left == 0 {
			return err
		}
		if time.Since(start) > 5*time.Minute {
			return fmt.Errorf("%d Jobs created by a tick in %s still there after 5 minutes", left, ns)
		}
	}
}

func medianOf(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s)%2 == 0 {
		return (s[len(s)/2-1] + s[len(s)/2]) / 2
	}
	return s[len(s)/2]
}

// mbs lists each round's figure.
func mbs(xs []float64) string {
	out := make([]string, len(xs))
	for i, x := range xs {
		out[i] = fmt.Sprintf("%.1f", x)
	}
	return strings.Join(out, ", ")
}

// writeMemoryResults writes the memory part's own results file (a run of BENCH_ONLY=memory leaves bench.md as it is).
func (b *bench) writeMemoryResults(ref string, n, rounds int, rows []row) error {
	about := fmt.Sprintf("GNU time's maximum resident set size of each command, this build and %s built the same way in the same run, "+
		"over the same %s suspended Jobs, %d rounds alternating which build runs first, each run with its binary's pages "+
		"dropped from the page cache first (read from the disk, as a new container's); `version` reads no Job; `dry-run` with limits.maxActive %s "+
		"(blocked, it lists and prints), `tick` with maxActive %s and maxPerTick %d (it lists, reads %d rows past the "+
		"Jobs' excluded keys and creates them; they are deleted after each round); limits.capacity off. %s has no "+
		"queues: it runs the configuration without queues: over the Jobs of the five queues too. See scripts/bench/README.md.",
		ref, thousands(n), rounds, thousands(n), thousands(n+memoryCreates), memoryCreates, memoryCreates, ref)
	return writeOwnResults(cmp.Or(os.Getenv("BENCH_MEMORY_RESULTS"), "scripts/bench/results/memory.md"),
		fmt.Sprintf("Peak RSS against %s (written by `BENCH_ONLY=memory scripts/bench.sh`; do not edit)", ref), about, rows)
}

// writeOwnResults writes a part's own results file: its title, the machine (BENCH_MACHINE), what it measured, its table.
func writeOwnResults(path, title, about string, rows []row) error {
	var w bytes.Buffer
	fmt.Fprintf(&w, "# %s\n\n%s\n\n%s\n\n", title, os.Getenv("BENCH_MACHINE"), about)
	table(&w, rows)
	progress("  results: %s", path)
	return os.WriteFile(path, w.Bytes(), 0o644)
}
