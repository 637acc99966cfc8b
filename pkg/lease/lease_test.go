package lease

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	goruntime "runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	coordinationv1 "k8s.io/api/coordination/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/jobsched/jobsched/pkg/testkit"
)

var leasesGR = schema.GroupResource{Group: "coordination.k8s.io", Resource: "leases"}

func ptr[T any](v T) *T { return &v }

func held(holder string, seconds int32) *coordinationv1.Lease {
	t := metav1.NewMicroTime(time.Now())
	return &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: "jobsched-s", Namespace: "ns", ResourceVersion: "7"},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr(holder), LeaseDurationSeconds: ptr(seconds),
			AcquireTime: &t, RenewTime: &t, LeaseTransitions: ptr(int32(2))},
	}
}

func TestHolder(t *testing.T) {
	env := func(m map[string]string) func(string) string { return func(k string) string { return m[k] } }
	if got := Holder(env(map[string]string{"POD_NAME": "jobsched-reports-29000-abcde"}), "node-1", 42); got != "jobsched-reports-29000-abcde" {
		t.Errorf("in a pod: %q", got)
	}
	if got := Holder(env(nil), "laptop", 42); got != "laptop_42" {
		t.Errorf("outside a pod: %q", got)
	}
	if got := Name("reports"); got != "jobsched-reports" {
		t.Errorf("Name: %q", got)
	}
}

func TestFree(t *testing.T) {
	seen := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	released := held("", 15)
	noHolder := held("x", 15)
	noHolder.Spec.HolderIdentity = nil
	noDuration := held("other", 15)
	noDuration.Spec.LeaseDurationSeconds = nil
	for _, tc := range []struct {
		name string
		l    *coordinationv1.Lease
		now  time.Time
		want bool
	}{
		{"released (empty holder)", released, seen, true},
		{"no holder", noHolder, seen, true},
		{"our own", held("me", 15), seen, true},
		{"another's, just seen", held("other", 15), seen, false},
		{"another's, a moment before its duration", held("other", 15), seen.Add(15*time.Second - time.Millisecond), false},
		{"another's, unrenewed for its duration", held("other", 15), seen.Add(15 * time.Second), true},
		{"its own duration counts, not ours", held("other", 2), seen.Add(2 * time.Second), true},
		{"no duration: the default", noDuration, seen.Add(DefaultDuration - time.Millisecond), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Free(recordOf(&tc.l.Spec), "me", seen, tc.now); got != tc.want {
				t.Errorf("Free = %v, want %v", got, tc.want)
			}
		})
	}
}

// TestRecord: the record a holder writes, as the Lease's spec: a new Lease's, a takeover's (a new acquire time, one
// more transition), a renewal's (only the renew time changes).
func TestRecord(t *testing.T) {
	now := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	cfg := Config{Name: "jobsched-s", Namespace: "ns", Holder: "me", Duration: 15 * time.Second}
	mt := metav1.NewMicroTime(now)
	spec := specOf

	fresh := record(nil, cfg, now)
	want := coordinationv1.LeaseSpec{HolderIdentity: ptr("me"), LeaseDurationSeconds: ptr(int32(15)), AcquireTime: &mt, RenewTime: &mt,
		LeaseTransitions: ptr(int32(0))}
	if got := spec(fresh); !apiequality.Semantic.DeepEqual(got, want) {
		t.Errorf("new Lease:\n got %+v\nwant %+v", got, want)
	}

	other := held("other", 3)
	otherRecord := recordOf(&other.Spec)
	taken := record(otherRecord, cfg, now)
	want = *other.Spec.DeepCopy()
	want.HolderIdentity, want.LeaseDurationSeconds, want.AcquireTime, want.RenewTime = ptr("me"), ptr(int32(15)), &mt, &mt
	want.LeaseTransitions = ptr(int32(3))
	if got := spec(taken); !apiequality.Semantic.DeepEqual(got, want) {
		t.Errorf("taken over:\n got %+v\nwant %+v", got, want)
	}
	if otherRecord.HolderIdentity != "other" {
		t.Error("record changed the record it was given")
	}

	later := now.Add(5 * time.Second)
	renewed := record(&taken, cfg, later)
	lt := metav1.NewMicroTime(later)
	want.RenewTime = &lt
	if got := spec(renewed); !apiequality.Semantic.DeepEqual(got, want) {
		t.Errorf("renewed (acquireTime and transitions kept):\n got %+v\nwant %+v", got, want)
	}
	if s := record(nil, Config{Duration: 1500 * time.Millisecond}, now).LeaseDurationSeconds; s != 2 {
		t.Errorf("1.5s as leaseDurationSeconds: %d, want 2 (rounded up)", s)
	}
}

