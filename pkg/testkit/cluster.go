package testkit

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/jobsched/jobsched/pkg/kube"
)

type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// Cluster is the clients of a real API server: client-go's clientset, for a test's own setup, and jobsched's client
// (Kube), built as jobsched builds it (kube.NewForConfig), for the code under test.
type Cluster struct {
	kubernetes.Interface
	Kube kube.Interface
}

// RealCluster is a client of the local control plane scripts/test.sh starts (KUBECONFIG), with no client-side rate
// limit, and a namespace of the test's own named prefix-XXXX, deleted when the test ends.
func RealCluster(t testing.TB, prefix string) (*Cluster, string) {
	t.Helper()
	return CountingCluster(t, prefix, nil)
}

// CountingCluster is RealCluster whose client calls count (when not nil) with each request it sends.
func CountingCluster(t testing.TB, prefix string, count func(*http.Request)) (*Cluster, string) {
	t.Helper()
	kc := os.Getenv("KUBECONFIG")
	if kc == "" {
		t.Fatal("KUBECONFIG must be set: run scripts/test.sh, which starts the local cluster")
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", kc)
	if err != nil {
		t.Fatal(err)
	}
	cfg.QPS, cfg.Burst = -1, 0
	if count != nil {
		cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
			return roundTripper(func(r *http.Request) (*http.Response, error) {
				count(r)
				return rt.RoundTrip(r)
			})
		})
	}
	c, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	k, err := kube.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ns := fmt.Sprintf("%s-%04x", prefix, rand.IntN(0xffff))
	if _, err := c.CoreV1().Namespaces().Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.CoreV1().Namespaces().Delete(context.Background(), ns, metav1.DeleteOptions{}) })
	return &Cluster{c, k}, ns
}
