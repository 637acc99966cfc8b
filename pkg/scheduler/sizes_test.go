package scheduler

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/jobsched/jobsched/pkg/capacity"
	"github.com/jobsched/jobsched/pkg/config"
	"github.com/jobsched/jobsched/pkg/jobmeta"
	"github.com/jobsched/jobsched/pkg/kube"
	"github.com/jobsched/jobsched/pkg/render"
	"github.com/jobsched/jobsched/pkg/rows"
	"github.com/jobsched/jobsched/pkg/testkit"
)

// sizedRows are rows whose column cpus holds each one's cpu request (key=cpus pairs).
func sizedRows(kv ...string) []rows.Row {
	var out []rows.Row
	for i := 0; i < len(kv); i += 2 {
		out = append(out, rows.Row{Key: kv[i], Columns: []rows.Column{{Name: "id", Value: kv[i]}, {Name: "cpus", Value: kv[i+1]}}})
	}
	return out
}

// createsOf are the create actions of the Jobs of keys, in order.
func createsOf(keys []string) []string {
	var out []string
	for _, k := range keys {
		out = append(out, "create jobs "+name(k))
	}
	return out
}

// createActions are client's create actions of Jobs, in order (the plan's, with one worker).
func createActions(client *testkit.Fake) []string {
	var out []string
	for _, a := range actions(client) {
		if strings.HasPrefix(a, "create jobs") {
			out = append(out, a)
		}
	}
	return out
}

// sizedConfig takes each worker's cpu from the column cpus, at most most, its template asking 1 cpu.
func sizedConfig(t *testing.T, mode config.Capacity, most string) *config.Config {
	return testConfig(t, func(c *config.Config) {
		c.Limits.Capacity = mode
		c.Job.RequestsFrom = map[corev1.ResourceName]string{corev1.ResourceCPU: "cpus"}
		c.Job.MaxRequests = map[corev1.ResourceName]resource.Quantity{corev1.ResourceCPU: resource.MustParse(most)}
		c.Template.Spec.Template.Spec.Containers[0].Resources.Requests = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}
	})
}

// fourCPU is the room of the tests: one node of 4 cpu (capacity nodes), or a quota of 4 cpu (capacity quota).
func fourCPU(mode config.Capacity) runtime.Object {
	if mode == config.CapacityQuota {
		q := &corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Name: "compute", Namespace: testkit.Namespace}}
		q.Spec.Hard = corev1.ResourceList{"requests.cpu": resource.MustParse("4")}
		q.Status.Hard, q.Status.Used = q.Spec.Hard, corev1.ResourceList{"requests.cpu": resource.MustParse("0")}
		return q
	}
	return makeNode("n1").Allocatable(corev1.ResourceCPU, "4").Allocatable(corev1.ResourcePods, "110").Obj()
}