// TestLockRecordIsLeaderElections: the record and its conversions to and from a Lease's spec are client-go's
// leader election's (resourcelock), which lock.go copies rather than imports.
func TestLockRecordIsLeaderElections(t *testing.T) {
	full := held("other", 15).Spec
	full.PreferredHolder, full.Strategy = ptr("next"), ptr(coordinationv1.OldestEmulationVersion)
	for name, spec := range map[string]coordinationv1.LeaseSpec{"empty": {}, "held": held("other", 15).Spec, "released": held("", 3).Spec,
		"every field": full} {
		t.Run(name, func(t *testing.T) {
			mine, theirs := recordOf(&spec), resourcelock.LeaseSpecToLeaderElectionRecord(&spec)
			if diff := cmp.Diff(*theirs, resourcelock.LeaderElectionRecord(*mine)); diff != "" {
				t.Errorf("record (-client-go +lock.go):\n%s", diff)
			}
			if diff := cmp.Diff(resourcelock.LeaderElectionRecordToLeaseSpec(theirs), specOf(*mine)); diff != "" {
				t.Errorf("spec (-client-go +lock.go):\n%s", diff)
			}
			mj, _ := json.Marshal(mine)
			tj, _ := json.Marshal(theirs)
			if string(mj) != string(tj) {
				t.Errorf("as JSON (what Acquire compares):\n%s\nclient-go:\n%s", mj, tj)
			}
		})
	}
}

func newFake(objs ...runtime.Object) *testkit.Fake { return testkit.NewFake(objs...) }

func TestAcquireCreatesAndReleases(t *testing.T) {
	c := newFake()
	h, err := Acquire(context.Background(), Config{Client: c.CoordinationV1(), Namespace: "ns", Name: "jobsched-s", Holder: "me"})
	if err != nil {
		t.Fatal(err)
	}
	if got := verbs(c); got != "get create" {
		t.Errorf("calls %q, want get (not found), create", got)
	}
	l, err := c.CoordinationV1().Leases("ns").Get(context.Background(), "jobsched-s", metav1.GetOptions{})
	if err != nil || *l.Spec.HolderIdentity != "me" || *l.Spec.LeaseDurationSeconds != 15 {
		t.Fatalf("after Acquire: %+v, %v", l, err)
	}
	if h.Context().Err() != nil {
		t.Fatal("a fresh Lease's Context is done")
	}
	c.ClearActions()
	if err := h.Release(context.Background()); err != nil || verbs(c) != "update" {
		t.Fatalf("Release: calls %q, %v; want one update", verbs(c), err)
	}
	l, _ = c.CoordinationV1().Leases("ns").Get(context.Background(), "jobsched-s", metav1.GetOptions{})
	if *l.Spec.HolderIdentity != "" {
		t.Errorf("after Release the holder is %q", *l.Spec.HolderIdentity)
	}
	if h.Context().Err() == nil {
		t.Error("after Release the Context is not done")
	}
	// A released Lease is taken at once: GET, UPDATE.
	c.ClearActions()
	h2, err := Acquire(context.Background(), Config{Client: c.CoordinationV1(), Namespace: "ns", Name: "jobsched-s", Holder: "next"})
	if err != nil || verbs(c) != "get update" {
		t.Fatalf("taking a released Lease: calls %q, %v; want get, update", verbs(c), err)
	}
	h2.Stop()
}

