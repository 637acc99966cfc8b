package capacity

import (
	"cmp"
	"context"
	"slices"
	"sync"

	"github.com/google/uuid"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/jobsched/jobsched/pkg/follow"
	"github.com/jobsched/jobsched/pkg/kube"
)

// Follow keeps what Observe reads between the passes of a fill run (package follow): the nodes, every non-terminal
// pod in the cluster (what it is bound to and requests: a storedPod, not the pod; of the caller's own pods, their
// summary too: Ours), and the namespace's LimitRanges and ResourceQuotas. The first Observe lists them and watches them from there; the next ones read
// what the watches kept (the RuntimeClasses the templates name are still read each pass, one GET each). Unlike a
// one-shot pass, which lists the pods of the few nodes the templates may use when it can (Options), a Follow
// follows every pod, as kube-scheduler does, and counts those of the same nodes. The zero value is ready; Stop
// ends its watches.
type Follow struct {
	Changes *follow.Changes // told of every change (set by the owner)

	namespace string
	nodes     *follow.Feed[corev1.Node, *corev1.NodeList, string, Node]
	pods      *follow.Feed[corev1.Pod, *corev1.PodList, podKey, storedPod]
	store     podStore // what the pods feed's records point into
	quotas    *follow.Feed[corev1.ResourceQuota, *corev1.ResourceQuotaList, string, corev1.ResourceQuota]
	limits    *follow.Feed[corev1.LimitRange, *corev1.LimitRangeList, string, corev1.LimitRange]

	mu         sync.Mutex
	usable     int                            // nodes the watch saw turn usable (NodesUsable)
	usableName string                         // the last of them
	bound      int                            // our pods the watch saw bound (OursBound)
	boundTo    string                         // the node of the last of them
	left       int                            // our pods the watch saw leave their node (OursLeft)
	leftFrom   string                         // the node of the last of them
	wheres     []placement                    // the templates' placements: only a node one may use counts (nil: any)
	allocs     map[string]corev1.ResourceList // each distinct allocatable list the nodes have, by its quantities
}

// NodesUsable counts the nodes the watch saw turn usable for pods since the Follow began, and names the last: a
// node that is Ready and not cordoned, and is new, was not Ready, was cordoned or has lost a NoSchedule or NoExecute
// taint (a node an autoscaler adds carries one until it is registered). Room a node has more of (allocatable) is not
// looked at. A fill run's wait wakes on it as on a Job's end (scheduler.Follow.Wait): the cluster grew.
func (f *Follow) NodesUsable() (int, string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.usable, f.usableName
}

// OursBound counts our pods (Ours) the watch saw bound to a node since the Follow began, and names the node of the
// last: a fill run's wait wakes on it when the last pass's fit awaited our unbound pods (scheduler.WakeOn.Binds).
func (f *Follow) OursBound() (int, string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.bound, f.boundTo
}

// OursLeft counts our pods (Ours) the watch saw leave the node they were bound to since the Follow began (they
// ended: the feed follows non-terminal pods; or they were deleted), and names the node of the last: its room is
// free. A fill run's wait wakes on it when the capacity fit bound the last pass (scheduler.WakeOn.Ends), about a
// second before the Job controller marks the Job finished.
func (f *Follow) OursLeft() (int, string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.left, f.leftFrom
}

