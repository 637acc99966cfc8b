package main

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kruntime "k8s.io/apimachinery/pkg/runtime"

	"github.com/jobsched/jobsched/pkg/config"
	"github.com/jobsched/jobsched/pkg/render"
	"github.com/jobsched/jobsched/pkg/scheduler"
	"github.com/jobsched/jobsched/pkg/source"
	"github.com/jobsched/jobsched/pkg/testkit"
)

// ---------------------------------------------------------------------------------------------------------------
// A pass's cost with per-row sizes (issue 55's third measure), in process: one dry-run pass of the scheduler
// package (observe, read, fit, plan; no write) with capacity nodes over BENCH_SIZES_PASS_NODES (5,000) empty nodes of
// 8 CPU held by a fake API server, reading a real PostgreSQL table of BENCH_SIZES_PASS_ROWS (20,000) waiting rows,
// limits.maxActive and maxPerTick 10,000. Side by side, alternating, BENCH_SIZES_PASS_ROUNDS (5) rounds: B, one
// template of 1 CPU; B at 1,000, the same with maxActive and maxPerTick 1,000 (as many rows as a sized pass reads at
// most); A4, job.requestsFrom with rows of 4 sizes (250m, 500m, 1, 2); A1000, every row of its own size among 1,000
// (100m … 1099m). Per side: the rows read, the creates planned, the sizes among them, the wall
// time of a pass and the bytes it allocated (median of the rounds, with the least and the most). The API server's
// lists are the same for every side (the fill part measures them at 5,000 nodes): what differs is the read and the
// fit, which this measures. The run writes BENCH_SIZES_PASS_RESULTS (default scripts/bench/results/sizes-pass.md).

type sizesPassSide struct {
	name, what string
	cpu        string // the SQL of row i's cpu column; "": no job.requestsFrom
	perTick    int    // limits.maxActive and maxPerTick
}

type sizesPassRun struct {
	side                    sizesPassSide
	read, creates, distinct int
	wall                    []time.Duration
	alloc                   []uint64
}

func (b *bench) sizesPass() error {
	nodes := envInt("BENCH_SIZES_PASS_NODES", 5000)
	total := envInt("BENCH_SIZES_PASS_ROWS", 20000)
	rounds := envInt("BENCH_SIZES_PASS_ROUNDS", 5)
	sides := []sizesPassSide{
		{"b", "B: one template of 1 CPU", "", 10000},
		{"b1000", "B at 1,000: the same, maxPerTick 1,000", "", 1000},
		{"a4", "A4: job.requestsFrom, rows of 4 sizes (250m, 500m, 1, 2)", "(ARRAY['250m', '500m', '1', '2'])[i % 4 + 1]", 10000},
		{"a1000", "A1000: job.requestsFrom, rows of 1,000 sizes (100m … 1099m)", "(100 + i % 1000)::text || 'm'", 10000},
	}
	var objs []kruntime.Object
	for i := range nodes {
		rl := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("8"), corev1.ResourceMemory: resource.MustParse("32Gi"),
			corev1.ResourcePods: resource.MustParse("110")}
		objs = append(objs, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("node-%05d", i)},
			Status: corev1.NodeStatus{Capacity: rl, Allocatable: rl, Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}}})
	}
	runs := make([]sizesPassRun, len(sides))
	scheds := make([]*scheduler.Scheduler, len(sides))
	for k, side := range sides {
		runs[k].side = side
		s, done, err := b.sizesPassScheduler(side, total, objs)
		if err != nil {
			return fmt.Errorf("%s: %w", side.what, err)
		}
		defer done()
		scheds[k] = s
	}
	for round := range rounds {
		for k := range sides {
			runtime.GC()
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			t0 := time.Now()
			res, err := scheds[k].Run(b.ctx, scheduler.DryRun)
			wall := time.Since(t0)
			runtime.ReadMemStats(&after)
			if err != nil {
				return fmt.Errorf("%s: %w", sides[k].what, err)
			}
			r := &runs[k]
			r.wall, r.alloc = append(r.wall, wall), append(r.alloc, after.TotalAlloc-before.TotalAlloc)
			r.read, r.creates = res.Summary.Selected, len(res.Plan.Creates)
			sizes := map[string]bool{}
			for _, c := range res.Plan.Creates {
				sizes[c.Requests.Cpu().String()] = true
			}
			r.distinct = len(sizes)
			progress("    round %d, %s: %d read, %d creates, %s", round+1, sides[k].name, r.read, r.creates, wall.Round(time.Millisecond))
		}
	}
	report := sizesPassReport(os.Getenv("BENCH_MACHINE"), nodes, total, rounds, runs)
	fmt.Print(report)
	return writeResultsFile("BENCH_SIZES_PASS_RESULTS", "scripts/bench/results/sizes-pass.md", "sizes pass", report)
}

