//go:build integration

package e2e

import (
	"context"
	"fmt"
	"net/http"
	"sync/atomic"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/jobsched/jobsched/pkg/capacity"
	"github.com/jobsched/jobsched/pkg/kube"
)

// BenchmarkCapacityPool measures one capacity: nodes observation side by side, on the cluster BenchmarkCapacityObserve
// fills (BENCH_NODES nodes, BENCH_PODS pods), whose first BENCH_POOL nodes (default 50) carry the label
// bench-pool=true:
//   - all-pods: a template that may run on every node: one LIST of all non-terminal pods, as every pass did before;
//   - pool: a template with nodeSelector bench-pool=true: one LIST of the pods of each pool node (spec.nodeName,
//     concurrently) and one of the unbound pods.
//
// Both also LIST the nodes, LimitRanges and ResourceQuotas. Reported: time per pass and the LIST calls per pass.
func BenchmarkCapacityPool(b *testing.B) {
	nodes, pods, pool := envInt("BENCH_NODES", 500), envInt("BENCH_PODS", 15000), envInt("BENCH_POOL", 50)
	admin := benchAdmin(b)
	ctx := context.Background()
	_, errNode := admin.CoreV1().Nodes().Get(ctx, fmt.Sprintf("bench-node-%d", nodes-1), metav1.GetOptions{})
	_, errPod := admin.CoreV1().Pods("bench").Get(ctx, fmt.Sprintf("bench-pod-%d", pods-1), metav1.GetOptions{})
	if errNode != nil || errPod != nil { // not filled yet by BenchmarkCapacityObserve in the same run
		populate(b, admin, nodes, pods)
	}
	label := []byte(`{"metadata":{"labels":{"bench-pool":"true"}}}`)
	parallel(b, pool, func(i int) error {
		_, err := admin.CoreV1().Nodes().Patch(ctx, fmt.Sprintf("bench-node-%d", i), types.MergePatchType, label, metav1.PatchOptions{})
		return err
	})
	var calls atomic.Int64
	// The bench nodes have no kubelet: they turn NotReady and tainted; the templates tolerate that (capacity still
	// lists the pods of NotReady nodes the template may use).
	template := func(selector map[string]string) *batchv1.Job {
		return &batchv1.Job{Spec: batchv1.JobSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
			NodeSelector: selector,
			Tolerations:  []corev1.Toleration{{Operator: corev1.TolerationOpExists}},
			Containers:   []corev1.Container{{Name: "worker", Image: "worker:1"}},
		}}}}
	}
	for _, bc := range []struct {
		name     string
		template *batchv1.Job
		listed   string
	}{
		{name: "all-pods", template: template(nil), listed: "all pods"},
		{name: fmt.Sprintf("pool-%d-nodes", pool), template: template(map[string]string{"bench-pool": "true"}), listed: fmt.Sprintf("pods of %d node(s)", pool)},
	} {
		b.Run(bc.name, func(b *testing.B) {
			calls.Store(0)
			b.ReportAllocs()
			for b.Loop() {
				// A new client each pass, as each tick is a new process: its rate limiter starts with a full burst.
				c := countingClient(b, &calls)
				snap, err := capacity.Observe(ctx, c, "bench", capacity.Options{Nodes: true, Templates: []*batchv1.Job{bc.template}})
				if err != nil {
					b.Fatal(err)
				}
				if snap.Listed != bc.listed {
					b.Fatalf("listed %q, want %q", snap.Listed, bc.listed)
				}
			}
			b.ReportMetric(float64(calls.Load())/float64(b.N), "calls/op")
		})
	}
}

// countingClient is a client with jobsched's default QPS and burst that counts its requests in calls.
func countingClient(b *testing.B, calls *atomic.Int64) kube.Interface {
	b.Helper()
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		b.Fatal(err)
	}
	cfg.QPS, cfg.Burst = 50, 100
	cfg.AcceptContentTypes, cfg.ContentType = "application/vnd.kubernetes.protobuf,application/json", "application/vnd.kubernetes.protobuf" // as kube.NewClient
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return roundTripper(func(r *http.Request) (*http.Response, error) {
			calls.Add(1)
			return rt.RoundTrip(r)
		})
	})
	c, err := kube.NewForConfig(cfg)
	if err != nil {
		b.Fatal(err)
	}
	return c
}

type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }
