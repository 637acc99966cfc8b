package scheduler

import (
	"context"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	k8stesting "k8s.io/client-go/testing"

	"github.com/jobsched/jobsched/pkg/config"
	"github.com/jobsched/jobsched/pkg/jobmeta"
	"github.com/jobsched/jobsched/pkg/lease"
	"github.com/jobsched/jobsched/pkg/rate"
	"github.com/jobsched/jobsched/pkg/render"
	"github.com/jobsched/jobsched/pkg/rows"
	"github.com/jobsched/jobsched/pkg/testkit"
)

func rateOf(n int, per time.Duration) *config.Rate {
	return &config.Rate{Creates: n, Per: metav1.Duration{Duration: per}}
}

// recordOf is a record with n creates at each of ats in scope, for limit l.
func recordOf(t *testing.T, l rate.Limit, scope string, n int, ats ...time.Time) *rate.Record {
	t.Helper()
	w := rate.NewWindow(l)
	for _, at := range ats {
		w.Add(at, n)
	}
	r := &rate.Record{}
	r.Set(scope, w)
	return r
}

// TestDecideRate: limits.rate bounds the slots by what the window that ends now leaves (the record's count or the
// Jobs', the larger), says so with the next create it allows, and takes a lost record as full.
func TestDecideRate(t *testing.T) {
	l := rate.Limit{Creates: 3, Per: time.Minute}
	cfg := testConfig(t, func(c *config.Config) { c.Limits.Rate = rateOf(3, time.Minute) })
	at := func(d time.Duration) *time.Time { t := now.Add(d); return &t }
	created := func(key string, d time.Duration) JobSummary {
		j := SummarizeJob(makeJob(key).Obj())
		j.Created = now.Add(-d)
		return j
	}
	for _, tc := range []struct {
		name    string
		windows Windows
		jobs    []JobSummary
		slots   int
		limit   string
		next    *time.Time
	}{
		{"an empty window: N slots", Windows{}, nil, 3, "limits.rate: 3 per 1m, next create at 12:01:00", at(time.Minute)},
		{"two creates 30s ago: one slot, the next when they leave",
			Windows{Record: recordOf(t, l, rate.ScopeInstall, 2, now.Add(-30*time.Second))}, nil,
			1, "limits.rate: 3 per 1m, next create at 12:00:30", at(30 * time.Second)},
		{"creates out of the window count no more",
			Windows{Record: recordOf(t, l, rate.ScopeInstall, 3, now.Add(-time.Minute))}, nil, 3, "limits.rate: 3 per 1m, next create at 12:01:00", at(time.Minute)},
		{"full: blocked until the first leaves",
			Windows{Record: recordOf(t, l, rate.ScopeInstall, 1, now.Add(-51*time.Second), now.Add(-21*time.Second), now.Add(-9*time.Second))}, nil,
			0, "limits.rate: 3 per 1m, next create at 12:00:09", at(9 * time.Second)},
		{"the Jobs' creation times count a second later (they are whole seconds)",
			Windows{Record: recordOf(t, l, rate.ScopeInstall, 1, now.Add(-43*time.Second), now.Add(-7*time.Second))},
			[]JobSummary{created("a", 43*time.Second), created("b", 7*time.Second)}, 1, "limits.rate: 3 per 1m, next create at 12:00:18", at(18 * time.Second)},
		{"a lost record is full for per from now", Windows{Lost: "garbled"}, nil, 0, "limits.rate: 3 per 1m, next create at 12:01:00", at(time.Minute)},
		{"a record kept nowhere: the Jobs only", Windows{Unkept: "no Lease"}, []JobSummary{created("a", 4*time.Second)}, 2,
			"limits.rate: 3 per 1m, next create at 12:00:57", at(57 * time.Second)},
		{"the next create is shown at the whole second after it (times are rounded up to per/1000)",
			Windows{Record: recordOf(t, l, rate.ScopeInstall, 3, now.Add(-50*time.Second))}, nil, 0,
			"limits.rate: 3 per 1m, next create at 12:00:11", at(10*time.Second + 20*time.Millisecond)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := Decide(cfg, &Observation{Now: now, Jobs: tc.jobs, Windows: tc.windows})
			if p.Slots != tc.slots || p.Limit != tc.limit || !equalTime(p.NextCreate, tc.next) {
				t.Errorf("slots %d, limit %q, next %v; want %d, %q, %v", p.Slots, p.Limit, p.NextCreate, tc.slots, tc.limit, tc.next)
			}
			if blocked := tc.slots == 0; blocked != (p.Blocked == tc.limit) {
				t.Errorf("blocked %q with %d slots", p.Blocked, tc.slots)
			}
		})
	}
	t.Run("a next create that is not today is shown with its date", func(t *testing.T) {
		p := Decide(testConfig(t, func(c *config.Config) { c.Limits.Rate = rateOf(3, 24*time.Hour) }), &Observation{Now: now, Windows: Windows{Lost: "garbled"}})
		if want := "limits.rate: 3 per 24h, next create at 2026-11-30 12:00:00"; p.Limit != want {
			t.Errorf("limit %q, want %q", p.Limit, want)
		}
	})
	t.Run("maxPerTick binds first: no rate in the limit", func(t *testing.T) {
		p := Decide(testConfig(t, func(c *config.Config) { c.Limits.Rate = rateOf(30, time.Minute) }), &Observation{Now: now})
		if p.Slots != 10 || p.Limit != "limits.maxPerTick: 10" || p.NextCreate != nil {
			t.Errorf("slots %d, limit %q, next %v", p.Slots, p.Limit, p.NextCreate)
		}
	})
}