// podChanged counts a pod of ours the watch saw bound to a node, that it had seen unbound or not at all (OursBound),
// and one it had seen bound that it no longer follows (OursLeft).
func (f *Follow) podChanged(old storedPod, had bool, p storedPod, has bool) {
	bound := has && p.node != 0 && !(had && old.node != 0)
	left := had && old.node != 0 && !has
	if !bound && !left {
		return
	}
	if left {
		p = old
	}
	f.store.mu.Lock()
	ours, node := f.store.shapes[p.shape].ours, f.store.nodes[p.node]
	f.store.mu.Unlock()
	if !ours {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if left {
		f.left, f.leftFrom = f.left+1, node
		return
	}
	f.bound, f.boundTo = f.bound+1, node
}

// nodeChanged counts a node the watch changed that turned usable (NodesUsable), if one of the templates may use it
// (its selector, affinity and tolerations; in a shared cluster other pools' nodes come and go all the time).
func (f *Follow) nodeChanged(old Node, had bool, n Node, has bool) {
	usable := func(n Node) bool { return n.Ready && !n.Unschedulable }
	if !has || !usable(n) || (had && usable(old) && !lostTaint(old.Taints, n.Taints)) {
		return
	}
	if f.wheres != nil && !slices.ContainsFunc(f.wheres, func(w placement) bool { return w.excluded(&n) == "" }) {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.usable, f.usableName = f.usable+1, n.Name
}

// node is what the nodes feed keeps of n: its summary, with an allocatable list equal to one kept before shared
// with it (the nodes of a group offer the same: at 5,000 nodes, 3.4 MB less). They are kept for the Follow's life,
// as the store's demands are; nothing writes a summary's list.
func (f *Follow) node(n *corev1.Node) (Node, bool) {
	s := newNode(n)
	key := Quantities(s.Allocatable)
	f.mu.Lock()
	defer f.mu.Unlock()
	if l, ok := f.allocs[key]; ok {
		s.Allocatable = l
	} else {
		if f.allocs == nil {
			f.allocs = map[string]corev1.ResourceList{}
		}
		f.allocs[key] = s.Allocatable
	}
	return s, true
}

// lostTaint says a NoSchedule or NoExecute taint of before is not in now.
func lostTaint(before, now []corev1.Taint) bool {
	return slices.ContainsFunc(before, func(t corev1.Taint) bool {
		return t.Effect != corev1.TaintEffectPreferNoSchedule && !slices.ContainsFunc(now, func(u corev1.Taint) bool { return t.MatchTaint(&u) })
	})
}

// Ours is the caller's own non-terminal pods (in the namespace, with its scheduler's label: Options.Scheduler), by
// name, from the watch of every pod that capacity follows (it lists them the first time, as Observe would): a fill
// run whose capacity mode follows every pod (FollowsPods) reads its pods here rather than from a watch of its own,
// so each of their events is sent and decoded once, and the pass and capacity read the pods from one feed: a pod
// the pass sees unbound, capacity does not count on a node; one the pass does not see, capacity does not count
// either (the pass counts it by its Job's status.active). o is what Observe is given.
func (f *Follow) Ours(ctx context.Context, c kube.Interface, namespace string, o Options) ([]PodSummary, error) {
	f.init(c, namespace, o, true)
	if err := f.pods.Sync(ctx); err != nil {
		return nil, err
	}
	var ours []PodSummary
	f.pods.Range(func(k podKey, p storedPod) {
		if e := f.store.record(k, p).podExtra; e != nil && e.Own != nil {
			ours = append(ours, *e.Own)
		}
	}, nil)
	slices.SortFunc(ours, func(a, b PodSummary) int { return cmp.Compare(a.Name, b.Name) })
	return ours, nil
}

// Losses counts the watches of its feeds lost since the Follow began (follow.Feed.Losses): a fill run's wait wakes
// on a new one (scheduler.Follow.Wait), so that the next pass lists what was lost.
func (f *Follow) Losses() int {
	if f.nodes == nil {
		return 0
	}
	return f.nodes.Losses() + f.pods.Losses() + f.quotas.Losses() + f.limits.Losses()
}

// Stop ends the watches (the next Observe lists afresh).
func (f *Follow) Stop() {
	if f.nodes == nil {
		return
	}
	f.nodes.Stop()
	f.pods.Stop()
	f.quotas.Stop()
	f.limits.Stop()
}

// init makes the feeds (once); watch: they watch after their first list (else each Observe lists).
func (f *Follow) init(c kube.Interface, namespace string, o Options, watch bool) {
	if f.nodes != nil {
		return
	}
	f.namespace = namespace
	for _, tpl := range o.Templates {
		if tpl == nil { // a template not known: any node may be its
			f.wheres = nil
			break
		}
		f.wheres = append(f.wheres, newPlacement(&tpl.Spec.Template.Spec))
	}
	f.nodes = f.nodesFeed(c, c.CoreV1().Nodes(), watch)
	agg := &aggregator{namespace: namespace, scheduler: o.Scheduler}
	if !o.NoNextPassRoom {
		agg.self = o.Self
	}
	f.pods = f.podsFeed(c, c.CoreV1().Pods(metav1.NamespaceAll), agg, watch)
	f.quotas = &follow.Feed[corev1.ResourceQuota, *corev1.ResourceQuotaList, string, corev1.ResourceQuota]{Client: c,
		Collection: c.CoreV1().ResourceQuotas(namespace), Watch: watch, Changes: f.Changes,
		Summarize: func(q *corev1.ResourceQuota) (corev1.ResourceQuota, bool) { // whole: a few per namespace
			c := *q
			c.TypeMeta = metav1.TypeMeta{} // a watch event's object has it, a list's items do not
			return c, true
		}}
	f.limits = &follow.Feed[corev1.LimitRange, *corev1.LimitRangeList, string, corev1.LimitRange]{Client: c,
		Collection: c.CoreV1().LimitRanges(namespace), Watch: watch, Changes: f.Changes,
		Summarize: func(l *corev1.LimitRange) (corev1.LimitRange, bool) {
			c := *l
			c.TypeMeta = metav1.TypeMeta{}
			return c, true
		}}
}

// nodesFeed is the feed of the nodes of collection, kept as Node summaries (Follow.node).
func (f *Follow) nodesFeed(c any, collection kube.Collection[*corev1.NodeList], watch bool) *follow.Feed[corev1.Node, *corev1.NodeList, string, Node] {
	return &follow.Feed[corev1.Node, *corev1.NodeList, string, Node]{Client: c, Collection: collection, Watch: watch,
		Changes: f.Changes, Summarize: f.node, Changed: f.nodeChanged}
}

// podsFeed is the feed of every non-terminal pod of collection, kept as storedPods.
func (f *Follow) podsFeed(c any, collection kube.Collection[*corev1.PodList], agg *aggregator, watch bool) *follow.Feed[corev1.Pod, *corev1.PodList, podKey, storedPod] {
	return &follow.Feed[corev1.Pod, *corev1.PodList, podKey, storedPod]{Client: c, Collection: collection,
		Options: metav1.ListOptions{FieldSelector: NonTerminal}, Watch: watch, Changes: f.Changes, Key: keyOf,
		Summarize: func(p *corev1.Pod) (storedPod, bool) {
			r, ok := agg.record(p)
			if !ok {
				return storedPod{}, false
			}
			return f.store.keep(keyOf(p), r), true
		}, Changed: f.podChanged}
}

// synced is a feed's items once Sync has made them current; a one-shot pass (no Follow) lists with list.
func synced[O, L, T any](ctx context.Context, f *follow.Feed[O, L, string, T], list func() ([]T, error)) ([]T, error) {
	if !f.Watch {
		return list()
	}
	if err := f.Sync(ctx); err != nil {
		return nil, err
	}
	items, _ := follow.Sorted(f)
	return items, nil
}

// podStore keeps, for a Follow's pods feed, each node name and each distinct shape once: a cluster's pods are on a few
// thousand nodes and of a few shapes, and a storedPod names them by index. They are kept for the Follow's life (a fill
// run): the name of a node gone stays, a few bytes.
type podStore struct {
	mu      sync.Mutex
	nodeOf  map[string]uint32 // node name → its index in nodes
	nodes   []string          // nodes[0] is "": bound to none
	shapeOf map[podShapeKey]uint32
	shapes  []podShape
	self    podKey // the tick pod's key, once seen
	// extras are the podExtra of the few pods that have one (those waiting for a node, the tick pod), by key: apart,
	// so that a storedPod is 8 bytes (a map of 150,000 takes 47 bytes a pod, not 70). hold sets and clears a pod's as
	// the feed's watch changes it (holding the feed); addHeld drops those of pods no longer followed.
	extras map[podKey]*podExtra
}

// podShape is what pods of one shape share: their demand, and whether they are being deleted and are ours.
type podShape struct {
	demand         corev1.ResourceList
	deleting, ours bool
}

// podShapeKey is a podShape's key in a podStore: the demand in words (Quantities), equal for equal demands.
type podShapeKey struct {
	demand         string
	deleting, ours bool
}

// podKey is a pod's key in the pods feed: its UID, 16 bytes (its namespace/name would take about 50, and a pointer).
type podKey [16]byte

// keyOf is m's podKey: its UID, or, for a pod whose UID is not a UUID (a fake's), a name-based UUID of its
// namespace/name (version 5: never equal to an API server's, version 4).
func keyOf(m metav1.Object) podKey {
	if u, err := uuid.Parse(string(m.GetUID())); err == nil {
		return podKey(u)
	}
	return podKey(uuid.NewSHA1(uuid.NameSpaceURL, []byte(m.GetNamespace()+"/"+m.GetName())))
}

// storedPod is what a Follow keeps of a pod between passes (a podRecord, compact): its node and shape by index in
// the podStore, 8 bytes (its podExtra, if any, is in podStore.extras): BenchmarkFollowedPods.
type storedPod struct {
	node, shape uint32
}

// keep is r, the record of the pod of key k, kept.
func (h *podStore) keep(k podKey, r podRecord) storedPod {
	key := podShapeKey{demand: Quantities(r.Demand), deleting: r.Deleting, ours: r.Ours}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.nodeOf == nil {
		h.nodeOf, h.nodes, h.shapeOf = map[string]uint32{"": 0}, []string{""}, map[podShapeKey]uint32{}
	}
	node, ok := h.nodeOf[r.Node]
	if !ok {
		node = uint32(len(h.nodes))
		h.nodeOf[r.Node], h.nodes = node, append(h.nodes, r.Node)
	}
	shape, ok := h.shapeOf[key]
	if !ok {
		shape = uint32(len(h.shapes))
		h.shapeOf[key], h.shapes = shape, append(h.shapes, podShape{demand: r.Demand, deleting: r.Deleting, ours: r.Ours})
	}
	if r.podExtra != nil && r.Self != nil {
		h.self = k
	}
	if r.podExtra != nil {
		if h.extras == nil {
			h.extras = map[podKey]*podExtra{}
		}
		h.extras[k] = r.podExtra
	} else {
		delete(h.extras, k)
	}
	return storedPod{node: node, shape: shape}
}

// record is the podRecord of p, the pod of key k (its demand shared with every pod of its shape: add only reads
// it).
func (h *podStore) record(k podKey, p storedPod) podRecord {
	h.mu.Lock()
	defer h.mu.Unlock()
	sh := h.shapes[p.shape]
	return podRecord{Node: h.nodes[p.node], Demand: sh.demand, Deleting: sh.deleting, Ours: sh.ours, podExtra: h.extras[k]}
}

// addHeld adds every pod the feed keeps to agg, and drops the extras of pods it no longer keeps (deleted, or gone
// from a list that replaced the watch's).
func (f *Follow) addHeld(agg *aggregator) {
	kept := map[podKey]*podExtra{}
	f.pods.Range(func(k podKey, p storedPod) {
		r := f.store.record(k, p)
		if r.podExtra != nil {
			kept[k] = r.podExtra
		}
		agg.add(r)
	}, func() { // still holding the feed: no keep has run since
		f.store.mu.Lock()
		f.store.extras = kept
		f.store.mu.Unlock()
	})
}

// selfSpec is the tick pod's spec, while the feed has it.
func (f *Follow) selfSpec() *corev1.PodSpec {
	f.store.mu.Lock()
	k := f.store.self
	f.store.mu.Unlock()
	if _, ok := f.pods.Get(k); !ok {
		return nil
	}
	f.store.mu.Lock()
	defer f.store.mu.Unlock()
	if e := f.store.extras[k]; e != nil {
		return e.Self
	}
	return nil
}