// sizesPassScheduler makes a side's table of total waiting rows (with its cpu column when sized), config and
// Scheduler over a fake API server of objs; done drops the table and closes the source.
func (b *bench) sizesPassScheduler(side sizesPassSide, total int, objs []kruntime.Object) (*scheduler.Scheduler, func(), error) {
	table := "bench_sizes_pass_" + side.name
	for _, s := range []string{
		"DROP TABLE IF EXISTS " + table,
		"CREATE TABLE " + table + " (id text PRIMARY KEY, status text NOT NULL, created_at timestamptz NOT NULL, cpu text)",
	} {
		if _, err := b.db.ExecContext(b.ctx, s); err != nil {
			return nil, nil, err
		}
	}
	cpu := "NULL"
	if side.cpu != "" {
		cpu = side.cpu
	}
	if _, err := b.db.ExecContext(b.ctx, fmt.Sprintf(`INSERT INTO %s SELECT 'task-' || lpad(i::text, 7, '0'), 'waiting',
		timestamptz '2026-01-01' + i * interval '1 second', %s FROM generate_series(0, %d) AS i`, table, cpu, total-1)); err != nil {
		return nil, nil, err
	}
	drop := func() { _, _ = b.db.ExecContext(b.ctx, "DROP TABLE IF EXISTS "+table) }
	dir := filepath.Join(b.dir, "sizes-pass-"+side.name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		drop()
		return nil, nil, err
	}
	sized := ""
	if side.cpu != "" {
		sized = "  requestsFrom: {cpu: cpu}\n  maxRequests: {cpu: 2}\n"
	}
	tpl := strings.Join([]string{"apiVersion: batch/v1", "kind: Job", "spec:", "  template:", "    spec:", "      restartPolicy: Never",
		"      containers:", "      - name: worker", "        image: registry.example/worker:1.0", "        resources:",
		"          requests: {cpu: \"1\", memory: 64Mi}", ""}, "\n")
	cfgText := fmt.Sprintf(`name: sizes-pass
namespace: bench-sizes-pass
source:
  dsnEnv: %s
  query: SELECT id, created_at, cpu FROM %s WHERE status = 'waiting' ORDER BY created_at
  key: id
job:
  template: job.yaml
%slimits:
  maxActive: %d
  maxPerTick: %d
  capacity: nodes
  reserveForTick: false
`, dsnEnv, table, sized, side.perTick, side.perTick)
	for name, text := range map[string]string{"job.yaml": tpl, "jobsched.yaml": cfgText} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			drop()
			return nil, nil, err
		}
	}
	cfg, err := config.Load(filepath.Join(dir, "jobsched.yaml"), "")
	if err != nil {
		drop()
		return nil, nil, err
	}
	srcs, closeSrcs, err := source.Postgres(b.ctx, cfg)
	if err != nil {
		drop()
		return nil, nil, err
	}
	s := &scheduler.Scheduler{Config: cfg, Kube: testkit.NewFake(objs...), Source: srcs[0], Renderer: render.New(cfg, nil), Now: time.Now}
	return s, func() { closeSrcs(); drop() }, nil
}

// spread is the middle of xs (the mean of the two middle ones for an even count), with the least and the most.
func spread[T time.Duration | uint64](xs []T) (mid, least, most T) {
	s := slices.Clone(xs)
	slices.Sort(s)
	n := len(s)
	if n == 0 {
		return 0, 0, 0
	}
	mid = s[n/2]
	if n%2 == 0 {
		mid = (s[n/2-1] + s[n/2]) / 2
	}
	return mid, s[0], s[n-1]
}

func sizesPassReport(machine string, nodes, total, rounds int, runs []sizesPassRun) string {
	var w strings.Builder
	fmt.Fprintf(&w, "# A pass's cost with per-row sizes (written by `BENCH_ONLY=sizes-pass scripts/bench.sh`; do not edit)\n\n")
	if machine != "" {
		fmt.Fprintf(&w, "%s\n\n", machine)
	}
	fmt.Fprintf(&w, "One dry-run pass of the scheduler package in process (observe, read, fit, plan; no write), `capacity: nodes` over %d empty "+
		"nodes of 8 CPU held by a fake API server (client-go's fake clientset: the lists are the same for every side, and the fill part "+
		"measures them on a real API server at 5,000 nodes), reading a real PostgreSQL table of %d waiting rows; `limits.maxActive` and "+
		"`maxPerTick` 10,000 (B at 1,000: 1,000). %d rounds, the sides alternating; median, with the least and the most. Rows read: the pass's `selected`; sizes: "+
		"the distinct cpu requests among the creates planned.\n\n", nodes, total, rounds)
	fmt.Fprintln(&w, "| side | rows read | creates planned | sizes | pass wall time | × B | allocated per pass | × B |")
	fmt.Fprintln(&w, "|---|--:|--:|--:|--:|--:|--:|--:|")
	bWall, _, _ := spread(runs[0].wall)
	bAlloc, _, _ := spread(runs[0].alloc)
	for _, r := range runs {
		wall, wl, wh := spread(r.wall)
		alloc, al, ah := spread(r.alloc)
		fmt.Fprintf(&w, "| %s | %d | %d | %d | %s (%s–%s) | %s | %.1f MB (%.1f–%.1f) | %s |\n", r.side.what, r.read, r.creates, r.distinct,
			wall.Round(time.Millisecond), wl.Round(time.Millisecond), wh.Round(time.Millisecond), ratio(wall.Seconds(), bWall.Seconds()),
			float64(alloc)/1e6, float64(al)/1e6, float64(ah)/1e6, ratio(float64(alloc), float64(bAlloc)))
	}
	return w.String()
}
