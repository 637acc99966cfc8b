package lease

import (
	"bytes"
	"context"
	"errors"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	k8stesting "k8s.io/client-go/testing"

	"github.com/jobsched/jobsched/pkg/testkit"
)

func logCtx(buf *bytes.Buffer) context.Context {
	return zerolog.New(buf).WithContext(context.Background())
}

func holderOf(t *testing.T, g *Guard) string {
	t.Helper()
	l, err := g.Client.Leases(g.Namespace).Get(context.Background(), Name(g.Scheduler), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return *l.Spec.HolderIdentity
}

func TestGuardTakeAndRelease(t *testing.T) {
	c := newFake()
	g := &Guard{Client: c.CoordinationV1(), Namespace: "ns", Scheduler: "s", Holder: "me"}
	ctx, release, err := g.Take(context.Background())
	if err != nil || ctx.Err() != nil {
		t.Fatalf("Take: %v, %v", err, ctx.Err())
	}
	if st, _ := g.Report(); st != StateHeld || holderOf(t, g) != "me" {
		t.Errorf("state %q, holder %q; want held by me", st, holderOf(t, g))
	}
	release()
	if holderOf(t, g) != "" || ctx.Err() == nil {
		t.Errorf("after release: holder %q, context err %v; want released and done", holderOf(t, g), ctx.Err())
	}
}

func TestGuardCutShortLeavesTheLeaseToExpire(t *testing.T) {
	c := newFake()
	g := &Guard{Client: c.CoordinationV1(), Namespace: "ns", Scheduler: "s", Holder: "me"}
	pass, cancel := context.WithCancel(context.Background())
	_, release, err := g.Take(pass)
	if err != nil {
		t.Fatal(err)
	}
	cancel() // the pass's deadline or a signal: creates may be in flight
	release()
	if h := holderOf(t, g); h != "me" {
		t.Errorf("holder %q after a pass cut short, want the Lease left to expire (me)", h)
	}
}

func TestGuardHeldByAnother(t *testing.T) {
	other := held("other", 15)
	other.Name = Name("s")
	c := newFake(other)
	clk := fakeClock()
	g := &Guard{Client: c.CoordinationV1(), Namespace: "ns", Scheduler: "s", Holder: "me", Clock: clk}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Second)
	defer cancel()
	bound := MaxWait(ctx, 0) // half of what is left of the pass (about 2s), not a Lease duration and a second (16s)
	var err error
	stepping(clk, 100*time.Millisecond, func() { _, _, err = g.Take(ctx) })
	var he *HeldError
	if !errors.As(err, &he) {
		t.Fatalf("err %v, want a HeldError", err)
	}
	// The Guard's bound is this one, less the moments between the two reads of the deadline; it waits until then,
	// read by read (100ms apart here).
	st, waited := g.Report()
	if st != "held by other" || waited <= bound/2 || waited >= bound+100*time.Millisecond {
		t.Errorf("state %q after waiting %s, want held by other after waiting its bound, %s (half the pass)", st, waited, bound)
	}
}

func TestGuardForbiddenRunsUnserialised(t *testing.T) {
	c := newFake()
	c.PrependReactor("get", "leases", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewForbidden(leasesGR, "jobsched-s", errors.New("RBAC: access denied"))
	})
	var buf bytes.Buffer
	g := &Guard{Client: c.CoordinationV1(), Namespace: "ns", Scheduler: "s", Holder: "me"}
	pass := logCtx(&buf)
	ctx, release, err := g.Take(pass)
	if err != nil || ctx != pass {
		t.Fatalf("Take without RBAC: %v; want the pass's own context and no error", err)
	}
	release()
	if st, _ := g.Report(); st != StateForbidden {
		t.Errorf("state %q, want forbidden", st)
	}
	if n := strings.Count(buf.String(), "caps not guaranteed under racing passes"); n != 1 {
		t.Errorf("the warning was logged %d times, want once:\n%s", n, buf.String())
	}
}

