package main

import (
	"fmt"
	"os"
	"strings"
	"time"
)

// ---------------------------------------------------------------------------------------------------------------
// The mixed drain on an autoscaled cluster (issue 55): sizes.go's two sides (A: job.requestsFrom, each Job its row's
// size; B: one template sized for the largest task) with capacity autoscale, through a NodePool of Karpenter's KWOK
// provider from no node, as autoscale.go's drain runs (bench.sh starts Karpenter for either). The backlog has
// sizes.go's shape at the NodePool's node (4 CPU, 3900m allocatable): three small tasks (450m, 256Mi), then one
// eight times larger (3600m, 2Gi), over and over, BENCH_SIZES_AUTOSCALE_ROWS (64) rows whose pods run
// BENCH_SIZES_AUTOSCALE_TASK_SECONDS (15), through a NodePool limited to BENCH_SIZES_AUTOSCALE_CPU (40: 10 nodes),
// each side on a NodePool, namespace and table of its own, after the one before was consolidated away. Measured per
// side: the drain, the NodeClaims launched and the most at once, the NodeClaim-seconds from the first tick's start
// to the drain's end (what the nodes cost while the work ran), the pods of Karpenter's limit Event and those
// Unschedulable at the limit with every node up, duplicate Jobs. The run writes BENCH_SIZES_AUTOSCALE_RESULTS
// (default scripts/bench/results/sizes-autoscale.md).

var (
	autoscaledSmall = taskSize{cpu: "450m", memory: "256Mi"}
	autoscaledLarge = taskSize{cpu: "3600m", memory: "2Gi"} // eight times the small task; one on a 3900m node
)

func (b *bench) sizesAutoscale() error {
	rows := envInt("BENCH_SIZES_AUTOSCALE_ROWS", 64)
	limit := fmt.Sprint(envInt("BENCH_SIZES_AUTOSCALE_CPU", 40))
	dur := time.Duration(envInt("BENCH_SIZES_AUTOSCALE_TASK_SECONDS", 15)) * time.Second
	dyn, err := b.dynamicClient()
	if err != nil {
		return err
	}
	tasks := backlogOf(rows, autoscaledSmall, autoscaledLarge)
	var runs []autoscaleRun
	for _, side := range []struct{ name, what string }{
		{"a", "A: job.requestsFrom (each row's size)"},
		{"b", "B: one template sized for the largest task"},
	} {
		progress("  sizes on an autoscaled cluster, %s…", side.what)
		r, err := b.autoscaleOnce(dyn, "sizes-"+side.name, rows, limit, func(ns, table, pool string) (string, error) {
			if err := b.sizesTable(table, tasks); err != nil {
				return "", err
			}
			return b.sizesScenario(side.name, ns, table, pool, rows, dur, "autoscale", autoscaledSmall, autoscaledLarge, 0)
		})
		if err != nil {
			return fmt.Errorf("%s: %w", side.what, err)
		}
		r.mode = side.what
		runs = append(runs, r)
	}
	report := sizesAutoscaleReport(os.Getenv("BENCH_MACHINE"), rows, limit, dur, runs[0], runs[1])
	fmt.Print(report)
	return writeResultsFile("BENCH_SIZES_AUTOSCALE_RESULTS", "scripts/bench/results/sizes-autoscale.md", "sizes on an autoscaled cluster", report)
}

// sizesAutoscaleReport is the results file: the setup, both sides side by side with B as the reference, each
// invocation.
func sizesAutoscaleReport(machine string, rows int, limit string, dur time.Duration, a, b autoscaleRun) string {
	var w strings.Builder
	fmt.Fprintf(&w, "# Per-row sizes against one template on an autoscaled cluster (written by `BENCH_ONLY=sizes-autoscale scripts/bench.sh`; do not edit)\n\n")
	if machine != "" {
		fmt.Fprintf(&w, "%s\n\n", machine)
	}
	fmt.Fprintf(&w, "Karpenter v1.13.0 (KWOK provider) from no node: a NodePool of 4-CPU nodes (3900m allocatable; scripts/karpenter/nodepool.yaml) "+
		"limited to %s CPU. %d rows in the query's order, three small tasks (%s CPU, %s) then one large (%s CPU, %s), over and over, each "+
		"task pod running %s. A: `job.requestsFrom: {cpu: cpu, memory: mem}`, `job.maxRequests: {cpu: %s, memory: %s}`; B: one template of %s "+
		"CPU and %s. Both `capacity: autoscale`, `tick --fill-for` (started again at once should it end while rows wait), each side on a "+
		"NodePool of its own after the one before was consolidated away. Drain: from the first tick's start to the last Job's Complete as "+
		"the bench's watch saw it. NodeClaims launched: every NodeClaim of the side's NodePool the bench's watch saw; NodeClaim-seconds: "+
		"the seconds each existed, summed, from the first tick's start to the drain's end.\n\n",
		limit, rows, autoscaledSmall.cpu, autoscaledSmall.memory, autoscaledLarge.cpu, autoscaledLarge.memory, dur,
		autoscaledLarge.cpu, autoscaledLarge.memory, autoscaledLarge.cpu, autoscaledLarge.memory)
	fmt.Fprintln(&w, "| side | drain | × B | NodeClaims launched | most at once | NodeClaim-seconds | × B | pods of Karpenter's limit Event | pods Unschedulable at the limit with every node up | Jobs created | duplicate Jobs | invocations (passes) | load avg (1 min) |")
	fmt.Fprintln(&w, "|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|")
	for _, r := range []autoscaleRun{a, b} {
		passes := 0
		for _, inv := range r.invocations {
			passes += inv.passes
		}
		fmt.Fprintf(&w, "| %s | %.1f s | %s | %d | %d | %.0f | %s | %d | %d | %d | %d | %d (%d) | %s |\n", r.mode, r.drain.Seconds(),
			ratio(r.drain.Seconds(), b.drain.Seconds()), r.figures.NodeClaims, r.figures.PeakNodeClaims, r.figures.NodeClaimSeconds,
			ratio(r.figures.NodeClaimSeconds, b.figures.NodeClaimSeconds), r.figures.LimitEventPods, r.figures.WaitedAtLimit, r.created,
			r.dupes, len(r.invocations), passes, r.load)
	}
	for _, r := range []autoscaleRun{a, b} {
		writeInvocations(&w, r.mode, r.invocations)
	}
	return w.String()
}

// ratio is a / b to two places, "–" when b is 0.
func ratio(a, b float64) string {
	if b == 0 {
		return "–"
	}
	return fmt.Sprintf("%.2f", a/b)
}