// TestSizedPass pins the per-row fit, in capacity nodes and quota: each row is placed with its own cpu, in the
// query's order; the first that does not fit stops the queue (strict order: the rows behind it wait, read ahead);
// a row over job.maxRequests, or larger than the node (the quota) could ever hold, is skipped with its key and
// why, counted apart, and the rows behind it are still created.
func TestSizedPass(t *testing.T) {
	for _, mode := range []config.Capacity{config.CapacityNodes, config.CapacityQuota} {
		neverWhy := "more than the allocatable of any of the 1 node(s) it may run on (the largest, n1: cpu=4)"
		if mode == config.CapacityQuota {
			neverWhy = "more than ResourceQuota compute allows in all (requests.cpu: 4)"
		}
		tests := []struct {
			name      string
			most      string
			rows      []rows.Row
			created   []string
			skipped   []Skip
			readAhead int
			wantLimit string
		}{
			{name: "1, 1, 3, 1 on 4: strict order creates 1 and 1, stops at 3", most: "4",
				rows:    sizedRows("a", "1", "b", "1", "c", "3", "d", "1"),
				created: []string{"a", "b"}, readAhead: 2,
				wantLimit: "capacity: the next row in the query's order asks for cpu=3, more than is free now; the rows behind it wait (strict order)"},
			{name: "sizes that fill it exactly", most: "4", rows: sizedRows("a", "2", "b", "500m", "c", "1500m", "d", "1m"),
				created: []string{"a", "b", "c"}, readAhead: 1, wantLimit: "capacity: the next row in the query's order asks for cpu=1m"},
			{name: "over maxRequests and not a quantity: skipped, the rows behind created", most: "2",
				rows:    sizedRows("a", "1", "big", "3", "bad", "x\x1b", "b", "2"),
				created: []string{"a", "b"},
				skipped: []Skip{
					{Key: "big", Reason: `no Job: the cpu request (column "cpus") 3 is over job.maxRequests.cpu (2)`, Size: true},
					{Key: "bad", Reason: `no Job: the cpu request (column "cpus") "x\x1b" is not a quantity (e.g. 500m, 2Gi)`, Size: true},
				},
				wantLimit: "limits.maxPerTick: 10"},
			{name: "larger than it could ever hold: skipped, the rows behind created", most: "8",
				rows:      sizedRows("a", "1", "huge", "5", "b", "3"),
				created:   []string{"a", "b"},
				skipped:   []Skip{{Key: "huge", Reason: "no Job: it asks for cpu=5, " + neverWhy, Size: true}},
				wantLimit: "limits.maxPerTick: 10"},
			{name: "the first row fills it: the next waits", most: "4",
				rows: sizedRows("a", "4", "b", "1"), created: []string{"a"}, readAhead: 1,
				wantLimit: "capacity: the next row in the query's order asks for cpu=1"},
		}
		for _, tc := range tests {
			t.Run(string(mode)+": "+tc.name, func(t *testing.T) {
				cfg := sizedConfig(t, mode, tc.most)
				client := testkit.NewFake(fourCPU(mode))
				s := &Scheduler{workers: 1, Config: cfg, Kube: client, Source: &source{Rows: tc.rows}, Renderer: render.New(cfg, nil),
					Now: func() time.Time { return now }}
				res, err := s.Run(context.Background(), Execute)
				if err != nil {
					t.Fatal(err)
				}
				if diff := cmp.Diff(createsOf(tc.created), createActions(client)); diff != "" {
					t.Errorf("creates (-want +got):\n%s", diff)
				}
				if diff := cmp.Diff(tc.skipped, res.Plan.Skipped); diff != "" {
					t.Errorf("skipped (-want +got):\n%s", diff)
				}
				if res.Summary.SkippedSize != len(tc.skipped) || res.Summary.Skipped != len(tc.skipped) || res.Summary.ReadAhead != tc.readAhead {
					t.Errorf("summary %+v: want skipped = skippedSize = %d, readAhead %d", res.Summary, len(tc.skipped), tc.readAhead)
				}
				if !strings.HasPrefix(res.Limit(), tc.wantLimit) {
					t.Errorf("limit %q, want %q…", res.Limit(), tc.wantLimit)
				}
				if tc.readAhead > 0 && (!res.RowsWait || !res.RoomBound()) {
					t.Errorf("rows wait %v, room bound %v: a fill run must wait for room", res.RowsWait, res.RoomBound())
				}
				for _, c := range res.Plan.Creates {
					i := slices.IndexFunc(tc.rows, func(r rows.Row) bool { return r.Key == c.Key })
					want := resource.MustParse(tc.rows[i].Columns[1].Value)
					if got := c.Job.Spec.Template.Spec.Containers[0].Resources.Requests[corev1.ResourceCPU]; got.Cmp(want) != 0 || c.Requests.Cpu().Cmp(want) != 0 {
						t.Errorf("%s asks cpu %s (Requests %s), want its row's %s", c.Key, got.String(), c.Requests.Cpu().String(), want.String())
					}
				}
			})
		}
	}
}

