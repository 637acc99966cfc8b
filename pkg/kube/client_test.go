package kube_test

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	"github.com/rs/zerolog"
	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/jobsched/jobsched/pkg/kube"
	"github.com/jobsched/jobsched/pkg/testkit"
)

// TestNoClientSideLimitByDefault: the default client has no rate limiter; --kube-qps sets one.
func TestNoClientSideLimitByDefault(t *testing.T) {
	for _, tc := range []struct {
		qps         float32
		wantLimiter bool
	}{{0, false}, {20, true}} {
		c, ns, err := kube.NewClient(kube.Options{Kubeconfig: testkit.Kubeconfig(t, "http://127.0.0.1:1"), QPS: tc.qps, Burst: 10})
		if err != nil {
			t.Fatal(err)
		}
		if ns != "batch" {
			t.Errorf("namespace %q, want the context's", ns)
		}
		if got := c.BatchV1().RESTClient().GetRateLimiter() != nil; got != tc.wantLimiter {
			t.Errorf("--kube-qps %v: rate limiter %v, want %v", tc.qps, got, tc.wantLimiter)
		}
	}
}

// TestTooManyRequestsIsRetried: a 429 with Retry-After (API Priority and Fairness) is retried as the server asks.
func TestTooManyRequestsIsRetried(t *testing.T) {
	var calls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if calls.Add(1) == 1 {
			w.Header().Set("Retry-After", "1")
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusTooManyRequests)
			fmt.Fprint(w, `{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"TooManyRequests","code":429}`)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		fmt.Fprint(w, `{"kind":"Job","apiVersion":"batch/v1","metadata":{"name":"j","namespace":"batch","uid":"u"}}`)
	}))
	defer srv.Close()
	c, _, err := kube.NewClient(kube.Options{Kubeconfig: testkit.Kubeconfig(t, srv.URL)})
	if err != nil {
		t.Fatal(err)
	}
	job, err := c.BatchV1().Jobs("batch").Create(context.Background(), &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: "j"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create after a 429: %v", err)
	}
	if job.UID != "u" || calls.Load() != 2 {
		t.Errorf("created %q after %d calls, want uid u after 2", job.UID, calls.Load())
	}
}

// TestWarningsInTheRunsLog: the API server's warnings (a Warning header, code 299) go to the zerolog logger of the
// request's context, at warn, with its fields, as JSON like every other line: not to klog's text on stderr.
func TestWarningsInTheRunsLog(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Add("Warning", `299 - "spec.template.spec.nodeSelector[beta.kubernetes.io/arch]: deprecated since v1.14"`)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		fmt.Fprint(w, `{"kind":"Job","apiVersion":"batch/v1","metadata":{"name":"j","namespace":"batch","uid":"u"}}`)
	}))
	defer srv.Close()
	c, _, err := kube.NewClient(kube.Options{Kubeconfig: testkit.Kubeconfig(t, srv.URL)})
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	log := zerolog.New(&out).With().Str("scheduler", "reports").Logger()
	if _, err := c.BatchV1().Jobs("batch").Create(log.WithContext(context.Background()), &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: "j"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	want := `{"level":"warn","scheduler":"reports","warning":"spec.template.spec.nodeSelector[beta.kubernetes.io/arch]: deprecated since v1.14","message":"the API server warns"}` + "\n"
	if out.String() != want {
		t.Errorf("log:\n%s\nwant\n%s", out.String(), want)
	}
}
