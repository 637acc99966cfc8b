package capacity

import (
	"context"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	k8stesting "k8s.io/client-go/testing"

	"github.com/jobsched/jobsched/pkg/follow"
	"github.com/jobsched/jobsched/pkg/jobmeta"
	"github.com/jobsched/jobsched/pkg/testkit"
)

// readyNode is a node named name, Ready or not, with spec.unschedulable cordoned and taints of the given keys
// (effect NoSchedule, or as the key says: "k:NoExecute", "k:PreferNoSchedule").
func readyNode(name string, ready, cordoned bool, taints ...string) *corev1.Node {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: corev1.NodeSpec{Unschedulable: cordoned}}
	status := corev1.ConditionFalse
	if ready {
		status = corev1.ConditionTrue
	}
	n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeMemoryPressure, Status: corev1.ConditionFalse}, {Type: corev1.NodeReady, Status: status}}
	for _, t := range taints {
		effect := corev1.TaintEffectNoSchedule
		for _, e := range []corev1.TaintEffect{corev1.TaintEffectNoExecute, corev1.TaintEffectPreferNoSchedule} {
			if len(t) > len(e) && t[len(t)-len(e)-1:] == ":"+string(e) {
				t, effect = t[:len(t)-len(e)-1], e
			}
		}
		n.Spec.Taints = append(n.Spec.Taints, corev1.Taint{Key: t, Effect: effect})
	}
	return n
}

