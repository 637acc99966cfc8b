//go:build integration

package e2e

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/util/workqueue"

	"github.com/jobsched/jobsched/pkg/capacity"
	"github.com/jobsched/jobsched/pkg/kube"
)

// BenchmarkCapacityObserve measures what capacity: nodes costs per pass on a real API server: one paginated LIST of
// nodes and one of non-terminal pods cluster-wide, aggregated page by page. The cluster is filled once with
// BENCH_NODES nodes (default 500) and BENCH_PODS pods bound to them (default 15000); scripts/bench-capacity.sh runs it
// at 5,000 nodes and 150,000 pods. Reported: time and allocations per pass, and the peak live heap during a pass
// (peak-heap-MB), which stays near one page of pods whatever the total.
func BenchmarkCapacityObserve(b *testing.B) {
	nodes, pods := envInt("BENCH_NODES", 500), envInt("BENCH_PODS", 15000)
	populate(b, benchAdmin(b), nodes, pods)
	c, _, err := kube.NewClient(kube.Options{Kubeconfig: kubeconfig, QPS: 50, Burst: 100}) // jobsched's defaults
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	var peak atomic.Uint64
	done := make(chan struct{})
	go func() { // sample the live heap while the passes run
		var ms runtime.MemStats
		for {
			select {
			case <-done:
				return
			case <-time.After(5 * time.Millisecond):
			}
			runtime.ReadMemStats(&ms)
			if ms.HeapAlloc > peak.Load() {
				peak.Store(ms.HeapAlloc)
			}
		}
	}()
	runtime.GC()
	var base runtime.MemStats
	runtime.ReadMemStats(&base)
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		snap, err := capacity.Observe(ctx, c, "bench", capacity.Options{Nodes: true, NoNextPassRoom: true})
		if err != nil {
			b.Fatal(err)
		}
		counted := 0
		for _, n := range snap.Nodes {
			counted += n.Pods
		}
		if len(snap.Nodes) < nodes || counted < pods {
			b.Fatalf("observed %d nodes and %d pods, want at least %d and %d", len(snap.Nodes), counted, nodes, pods)
		}
	}
	b.StopTimer()
	close(done)
	b.ReportMetric(float64(peak.Load()-min(peak.Load(), base.HeapAlloc))/(1<<20), "peak-heap-MB")
}

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}

// populate creates the nodes and pods (idempotent: it tops up what a previous run left). The nodes carry no kwok
// annotation, so nothing runs the pods: they stay bound and non-terminal, which is what capacity counts. The pods
// tolerate every taint so that the node lifecycle controller does not evict them from the heartbeat-less nodes.
// benchAdmin is client-go's clientset on the test cluster, for what the benchmarks set up (namespaces, nodes, pods).
func benchAdmin(b *testing.B) kubernetes.Interface {
	b.Helper()
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		b.Fatal(err)
	}
	cfg.QPS, cfg.Burst = 5000, 10000
	c, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		b.Fatal(err)
	}
	return c
}

func populate(b *testing.B, c kubernetes.Interface, nodes, pods int) {
	b.Helper()
	ctx := context.Background()
	_, err := c.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "bench"}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		b.Fatal(err)
	}
	// Pods need the namespace's default ServiceAccount, which the controller-manager makes.
	if err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		_, err := c.CoreV1().ServiceAccounts("bench").Get(ctx, "default", metav1.GetOptions{})
		return err == nil, nil
	}); err != nil {
		b.Fatalf("waiting for the default ServiceAccount of namespace bench: %v", err)
	}
	start := time.Now()
	rl := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("64"), corev1.ResourceMemory: resource.MustParse("256Gi"), corev1.ResourcePods: resource.MustParse("110")}
	parallel(b, nodes, func(i int) error {
		_, err := c.CoreV1().Nodes().Create(ctx, &corev1.Node{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("bench-node-%d", i), Labels: map[string]string{"bench": "true"}},
			Status:     corev1.NodeStatus{Capacity: rl, Allocatable: rl},
		}, metav1.CreateOptions{})
		return err
	})
	parallel(b, pods, func(i int) error {
		_, err := c.CoreV1().Pods("bench").Create(ctx, &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("bench-pod-%d", i), Labels: map[string]string{"app": "bench"}},
			Spec: corev1.PodSpec{
				NodeName:                     fmt.Sprintf("bench-node-%d", i%nodes),
				AutomountServiceAccountToken: new(bool),
				Tolerations:                  []corev1.Toleration{{Operator: corev1.TolerationOpExists}},
				Containers: []corev1.Container{{Name: "c", Image: "bench:1", Resources: corev1.ResourceRequirements{
					Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("128Mi")}}}},
			},
		}, metav1.CreateOptions{})
		return err
	})
	b.Logf("cluster holds %d nodes and %d pods (populated in %s)", nodes, pods, time.Since(start).Round(time.Second))
}

// parallel runs create(i) for i < n with 64 workers; AlreadyExists is fine (a previous run made it).
func parallel(b *testing.B, n int, create func(i int) error) {
	b.Helper()
	ctx, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	workqueue.ParallelizeUntil(ctx, 64, n, func(i int) {
		if err := create(i); err != nil && !apierrors.IsAlreadyExists(err) {
			cancel(err)
		}
	})
	if err := context.Cause(ctx); err != nil {
		b.Fatal(err)
	}
}
