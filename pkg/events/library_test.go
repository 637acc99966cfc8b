package events

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr/funcr"
	"github.com/google/go-cmp/cmp"
	"github.com/rs/zerolog"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes/scheme"
	k8stesting "k8s.io/client-go/testing"
	clientevents "k8s.io/client-go/tools/events"
	"k8s.io/klog/v2"

	"github.com/jobsched/jobsched/pkg/scheduler"
	"github.com/jobsched/jobsched/pkg/testkit"
)

// side is one Event writer under comparison on its own fake API server: jobsched's Writer, or client-go's events
// library (a broadcaster recording to the fake's events.k8s.io client, its recorder behind the same Recorder).
type side struct {
	name   string
	client *testkit.Fake
	rec    *Recorder
	logs   *testkit.Buffer // the library's klog lines (its refusals and retries), or the Writer's zerolog lines
	close  func()          // Close for the Writer; the library's Shutdown
}

func sides(t *testing.T, prepare func(*testkit.Fake)) []*side {
	t.Helper()
	ours := &side{name: "Writer", client: testkit.NewFake(), logs: &testkit.Buffer{}}
	lib := &side{name: "library", client: testkit.NewFake(), logs: &testkit.Buffer{}}
	for _, s := range []*side{ours, lib} {
		if prepare != nil {
			prepare(s.client)
		}
	}
	octx := zerolog.New(ours.logs).WithContext(context.Background())
	ours.rec = New(octx, ours.client, Options{Namespace: ns, Pod: pod})
	ours.rec.writer.retry = 10 * time.Millisecond
	ours.close = func() { ours.rec.Close(time.Minute) }

	b := clientevents.NewBroadcaster(&clientevents.EventSinkImpl{Interface: lib.client.Clientset.EventsV1()})
	logger := funcr.New(func(prefix, args string) { _, _ = lib.logs.Write([]byte(prefix + " " + args + "\n")) }, funcr.Options{Verbosity: 9})
	ctx, cancel := context.WithCancel(klog.NewContext(context.Background(), logger))
	if err := b.StartRecordingToSinkWithContext(ctx); err != nil {
		t.Fatal(err)
	}
	lib.rec = newRecorder(ctx, b.NewRecorder(scheme.Scheme, ReportingController), Options{Namespace: ns, Pod: pod})
	lib.close = func() { b.Shutdown() }
	t.Cleanup(cancel)
	t.Cleanup(lib.close)
	return []*side{ours, lib}
}

// report is what a pass reports: a Created and a Deleted Event regarding Jobs, a Cancelled one, and its Blocked.
func report(r *Recorder) {
	r.JobCreated(createdJob(), scheduler.Create{Queue: "exports", Key: "k1", Attempt: 2}, "2 slot(s) this pass, bound by limits.maxPerTick: 2")
	r.JobDeleted(scheduler.JobStatus{Name: "reports-k2", Key: "k2", Attempt: 3, State: scheduler.StateDead, Delete: scheduler.DeleteDead, UID: "uid-2"})
	r.JobDeleted(scheduler.JobStatus{Name: "reports-k3", Key: "k3", Attempt: 1, State: scheduler.StateRunning, Delete: scheduler.DeleteCancelled, UID: "uid-3"})
	r.PassBlocked("limits.maxActive: 3 of 3 unfinished", true)
}

// until waits for cond, polling: the library writes from goroutines of its own, which nothing signals.
func until(t *testing.T, what string, cond func() bool) {
	t.Helper()
	if err := wait.PollUntilContextTimeout(context.Background(), 5*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
		return cond(), nil
	}); err != nil {
		t.Fatalf("waiting for %s: %v", what, err)
	}
}

// writes are the fake's write calls on events, as "verb note" (a patch: "patch"), in their order.
func writes(c *testkit.Fake) []string {
	var out []string
	for _, a := range c.Actions() {
		if a.GetResource().Resource != "events" {
			continue
		}
		switch a := a.(type) {
		case k8stesting.CreateAction:
			out = append(out, "create "+a.GetObject().(*eventsv1.Event).Note)
		case k8stesting.PatchAction:
			out = append(out, "patch "+string(a.GetPatch()))
		}
	}
	return out
}

func stored(t *testing.T, c *testkit.Fake) []eventsv1.Event {
	t.Helper()
	l, err := c.Clientset.EventsV1().Events(ns).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	slices.SortFunc(l.Items, func(a, b eventsv1.Event) int { return strings.Compare(a.Note, b.Note) })
	return l.Items
}