// TestNodesUsable: which change of a node the Follow counts as a node turning usable (a fill run's wait wakes on it:
// the node may now hold pods it could not) and which not. Each case starts from the nodes listed, then applies its
// writes in order through the fake clientset's watch, then creates a last Ready node: the count must name the one
// write that may add room (the case's last) and then "last", and count nothing else.
func TestNodesUsable(t *testing.T) {
	type write struct {
		node   *corev1.Node
		delete bool
	}
	tests := []struct {
		name   string
		listed []*corev1.Node
		writes []write
		want   string // "": no write counts
		// templates: Options.Templates (nil: none known, every node counts); the last node is labelled pool=p.
		templates []*batchv1.Job
	}{
		{name: "a node turns Ready", listed: []*corev1.Node{readyNode("a", false, false)},
			writes: []write{{node: readyNode("a", true, false)}}, want: "a"},
		{name: "a new node, Ready", writes: []write{{node: readyNode("b", true, false)}}, want: "b"},
		{name: "a new node not Ready, then Ready", writes: []write{{node: readyNode("b", false, false)}, {node: readyNode("b", true, false)}}, want: "b"},
		{name: "an autoscaler's node loses its startup taint", listed: []*corev1.Node{readyNode("k", true, false, "karpenter.sh/unregistered:NoExecute")},
			writes: []write{{node: readyNode("k", true, false)}}, want: "k"},
		{name: "a Ready node loses a NoSchedule taint", listed: []*corev1.Node{readyNode("a", true, false, "dedicated", "gpu")},
			writes: []write{{node: readyNode("a", true, false, "gpu")}}, want: "a"},
		{name: "uncordoned", listed: []*corev1.Node{readyNode("a", true, true)},
			writes: []write{{node: readyNode("a", true, false)}}, want: "a"},
		{name: "nothing that adds room", listed: []*corev1.Node{readyNode("a", true, false), readyNode("c", true, true), readyNode("d", true, false, "x"), readyNode("e", true, false)},
			writes: []write{
				{node: readyNode("a", true, false)},                           // a heartbeat
				{node: readyNode("a", true, false, "karpenter.sh/disrupted")}, // a taint added
				{node: readyNode("a", true, false, "karpenter.sh/disrupted", "soft:PreferNoSchedule")},
				{node: readyNode("a", true, false, "karpenter.sh/disrupted")}, // only a PreferNoSchedule taint lost
				{node: readyNode("c", false, true)},                           // cordoned, and now not Ready
				{node: readyNode("c", false, false)},                          // uncordoned, but not Ready
				{node: readyNode("d", false, false)},                          // its taint gone, but not Ready
				{node: readyNode("f", false, false)},                          // new, not Ready
				{node: readyNode("g", true, true)},                            // new, cordoned
				{node: readyNode("e", true, false), delete: true},             // gone
			}},
		{name: "a node no template may use turns usable (another pool's)", templates: []*batchv1.Job{poolJob("p")},
			writes: []write{{node: readyNode("other", true, false)}, {node: inPool(readyNode("b", true, false), "p")}}, want: "b"},
	}
	nodes := schema.GroupVersionResource{Version: "v1", Resource: "nodes"}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var objs []runtime.Object
			for i, n := range tt.listed {
				n.ResourceVersion = strconv.Itoa(1 + i)
				objs = append(objs, n)
			}
			client := testkit.NewFake(objs...)
			client.PrependReactor("list", "nodes", func(k8stesting.Action) (bool, runtime.Object, error) {
				obj, err := client.Tracker().List(nodes, corev1.SchemeGroupVersion.WithKind("Node"), "")
				if err == nil {
					obj.(*corev1.NodeList).ResourceVersion = "7" // the fake sets none, and a watch needs one
				}
				return true, obj, err
			})
			watching := make(chan struct{}) // the fake's watch sends only what happens after it starts
			client.PrependWatchReactor("nodes", func(k8stesting.Action) (bool, watch.Interface, error) {
				w, err := client.Tracker().Watch(nodes, "")
				close(watching)
				return true, w, err
			})
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			f := &Follow{Changes: &follow.Changes{}}
			defer f.Stop()
			f.init(client, "work", Options{Templates: tt.templates}, true)
			if err := f.nodes.Sync(ctx); err != nil {
				t.Fatal(err)
			}
			<-watching
			for i, w := range append(tt.writes, write{node: inPool(readyNode("last", true, false), "p")}) {
				w.node.ResourceVersion = strconv.Itoa(8 + i) // RetryWatcher needs one; the fake sets none
				var err error
				switch _, getErr := client.CoreV1().Nodes().Get(ctx, w.node.Name, metav1.GetOptions{}); {
				case w.delete:
					err = client.CoreV1().Nodes().Delete(ctx, w.node.Name, metav1.DeleteOptions{})
				case getErr == nil:
					_, err = client.CoreV1().Nodes().Update(ctx, w.node, metav1.UpdateOptions{})
				default:
					_, err = client.CoreV1().Nodes().Create(ctx, w.node, metav1.CreateOptions{})
				}
				if err != nil {
					t.Fatal(err)
				}
				if tt.want != "" && i == len(tt.writes)-1 {
					if err := f.Changes.Until(ctx, func() bool { n, _ := f.NodesUsable(); return n > 0 }); err != nil {
						t.Fatal(err)
					}
					if n, name := f.NodesUsable(); n != 1 || name != tt.want {
						t.Errorf("after %s's write: %d usable, the last %q; want 1, %q", tt.want, n, name, tt.want)
					}
				}
			}
			if err := f.Changes.Until(ctx, func() bool { _, name := f.NodesUsable(); return name == "last" }); err != nil {
				t.Fatal(err)
			}
			want := 1
			if tt.want != "" {
				want = 2
			}
			if n, _ := f.NodesUsable(); n != want {
				t.Errorf("%d nodes counted usable, want %d (the case's and the last)", n, want)
			}
		})
	}
}