func TestGuardOtherErrorCreatesNothing(t *testing.T) {
	c := newFake()
	c.PrependReactor("get", "leases", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, errors.New("connection refused")
	})
	g := &Guard{Client: c.CoordinationV1(), Namespace: "ns", Scheduler: "s", Holder: "me"}
	if _, _, err := g.Take(context.Background()); err == nil || !strings.Contains(err.Error(), "connection refused") {
		t.Errorf("err %v, want the failure", err)
	}
	if st, _ := g.Report(); st != StateError {
		t.Errorf("state %q, want error", st)
	}
}

func TestGuardLost(t *testing.T) {
	c := newFake()
	var updates atomic.Int32 // the Lease is created: every update is a renewal, or a release
	c.PrependReactor("update", "leases", func(k8stesting.Action) (bool, runtime.Object, error) {
		updates.Add(1)
		return true, nil, errors.New("connection refused")
	})
	var buf testkit.Buffer
	g := &Guard{Client: c.CoordinationV1(), Namespace: "ns", Scheduler: "s", Holder: "me", Duration: 300 * time.Millisecond}
	ctx, release, err := g.Take(zerolog.New(&buf).WithContext(context.Background()))
	if err != nil {
		t.Fatal(err)
	}
	<-ctx.Done()
	if !errors.Is(context.Cause(ctx), ErrLost) {
		t.Errorf("cause %v, want ErrLost", context.Cause(ctx))
	}
	before := updates.Load()
	release()
	if st, _ := g.Report(); st != StateLost {
		t.Errorf("state %q, want lost", st)
	}
	if n := updates.Load() - before; n != 0 {
		t.Errorf("release of a lost Lease wrote it %d times, want none", n)
	}
	// The warning is logged as the context ends, from its own goroutine.
	if err := wait.PollUntilContextTimeout(context.Background(), 10*time.Millisecond, 5*time.Second, true, func(context.Context) (bool, error) {
		return strings.Contains(buf.String(), "lost the Lease: this pass creates nothing more"), nil
	}); err != nil {
		t.Fatalf("no warning of the loss (%v):\n%s", err, buf.String())
	}
}

// An API server that has just started refuses everything until its RBAC cache is filled: a Forbidden counts as the
// Role's only once a read the Role grants has succeeded and the Lease is still refused.
func TestGuardForbiddenIsConfirmed(t *testing.T) {
	forbidden := func(n int32) (*atomic.Int32, k8stesting.ReactionFunc) {
		var calls atomic.Int32
		return &calls, func(k8stesting.Action) (bool, runtime.Object, error) {
			if calls.Add(1) <= n {
				return true, nil, apierrors.NewForbidden(leasesGR, "jobsched-s", errors.New("RBAC: access denied"))
			}
			return false, nil, nil
		}
	}
	t.Run("cold cache, then the Role", func(t *testing.T) {
		c := newFake()
		_, react := forbidden(1)
		c.PrependReactor("get", "leases", react)
		g := &Guard{Client: c.CoordinationV1(), Namespace: "ns", Scheduler: "s", Holder: "me",
			Confirm: func(context.Context) error { return nil }}
		if _, release, err := g.Take(context.Background()); err != nil {
			t.Fatal(err)
		} else {
			release()
		}
		if st, _ := g.Report(); st != StateHeld {
			t.Errorf("state %q, want held: the first Forbidden was the cold cache's", st)
		}
	})
	t.Run("cold cache, confirm refused too", func(t *testing.T) {
		c := newFake()
		_, react := forbidden(100)
		c.PrependReactor("get", "leases", react)
		g := &Guard{Client: c.CoordinationV1(), Namespace: "ns", Scheduler: "s", Holder: "me",
			Confirm: func(context.Context) error { return errors.New("forbidden: cannot list jobs") }}
		if _, _, err := g.Take(context.Background()); err == nil || errors.Is(err, ErrForbidden) {
			t.Errorf("err %v, want a failure that is not taken as the Role's answer", err)
		}
		if st, _ := g.Report(); st != StateError {
			t.Errorf("state %q, want error: no create unserialised", st)
		}
	})
	t.Run("the Role lacks the verbs", func(t *testing.T) {
		c := newFake()
		calls, react := forbidden(100)
		c.PrependReactor("get", "leases", react)
		g := &Guard{Client: c.CoordinationV1(), Namespace: "ns", Scheduler: "s", Holder: "me",
			Confirm: func(context.Context) error { return nil }}
		if _, _, err := g.Take(context.Background()); err != nil {
			t.Fatal(err)
		}
		if st, _ := g.Report(); st != StateForbidden || calls.Load() != 2 {
			t.Errorf("state %q after %d reads, want forbidden after 2", st, calls.Load())
		}
	})
}