// TestSizedAwaitsBinds: on two 8-CPU nodes, ten rows of 500m then one of 4 CPU. The placement spreads the small
// ones, 2.5 CPU on each node, and fits the large one beside them; the rule's bound (capacity's sure.go) may count
// all 5 CPU of small ones on either node, so it is sure of the large one only once they are bound. The small ones
// are created, the large one waits, the limit says why, and a fill run wakes at their bind (AwaitsBinds). With
// job.backfill the rows behind it do not pass it: they would take the room it gets in moments. A 2-CPU row instead
// fits however they are bound.
func TestSizedAwaitsBinds(t *testing.T) {
	small := []string{"a", "500m", "b", "500m", "c", "500m", "d", "500m", "e", "500m", "f", "500m", "g", "500m", "h", "500m", "i", "500m", "j", "500m"}
	for _, tc := range []struct {
		name       string
		rows       []rows.Row
		created    int
		wantLimit  string
		wantAwaits bool
		backfill   bool
	}{
		{name: "ten 500m then 4: the 4 waits for their bind",
			rows: sizedRows(append(small, "k", "4")...), created: 10, wantAwaits: true,
			wantLimit: "capacity: the next row in the query's order asks for cpu=4, more than is sure to be free until 10 " +
				"unbound pod(s) of ours of other sizes are bound; the rows behind it wait (strict order)"},
		{name: "with backfill, ten 500m, 4, 500m: the 500m behind the 4 does not pass it", backfill: true,
			rows: sizedRows(append(small, "k", "4", "l", "500m")...), created: 10, wantAwaits: true,
			wantLimit: "capacity: the next row in the query's order asks for cpu=4, more than is sure to be free until 10 " +
				"unbound pod(s) of ours of other sizes are bound; the rows behind it wait for those binds rather than take its room"},
		{name: "ten 500m then 2: fits wherever they go",
			rows: sizedRows(append(small, "k", "2")...), created: 11, wantLimit: "limits.maxPerTick: 20"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := sizedConfig(t, config.CapacityNodes, "4")
			cfg.Limits.MaxPerTick, cfg.Limits.MaxActive = ptr.To(20), ptr.To(20)
			if tc.backfill {
				cfg.Job.Backfill = &config.Backfill{Since: "since", MaxWait: metav1.Duration{Duration: 10 * time.Minute}}
				for i := range tc.rows {
					tc.rows[i].Columns = append(tc.rows[i].Columns, rows.Column{Name: "since", Value: now.Add(-time.Minute).Format(time.RFC3339)})
				}
			}
			node := func(name string) runtime.Object {
				return makeNode(name).Allocatable(corev1.ResourceCPU, "8").Allocatable(corev1.ResourcePods, "110").Obj()
			}
			client := testkit.NewFake(node("n1"), node("n2"))
			s := &Scheduler{workers: 1, Config: cfg, Kube: client, Source: &source{Rows: tc.rows}, Renderer: render.New(cfg, nil),
				Now: func() time.Time { return now }}
			res, err := s.Run(context.Background(), Execute)
			if err != nil {
				t.Fatal(err)
			}
			if got := len(createActions(client)); got != tc.created {
				t.Errorf("%d Jobs created, want %d", got, tc.created)
			}
			if !strings.HasPrefix(res.Limit(), tc.wantLimit) {
				t.Errorf("limit %q\nwant  %q…", res.Limit(), tc.wantLimit)
			}
			if res.AwaitsBinds() != tc.wantAwaits || tc.wantAwaits && !res.CapacityBound() {
				t.Errorf("awaits binds %v, capacity bound %v; want %v, and bound when it awaits", res.AwaitsBinds(), res.CapacityBound(), tc.wantAwaits)
			}
		})
	}
}

// TestSizedReadsBesideUnbound: a sized queue's read is bounded by its smallest shape's room as placed, not by the
// rule for our unbound pods of other sizes (capacity's sure.go), which each row's own shape meets when it is
// placed: against 1m of cpu every pod is of another size, and once ours that are unbound asked more than a node
// holds, the rule read nothing. Two nodes of 8 cpu, our unbound pods of 4, 4 and 500m, rows of 500m, 500m and 4:
// the three are read, a and b fit wherever kube-scheduler binds the pods, c fits on no node now.
func TestSizedReadsBesideUnbound(t *testing.T) {
	cfg := sizedConfig(t, config.CapacityNodes, "4")
	cfg.Limits.MaxPerTick, cfg.Limits.MaxActive = ptr.To(20), ptr.To(20)
	objs := []runtime.Object{eightCPU("n1"), eightCPU("n2")}
	for _, old := range [][2]string{{"old-large", "4"}, {"old-large-2", "4"}, {"old-small", "500m"}} {
		job := makeJob(old[0]).Active(1).Obj()
		job.UID = types.UID("uid-" + old[0])
		objs = append(objs, job, makePod(job).Requests(corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(old[1])}).Obj())
	}
	res, got := sizedPass(t, cfg, sizedRows("a", "500m", "b", "500m", "c", "4"), objs...)
	if diff := cmp.Diff([]string{"a", "b"}, got); diff != "" || res.Plan.Selected != 3 {
		t.Errorf("%d rows read, want 3; creates (-want +got):\n%s", res.Plan.Selected, diff)
	}
	want := "capacity: the next row in the query's order asks for cpu=4, more than is free now; the rows behind it wait (strict order)"
	if res.Limit() != want {
		t.Errorf("limit %q\nwant  %q", res.Limit(), want)
	}
}