// TestLibrary compares the Writer with client-go's events library (k8s.io/client-go/tools/events), which it stands
// in for: the same reports through each, on a fake API server each, make the same Events, and meet the same fate
// when the API server refuses them, fails in transport or is slow; where the two differ on purpose (the package
// comment), the test shows how.
func TestLibrary(t *testing.T) {
	t.Run("the same Events", func(t *testing.T) {
		t.Parallel()
		s := sides(t, nil)
		var got [][]eventsv1.Event
		for _, side := range s {
			report(side.rec)
			until(t, side.name+"'s 4 Events", func() bool { return len(stored(t, side.client)) == 4 })
			side.close()
			var evs []eventsv1.Event // as sent
			for _, a := range side.client.Actions() {
				if c, ok := a.(k8stesting.CreateAction); ok && a.GetResource().Resource == "events" {
					evs = append(evs, *c.GetObject().(*eventsv1.Event))
				}
			}
			slices.SortFunc(evs, func(a, b eventsv1.Event) int { return strings.Compare(a.Note, b.Note) })
			for i := range evs {
				e := &evs[i]
				// The name is the regarding's and the time in hex, as util.GenerateEventName makes it; the library
				// reads the clock once for the name and once for eventTime, so only the form is compared.
				prefix, hex, ok := strings.Cut(e.Name, ".")
				if _, err := strconv.ParseUint(hex, 16, 64); !ok || err != nil || prefix != e.Regarding.Name {
					t.Errorf("%s: Event name %q, want <regarding name>.<time in hex>", side.name, e.Name)
				}
				if time.Since(e.EventTime.Time) > time.Minute || e.EventTime.IsZero() {
					t.Errorf("%s: eventTime %v, want the moment it was recorded", side.name, e.EventTime)
				}
				e.Name, e.EventTime = "", metav1.MicroTime{}
			}
			got = append(got, evs)
		}
		if diff := cmp.Diff(got[1], got[0]); diff != "" {
			t.Errorf("Events (-library +Writer):\n%s", diff)
		}
		if len(got[0]) > 0 && got[0][0].Namespace != ns {
			t.Errorf("Events in namespace %q, want %q", got[0][0].Namespace, ns)
		}
	})

	// Two Events alike but for their note: the library writes the second as a count on the first (a PATCH of its
	// series, without the second note); the Writer writes each with its note (the package comment says why).
	t.Run("series", func(t *testing.T) {
		t.Parallel()
		s := sides(t, nil)
		for _, side := range s {
			// The second once the first is stored: the library records each Event from a goroutine of its own, and
			// were the second's patch sent first it would find no Event to patch and create one (three writes).
			side.rec.PassBlocked("limits.maxActive: 3 of 3 unfinished", true)
			until(t, side.name+"'s first Event", func() bool { return len(stored(t, side.client)) == 1 })
			side.rec.PassBlocked("limits.rate: 1 per 1m, next create at 12:00:00", true)
			until(t, side.name+"'s 2 writes", func() bool { return len(writes(side.client)) >= 2 })
			side.close()
		}
		ours, lib := writes(s[0].client), writes(s[1].client)
		slices.Sort(ours) // 4 writers: in any order, as the library's goroutines
		if want := []string{"create Created no Job: limits.maxActive: 3 of 3 unfinished",
			"create Created no Job: limits.rate: 1 per 1m, next create at 12:00:00"}; !cmp.Equal(want, ours) {
			t.Errorf("Writer's writes %q, want %q", ours, want)
		}
		if len(lib) != 2 || !strings.HasPrefix(lib[0], "create Created no Job: limits.") || !strings.HasPrefix(lib[1], "patch ") ||
			!strings.Contains(lib[1], `"count":2`) || strings.Contains(lib[1], "note") {
			t.Errorf("library's writes %q, want a create, then a patch of its series' count to 2 without a note", lib)
		}
	})

	// A refusal (here no RBAC permission) is not tried again, by either.
	t.Run("refused", func(t *testing.T) {
		t.Parallel()
		s := sides(t, func(c *testkit.Fake) {
			c.PrependReactor("create", "events", func(k8stesting.Action) (bool, runtime.Object, error) {
				return true, nil, apierrors.NewForbidden(schema.GroupResource{Group: "events.k8s.io", Resource: "events"}, "", errors.New("no"))
			})
		})
		for _, side := range s {
			report(side.rec)
		}
		s[0].close() // returns once each was refused
		until(t, "the library's 4 refusals", func() bool {
			return strings.Count(s[1].logs.String(), "Server rejected event (will not retry!)") == 4
		})
		for _, side := range s {
			if n := len(writes(side.client)); n != 4 {
				t.Errorf("%s: %d creates, want 4: one each, none retried", side.name, n)
			}
		}
	})

	// A write that fails in transport is tried again, by both (the library after about 10 s, the Writer after a
	// moment: see the package comment), and written once.
	t.Run("failed in transport", func(t *testing.T) {
		t.Parallel()
		s := sides(t, func(c *testkit.Fake) {
			var calls atomic.Int32
			c.PrependReactor("create", "events", func(k8stesting.Action) (bool, runtime.Object, error) {
				if calls.Add(1) == 1 {
					return true, nil, errors.New("connection reset by peer")
				}
				return false, nil, nil
			})
		})
		for _, side := range s {
			side.rec.PassBlocked("limits.maxActive: 3 of 3 unfinished", true)
			until(t, side.name+"'s Event written after its retry", func() bool { return len(stored(t, side.client)) == 1 })
			side.close()
			if w := writes(side.client); len(w) != 2 {
				t.Errorf("%s: writes %q, want the create that failed and the one that succeeded", side.name, w)
			}
		}
	})

	// An API server that answers late: every Event recorded meanwhile is written once it answers, by both.
	t.Run("slow", func(t *testing.T) {
		t.Parallel()
		var once sync.Once
		answer := make(chan struct{})
		s := sides(t, func(c *testkit.Fake) {
			c.PrependReactor("create", "events", func(k8stesting.Action) (bool, runtime.Object, error) {
				<-answer
				return false, nil, nil
			})
		})
		for _, side := range s {
			report(side.rec)
		}
		once.Do(func() { close(answer) })
		for _, side := range s {
			until(t, side.name+"'s 4 Events", func() bool { return len(stored(t, side.client)) == 4 })
			side.close()
		}
	})
}
