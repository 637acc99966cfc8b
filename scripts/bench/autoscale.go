package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"

	"github.com/jobsched/jobsched/pkg/jobmeta"
	"github.com/jobsched/jobsched/pkg/testkit/karpenterkit"
	"github.com/jobsched/jobsched/pkg/testkit/kwokkit"
	"github.com/jobsched/jobsched/pkg/testkit/runinfo"
)

// ---------------------------------------------------------------------------------------------------------------
// The autoscaled drain (issue 30): TestAutoscale's scenario at a larger size, on Karpenter's KWOK provider (bench.sh
// starts its cluster with KARPENTER=1 NODES=0). A NodePool of scripts/karpenter/nodepool.yaml (4-CPU nodes, 2 task
// pods of 1900m each) limited to BENCH_AUTOSCALE_CPU (40: 10 nodes, 20 pods at once), BENCH_AUTOSCALE_ROWS rows
// (100) whose pods run BENCH_AUTOSCALE_TASK_SECONDS (10), from no node; side by side in one run, each on a NodePool
// and namespace of its own and after the one before has been consolidated away: capacity off (every row's Job at
// once, as KEDA's ScaledJob does) and capacity autoscale, each run by `tick --fill-for`, started again at once
// should it end before the drain (a CronJob would start it at its next time). Measured: the drain (the first tick's
// start to the last Job's Complete, as the bench's watch saw it), its ratio to off's, the Unschedulable
// pod-seconds (in all, and while the pool was at its limit: Karpenter could add no node), the pods of Karpenter's
// FailedScheduling Event at the pool's limits, the most NodeClaims at once, duplicate Jobs, and how long
// Karpenter took to consolidate the empty nodes after the drain. The run writes BENCH_AUTOSCALE_RESULTS (default
// scripts/bench/results/autoscale.md).

const autoscaleTaskCPU = "1900m"

type autoscaleRun struct {
	mode              string
	drain             time.Duration
	invocations       []invocation
	created, dupes    int
	figures           karpenterkit.Figures
	consolidated      time.Duration // from the drain's end until the pool had no NodeClaim
	consolidateFailed bool
	load              string
}

func (b *bench) autoscale() error {
	rows := envInt("BENCH_AUTOSCALE_ROWS", 100)
	limit := fmt.Sprint(envInt("BENCH_AUTOSCALE_CPU", 40))
	dur := time.Duration(envInt("BENCH_AUTOSCALE_TASK_SECONDS", 10)) * time.Second
	dyn, err := b.dynamicClient()
	if err != nil {
		return err
	}
	var runs []autoscaleRun
	for _, mode := range []string{"off", "autoscale"} {
		progress("  autoscaled drain, capacity %s…", mode)
		r, err := b.autoscaleOnce(dyn, mode, rows, limit, func(ns, table, pool string) (string, error) {
			if err := b.fillTableFresh(table, rows); err != nil {
				return "", err
			}
			return b.autoscaleScenario(mode, ns, table, pool, rows, dur)
		})
		if err != nil {
			return fmt.Errorf("capacity %s: %w", mode, err)
		}
		runs = append(runs, r)
	}
	return writeAutoscaleResults(runs, rows, limit, dur)
}

// autoscaleOnce drains rows through a NodePool of its own limited to limit CPU, from no node, in the namespace and
// table of name (made by scenario, which returns the config file): `tick --fill-for`, started again should it end
// while rows wait.
func (b *bench) autoscaleOnce(dyn dynamic.Interface, name string, rows int, limit string, scenario func(ns, table, pool string) (string, error)) (autoscaleRun, error) {
	r := autoscaleRun{mode: name}
	ns, table, pool := "bench-autoscale-"+name, "bench_autoscale_"+strings.ReplaceAll(name, "-", "_"), "bench-autoscale-"+name
	if _, err := b.admin.CoreV1().Namespaces().Create(b.ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return r, err
	}
	if err := b.clearJobs(ns); err != nil {
		return r, err
	}
	defer func() { _, _ = b.db.ExecContext(b.ctx, "DROP TABLE IF EXISTS "+table) }()
	del, err := karpenterkit.Create(b.ctx, dyn, ".", pool, limit, map[string]string{"jobsched.io/bench-pool": pool})
	if err != nil {
		return r, err
	}
	defer del(context.Background())
	ctx, cancel := context.WithCancel(b.ctx)
	defer cancel()
	w, err := karpenterkit.Start(ctx, b.admin, dyn, ns, pool)
	if err != nil {
		return r, err
	}

	var mu sync.Mutex
	perKey, complete := map[string]int{}, map[string]bool{}
	var lastComplete time.Time
	allDone := make(chan struct{})
	var once sync.Once
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
		if len(complete) >= rows {
			once.Do(func() { close(allDone) })
		}
	}); err != nil {
		return r, err
	}
	worker := b.standIn(table)
	if err := follow(ctx, b.admin.CoreV1().Pods(ns), func(_ watch.EventType, pod *corev1.Pod) { worker.saw(pod) }); err != nil {
		return r, err
	}

	cfgFile, err := scenario(ns, table, pool)
	if err != nil {
		return r, err
	}
	args := []string{"--timeout", "20s", "--fill-for", "15m"}
	t0 := time.Now()
	deadline := t0.Add(15 * time.Minute)
	drained := false
	for !drained && time.Now().Before(deadline) {
		_, done := b.drainTick(cfgFile, args, t0)
		inv := <-done
		r.invocations = append(r.invocations, inv)
		select {
		case <-allDone:
			drained = true
		default:
			if inv.code != 0 || len(r.invocations) > 50 {
				return r, fmt.Errorf("invocation %d exited %d (%s)", len(r.invocations), inv.code, inv.lastPass)
			}
			// The pass was blocked while rows wait: the next invocation once a Job has finished (a CronJob would
			// start it at its next time); with every row's Job created, only the drain's end is waited for.
			mu.Lock()
			before, created := len(complete), len(perKey)
			mu.Unlock()
			if created >= rows {
				select {
				case <-allDone:
					drained = true
				case <-time.After(time.Until(deadline)):
				}
				continue
			}
			_ = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Until(deadline), true, func(context.Context) (bool, error) {
				mu.Lock()
				defer mu.Unlock()
				return len(complete) > before || len(complete) >= rows, nil
			})
			select {
			case <-allDone:
				drained = true
			default:
			}
		}
	}
	if !drained {
		return r, errors.New("not drained after 15 minutes")
	}
	mu.Lock()
	r.drain = lastComplete.Sub(t0)
	for _, n := range perKey {
		r.created += n
		r.dupes += max(n-1, 0)
	}
	mu.Unlock()
	r.figures, r.load = w.Figures(), runinfo.LoadAvg(1)
	end := time.Now()
	if err := wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, 5*time.Minute, true, func(context.Context) (bool, error) {
		return w.NodeClaims() == 0, nil
	}); err != nil {
		r.consolidateFailed = true
	}
	r.consolidated = time.Since(end)
	progress("    drained in %.0f s; %+v", r.drain.Seconds(), r.figures)
	return r, nil
}