// TestFitAwaitsBinds: when the fit finds less room for a queue's template than the nodes hold, until our unbound
// pods of other sizes are bound, the queue reads and creates what is sure, and the pass awaits a bind (a fill run
// wakes at one), not a Job's end. Two nodes of 8 cpu; queue large (4 cpu) has 1 unbound pod, sized queue small 3
// of 500m: one 4 more is sure wherever they go, not two (500m on each node, then three 4s, leave one no node).
func TestFitAwaitsBinds(t *testing.T) {
	cfg := queuesConfig(t, "capacity: nodes, maxPerTick: 20, maxActive: 20",
		"- name: small\n  source: {query: q, key: id}\n  job: {template: job.yaml, requestsFrom: {cpu: cpus}, maxRequests: {cpu: 4}}\n"+
			queue("large", ""))
	cfg.Queues[1].Template.Spec.Template.Spec.Containers[0].Resources.Requests = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4")}
	objs := []runtime.Object{eightCPU("n1"), eightCPU("n2")}
	for _, old := range []struct {
		queue    int
		key, cpu string
	}{{1, "l0", "4"}, {0, "s0", "500m"}, {0, "s1", "500m"}, {0, "s2", "500m"}} {
		job := queueJob(t, cfg, old.queue, old.key)
		job.UID, job.Status.Active = types.UID("uid-"+old.key), 1
		pod := makePod(job).Requests(corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(old.cpu)}).Obj()
		pod.Labels = job.Spec.Template.Labels
		objs = append(objs, job, pod)
	}
	client := testkit.NewFake(objs...)
	s := &Scheduler{workers: 1, Config: cfg, Kube: client, Now: func() time.Time { return now }, Queues: []Queue{
		{Source: &source{}, Renderer: render.New(cfg.QueueConfig(0), nil)},
		{Source: &source{Rows: rowsFor("l1", "l2")}, Renderer: render.New(cfg.QueueConfig(1), nil)}}}
	res, err := s.Run(context.Background(), Execute)
	if err != nil {
		t.Fatal(err)
	}
	want := "capacity: nodes: 1 more fit on 2 node(s) wherever kube-scheduler binds our 3 unbound pod(s) of other sizes, after 4 unbound"
	if q := res.Plan.Queues[1]; q.Limit != want || q.Selected != 1 || len(res.Plan.Creates) != 1 || !res.AwaitsBinds() {
		t.Errorf("large: limit %q, %d row(s) read, %d create(s), awaits binds %v\nwant %q, 1, 1, true", q.Limit, q.Selected,
			len(res.Plan.Creates), res.AwaitsBinds(), want)
	}
}

// eightCPU is a node of 8 cpu and 110 pods.
func eightCPU(name string) runtime.Object {
	return makeNode(name).Allocatable(corev1.ResourceCPU, "8").Allocatable(corev1.ResourcePods, "110").Obj()
}