func equalTime(a, b *time.Time) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.Equal(*b)
}

// TestDecideRateQueuesAndGroups: a queue's rate bounds that queue; a group's rate is what its group may still get
// in the read (the window of each group known from the record or its Jobs).
func TestDecideRateQueuesAndGroups(t *testing.T) {
	cfg := queuesConfig(t, "maxActive: 20", queue("a", "  limits: {rate: {creates: 4, per: 1m}, perGroup: {column: tenant, maxActive: 5, rate: {creates: 2, per: 1m}}}\n")+queue("b", ""))
	gl := rate.Limit{Creates: 2, Per: time.Minute}
	rec := recordOf(t, gl, rate.GroupScope("a", "t1"), 2, now.Add(-time.Second))
	w := rate.NewWindow(rate.Limit{Creates: 4, Per: time.Minute})
	w.Add(now.Add(-time.Second), 3)
	rec.Set(rate.QueueScope("a"), w)
	job := SummarizeJob(makeJob("x").Queue("a").Annotation(jobmeta.AnnotationGroup, "t2").Obj())
	job.Created = now.Add(-2 * time.Second)
	p := Decide(cfg, &Observation{Now: now, Jobs: []JobSummary{job}, Windows: Windows{Record: rec}})
	if got := []int{p.Queues[0].Slots, p.Queues[1].Slots}; !slices.Equal(got, []int{1, 10}) {
		t.Errorf("queues' slots %v, want a's rate to leave it 1 and b its maxPerTick", got)
	}
	if want := map[string]int{"t1": 0, "t2": 1}; !cmp.Equal(p.parts[0].groupRoom, want) {
		t.Errorf("a's groupRoom %v, want %v", p.parts[0].groupRoom, want)
	}
	if p.parts[1].groupRoom != nil {
		t.Errorf("b has no perGroup.rate: groupRoom %v", p.parts[1].groupRoom)
	}
}

