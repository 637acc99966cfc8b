package follow

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/go-logr/logr"
	"github.com/go-logr/zerologr"
	"github.com/rs/zerolog"

	batchv1 "k8s.io/api/batch/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/jobsched/jobsched/pkg/testkit"
)

// job is a Job at resourceVersion 6 (the fake tracker sets none, and a watch needs one).
func job(name string) *batchv1.Job {
	return &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", ResourceVersion: "6"}}
}

func jobFeed(c *fake.Clientset, changes *Changes) *Feed[batchv1.Job, *batchv1.JobList, string, string] {
	return &Feed[batchv1.Job, *batchv1.JobList, string, string]{Client: c, Collection: c.BatchV1().Jobs("ns"), Watch: true, Changes: changes,
		Summarize: func(j *batchv1.Job) (string, bool) { return j.Name, true }}
}

var jobs = schema.GroupVersionResource{Group: "batch", Version: "v1", Resource: "jobs"}

// listAt makes the fake's LISTs of Jobs answer the tracker's Jobs at resourceVersion rv (the fake sets none),
// counting them in lists.
func listAt(c *fake.Clientset, rv string, lists *int) {
	c.PrependReactor("list", "jobs", func(a k8stesting.Action) (bool, runtime.Object, error) {
		*lists++
		obj, err := c.Tracker().List(jobs, schema.GroupVersionKind{Group: "batch", Version: "v1", Kind: "Job"}, "ns")
		if err != nil {
			return true, nil, err
		}
		l := obj.(*batchv1.JobList)
		l.ResourceVersion = rv
		return true, l, nil
	})
}