// TestSizedReadBound: a sized queue reads as many rows as its smallest Job fits, bounded by limits.maxPerTick and
// MaxSizedRows, never by its template's size: 1-cpu rows on a node where the 3-cpu template fits once.
func TestSizedReadBound(t *testing.T) {
	for _, tc := range []struct {
		name       string
		maxPerTick int
		want       int
		wantLimit  string
	}{
		{"maxPerTick", 10, 10, "limits.maxPerTick: 10"},
		{"MaxSizedRows", config.MaxCount, MaxSizedRows, "job.requestsFrom: at most 1000 rows a pass"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := sizedConfig(t, config.CapacityNodes, "3")
			cfg.Limits.MaxPerTick, cfg.Limits.MaxActive = ptr.To(tc.maxPerTick), ptr.To(config.MaxCount)
			cfg.Template.Spec.Template.Spec.Containers[0].Resources.Requests[corev1.ResourceCPU] = resource.MustParse("3")
			obs := observed(nil, nil)
			obs.Capacity = &capacity.Snapshot{Mode: config.CapacityNodes, Nodes: []capacity.Node{{Name: "n1", Ready: true, Allocatable: corev1.ResourceList{
				corev1.ResourceCPU: resource.MustParse("4000"), corev1.ResourcePods: resource.MustParse("100000")}}}}
			p := Decide(cfg, obs)
			if p.Slots != tc.want || p.Limit != tc.wantLimit {
				t.Errorf("slots %d (%s), want %d (%s)", p.Slots, p.Limit, tc.want, tc.wantLimit)
			}
		})
	}
}

// TestSizedUnboundOwnSize pins that a sized queue's pods bound to no node yet count at their own size, as observed,
// not at the largest a row may ask: one of 1 cpu, Pending, on a node of 4 leaves 3; and so does a Job of 1 cpu whose
// pod is not made yet, by its pod template. With job.maxRequests larger than the node, the largest would fit no node
// and the pod would count nowhere (too many created); with it smaller, the largest would hold room the pod does not
// take (too few).
func TestSizedUnboundOwnSize(t *testing.T) {
	one := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}
	for _, tc := range []struct {
		most    string
		rows    []rows.Row
		created []string
	}{
		{"8", sizedRows("a", "3", "b", "1"), []string{"a"}},                // 1 + 3: b's 1 more would not fit
		{"2", sizedRows("a", "2", "b", "1", "c", "1"), []string{"a", "b"}}, // 1 + 2 + 1: c waits
	} {
		t.Run("maxRequests "+tc.most+", a Pending pod", func(t *testing.T) {
			job := makeJob("old").Active(1).Obj()
			sizedUnbound(t, tc.most, tc.rows, tc.created, job, makePod(job).Requests(one).Obj())
		})
		t.Run("maxRequests "+tc.most+", a Job with no pod yet", func(t *testing.T) {
			sizedUnbound(t, tc.most, tc.rows, tc.created, makeJob("old").Active(0).Requests(one).Obj())
		})
	}
}

// sizedUnbound runs a pass of a sized queue on a node of 4 cpu with objs (ours) and rows, and checks its creates.
func sizedUnbound(t *testing.T, most string, rs []rows.Row, created []string, objs ...runtime.Object) {
	t.Helper()
	_, got := sizedPass(t, sizedConfig(t, config.CapacityNodes, most), rs, append([]runtime.Object{fourCPU(config.CapacityNodes)}, objs...)...)
	if diff := cmp.Diff(created, got); diff != "" {
		t.Errorf("creates (-want +got):\n%s", diff)
	}
}

// sizedPass runs one pass of cfg's one queue over rs, with objs in the cluster, and returns it with the keys of its
// creates, in order.
func sizedPass(t *testing.T, cfg *config.Config, rs []rows.Row, objs ...runtime.Object) (Result, []string) {
	t.Helper()
	s := &Scheduler{workers: 1, Config: cfg, Kube: testkit.NewFake(objs...), Source: &source{Rows: rs},
		Renderer: render.New(cfg, nil), Now: func() time.Time { return now }}
	res, err := s.Run(context.Background(), Execute)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, c := range res.Plan.Creates {
		got = append(got, c.Key)
	}
	return res, got
}