// fakeClock is a holder's clock that the test moves on; it starts at the real time, as the Leases of held do.
func fakeClock() *clocktesting.FakeClock { return clocktesting.NewFakeClock(time.Now()) }

// until waits, polling, for cond: what the code under test has done on the fake clock before the test moves it on.
func until(t *testing.T, what string, cond func() bool) {
	t.Helper()
	if err := wait.PollUntilContextTimeout(t.Context(), time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		return cond(), nil
	}); err != nil {
		t.Fatalf("waiting for %s: %v", what, err)
	}
}

// stepping runs fn, moving c on by step each time the code under test waits on c (its only timer: a wait for the
// next read), until fn returns; it returns how long fn took on c.
func stepping(c *clocktesting.FakeClock, step time.Duration, fn func()) time.Duration {
	start := c.Now()
	done := make(chan struct{})
	go func() { defer close(done); fn() }()
	for {
		select {
		case <-done:
			return c.Since(start)
		default:
		}
		if c.Waiters() > 0 {
			c.Step(step)
		} else {
			goruntime.Gosched()
		}
	}
}

// acquireStepping is Acquire with cfg on clock c, stepped by cfg.Poll (see stepping), and how long it took on c.
func acquireStepping(t *testing.T, c *clocktesting.FakeClock, cfg Config) (h *Held, took time.Duration, err error) {
	t.Helper()
	cfg.Clock = c
	took = stepping(c, cfg.Poll, func() { h, err = Acquire(context.Background(), cfg) })
	return h, took, err
}

// verbs are the fake's actions' verbs, in order.
func verbs(c *testkit.Fake) string {
	var out []string
	for _, a := range c.Actions() {
		out = append(out, a.GetVerb())
	}
	return strings.Join(out, " ")
}

// TestAcquireHeld: a live holder's Lease is read every Poll until Wait has passed, then Acquire gives up with a
// HeldError naming the holder; it never writes the Lease.
func TestAcquireHeld(t *testing.T) {
	c := newFake(held("other", 15))
	_, took, err := acquireStepping(t, fakeClock(), Config{Client: c.CoordinationV1(), Namespace: "ns", Name: "jobsched-s",
		Holder: "me", Wait: 300 * time.Millisecond, Poll: 100 * time.Millisecond})
	var he *HeldError
	if !errors.As(err, &he) || he.Holder != "other" || he.Waited != 300*time.Millisecond {
		t.Fatalf("err = %v, want a HeldError naming other after its Wait, 300ms", err)
	}
	if took != 300*time.Millisecond || verbs(c) != "get get get get" {
		t.Errorf("gave up after %s with calls %q, want 300ms and 4 reads, no write (at 0, 100, 200, 300ms)", took, verbs(c))
	}
}

