//go:build integration

package lease

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/jobsched/jobsched/pkg/testkit"
)

// These run against the real API server of scripts/test.sh (KUBECONFIG): its optimistic concurrency is what makes
// the Lease exclusive, and the fake clientset has none.

// Ten holders race for a Lease nobody holds, none waiting: exactly one gets it.
func TestIntegrationOneOfRacingHolders(t *testing.T) {
	c, ns := testkit.RealCluster(t, "lease")
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
				h, err := Acquire(context.Background(), Config{Client: c.Kube.CoordinationV1(), Namespace: ns, Name: "jobsched-race",
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
	c, ns := testkit.RealCluster(t, "lease")
	var inside, most, turns atomic.Int32
	var wg sync.WaitGroup
	for i := range 6 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			h, err := Acquire(context.Background(), Config{Client: c.Kube.CoordinationV1(), Namespace: ns, Name: "jobsched-turns",
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
	c, ns := testkit.RealCluster(t, "lease")
	cfg := Config{Client: c.Kube.CoordinationV1(), Namespace: ns, Name: "jobsched-expiry", Duration: 2 * time.Second,
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
	if err := h.lock.update(context.Background(), h.record); err == nil { // the renewal the old holder would write
		t.Error("a write conditional on the old holder's version succeeded")
	}
}