// TestSizedShapesBounded pins MaxShapes: a pass places a sized queue's rows of its first MaxShapes−1 sizes each as
// its own, and those of any size after them as one shape that asks the most of them. Rows of 1m … 31m (496m in
// all), then 100m and 3000m, on a node of 4 cpu: exactly, all three would fit (3596m); with 100m counted at 3000m,
// the 3000m row no longer does. Each Job still asks its own row's cpu.
func TestSizedShapesBounded(t *testing.T) {
	cfg := sizedConfig(t, config.CapacityNodes, "4")
	cfg.Limits.MaxPerTick, cfg.Limits.MaxActive = ptr.To(50), ptr.To(50)
	var kv []string
	for k := range MaxShapes - 1 {
		kv = append(kv, fmt.Sprintf("s%02d", k), fmt.Sprintf("%dm", k+1))
	}
	kv = append(kv, "small", "100m", "large", "3000m")
	s := &Scheduler{workers: 1, Config: cfg, Kube: testkit.NewFake(fourCPU(config.CapacityNodes)), Source: &source{Rows: sizedRows(kv...)},
		Renderer: render.New(cfg, nil), Now: func() time.Time { return now }}
	res, err := s.Run(context.Background(), Execute)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := len(res.Plan.Creates), MaxShapes; got != want || res.Summary.ReadAhead != 1 {
		t.Fatalf("%d creates, readAhead %d; want %d (every row but large), readAhead 1", got, res.Summary.ReadAhead, want)
	}
	last := res.Plan.Creates[len(res.Plan.Creates)-1]
	if got := last.Job.Spec.Template.Spec.Containers[0].Resources.Requests[corev1.ResourceCPU]; last.Key != "small" || got.Cmp(resource.MustParse("100m")) != 0 {
		t.Errorf("the last create is %s asking cpu %s, want small asking its own 100m", last.Key, got.String())
	}
}

// TestUnboundSizesBounded pins MaxShapes for a sized queue's pods bound to no node: the first MaxShapes−1 sizes
// count each as its own, any other in one more entry that asks, per resource, the most of them.
func TestUnboundSizesBounded(t *testing.T) {
	p := &queuePart{}
	cpu := func(m int) corev1.ResourceList {
		return corev1.ResourceList{corev1.ResourceCPU: *resource.NewMilliQuantity(int64(m), resource.DecimalSI)}
	}
	for m := 1; m <= MaxShapes-1; m++ {
		p.unboundOfSize(cpu(m)).pods++
	}
	p.unboundOfSize(cpu(5)).pods++ // a size already counted: its own entry
	p.unboundOfSize(cpu(300)).pods++
	p.unboundOfSize(corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("1Gi")}).pods++
	if n := len(p.unboundSizes); n != MaxShapes {
		t.Fatalf("%d entries, want %d", n, MaxShapes)
	}
	if got := p.unboundSizes[4]; got.pods != 2 || got.over {
		t.Errorf("the entry of 5m: %+v, want 2 pods, its own", got)
	}
	over := p.unboundSizes[MaxShapes-1]
	if !over.over || over.pods != 2 || requestsWords(over.demand) != "cpu=300m memory=1Gi" {
		t.Errorf("the overflow entry: %d pods, over %v, asking %s; want 2, true, cpu=300m memory=1Gi", over.pods, over.over, requestsWords(over.demand))
	}
}

