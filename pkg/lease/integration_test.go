//go:build integration

package lease

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/jobsched/jobsched/pkg/testkit"
)

// These run against the real API server of scripts/test.sh (KUBECONFIG): its optimistic concurrency is what makes
// the Lease exclusive, and the fake clientset has none.

func realClient(t *testing.T) (kubernetes.Interface, string) {
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
	c := kubernetes.NewForConfigOrDie(cfg)
	ns := fmt.Sprintf("lease-%04x", rand.IntN(0xffff))
	if _, err := c.CoreV1().Namespaces().Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.CoreV1().Namespaces().Delete(context.Background(), ns, metav1.DeleteOptions{}) })
	return c, ns
}

// Ten holders race for a Lease nobody holds, none waiting: exactly one gets it.
func TestIntegrationOneOfRacingHolders(t *testing.T) {
	c, ns := realClient(t)
	for round := range 5 { // the first round races on the create, the others on the update of a released Lease
		var wg sync.WaitGroup
		var got []*Held
		var mu sync.Mutex
		heldErrs := 0
		start := make(chan struct{})
		for i := range 10 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				h, err := Acquire(context.Background(), Config{Client: c.CoordinationV1(), Namespace: ns, Name: "jobsched-race",
					Holder: fmt.Sprintf("h%d-%d", round, i), Duration: 3 * time.Second})
				mu.Lock()
				defer mu.Unlock()
				var he *HeldError
				switch {
				case err == nil:
					got = append(got, h)
				case errors.As(err, &he):
					heldErrs++
				default:
					t.Errorf("round %d: %v", round, err)
				}
			}()
		}
		close(start)
		wg.Wait()
		if len(got) != 1 || heldErrs != 9 {
			t.Fatalf("round %d: %d holders, %d told it is held; want 1 and 9", round, len(got), heldErrs)
		}
		if err := got[0].Release(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
}

// Holders that wait take turns: never two at once, and each gets it.
func TestIntegrationWaitingHoldersTakeTurns(t *testing.T) {
	c, ns := realClient(t)
	var inside, most, turns atomic.Int32
	var wg sync.WaitGroup
	for i := range 6 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			h, err := Acquire(context.Background(), Config{Client: c.CoordinationV1(), Namespace: ns, Name: "jobsched-turns",
				Holder: fmt.Sprintf("h%d", i), Duration: 3 * time.Second, Wait: 30 * time.Second, Poll: 50 * time.Millisecond})
			if err != nil {
				t.Error(err)
				return
			}
			n := inside.Add(1)
			for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
			}
			// The holder's work, while the others wait their turn: the scenario's schedule, not a wait for something.
			if err := testkit.Pause(t.Context(), 100*time.Millisecond); err != nil {
				t.Error(err)
			}
			inside.Add(-1)
			turns.Add(1)
			if err := h.Release(context.Background()); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	if most.Load() != 1 || turns.Load() != 6 {
		t.Errorf("at most %d holders at once, %d turns; want 1 and 6", most.Load(), turns.Load())
	}
}

// A holder that stops renewing without releasing (as a SIGKILLed pass) keeps the next one out for one Lease
// duration, counted from when the next one first saw it, and no longer; one that renews keeps it past its duration.
func TestIntegrationUnrenewedLeaseExpires(t *testing.T) {
	c, ns := realClient(t)
	cfg := Config{Client: c.CoordinationV1(), Namespace: ns, Name: "jobsched-expiry", Duration: 2 * time.Second,
		Poll: 100 * time.Millisecond}
	first := cfg
	first.Holder = "renewing"
	h, err := Acquire(context.Background(), first)
	if err != nil {
		t.Fatal(err)
	}
	// Renewed every 2/3 s: a contender waiting 4 s (twice the duration) never gets it.
	other := cfg
	other.Holder, other.Wait = "contender", 4*time.Second
	var he *HeldError
	if _, err := Acquire(context.Background(), other); !errors.As(err, &he) || he.Holder != "renewing" {
		t.Fatalf("a renewed Lease: %v, want held by renewing", err)
	}
	if h.Context().Err() != nil {
		t.Fatalf("the renewing holder lost it: %v", context.Cause(h.Context()))
	}
	h.Stop() // killed: no more renewals, no release
	start := time.Now()
	h2, err := Acquire(context.Background(), other)
	if err != nil {
		t.Fatal(err)
	}
	defer h2.Stop()
	// Taken within other's Wait (4s, twice the duration: no HeldError), and not before the Lease's duration.
	if d := time.Since(start); d < 2*time.Second {
		t.Errorf("took the unrenewed Lease after %s, before its duration, 2s", d)
	}
	// The old holder's write now conflicts: it cannot take the Lease back by renewing.
	l, err := c.CoordinationV1().Leases(ns).Get(context.Background(), "jobsched-expiry", metav1.GetOptions{})
	if err != nil || *l.Spec.HolderIdentity != "contender" || *l.Spec.LeaseTransitions != 1 {
		t.Fatalf("after the takeover: %+v, %v", l.Spec, err)
	}
	if err := h.lock.Update(context.Background(), h.record); err == nil { // the renewal the old holder would write
		t.Error("a write conditional on the old holder's version succeeded")
	}
}