// autoscaleScenario writes the scenario's config: the mode, maxActive and maxPerTick the rows (off creates them
// all at once), no room kept for a tick pod (the bench runs outside a pod), finished Jobs deleted at once, task pods
// of 1900m on the pool's nodes that run dur.
func (b *bench) autoscaleScenario(mode, ns, table, pool string, rows int, dur time.Duration) (string, error) {
	dir := filepath.Join(b.dir, "autoscale-"+mode)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	tpl := kwokkit.Job{Duration: dur.String(), PodSpec: kwokkit.Task{PoolLabel: "jobsched.io/bench-pool", Pool: pool,
		Image: "registry.example/worker:1.0", CPU: autoscaleTaskCPU, Memory: "128Mi"}.PodSpec()}.YAML()
	cfg := benchConfig("autoscale", ns, table, fmt.Sprintf(`limits:
  maxActive: %d
  maxPerTick: %d
  capacity: %s
  reserveForTick: false
gc:
  succeededRetention: 0s
`, rows, rows, mode))
	if err := os.WriteFile(filepath.Join(dir, "job.yaml"), []byte(tpl), 0o644); err != nil {
		return "", err
	}
	file := filepath.Join(dir, "jobsched.yaml")
	return file, os.WriteFile(file, []byte(cfg), 0o644)
}

func writeAutoscaleResults(runs []autoscaleRun, rows int, limit string, dur time.Duration) error {
	var w strings.Builder
	fmt.Fprintf(&w, "# The autoscaled drain (written by `BENCH_ONLY=autoscale scripts/bench.sh`; do not edit)\n\n")
	fmt.Fprintf(&w, "%s\n\n", os.Getenv("BENCH_MACHINE"))
	fmt.Fprintf(&w, "Karpenter v1.13.0 (KWOK provider) from no node: a NodePool of 4-CPU nodes (scripts/karpenter/nodepool.yaml) limited to %s CPU, "+
		"%d rows, task pods of %s (2 a node) that run %s; each mode on a NodePool of its own, after the one before was consolidated away; "+
		"`tick --fill-for` (started again at once should it end before the drain). Drain: from the first tick's start to the last Job's Complete "+
		"as the bench's watch saw it. At the limit: the NodePool's status.resources.cpu leaves less than one node below its limit; with every node up: "+
		"kube-scheduler marked the pod Unschedulable while the pool was at its limit and every NodeClaim of it Initialized (no node coming for it).\n\n",
		limit, rows, autoscaleTaskCPU, dur)
	fmt.Fprintln(&w, "| capacity | drain | × off's | invocations (passes) | Jobs created | duplicate Jobs | most NodeClaims | pods of Karpenter's limit Event | pods Unschedulable at the limit with every node up | Unschedulable pod-seconds at the limit | in all | consolidated after the drain | load avg (1 min) |")
	fmt.Fprintln(&w, "|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|")
	for _, r := range runs {
		passes := 0
		for _, inv := range r.invocations {
			passes += inv.passes
		}
		cons := fmt.Sprintf("%.0f s", r.consolidated.Seconds())
		if r.consolidateFailed {
			cons = "not within " + cons
		}
		fmt.Fprintf(&w, "| %s | %.1f s | %.2f | %d (%d) | %d | %d | %d | %d | %d | %.1f | %.1f | %s | %s |\n", r.mode, r.drain.Seconds(),
			r.drain.Seconds()/runs[0].drain.Seconds(), len(r.invocations), passes, r.created, r.dupes, r.figures.PeakNodeClaims,
			r.figures.LimitEventPods, r.figures.WaitedAtLimit, r.figures.PodSecondsAt, r.figures.PodSeconds, cons, r.load)
	}
	for _, r := range runs {
		writeInvocations(&w, "capacity "+r.mode, r.invocations)
	}
	return writeResultsFile("BENCH_AUTOSCALE_RESULTS", "scripts/bench/results/autoscale.md", "autoscale", w.String())
}