// TestBackfill pins job.backfill, in capacity nodes and quota: a row that does not fit now is passed by the rows
// behind it that do while it has waited less than maxWait (read again next pass: read ahead, passed); one that has
// waited that long, or whose wait is not known, stops its queue as in strict order.
func TestBackfill(t *testing.T) {
	young, old := now.Add(-9*time.Minute).Format(time.RFC3339Nano), now.Add(-11*time.Minute).Format(time.RFC3339)
	// row is a row of key k asking cpus, which began to wait at since ("null": NULL; "": no such column).
	row := func(k, cpus, since string) rows.Row {
		r := sizedRows(k, cpus)[0]
		switch since {
		case "":
		case "null":
			r.Columns = append(r.Columns, rows.Column{Name: "since", Null: true})
		default:
			r.Columns = append(r.Columns, rows.Column{Name: "since", Value: since})
		}
		return r
	}
	tests := []struct {
		name              string
		rows              []rows.Row
		created           []string
		readAhead, passed int
		wantLimit         string
	}{
		{name: "a young row that does not fit is passed", rows: []rows.Row{row("a", "1", young), row("b", "1", young),
			row("c", "3", young), row("d", "1", young), row("e", "1", young)},
			created: []string{"a", "b", "d", "e"}, readAhead: 1, passed: 1,
			wantLimit: "capacity: 1 row(s) ask for more than is free now (the first cpu=3); the rows behind them that fit passed them (job.backfill: each for at most 10m)"},
		{name: "two young rows passed", rows: []rows.Row{row("a", "1", young), row("b", "4", young), row("c", "4", young),
			row("d", "1", young), row("e", "1", young)},
			created: []string{"a", "d", "e"}, readAhead: 2, passed: 2, wantLimit: "capacity: 2 row(s) ask for more"},
		{name: "a row that waited maxWait stops the queue", rows: []rows.Row{row("a", "1", young), row("b", "1", young),
			row("c", "3", old), row("d", "1", young)},
			created: []string{"a", "b"}, readAhead: 2,
			wantLimit: "capacity: the next row in the query's order asks for cpu=3, more than is free now; it has waited 11m (job.backfill.maxWait: 10m): the rows behind it wait for it"},
		{name: "passed, then stopped by an old one", rows: []rows.Row{row("a", "1", young), row("b", "4", young), row("c", "1", young),
			row("d", "4", old), row("e", "1", young)},
			created: []string{"a", "c"}, readAhead: 3, passed: 1, wantLimit: "capacity: the next row in the query's order asks for cpu=4, more than is free now; it has waited 11m"},
		{name: "a row that waited exactly maxWait is not passed", rows: []rows.Row{row("a", "2", young),
			row("b", "3", now.Add(-10*time.Minute).Format(time.RFC3339)), row("c", "1", young)},
			created: []string{"a"}, readAhead: 2, wantLimit: "capacity: the next row in the query's order asks for cpu=3, more than is free now; it has waited 10m"},
		{name: "a NULL wait is not passed", rows: []rows.Row{row("a", "2", young), row("b", "3", "null"), row("c", "1", young)},
			created: []string{"a"}, readAhead: 2, wantLimit: "capacity: the next row in the query's order asks for cpu=3, more than is free now; it has waited for a time not known"},
		{name: "no such column is not passed", rows: []rows.Row{row("a", "2", young), row("b", "3", ""), row("c", "1", young)},
			created: []string{"a"}, readAhead: 2, wantLimit: "capacity: the next row in the query's order asks for cpu=3, more than is free now; it has waited for a time not known"},
		{name: "not a time is not passed", rows: []rows.Row{row("a", "2", young), row("b", "3", "yesterday"), row("c", "1", young)},
			created: []string{"a"}, readAhead: 2, wantLimit: "capacity: the next row in the query's order asks for cpu=3, more than is free now; it has waited for a time not known"},
	}
	for _, mode := range []config.Capacity{config.CapacityNodes, config.CapacityQuota} {
		for _, tc := range tests {
			t.Run(string(mode)+": "+tc.name, func(t *testing.T) {
				cfg := sizedConfig(t, mode, "4")
				cfg.Job.Backfill = &config.Backfill{Since: "since", MaxWait: metav1.Duration{Duration: 10 * time.Minute}}
				client := testkit.NewFake(fourCPU(mode))
				s := &Scheduler{workers: 1, Config: cfg, Kube: client, Source: &source{Rows: tc.rows}, Renderer: render.New(cfg, nil),
					Now: func() time.Time { return now }}
				res, err := s.Run(context.Background(), Execute)
				if err != nil {
					t.Fatal(err)
				}
				if diff := cmp.Diff(createsOf(tc.created), createActions(client)); diff != "" {
					t.Errorf("creates (-want +got):\n%s", diff)
				}
				if res.Summary.ReadAhead != tc.readAhead || res.Summary.Passed != tc.passed || res.Summary.Skipped != 0 {
					t.Errorf("summary %+v: want readAhead %d, passed %d, none skipped", res.Summary, tc.readAhead, tc.passed)
				}
				if !strings.HasPrefix(res.Limit(), tc.wantLimit) {
					t.Errorf("limit %q, want %q…", res.Limit(), tc.wantLimit)
				}
				if !res.RowsWait || !res.RoomBound() || !res.CapacityBound() {
					t.Errorf("rows wait %v, room bound %v, capacity bound %v: a fill run must wait for room", res.RowsWait, res.RoomBound(), res.CapacityBound())
				}
			})
		}
	}
}