// TestFollowedRecord: what a Follow keeps of a pod is small because it is shared: pods on one node keep one copy of
// its name and pods of one shape one demand, a bound pod is kept by its UID's 16 bytes and keeps neither its name
// nor its namespace, and only a pod waiting for a node or the tick pod keep the rest (its name and placement, or
// its spec).
func TestFollowedRecord(t *testing.T) {
	f := &Follow{}
	agg := &aggregator{namespace: "work", scheduler: "s", self: "tick-1"}
	rec := func(p *corev1.Pod) (storedPod, podRecord) {
		t.Helper()
		p = p.DeepCopy() // strings and maps of their own, as each decoded pod's are
		p.UID = types.UID(uuid.NewString())
		r, ok := agg.record(p)
		if !ok {
			t.Fatalf("no record of %s/%s", p.Namespace, p.Name)
		}
		if k := keyOf(p); uuid.UUID(k).String() != string(p.UID) {
			t.Errorf("%s/%s is kept by key %x; want its UID %s", p.Namespace, p.Name, k, p.UID)
		}
		k := keyOf(p)
		h := f.store.keep(k, r)
		return h, f.store.record(k, h)
	}
	ha, a := rec(kubePod("other", "a", "node-1", corev1.PodRunning, rl("cpu", "1")))
	hb, b := rec(kubePod("other", "b", strings.Clone("node-1"), corev1.PodRunning, rl("cpu", "1000m")))
	if ha.node != hb.node || a.Node != "node-1" || b.Node != "node-1" {
		t.Errorf("two pods on node-1 keep nodes %d (%q) and %d (%q); want one, node-1", ha.node, a.Node, hb.node, b.Node)
	}
	if ha.shape != hb.shape || reflect.ValueOf(a.Demand).UnsafePointer() != reflect.ValueOf(b.Demand).UnsafePointer() {
		t.Errorf("two pods requesting 1 CPU keep two demands")
	}
	if q := a.Demand[corev1.ResourceCPU]; q.MilliValue() != 1000 {
		t.Errorf("a pod requesting 1 CPU is read back as %v", a.Demand)
	}
	hc, _ := rec(kubePod("other", "c", "node-2", corev1.PodRunning, rl("cpu", "2")))
	if hc.node == ha.node || hc.shape == ha.shape {
		t.Errorf("a pod of 2 CPU on node-2 shares a node (%v) or a shape (%v) with one of 1 CPU on node-1",
			hc.node == ha.node, hc.shape == ha.shape)
	}
	deleting := kubePod("other", "g", "node-1", corev1.PodRunning, rl("cpu", "1"))
	deleting.DeletionTimestamp = &metav1.Time{}
	ours := kubePod("work", "h", "node-1", corev1.PodRunning, rl("cpu", "1"))
	ours.Labels = map[string]string{jobmeta.LabelScheduler: "s"}
	hg, g := rec(deleting)
	hh, h := rec(ours)
	if hg.shape == ha.shape || hh.shape == ha.shape || hg.shape == hh.shape || !g.Deleting || g.Ours || h.Deleting || !h.Ours || a.Deleting || a.Ours {
		t.Errorf("pods of 1 CPU, one being deleted and one ours, are kept as shapes %d, %d, %d (deleting %v %v %v, ours %v %v %v); "+
			"want three, each read back as it was", ha.shape, hg.shape, hh.shape, a.Deleting, g.Deleting, h.Deleting, a.Ours, g.Ours, h.Ours)
	}
	if a.podExtra != nil || len(f.store.extras) != 0 {
		t.Errorf("a bound pod keeps %+v (extras %v); want only its node and demand", a.podExtra, f.store.extras)
	}
	waiting := kubePod("other", "d", "", corev1.PodPending, rl("cpu", "1"))
	waiting.Spec.NodeSelector = map[string]string{"zone": "a"}
	if _, d := rec(waiting); d.podExtra == nil || d.Node != "" || d.Namespace != "other" || d.Name != "d" || d.Where.NodeSelector["zone"] != "a" {
		t.Errorf("a pod waiting for a node is kept as %+v; want its name and nodeSelector", d)
	}
	if _, s := rec(kubePod("work", "tick-1", "node-2", corev1.PodRunning, rl("cpu", "100m"))); s.podExtra == nil || s.Self == nil || len(s.Self.Containers) != 1 {
		t.Errorf("the tick pod is kept as %+v; want its spec", s)
	}
	e, e2, f2 := keyOf(&metav1.ObjectMeta{Namespace: "other", Name: "e", UID: "not-a-uuid"}), keyOf(&metav1.ObjectMeta{Namespace: "other", Name: "e"}),
		keyOf(&metav1.ObjectMeta{Namespace: "other", Name: "f"})
	if e != e2 || e == f2 || uuid.UUID(e).Version() != 5 {
		t.Errorf("pods whose UID is not a UUID are kept by %x (other/e), %x (other/e, no UID), %x (other/f); want one "+
			"name-based UUID (version 5) per namespace/name", e, e2, f2)
	}
}