// TestFeedFollows: after its list, a feed applies the watch's events; a Sync then lists nothing.
func TestFeedFollows(t *testing.T) {
	c := fake.NewClientset(job("a"))
	lists := 0
	listAt(c, "5", &lists)
	watching := make(chan struct{}) // the fake's watch sends only what happens after it starts
	c.PrependWatchReactor("jobs", func(a k8stesting.Action) (bool, watch.Interface, error) {
		w, err := c.Tracker().Watch(jobs, "ns")
		close(watching)
		return true, w, err
	})
	var changes Changes
	f := jobFeed(c, &changes)
	defer f.Stop()
	ctx := context.Background()
	if err := f.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	if !f.Watching() {
		t.Fatal("not watching after the list")
	}
	<-watching
	if _, err := c.BatchV1().Jobs("ns").Create(ctx, job("b"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := changes.Until(ctx, func() bool { _, ok := f.Get("ns/b"); return ok }); err != nil {
		t.Fatal(err)
	}
	if err := f.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	if got, _ := Sorted(f); !slices.Equal(got, []string{"a", "b"}) || lists != 1 {
		t.Errorf("items %v after %d LISTs, want [a b] after 1", got, lists)
	}
}

// TestFeedExpired: a 410 Gone (to the WATCH, or in its stream) ends the watch; the next Sync lists afresh, as
// client-go's reflector does, and watches from the new list.
func TestFeedExpired(t *testing.T) {
	for _, inStream := range []bool{false, true} {
		c := fake.NewClientset(job("a"))
		lists := 0
		listAt(c, "5", &lists)
		watches := 0
		c.PrependWatchReactor("jobs", func(a k8stesting.Action) (bool, watch.Interface, error) {
			watches++
			if watches > 1 {
				return false, nil, nil // the tracker's watch
			}
			expired := apierrors.NewResourceExpired("too old resource version: 5 (9)")
			if !inStream {
				return true, nil, expired
			}
			w := watch.NewRaceFreeFake()
			w.Error(&expired.ErrStatus)
			return true, w, nil
		})
		var changes Changes
		f := jobFeed(c, &changes)
		ctx := context.Background()
		if err := f.Sync(ctx); err != nil {
			t.Fatal(err)
		}
		if err := changes.Until(ctx, func() bool { return !f.Watching() }); err != nil {
			t.Fatal(err)
		}
		if err := f.Lost(); !apierrors.IsResourceExpired(err) {
			t.Errorf("in stream %v: lost with %v, want the 410", inStream, err)
		}
		if _, err := c.BatchV1().Jobs("ns").Create(ctx, job("b"), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		if err := f.Sync(ctx); err != nil {
			t.Fatal(err)
		}
		if got, _ := Sorted(f); !slices.Equal(got, []string{"a", "b"}) || lists != 2 || !f.Watching() {
			t.Errorf("in stream %v: items %v after %d LISTs, watching %v; want [a b] after 2, watching", inStream, got, lists, f.Watching())
		}
		f.Stop()
	}
}

// TestFeedMadeAndGone: the caller's own writes are in the feed at once, and the watch, lagging, does not undo them:
// a created object stays through the older events of its name, a deleted one stays out through its own events until
// its DELETED; an object the watch already delivered newer is not set back by Made.
func TestFeedMadeAndGone(t *testing.T) {
	at := func(name, uid, rv string) *batchv1.Job {
		return &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", UID: types.UID(uid), ResourceVersion: rv}}
	}
	a := at("a", "uid-a", "4")
	c := fake.NewClientset(a)
	lists := 0
	listAt(c, "5", &lists)
	w := watch.NewRaceFreeFake()
	c.PrependWatchReactor("jobs", func(k8stesting.Action) (bool, watch.Interface, error) { return true, w, nil })
	var changes Changes
	f := &Feed[batchv1.Job, *batchv1.JobList, string, string]{Client: c, Collection: c.BatchV1().Jobs("ns"), Watch: true, Changes: &changes,
		Summarize: func(j *batchv1.Job) (string, bool) { return j.Name + "@" + j.ResourceVersion, true }}
	defer f.Stop()
	ctx := context.Background()
	if err := f.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	// deliver sends ev and waits until the feed is at its resourceVersion.
	deliver := func(typ watch.EventType, j *batchv1.Job) {
		t.Helper()
		w.Action(typ, j)
		if err := changes.Until(ctx, func() bool { return f.Reached(j.ResourceVersion) }); err != nil {
			t.Fatal(err)
		}
	}
	items := func() []string { got, _ := Sorted(f); return got }
	check := func(step string, want ...string) {
		t.Helper()
		if got := items(); !slices.Equal(got, want) {
			t.Errorf("%s: items %v, want %v", step, got, want)
		}
	}

	f.Made(at("b", "uid-b", "9"))
	f.Gone("ns/a", "uid-a")
	check("at once", "b@9")
	deliver(watch.Deleted, at("b", "uid-b0", "6")) // an older b, deleted before ours was made
	deliver(watch.Modified, at("a", "uid-a", "7")) // a, before its delete
	deliver(watch.Modified, at("a", "uid-a", "8")) // and again: only its DELETED ends what Gone keeps out
	check("older events", "b@9")
	deliver(watch.Added, at("b", "uid-b", "9"))
	deliver(watch.Deleted, at("a", "uid-a", "10"))
	deliver(watch.Added, at("a", "uid-a2", "11")) // a new a: the watch applies it
	check("the watch caught up", "a@11", "b@9")
	deliver(watch.Modified, at("b", "uid-b", "12"))
	f.Made(at("b", "uid-b", "9")) // found present, older than what the watch delivered
	check("made behind the watch", "a@11", "b@12")
	if lists != 1 {
		t.Errorf("%d LISTs, want 1", lists)
	}
}

// TestFeedStoppedWatch: an event of a watch that was stopped is not applied, even when it arrives after the list
// that replaced the items (its goroutine may have received it before the Stop).
func TestFeedStoppedWatch(t *testing.T) {
	c := fake.NewClientset(job("a"))
	lists := 0
	listAt(c, "5", &lists)
	f := jobFeed(c, nil)
	f.Watch = false // the test applies the events itself
	ctx := context.Background()
	if err := f.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	stopped, stop := context.WithCancel(ctx)
	stop()
	f.apply(stopped, watch.Event{Type: watch.Added, Object: job("late")})
	f.apply(stopped, watch.Event{Type: watch.Deleted, Object: job("a")})
	if got, _ := Sorted(f); !slices.Equal(got, []string{"a"}) {
		t.Errorf("items %v after a stopped watch's events, want [a]", got)
	}
	f.apply(ctx, watch.Event{Type: watch.Added, Object: job("b")})
	if got, _ := Sorted(f); !slices.Equal(got, []string{"a", "b"}) {
		t.Errorf("items %v after a running watch's event, want [a b]", got)
	}
}

// TestFeedRange: Range gives each key and summary once, then calls done still holding the feed (capacity's addHeld
// swaps its extras there, so no event lands between the walk and the swap); a nil done is allowed.
func TestFeedRange(t *testing.T) {
	c := fake.NewClientset(job("a"), job("b"))
	lists := 0
	listAt(c, "5", &lists)
	f := jobFeed(c, nil)
	f.Watch = false
	if err := f.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	var seen []string
	doneAfter, held := 0, false
	f.Range(func(k, v string) { seen = append(seen, k+"="+v) }, func() {
		doneAfter = len(seen)
		held = !f.mu.TryLock()
		if !held {
			f.mu.Unlock()
		}
	})
	slices.Sort(seen)
	if want := []string{"ns/a=a", "ns/b=b"}; !slices.Equal(seen, want) {
		t.Errorf("Range gave %v, want %v", seen, want)
	}
	if doneAfter != 2 || !held {
		t.Errorf("done ran after %d of 2 items, holding the feed: %v; want after both, held", doneAfter, held)
	}
	n := 0
	f.Range(func(string, string) { n++ }, nil)
	if n != 2 {
		t.Errorf("Range without done gave %d items, want 2", n)
	}
}

// TestFeedLostWatchLoggedOnce: while the API server refuses the watch (three attempts, as during an outage), the
// feed says once, at warn, that it lost the watch, and once, at info, that it is back, in the context's logger;
// RetryWatcher's own "Watch failed" line for each attempt (at error, about once a second) is not written.
func TestFeedLostWatchLoggedOnce(t *testing.T) {
	c := fake.NewClientset(job("a"))
	lists := 0
	listAt(c, "5", &lists)
	attempts, w := 0, watch.NewFake()
	c.PrependWatchReactor("jobs", func(a k8stesting.Action) (bool, watch.Interface, error) {
		if attempts++; attempts <= 3 {
			return true, nil, errors.New("dial tcp 127.0.0.1:6443: connect: connection refused")
		}
		return true, w, nil
	})
	var out testkit.Buffer
	log := zerolog.New(&out).With().Str("scheduler", "s").Logger()
	ctx := logr.NewContext(log.WithContext(context.Background()), zerologr.New(&log))
	var changes Changes
	f := jobFeed(c, &changes)
	defer f.Stop()
	if err := f.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	w.Add(job("b")) // received once the watch is back, after its line
	if err := changes.Until(ctx, func() bool { _, ok := f.Get("ns/b"); return ok }); err != nil {
		t.Fatal(err)
	}
	var lines []string
	for _, l := range strings.Split(strings.TrimSpace(out.String()), "\n") {
		var e struct{ Level, Message, Watch, Scheduler string }
		if err := json.Unmarshal([]byte(l), &e); err != nil {
			t.Fatalf("%v: %q", err, l)
		}
		lines = append(lines, e.Level+" "+e.Message+" "+e.Watch+" "+e.Scheduler)
	}
	want := []string{"warn lost a watch: retrying every second until it is back (said once) Job s", "info the watch is back Job s"}
	if !slices.Equal(lines, want) {
		t.Errorf("log lines:\n%s\nwant\n%s", strings.Join(lines, "\n"), strings.Join(want, "\n"))
	}
}

// TestFeedBackListsAgain: a watch back after failed requests leaves the feed lost (ErrBack, one more loss, Changes
// told): what the watch missed arrives after its return, so the next Sync lists. A stopped watch is no loss.
func TestFeedBackListsAgain(t *testing.T) {
	c := fake.NewClientset(job("a"))
	lists := 0
	listAt(c, "5", &lists)
	attempts := 0
	c.PrependWatchReactor("jobs", func(a k8stesting.Action) (bool, watch.Interface, error) {
		if attempts++; attempts <= 2 {
			return true, nil, errors.New("dial tcp 127.0.0.1:6443: connect: connection refused")
		}
		return true, watch.NewFake(), nil
	})
	var changes Changes
	f := jobFeed(c, &changes)
	defer f.Stop()
	ctx := context.Background()
	if err := f.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	if err := changes.Until(ctx, func() bool { return !f.Watching() }); err != nil {
		t.Fatal(err)
	}
	if err := f.Lost(); !errors.Is(err, ErrBack) || f.Losses() != 1 {
		t.Errorf("lost with %v after %d losses, want ErrBack after 1", err, f.Losses())
	}
	if err := f.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	f.Stop()
	if lists != 2 || f.Lost() != nil || f.Losses() != 1 {
		t.Errorf("%d LISTs, lost %v, %d losses after a Sync and a Stop; want 2, none, 1", lists, f.Lost(), f.Losses())
	}
}