// TestRunUnderRate: with the Lease as its Guard, a pass writes the record with its creates before the first create,
// and its release writes them settled; the next pass, its Jobs gone, still creates nothing until the window opens.
func TestRunUnderRate(t *testing.T) {
	cfg := testConfig(t, func(c *config.Config) { c.Limits.Rate = rateOf(2, time.Minute) })
	client := testkit.NewFake()
	clock := now
	pass := func() Result {
		t.Helper()
		g := &lease.Guard{Client: client.CoordinationV1(), Namespace: cfg.Namespace, Scheduler: cfg.Name, Holder: "me", Annotation: rate.Annotation}
		s := &Scheduler{workers: 1, Config: cfg, Kube: client, Source: &source{Rows: rowsFor("a", "b", "c")},
			Renderer: render.New(cfg, nil), Now: func() time.Time { return clock }, Guard: g}
		res, err := s.Run(context.Background(), Execute)
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	var records []string // the record as each write of the Lease carried it
	client.PrependReactor("*", "leases", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if w, ok := a.(interface{ GetObject() runtime.Object }); ok {
			records = append(records, w.GetObject().(*coordinationv1.Lease).Annotations[rate.Annotation])
		}
		return false, nil, nil
	})
	res := pass()
	if res.Summary.Created != 2 || res.Plan.Limit != "limits.rate: 2 per 1m, next create at 12:01:00" {
		t.Fatalf("first pass: created %d, limit %q", res.Summary.Created, res.Plan.Limit)
	}
	want := []string{"get leases jobsched-reports", "create leases jobsched-reports", "list jobs", "list pods",
		"update leases jobsched-reports", // the reservation, before the creates
		"create jobs " + name("a"), "create jobs " + name("b"),
		"update leases jobsched-reports"} // the release, with the settled record
	if diff := cmp.Diff(want, actions(client)); diff != "" {
		t.Errorf("actions (-want +got):\n%s", diff)
	}
	reserved, settled := windowOf(t, records[1]), windowOf(t, records[2])
	// Counted until RateReserve after now, and the window after it (up to a tick later: times are rounded up).
	if got, want := reserved.Next(now, rate.Limit{Creates: 2, Per: time.Minute}), now.Add(RateReserve+time.Minute); got.Before(want) || got.After(want.Add(rate.TickOf(time.Minute))) {
		t.Errorf("the reservation counts the creates until %s, want %s after now", got.Sub(now), RateReserve+time.Minute)
	}
	if got := settled.Next(now, rate.Limit{Creates: 2, Per: time.Minute}); !got.Equal(now.Add(time.Minute)) {
		t.Errorf("the settled record counts them until %s, want 1m after now", got.Sub(now))
	}

	for _, n := range []string{name("a"), name("b")} { // the Jobs are gone: only the record remembers them
		if err := client.BatchV1().Jobs(cfg.Namespace).Delete(context.Background(), n, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	clock = now.Add(59 * time.Second)
	if res := pass(); res.Summary.Created != 0 || res.Plan.Blocked != "limits.rate: 2 per 1m, next create at 12:01:00" || !res.RowsWait {
		t.Errorf("a pass inside the window: created %d, blocked %q, rowsWait %v", res.Summary.Created, res.Plan.Blocked, res.RowsWait)
	}
	clock = now.Add(time.Minute)
	if res := pass(); res.Summary.Created != 2 {
		t.Errorf("the pass once the window opened created %d, want 2", res.Summary.Created)
	}
}

func windowOf(t *testing.T, value string) *rate.Window {
	t.Helper()
	r, err := rate.DecodeRecord(value)
	if err != nil {
		t.Fatalf("record %q: %v", value, err)
	}
	return r.Window(rate.ScopeInstall)
}

// heldSource records the Held of each Select and returns no row.
type heldSource struct {
	source
	held []map[string]int
}

func (s *heldSource) Select(_ context.Context, sel rows.Selection) ([]rows.Row, error) {
	s.held = append(s.held, maps.Clone(sel.Held))
	return nil, nil
}

// TestReadGroupRate: the read holds a group back by its rate as by its maxActive: a group whose window is full is
// read as a group at its cap, one with room left as one with that much room.
func TestReadGroupRate(t *testing.T) {
	cfg := queuesConfig(t, "maxActive: 20", queue("a", "  limits: {perGroup: {column: tenant, maxActive: 5, rate: {creates: 2, per: 1m}}}\n"))
	gl := rate.Limit{Creates: 2, Per: time.Minute}
	rec := recordOf(t, gl, rate.GroupScope("a", "full"), 2, now.Add(-3*time.Second))
	w := rate.NewWindow(gl)
	w.Add(now.Add(-3*time.Second), 1)
	rec.Set(rate.GroupScope("a", "one left"), w)
	running := SummarizeJob(makeJob("x").Queue("a").Annotation(jobmeta.AnnotationGroup, "full").Obj()) // created long ago
	p := Decide(cfg, &Observation{Now: now, Jobs: []JobSummary{running}, Windows: Windows{Record: rec}})
	src := &heldSource{}
	s := &Scheduler{Config: cfg}
	if a := s.read(context.Background(), p, 0, Queue{Source: src}); a.Err != nil {
		t.Fatal(a.Err)
	}
	// The source returns at most PassMax (min(maxActive 5, creates 2)) − Held rows of a group: none of "full", one
	// of "one left", and two of a group neither a Job nor a window knows.
	if want := []map[string]int{{"full": 2, "one left": 1}}; !cmp.Equal(src.held, want) {
		t.Errorf("the read's Held %v, want %v", src.held, want)
	}
	if got := cfg.Queues[0].Limits.PerGroup.PassMax(); got != 2 {
		t.Errorf("PassMax = %d, want 2", got)
	}
	// A group's first creates are recorded in a window of its own.
	c := Create{Queue: "a", Job: makeJob("y").Annotation(jobmeta.AnnotationGroup, "new").Obj()}
	got := p.rates.with(cfg, []Create{c}, nil, now)
	if w := got.Window(rate.GroupScope("a", "new")); w.Count(now, time.Minute) != 1 {
		t.Errorf("the new group's window holds %d creates, want 1", w.Count(now, time.Minute))
	}
}

// TestObserveReadsWindows: status and dry-run read the record from the Lease (one GET); one that does not decode,
// or none on a Lease while the install has Jobs, is lost (full).
func TestObserveReadsWindows(t *testing.T) {
	cfg := testConfig(t, func(c *config.Config) { c.Limits.Rate = rateOf(2, time.Minute) })
	rec, _, err := recordOf(t, rate.Limit{Creates: 2, Per: time.Minute}, rate.ScopeInstall, 1, now).Encode(rate.MaxRecordBytes)
	if err != nil {
		t.Fatal(err)
	}
	withLease := func(annotations map[string]string) *coordinationv1.Lease {
		return &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: lease.Name(cfg.Name), Namespace: cfg.Namespace, Annotations: annotations}}
	}
	ahead := func(d time.Duration) string {
		v, _, err := recordOf(t, rate.Limit{Creates: 2, Per: time.Minute}, rate.ScopeInstall, 2, now.Add(d)).Encode(rate.MaxRecordBytes)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	for _, tc := range []struct {
		name    string
		objects []runtime.Object
		lost    bool
		record  bool
	}{
		{"a record", []runtime.Object{withLease(map[string]string{rate.Annotation: rec})}, false, true},
		{"garbled", []runtime.Object{withLease(map[string]string{rate.Annotation: "{"})}, true, false},
		{"none, and no Jobs: a new install", []runtime.Object{withLease(nil)}, false, false},
		{"no Lease while the install has Jobs", []runtime.Object{makeJob("a").Obj()}, true, false},
		{"a record dated three days ahead is lost", []runtime.Object{withLease(map[string]string{rate.Annotation: ahead(72 * time.Hour)})}, true, false},
		{"a reservation (now + RateReserve) is a record", []runtime.Object{withLease(map[string]string{rate.Annotation: ahead(RateReserve)})}, false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			client := testkit.NewFake(tc.objects...)
			s := &Scheduler{Config: cfg, Kube: client, Now: func() time.Time { return now }}
			obs, err := s.Observe(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if got := obs.Windows; (got.Lost != "") != tc.lost || (got.Record != nil) != tc.record {
				t.Errorf("windows %+v: want lost %v, a record %v", got, tc.lost, tc.record)
			}
		})
	}
}