// TestRowRequests: what a row of a sized queue asks without reading one: NULL the template's request (none: absent),
// else up to job.maxRequests; the largest shape the fit counts unknown sizes at is the larger of the two.
func TestRowRequests(t *testing.T) {
	cfg := sizedConfig(t, config.CapacityOff, "8") // its template asks 1 cpu and no memory
	cfg.Job.RequestsFrom[corev1.ResourceMemory] = "mem"
	cfg.Job.MaxRequests[corev1.ResourceMemory] = resource.MustParse("16Gi")
	r := RowRequestsOf(cfg)
	if got := capacity.Quantities(r.Default) + " / " + capacity.Quantities(r.Max); got != "cpu=1 / cpu=8 memory=16Gi" {
		t.Errorf("default / max %s, want cpu=1 / cpu=8 memory=16Gi", got)
	}
	cfg.Template.Spec.Template.Spec.Containers[0].Resources.Limits = corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("32Gi")}
	if got := capacity.Quantities(RowRequestsOf(cfg).Most()); got != "cpu=8 memory=32Gi" {
		t.Errorf("most %s, want cpu=8 memory=32Gi (a limit without a request is the request)", got)
	}
	if RowRequestsOf(testConfig(t, nil)) != nil {
		t.Error("a queue without job.requestsFrom: want nil")
	}
}

// TestCreatesInSizeRuns: creates of different sizes go in the plan's order (the fit's) one run of equal size at a
// time, each run concurrently, so that kube-scheduler meets the pods in the order the fit placed them: a 2-CPU Job
// placed after a 1-CPU one is created after it, and the 500m ones after both, although a larger Job's create is
// slower (all workers in flight).
func TestCreatesInSizeRuns(t *testing.T) {
	if got := sizeRuns(nil); got != nil {
		t.Errorf("no creates: runs %v", got)
	}
	cfg := sizedConfig(t, config.CapacityNodes, "4")
	client := &slowSmall{Interface: testkit.NewFake(fourCPU(config.CapacityNodes))}
	s := &Scheduler{Config: cfg, Kube: client, Source: &source{Rows: sizedRows("a", "1", "c", "2", "b", "500m", "d", "500m")},
		Renderer: render.New(cfg, nil), Now: func() time.Time { return now }}
	res, err := s.Run(context.Background(), Execute)
	if err != nil {
		t.Fatal(err)
	}
	if done := client.done; res.Summary.Created != 4 || len(done) != 4 || done[0] != "a" || done[1] != "c" {
		t.Errorf("created %d, in the order %v; want a, c, then b and d (either order)", res.Summary.Created, done)
	}
	if got := sizeRuns(res.Plan.Creates); !slices.Equal(got, [][2]int{{0, 1}, {1, 2}, {2, 4}}) {
		t.Errorf("runs %v, want [0 1] [1 2] [2 4]", got)
	}
}

// slowSmall is a client whose creates of Jobs take 1ms per 40m of cpu they ask, outside the fake clientset's lock (which
// serialises its reactors), and which records the keys of the Jobs it created, in the order their creates ended.
type slowSmall struct {
	kube.Interface
	mu   sync.Mutex
	done []string
}

func (c *slowSmall) BatchV1() kube.BatchV1 { return smallBatch{c.Interface.BatchV1(), c} }

// IsWatchListSemanticsUnSupported is the fake's: it cannot stream lists.
func (c *slowSmall) IsWatchListSemanticsUnSupported() bool { return true }

type smallBatch struct {
	kube.BatchV1
	c *slowSmall
}

func (b smallBatch) Jobs(ns string) kube.Jobs { return smallJobs{b.BatchV1.Jobs(ns), b.c} }

type smallJobs struct {
	kube.Jobs
	c *slowSmall
}

func (j smallJobs) Create(ctx context.Context, job *batchv1.Job, o metav1.CreateOptions) (*batchv1.Job, error) {
	// the larger, the slower: without runs, the smallest Jobs' creates would end first
	time.Sleep(time.Duration(job.Spec.Template.Spec.Containers[0].Resources.Requests.Cpu().MilliValue()/40) * time.Millisecond)
	out, err := j.Jobs.Create(ctx, job, o)
	j.c.mu.Lock()
	j.c.done = append(j.c.done, job.Annotations[jobmeta.AnnotationTaskKey])
	j.c.mu.Unlock()
	return out, err
}