// TestAcquireTakesOverAnUnrenewedLease: a Lease nobody renews is taken over once it has gone unrenewed for its own
// duration (1s) on the taker's clock from when it first saw it, not after the taker's Wait (3s).
func TestAcquireTakesOverAnUnrenewedLease(t *testing.T) {
	c := newFake(held("killed", 1))
	clk := fakeClock()
	start := clk.Now()
	h, _, err := acquireStepping(t, clk, Config{Client: c.CoordinationV1(), Namespace: "ns", Name: "jobsched-s",
		Holder: "me", Wait: 3 * time.Second, Poll: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Stop()
	l, _ := c.CoordinationV1().Leases("ns").Get(context.Background(), "jobsched-s", metav1.GetOptions{})
	// When it took over is the acquire time it wrote, on its clock: the stepping may move the clock on after Acquire
	// returned, for the new hold's renewal timer, before it sees Acquire done.
	if took := l.Spec.AcquireTime.Sub(start).Round(time.Millisecond); took != time.Second {
		t.Errorf("took over after %s, want the Lease's duration, 1s", took)
	}
	if *l.Spec.HolderIdentity != "me" || *l.Spec.LeaseTransitions != 3 {
		t.Errorf("after the takeover: holder %q, transitions %d", *l.Spec.HolderIdentity, *l.Spec.LeaseTransitions)
	}
}

func TestAcquireConflictRereads(t *testing.T) {
	c := newFake(held("", 15))
	var conflicts atomic.Int32
	c.PrependReactor("update", "leases", func(k8stesting.Action) (bool, runtime.Object, error) {
		if conflicts.Add(1) == 1 {
			return true, nil, apierrors.NewConflict(leasesGR, "jobsched-s", errors.New("the object has been modified"))
		}
		return false, nil, nil
	})
	h, err := Acquire(context.Background(), Config{Client: c.CoordinationV1(), Namespace: "ns", Name: "jobsched-s", Holder: "me"})
	if err != nil {
		t.Fatal(err)
	}
	h.Stop()
	if got := verbs(c); got != "get update get update" {
		t.Errorf("calls %q, want get, update (conflict), get, update", got)
	}
}

func TestAcquireForbidden(t *testing.T) {
	for _, verb := range []string{"get", "create"} {
		t.Run(verb, func(t *testing.T) {
			c := newFake()
			c.PrependReactor(verb, "leases", func(k8stesting.Action) (bool, runtime.Object, error) {
				return true, nil, apierrors.NewForbidden(leasesGR, "jobsched-s", errors.New("RBAC: access denied"))
			})
			_, err := Acquire(context.Background(), Config{Client: c.CoordinationV1(), Namespace: "ns", Name: "jobsched-s", Holder: "me"})
			if !errors.Is(err, ErrForbidden) {
				t.Errorf("err = %v, want ErrForbidden", err)
			}
		})
	}
}

// TestRenewFailureEndsContext: the holder renews every third of the duration; the first renewal that fails ends
// its Context with ErrLost, and a lost Lease is not released.
func TestRenewFailureEndsContext(t *testing.T) {
	c := newFake()
	var renewals atomic.Int32 // the Lease is created: every update is a renewal
	c.PrependReactor("update", "leases", func(k8stesting.Action) (bool, runtime.Object, error) {
		if renewals.Add(1) <= 2 {
			return false, nil, nil // two renewals succeed
		}
		return true, nil, errors.New("connection refused")
	})
	clk := fakeClock()
	h, err := Acquire(context.Background(), Config{Client: c.CoordinationV1(), Namespace: "ns", Name: "jobsched-s", Holder: "me",
		Duration: 300 * time.Millisecond, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	until(t, "the renewals' ticker and deadline", func() bool { return clk.Waiters() >= 2 })
	for n := int32(1); n <= 2; n++ { // a renewal every 100ms, each done before the clock moves on
		clk.Step(100 * time.Millisecond)
		// Done: the renewal has been sent, and the holder waits again (the ticker, the deadlines of the renewal and
		// of the wait before it, and the next deadline, from this renewal: 4 timers).
		until(t, fmt.Sprintf("renewal %d", n), func() bool { return renewals.Load() == n && clk.Waiters() >= 4 })
	}
	clk.Step(100 * time.Millisecond) // the third renewal fails
	until(t, "the Context's end", func() bool { return h.Context().Err() != nil })
	if !errors.Is(context.Cause(h.Context()), ErrLost) || h.Lost() == nil {
		t.Errorf("cause %v, Lost %v: want ErrLost", context.Cause(h.Context()), h.Lost())
	}
	if n := renewals.Load(); n != 3 {
		t.Errorf("%d renewals tried, want 3 (two that succeeded, then the one that failed)", n)
	}
	c.ClearActions()
	if err := h.Release(context.Background()); verbs(c) != "" || err != nil {
		t.Errorf("releasing a lost Lease: calls %q, %v; want none", verbs(c), err)
	}
}

// TestRenewThatHangsEndsContextAtValidity: a renewal the API server never answers ends the Context when the
// Lease's validity (two thirds of its duration after the last successful write) runs out, not later.
func TestRenewThatHangsEndsContextAtValidity(t *testing.T) {
	c := newFake()
	hang := make(chan struct{}) // an API server that does not answer: the renewal returns only when the test ends
	t.Cleanup(func() { close(hang) })
	var renewals atomic.Int32
	c.PrependReactor("update", "leases", func(k8stesting.Action) (bool, runtime.Object, error) {
		renewals.Add(1)
		<-hang
		return true, nil, errors.New("timeout")
	})
	clk := fakeClock()
	start := clk.Now()
	h, err := Acquire(context.Background(), Config{Client: c.CoordinationV1(), Namespace: "ns", Name: "jobsched-s", Holder: "me",
		Duration: 600 * time.Millisecond, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	until(t, "the renewals' ticker and deadline", func() bool { return clk.Waiters() >= 2 })
	clk.Step(200 * time.Millisecond) // the first renewal: it hangs
	until(t, "the hanging renewal and its deadline", func() bool { return renewals.Load() == 1 && clk.Waiters() >= 3 })
	if h.Context().Err() != nil {
		t.Fatal("the Context ended while the Lease was still valid")
	}
	clk.Step(200 * time.Millisecond) // 400ms after the acquiring write: the validity has run out
	until(t, "the Context's end", func() bool { return h.Context().Err() != nil })
	if !errors.Is(context.Cause(h.Context()), ErrLost) || clk.Since(start) != 400*time.Millisecond {
		t.Errorf("cause %v at %s; want ErrLost at 400ms", context.Cause(h.Context()), clk.Since(start))
	}
}

func TestDescribe(t *testing.T) {
	now := time.Now()
	l := held("pod-1", 15)
	l.Name = Name("s")
	renewed := metav1.NewMicroTime(now.Add(-40 * time.Second))
	l.Spec.RenewTime = &renewed
	for _, tc := range []struct {
		name string
		c    *testkit.Fake
		want string
	}{
		{"never taken", newFake(), "jobsched-s: free (no pass creating)"},
		{"held, unrenewed past its duration", newFake(l), "jobsched-s: held by pod-1, renewed 40s ago (longer than its 15s: the next tick takes it over)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Describe(context.Background(), tc.c.CoordinationV1(), "ns", "s").String(now); got != tc.want {
				t.Errorf("got  %q\nwant %q", got, tc.want)
			}
		})
	}
	c := newFake()
	c.PrependReactor("get", "leases", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewForbidden(leasesGR, "jobsched-s", errors.New("RBAC: access denied"))
	})
	if i := Describe(context.Background(), c.CoordinationV1(), "ns", "s"); i.Error == "" || !strings.Contains(i.String(now), "cannot read it") {
		t.Errorf("without RBAC: %+v", i)
	}
}

// TestHeldErrorEscapesTheHolder: the holder is written by anyone with update on leases, and the error reaches the
// Blocked Event's note and the logs: a control character in it is escaped; a plain holder is shown as it is.
func TestHeldErrorEscapesTheHolder(t *testing.T) {
	if got := (&HeldError{Name: "jobsched-s", Holder: "pod-1", Waited: time.Second}).Error(); got != "Lease jobsched-s is held by pod-1 (waited 1s)" {
		t.Errorf("plain holder: %q", got)
	}
	got := (&HeldError{Name: "jobsched-s", Holder: "p\x1b[2Jod\n", Waited: time.Second}).Error()
	if got != `Lease jobsched-s is held by "p\x1b[2Jod\n" (waited 1s)` {
		t.Errorf("holder with control characters: %q", got)
	}
}