func TestMaxWait(t *testing.T) {
	if w := MaxWait(context.Background(), 0); w != DefaultDuration+time.Second {
		t.Errorf("no deadline, default duration: %s", w)
	}
	if w := MaxWait(context.Background(), 5*time.Second); w != 6*time.Second {
		t.Errorf("no deadline, 5s Lease: %s, want 6s", w)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if w := MaxWait(ctx, 0); w > 5*time.Second || w < 4*time.Second {
		t.Errorf("10s left: %s, want half of it", w)
	}
}

// TestGuardAlone: a Guard says whether another holder took the Lease between its last two holds (a fill run's
// followed state is then not all that changed).
func TestGuardAlone(t *testing.T) {
	c := newFake()
	me := &Guard{Client: c.CoordinationV1(), Namespace: "ns", Scheduler: "s", Holder: "me"}
	other := &Guard{Client: c.CoordinationV1(), Namespace: "ns", Scheduler: "s", Holder: "other"}
	take := func(g *Guard) {
		t.Helper()
		_, release, err := g.Take(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		release()
	}
	var got []bool
	take(me) // the first hold: nothing before it to compare with
	got = append(got, me.Alone())
	take(me) // released and taken back by me
	got = append(got, me.Alone())
	take(other)
	take(me)
	got = append(got, me.Alone())
	take(me)
	got = append(got, me.Alone())
	if want := []bool{false, true, false, true}; !slices.Equal(got, want) {
		t.Errorf("Alone after each hold %v, want %v", got, want)
	}
}

// TestGuardKeep: with Keep, the hold of one pass is the next pass's, without a call and past the end of the pass
// that took it; Give releases it and the Take after takes it again; a lost hold is taken again; with the rate
// record (Annotation) each pass takes and releases it, as without Keep.
func TestGuardKeep(t *testing.T) {
	take := func(t *testing.T, g *Guard) context.Context {
		t.Helper()
		pass, cancel := context.WithCancel(context.Background())
		held, release, err := g.Take(pass)
		if err != nil {
			t.Fatal(err)
		}
		release()
		cancel() // the pass ends
		return held
	}
	t.Run("kept from pass to pass, given up by Give", func(t *testing.T) {
		c := newFake()
		g := &Guard{Client: c.CoordinationV1(), Namespace: "ns", Scheduler: "s", Holder: "me", Keep: true}
		first := take(t, g)
		c.ClearActions()
		second := take(t, g)
		if got := verbs(c); got != "" || second != first || first.Err() != nil || holderOf(t, g) != "me" {
			t.Errorf("second pass: calls %q, same hold %v, hold's err %v, holder %q; want no call, the first pass's hold, still held by me",
				got, second == first, first.Err(), holderOf(t, g))
		}
		if st, waited := g.Report(); st != StateHeld || waited != 0 || !g.Alone() {
			t.Errorf("report %q after %s, alone %v; want held, no wait, alone", st, waited, g.Alone())
		}
		g.Give(context.Background())
		if holderOf(t, g) != "" || first.Err() == nil {
			t.Errorf("after Give: holder %q, hold's err %v; want released", holderOf(t, g), first.Err())
		}
		c.ClearActions()
		if third := take(t, g); third == first || verbs(c) != "get update" {
			t.Errorf("after Give: calls %q, a new hold %v; want get update, a new hold", verbs(c), third != first)
		}
	})
	t.Run("lost: the next pass takes it again", func(t *testing.T) {
		c := newFake()
		g := &Guard{Client: c.CoordinationV1(), Namespace: "ns", Scheduler: "s", Holder: "me", Keep: true}
		first := take(t, g)
		g.mu.Lock()
		g.held.lose(ErrLost)
		g.mu.Unlock()
		c.ClearActions()
		if second := take(t, g); second == first || verbs(c) != "get update" {
			t.Errorf("after a loss: calls %q, a new hold %v; want get update, a new hold", verbs(c), second != first)
		}
	})
	t.Run("with the rate record: released each pass", func(t *testing.T) {
		c := newFake()
		g := &Guard{Client: c.CoordinationV1(), Namespace: "ns", Scheduler: "s", Holder: "me", Keep: true, Annotation: "jobsched.io/rate"}
		take(t, g)
		if h := holderOf(t, g); h != "" {
			t.Errorf("holder %q after the pass, want released", h)
		}
		c.ClearActions()
		g.Give(context.Background()) // nothing kept: no call
		if got := verbs(c); got != "" {
			t.Errorf("Give after a released pass: calls %q, want none", got)
		}
	})
}

// TestGuardReportAfterALoss: a Take after a hold was lost reports what that Take found, not the old loss: the Lease
// taken meanwhile by another holder ("held by other"), or the failure to read it (error), or the Role's refusal.
func TestGuardReportAfterALoss(t *testing.T) {
	tests := []struct {
		name    string
		then    func(c *testkit.Fake)
		want    string
		wantErr bool
	}{
		{name: "taken by another holder", want: "held by other", wantErr: true, then: func(c *testkit.Fake) {
			other := held("other", 15)
			other.Name = Name("s")
			c.PrependReactor("get", "leases", func(k8stesting.Action) (bool, runtime.Object, error) { return true, other, nil })
		}},
		{name: "unreadable", want: StateError, wantErr: true, then: func(c *testkit.Fake) {
			c.PrependReactor("get", "leases", func(k8stesting.Action) (bool, runtime.Object, error) {
				return true, nil, errors.New("connection refused")
			})
		}},
		{name: "forbidden", want: StateForbidden, then: func(c *testkit.Fake) {
			c.PrependReactor("get", "leases", func(k8stesting.Action) (bool, runtime.Object, error) {
				return true, nil, apierrors.NewForbidden(leasesGR, "jobsched-s", errors.New("RBAC: access denied"))
			})
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := newFake()
			// The real clock: the first hold's renewals leave a timer on a fake clock, which stepping would race ahead.
			g := &Guard{Client: c.CoordinationV1(), Namespace: "ns", Scheduler: "s", Holder: "me", Keep: true}
			if _, _, err := g.Take(context.Background()); err != nil {
				t.Fatal(err)
			}
			g.mu.Lock()
			lost := g.held
			g.mu.Unlock()
			lost.lose(ErrLost) // the first pass's hold is lost (its renewals failed, and ended)
			lost.Stop()
			<-lost.done
			if st, _ := g.Report(); st != StateLost {
				t.Fatalf("state %q after the loss, want lost", st)
			}
			tt.then(c)
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second) // held by other: Take waits 1s
			defer cancel()
			_, _, err := g.Take(ctx)
			if (err != nil) != tt.wantErr {
				t.Errorf("Take: %v, want an error: %v", err, tt.wantErr)
			}
			if st, _ := g.Report(); st != tt.want {
				t.Errorf("state %q after the next Take, want %q", st, tt.want)
			}
		})
	}
}