// TestFollowedTickPod: a fill run finds the tick pod's spec (the next tick's, for which room is kept) among the pods
// it follows, as a pass finds it by a LIST, also when pods that wait for a node are held beside it.
func TestFollowedTickPod(t *testing.T) {
	tick := kubePod("work", "tick-1", "n1", corev1.PodRunning, rl("cpu", "100m"))
	tick.UID, tick.Spec.NodeSelector = types.UID(uuid.NewString()), map[string]string{"pool": "ticks"}
	waiting := kubePod("other", "waiting", "", corev1.PodPending, rl("cpu", "1"))
	waiting.UID = types.UID(uuid.NewString())
	client := testkit.NewFake(kubeNode("n1", corev1.ConditionTrue, rl("cpu", "8", "memory", "16Gi", "pods", "110")), tick, waiting)
	ctx := context.Background()
	o := Options{Nodes: true, Scheduler: "s", Self: "tick-1"}
	listed, err := Observe(ctx, client, "work", o)
	if err != nil {
		t.Fatal(err)
	}
	o.Follow = &Follow{Changes: &follow.Changes{}}
	defer o.Follow.Stop()
	client.ClearActions()
	for pass := range 2 {
		followed, err := Observe(ctx, client, "work", o)
		if err != nil {
			t.Fatal(err)
		}
		if followed.NextPassPod == nil || listed.NextPassPod == nil || followed.NextPassPod.Spec.NodeSelector["pool"] != "ticks" ||
			!reflect.DeepEqual(followed.NextPassPod.Spec, listed.NextPassPod.Spec) {
			t.Errorf("pass %d: the followed tick pod is %+v; want the listed one's spec, %+v", pass, followed.NextPassPod, listed.NextPassPod)
		}
	}
	for _, a := range client.Actions() {
		if l, ok := a.(k8stesting.ListAction); ok && l.GetResource().Resource == "pods" && l.GetNamespace() == "work" {
			t.Errorf("a fill run listed pods in work (%v): the tick pod is among those it follows", l.GetListRestrictions().Fields)
		}
	}
}

// TestFollowedListsOnce: a Follow lists the nodes, the pods, the quotas and the LimitRanges once, then follows them
// (a refill lists nothing, and sees what was listed); Stop ends its watches, so the next Observe lists each afresh.
func TestFollowedListsOnce(t *testing.T) {
	client := testkit.NewFake(kubeNode("n1", corev1.ConditionTrue, rl("cpu", "8", "memory", "16Gi", "pods", "110")),
		kubePod("work", "p", "n1", corev1.PodRunning, rl("cpu", "1")),
		&corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Name: "q", Namespace: "work"}},
		&corev1.LimitRange{ObjectMeta: metav1.ObjectMeta{Name: "l", Namespace: "work"}})
	ctx := context.Background()
	o := Options{Nodes: true, Scheduler: "s", Follow: &Follow{Changes: &follow.Changes{}}}
	defer o.Follow.Stop()
	lists := func() []string {
		var listed []string
		for _, a := range client.Actions() {
			if _, ok := a.(k8stesting.ListAction); ok {
				listed = append(listed, a.GetResource().Resource)
			}
		}
		client.ClearActions()
		slices.Sort(listed)
		return listed
	}
	all := []string{"limitranges", "nodes", "pods", "resourcequotas"}
	for pass, want := range [][]string{all, nil, nil} {
		snap, err := Observe(ctx, client, "work", o)
		if err != nil {
			t.Fatal(err)
		}
		if got := lists(); !slices.Equal(got, want) {
			t.Errorf("pass %d listed %v, want %v", pass, got, want)
		}
		if len(snap.Nodes) != 1 || len(snap.Quotas) != 1 || len(snap.LimitRanges) != 1 {
			t.Errorf("pass %d saw %d nodes, %d quotas, %d LimitRanges; want 1 of each", pass, len(snap.Nodes), len(snap.Quotas), len(snap.LimitRanges))
		}
	}
	o.Follow.Stop()
	if o.Follow.nodes.Watching() || o.Follow.pods.Watching() || o.Follow.quotas.Watching() || o.Follow.limits.Watching() {
		t.Error("a feed still watches after Stop")
	}
	if _, err := Observe(ctx, client, "work", o); err != nil {
		t.Fatal(err)
	}
	if got := lists(); !slices.Equal(got, all) {
		t.Errorf("after Stop, the pass listed %v, want %v", got, all)
	}
}

// TestFollowedExtras: what a Follow keeps beside a followed pod's node and shape (its name and placement while it
// waits for a node, the tick pod's spec) lives as long as it is needed: a pod bound since, or gone, keeps none.
func TestFollowedExtras(t *testing.T) {
	pod := func(ns, name, node string) *corev1.Pod {
		p := kubePod(ns, name, node, corev1.PodRunning, rl("cpu", "100m"))
		p.UID = types.UID(uuid.NewString())
		return p
	}
	tick, waiting, gone := pod("work", "tick-1", "n1"), pod("other", "waiting", ""), pod("other", "gone", "")
	client := testkit.NewFake(kubeNode("n1", corev1.ConditionTrue, rl("cpu", "8", "memory", "16Gi", "pods", "110")), tick, waiting, gone)
	ctx := context.Background()
	o := Options{Nodes: true, Scheduler: "s", Self: "tick-1", Follow: &Follow{Changes: &follow.Changes{}}}
	defer o.Follow.Stop()
	extras := func() []string {
		var names []string
		for _, e := range o.Follow.store.extras {
			names = append(names, e.Name)
		}
		slices.Sort(names)
		return names
	}
	pending := func(s *Snapshot) []string {
		var names []string
		for _, p := range s.Pending {
			names = append(names, p.Name)
		}
		return names
	}
	snap, err := Observe(ctx, client, "work", o)
	if err != nil {
		t.Fatal(err)
	}
	if got := pending(snap); !slices.Equal(got, []string{"gone", "waiting"}) || !slices.Equal(extras(), []string{"gone", "tick-1", "waiting"}) {
		t.Errorf("first pass: pending %v, extras kept %v; want [gone waiting], [gone tick-1 waiting]", got, extras())
	}
	waiting.Spec.NodeName = "n1"
	if _, err := client.CoreV1().Pods("other").Update(ctx, waiting, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := client.CoreV1().Pods("other").Delete(ctx, "gone", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	o.Follow.pods.Stop() // the next Observe lists them afresh, as after a lost watch
	if snap, err = Observe(ctx, client, "work", o); err != nil {
		t.Fatal(err)
	}
	if got := pending(snap); len(got) != 0 || !slices.Equal(extras(), []string{"tick-1"}) || snap.NextPassPod == nil {
		t.Errorf("once bound and gone: pending %v, extras kept %v, tick pod %v; want none, [tick-1], found", got, extras(), snap.NextPassPod != nil)
	}
}

// TestFollowedNodesShareAllocatable: the nodes a Follow keeps share one allocatable list where theirs are equal
// (BenchmarkFollowedNodes), and keep their own where not.
func TestFollowedNodesShareAllocatable(t *testing.T) {
	alloc := func(mem string) corev1.ResourceList { return rl("cpu", "4", "memory", mem, "pods", "110") }
	c := testkit.NewFake(kubeNode("a", corev1.ConditionTrue, alloc("8Gi")), kubeNode("b", corev1.ConditionTrue, alloc("8Gi")),
		kubeNode("c", corev1.ConditionTrue, alloc("16Gi")))
	f := &Follow{}
	nodes := f.nodesFeed(c, c.CoreV1().Nodes(), false)
	if err := nodes.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	ns, _ := follow.Sorted(nodes)
	same := func(i, j int) bool {
		return reflect.ValueOf(ns[i].Allocatable).UnsafePointer() == reflect.ValueOf(ns[j].Allocatable).UnsafePointer()
	}
	if len(ns) != 3 || !same(0, 1) || same(0, 2) {
		t.Fatalf("nodes a, b, c share allocatable lists a=b %v a=c %v, want true, false (%d nodes)", same(0, 1), same(0, 2), len(ns))
	}
	for i, want := range []string{"8Gi", "8Gi", "16Gi"} {
		if got := Quantities(ns[i].Allocatable); got != Quantities(alloc(want)) {
			t.Errorf("node %s allocatable = %s, want %s", ns[i].Name, got, Quantities(alloc(want)))
		}
	}
}

// poolJob is a Job template whose pods select the nodes labelled pool=v.
func poolJob(v string) *batchv1.Job {
	j := &batchv1.Job{}
	j.Spec.Template.Spec.NodeSelector = map[string]string{"pool": v}
	return j
}

// inPool is n labelled pool=v.
func inPool(n *corev1.Node, v string) *corev1.Node {
	n.Labels = map[string]string{"pool": v}
	return n
}

// TestOursBoundAndLeft: the feed's change of one of our pods from unbound (or not seen) to bound counts as bound,
// with its node; one of ours that was bound and is no longer followed (it ended, or was deleted) as left, with the
// node it left; another's, ours still unbound, ours gone while unbound, and ours moved between nodes, as neither.
func TestOursBoundAndLeft(t *testing.T) {
	f := &Follow{}
	agg := &aggregator{namespace: "work", scheduler: "s"}
	stored := func(p *corev1.Pod) storedPod {
		t.Helper()
		r, ok := agg.record(p)
		if !ok {
			t.Fatalf("no record of %s/%s", p.Namespace, p.Name)
		}
		return f.store.keep(keyOf(p), r)
	}
	ours := func(node string) storedPod {
		p := kubePod("work", "a", node, corev1.PodPending, rl("cpu", "1"))
		p.Labels = map[string]string{jobmeta.LabelScheduler: "s"}
		return stored(p)
	}
	other := func(node string) storedPod {
		return stored(kubePod("other", "b", node, corev1.PodPending, rl("cpu", "1")))
	}
	for _, tc := range []struct {
		name                string
		old                 storedPod
		had                 bool
		now                 storedPod
		has                 bool
		wantBound, wantLeft int
		wantNode            string
	}{
		{name: "ours bound", old: ours(""), had: true, now: ours("n1"), has: true, wantBound: 1, wantNode: "n1"},
		{name: "ours seen first bound", now: ours("n2"), has: true, wantBound: 1, wantNode: "n2"},
		{name: "ours still unbound", old: ours(""), had: true, now: ours(""), has: true},
		{name: "ours on another node", old: ours("n1"), had: true, now: ours("n2"), has: true},
		{name: "ours ended or deleted", old: ours("n1"), had: true, wantLeft: 1, wantNode: "n1"},
		{name: "ours gone unbound", old: ours(""), had: true},
		{name: "another's bound", old: other(""), had: true, now: other("n1"), has: true},
		{name: "another's ended", old: other("n1"), had: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			bound, _ := f.OursBound()
			left, _ := f.OursLeft()
			f.podChanged(tc.old, tc.had, tc.now, tc.has)
			b, boundTo := f.OursBound()
			l, leftFrom := f.OursLeft()
			if b-bound != tc.wantBound || l-left != tc.wantLeft || tc.wantBound > 0 && boundTo != tc.wantNode || tc.wantLeft > 0 && leftFrom != tc.wantNode {
				t.Errorf("bound %d (last on %q), left %d (last %q); want %d, %d, on %q", b-bound, boundTo, l-left, leftFrom,
					tc.wantBound, tc.wantLeft, tc.wantNode)
			}
		})
	}
}
