package autoscale

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/jobsched/jobsched/pkg/autoscaler"
	"github.com/jobsched/jobsched/pkg/capacity"
	"github.com/jobsched/jobsched/pkg/config"
)

// maxGroupNodes bounds the new nodes counted of one node group or NodePool: more than one pass's pods can wait for.
const maxGroupNodes = 1000

// growth is the room the autoscaler can still add for a Placer's claims (limits.capacity: autoscale): per NodePool
// what its limits leave, per node group its new nodes; the pods that already wait for new nodes (ours that fit on
// no node, then others') take theirs first, and at most limits.maxPending of ours wait at once.
type growth struct {
	p           *capacity.Placer
	needs       []capacity.Amounts // per claim, one pod's need over the Placer's resources
	source      string
	pools       []*growPool
	waiting     int // our pods waiting for new nodes before this pass
	pending     int // how many more of ours may wait: limits.maxPending − waiting − those placed on new nodes
	maxPending  int
	claimsPools [][]string // per claim, per pool: why the claim's pod may not land there ("" if it may)
	// onNew is the size (quantities of its demand) of our pods that wait for new nodes: those waiting when the pass
	// began, then those it places there; "" while there are none, mixedSizes when those waiting differ. Pods of
	// another size are not placed on new nodes meanwhile (see place).
	onNew string
}

// mixedSizes is growth.onNew when our pods that wait for new nodes are of several sizes.
const mixedSizes = "mixed"

// growPool is one NodePool or node group while pods are placed on it.
type growPool struct {
	fit   capacity.PoolFit
	pool  *autoscaler.Pool
	shape *capacity.Node // a node group's node, whose labels and taints its new nodes carry
	// free is a NodePool's room left of its limits, per resource they name (its launching NodeClaims added);
	// nil when it has no limit. nodes are the new nodes (a node group's, or a shaped NodePool's), each's free room.
	free  corev1.ResourceList
	nodes []capacity.Amounts // over the Placer's resources
	// perNode says the pool's room is nodes (a node group's, or a NodePool's whose node shape is known).
	perNode bool
	// probe is, for a NodePool whose node shape is not known yet (no NodeClaim shows one), how many more pods it
	// takes this pass: one Job's, so that Karpenter makes a node whose shape the next pass counts on.
	probe int
	// launching is the allocatable of its launching NodeClaims whose node is not among the nodes (see coming).
	launching []corev1.ResourceList
	words     string // what the nodes are, for the report
	full      string // why it adds nothing whatever the pod ("" when it may add)
}

// growingPlacer is the Placer of claims on snap (capacity.NewPlacer), with the room the autoscaler can still add
// (snap.Autoscale) for the pods that fit on no node. A node whose NodeClaim is being deleted is no room (it carries
// Karpenter's disrupted taint here, as it soon does on the cluster): its NodeClaim no longer counts against the
// NodePool's limits, so its room is counted there, on the new nodes it lets in, once.
func growingPlacer(snap *capacity.Snapshot, claims []capacity.Claim) *capacity.Placer {
	snap = withoutDisrupted(snap)
	p := capacity.NewPlacer(snap, claims)
	if g := newGrowth(snap, p); g != nil {
		p.Grow(g)
	}
	return p
}

// newGrowth is the growth of p's claims on snap, nil when the mode counts none (no autoscaler found, or no nodes
// observed: the pass counted as quota).
func newGrowth(snap *capacity.Snapshot, p *capacity.Placer) *growth {
	st := snap.Autoscale
	if st == nil || st.Source == "" || snap.Mode != config.CapacityNodes {
		return nil
	}
	g := &growth{p: p, source: st.Source, maxPending: snap.MaxPending}
	probe := 1
	for c := range p.Claims() {
		cl := p.Claim(c)
		probe = max(probe, cl.PerJob)
		g.needs = append(g.needs, p.Need(cl.Demand))
	}
	for i := range st.Pools {
		g.pools = append(g.pools, newGrowPool(&st.Pools[i], snap.Nodes, probe, p))
	}
	for c := range p.Claims() {
		var why []string
		for _, gp := range g.pools {
			why = append(why, gp.excluded(p.Claim(c).Spec))
		}
		g.claimsPools = append(g.claimsPools, why)
	}
	for c := range p.Claims() {
		cl := p.Claim(c)
		if max(cl.OnNoNode, cl.ForNewNode) > 0 {
			switch size := capacity.Quantities(cl.Demand); g.onNew {
			case "":
				g.onNew = size
			case size:
			default:
				g.onNew = mixedSizes
			}
		}
		g.waiting += max(cl.OnNoNode, cl.ForNewNode) // interchangeable: those that fit nowhere are of those first
		for range cl.OnNoNode {
			g.takeAny(cl.Demand, g.needs[c], func(k int, _ *growPool) string { return g.claimsPools[c][k] })
		}
	}
	for _, pd := range p.Unplaced() {
		g.takeAny(pd.Demand, p.Need(pd.Demand), func(_ int, gp *growPool) string { return gp.excluded(&pd.Spec) })
	}
	g.pending = max(g.maxPending-g.waiting, 0)
	return g
}

func newGrowPool(pool *autoscaler.Pool, nodes []capacity.Node, probe int, p *capacity.Placer) *growPool {
	gp := &growPool{pool: pool, launching: coming(pool.Launching, nodes), full: pool.Unavailable}
	gp.fit = capacity.PoolFit{Kind: pool.Kind, Name: pool.Name, Limit: pool.Limits, Used: pool.Used, Launching: len(gp.launching)}
	if g := pool.Group; g != nil {
		gp.perNode = true
		gp.fit.Limit = corev1.ResourceList{"nodes": *resource.NewQuantity(int64(g.MaxSize), resource.DecimalSI)}
		gp.fit.Used = corev1.ResourceList{"nodes": *resource.NewQuantity(int64(g.Ready), resource.DecimalSI)}
		gp.shape = groupNode(pool.Name, nodes)
		n := min(g.MaxSize-g.Ready, maxGroupNodes)
		switch {
		case gp.shape == nil:
			gp.full = "no node of the group to read its node shape from: unknown, counted as adding nothing"
		case n <= 0:
			gp.full = fmt.Sprintf("at its maxSize of %d node(s)", g.MaxSize)
		default:
			node := p.Empty(gp.shape.Allocatable)
			for range n {
				gp.nodes = append(gp.nodes, node)
			}
			gp.words = fmt.Sprintf("maxSize %d: %d new node(s) of %s", g.MaxSize, n, capacity.Quantities(gp.shape.Allocatable))
		}
		return gp
	}
	if len(pool.Limits) == 0 {
		return gp
	}
	// What the limits have left: the larger, per resource, of status.resources and what the NodeClaims hold, as
	// Karpenter counts a NodeClaim at once while its status.resources may not yet.
	used := corev1.ResourceList{}
	for _, l := range []corev1.ResourceList{pool.Used, pool.Claimed} {
		for r, q := range l {
			if u, ok := used[r]; !ok || q.Cmp(u) > 0 {
				used[r] = q
			}
		}
	}
	gp.fit.Used = used
	left := corev1.ResourceList{}
	for r, limit := range pool.Limits {
		l := limit.DeepCopy()
		l.Sub(used[r])
		left[r] = l
	}
	if l, ok := left["nodes"]; ok && l.Sign() <= 0 && gp.full == "" {
		gp.full = fmt.Sprintf("at its limit of %s node(s)", pool.Limits.Name("nodes", resource.DecimalSI).String())
	}
	if sh := pool.Shape; sh != nil {
		return gp.shaped(sh, left, p)
	}
	gp.free, gp.probe = corev1.ResourceList{}, probe
	for r, l := range left {
		if r == "nodes" { // a count of nodes: it bounds no pod without a node shape
			continue
		}
		for _, alloc := range gp.launching {
			if q, ok := alloc[r]; ok {
				l.Add(q)
			}
		}
		gp.free[r] = l
	}
	return gp
}

// coming is the allocatable of the launching NodeClaims whose node is not among nodes (by spec.providerID), by
// NodeClaim name: Karpenter removes a new node's karpenter.sh/unregistered taint before its NodeClaim says
// Registered, so in between the node is counted with the nodes and is no room coming.
func coming(launching map[string]autoscaler.Launch, nodes []capacity.Node) []corev1.ResourceList {
	var out []corev1.ResourceList
	for _, name := range slices.Sorted(maps.Keys(launching)) {
		c := launching[name]
		if c.ProviderID != "" && slices.ContainsFunc(nodes, func(n capacity.Node) bool { return n.ProviderID == c.ProviderID }) {
			continue
		}
		out = append(out, c.Allocatable)
	}
	return out
}

// shaped makes a NodePool whose node shape sh is known per node: its launching NodeClaims, then as many new nodes
// of sh as what is left of its limits (left) holds, each counted at sh's capacity as Karpenter counts it.
func (gp *growPool) shaped(sh *autoscaler.Shape, left corev1.ResourceList, p *capacity.Placer) *growPool {
	gp.perNode = true
	n := int64(maxGroupNodes)
	for _, r := range slices.Sorted(maps.Keys(left)) {
		// What Karpenter charges the limits: the node's capacity, never less than its allocatable (a provider that
		// reports less, as KWOK's does, still checks the limits against its instance type's catalog).
		per := sh.Capacity[r]
		if a := sh.Allocatable[r]; a.Cmp(per) > 0 {
			per = a
		}
		if r == "nodes" {
			per = *resource.NewQuantity(1, resource.DecimalSI)
		}
		if q, ok := capacity.Quotient(left[r], per, r); ok {
			n = min(n, q)
		}
	}
	for _, l := range gp.launching {
		gp.nodes = append(gp.nodes, p.Empty(l))
	}
	node := p.Empty(sh.Allocatable)
	for range n {
		gp.nodes = append(gp.nodes, node)
	}
	gp.words = fmt.Sprintf("%d launching, %d new node(s) within its limits of %s (as NodeClaim %s)", len(gp.launching), n, capacity.Quantities(sh.Allocatable), sh.From)
	if len(gp.nodes) == 0 && gp.full == "" {
		gp.full = fmt.Sprintf("at its limits: no more node of capacity %s fits (as NodeClaim %s)", capacity.Quantities(sh.Capacity), sh.From)
	}
	return gp
}

// groupNode is a node of the node group named name: one whose spec.providerID has name as a path segment (Azure's
// scale sets, OpenStack's and others' node groups) or one of whose labels has name as value (GKE's
// cloud.google.com/gke-nodepool, EKS's eks.amazonaws.com/nodegroup, AKS's kubernetes.azure.com/agentpool, when the
// cluster-autoscaler names its groups so), the first by name; nil when none is.
func groupNode(name string, nodes []capacity.Node) *capacity.Node {
	for i := range nodes {
		n := &nodes[i]
		if slices.Contains(strings.Split(n.ProviderID, "/"), name) || slices.Contains(slices.Collect(maps.Values(n.Labels)), name) {
			return n
		}
	}
	return nil
}

// excluded says why a pod of spec may not land on the pool's new nodes, "".
func (gp *growPool) excluded(spec *corev1.PodSpec) string {
	if gp.shape != nil {
		n := *gp.shape
		n.Name, n.Ready, n.Unschedulable = "", true, false // a new node: no name yet, Ready, not cordoned
		return capacity.Excluded(spec, &n)
	}
	if gp.pool.Group != nil {
		return ""
	}
	return gp.pool.Excluded(spec)
}

// pods is how many more pods of demand (need over the Placer's space) the pool takes (unlimited: no limit binds)
// and what binds, in words.
func (gp *growPool) pods(demand corev1.ResourceList, need capacity.Amounts) (int, string) {
	switch {
	case gp.full != "":
		return 0, gp.full
	case gp.perNode:
		n := 0
		for _, node := range gp.nodes {
			k, _ := capacity.Fits(need, node)
			n += k
		}
		return n, gp.words
	case gp.free == nil:
		return capacity.Unlimited, "no limits"
	}
	k, bound := int64(math.MaxInt64), ""
	for _, r := range slices.Sorted(maps.Keys(gp.free)) {
		per := demand[r]
		if r == corev1.ResourcePods {
			per = *resource.NewQuantity(1, resource.DecimalSI)
		}
		if q, ok := capacity.Quotient(gp.free[r], per, r); ok && q < k {
			k, bound = q, string(r)
		}
	}
	if bound == "" {
		return capacity.Unlimited, "its limits name no resource the pod requests"
	}
	left := gp.free[corev1.ResourceName(bound)]
	if int64(gp.probe) < k {
		return gp.probe, fmt.Sprintf("its node shape is not known yet (no NodeClaim shows one): %d pod(s) to learn it, of %s left", gp.probe, left.String())
	}
	return int(k), fmt.Sprintf("limits.%s: %s left", bound, left.String())
}

// take takes one pod of demand (need over the Placer's space) from the pool (which has room for it).
func (gp *growPool) take(demand corev1.ResourceList, need capacity.Amounts) {
	if gp.perNode {
		for i, node := range gp.nodes {
			if k, _ := capacity.Fits(need, node); k > 0 {
				gp.nodes[i], _ = capacity.Minus(node, need)
				return
			}
		}
		return
	}
	gp.probe--
	for r, q := range gp.free {
		per := demand[r]
		if r == corev1.ResourcePods {
			per = *resource.NewQuantity(1, resource.DecimalSI)
		}
		q.Sub(per)
		gp.free[r] = q
	}
}

// takeAny takes one pod of demand (need over the Placer's space) from the first pool that takes it (why says why
// pool k may not), if any.
func (g *growth) takeAny(demand corev1.ResourceList, need capacity.Amounts, why func(k int, gp *growPool) string) bool {
	for k, gp := range g.pools {
		if why(k, gp) != "" {
			continue
		}
		if n, _ := gp.pods(demand, need); n != 0 {
			gp.take(demand, need)
			return true
		}
	}
	return false
}

// room is how many more pods of claim c the pools take together (unlimited: no limit binds), and each pool's fit.
func (g *growth) room(c int) (int, []capacity.PoolFit) {
	total := 0
	var fits []capacity.PoolFit
	for k, gp := range g.pools {
		f := gp.fit
		f.Excluded = g.claimsPools[c][k]
		if f.Excluded == "" {
			f.Pods, f.Bound = gp.pods(g.p.Claim(c).Demand, g.needs[c])
			if total != capacity.Unlimited {
				if f.Pods == capacity.Unlimited {
					total = capacity.Unlimited
				} else {
					total += f.Pods
				}
			}
		}
		fits = append(fits, f)
	}
	return total, fits
}

// MayAdd says whether some pool could ever add a node that one pod of claim c fits on, were its limits all free:
// one the pod may use (selectors, taints) whose node shape holds it, within the pool's limits in all. A pool whose
// node shape is not known yet (a NodePool before a NodeClaim shows one, a node group with no node to read) may:
// what it can launch is the autoscaler's to say.
func (g *growth) MayAdd(c int) bool {
	for k, gp := range g.pools {
		if g.claimsPools[c][k] == "" && gp.mayHold(g.p.Claim(c).Demand, g.needs[c], g.p) {
			return true
		}
	}
	return false
}

// mayHold says whether a new node of the pool could hold one pod of demand (need over p's resources).
func (gp *growPool) mayHold(demand corev1.ResourceList, need capacity.Amounts, p *capacity.Placer) bool {
	for r, limit := range gp.pool.Limits {
		if d, ok := demand[r]; ok && d.Cmp(limit) > 0 {
			return false
		}
	}
	var shape corev1.ResourceList
	switch {
	case gp.shape != nil:
		shape = gp.shape.Allocatable
	case gp.pool.Shape != nil:
		shape = gp.pool.Shape.Allocatable
	default:
		return true
	}
	return capacity.FitsIn(p.Empty(shape), need)
}

// Holds says whether claim c gets no room at all: some of its pods wait for a new node (Claim.Waiting) and
// limits.maxPending has no room for one more Job's pods.
func (g *growth) Holds(c int) bool {
	cl := g.p.Claim(c)
	return cl.ForNewNode > 0 && g.pending < cl.PerJob
}

// Place places one Job of claim c on new nodes, if the pools and limits.maxPending take its pods, and no pod of ours
// of another size waits for a new node (onNew). Pods of one size are interchangeable: however kube-scheduler binds
// them as the new nodes come up, the nodes hold as many. Pods of different sizes are not: a small pod bound first
// to a node launched for a large one (kube-scheduler retries the pods it backed off later) leaves the large one no
// room, and the autoscaler at its limits no node for it. So the sizes take new nodes one at a time: the next size
// once those waiting are bound (job.requestsFrom's rows; queues of different templates alike).
func (g *growth) Place(c int) bool {
	cl := g.p.Claim(c)
	size := capacity.Quantities(cl.Demand)
	if g.onNew != "" && g.onNew != size {
		return false
	}
	if n, _ := g.room(c); g.pending < cl.PerJob || n != capacity.Unlimited && n < cl.PerJob {
		return false
	}
	g.onNew = size
	for range cl.PerJob {
		g.takeAny(cl.Demand, g.needs[c], func(k int, _ *growPool) string { return g.claimsPools[c][k] })
	}
	g.pending -= cl.PerJob
	return true
}

// Report is how many more Jobs of claim c new nodes take, in words, and sets r.Autoscale.
func (g *growth) Report(c int, r *capacity.Report) (int, string) {
	total, fits := g.room(c)
	pods, why := total, ""
	switch {
	case total == capacity.Unlimited || total >= g.pending:
		pods = g.pending
		why = fmt.Sprintf("limits.maxPending: %d of %d pod(s) wait for new nodes", g.maxPending-g.pending, g.maxPending)
	case len(fits) == 0:
		why = "no " + poolKind(g.source)
	default:
		var by []string
		for _, f := range fits {
			switch {
			case f.Excluded != "":
			case f.Pods != 0:
				by = append(by, fmt.Sprintf("%d on %s %s: %s", f.Pods, f.Kind, f.Name, f.Bound))
			default:
				by = append(by, fmt.Sprintf("%s %s %s", f.Kind, f.Name, f.Bound))
			}
		}
		if len(by) == 0 {
			by = append(by, "no "+poolKind(g.source)+" takes the template")
		}
		why = strings.Join(by, ", ")
	}
	jobs := pods / g.p.Claim(c).PerJob
	words := fmt.Sprintf("%s: %d more on new nodes (%s)", g.source, jobs, why)
	r.Autoscale = &capacity.AutoscaleFit{Source: g.source, Adds: jobs, Binding: why, Waiting: g.waiting, Pools: fits}
	return jobs, words
}

// Adds names what adds the nodes: a NodePool (Karpenter) or a node group.
func (g *growth) Adds() string { return poolKind(g.source) }

func poolKind(source string) string {
	if source == autoscaler.Karpenter {
		return autoscaler.KindNodePool
	}
	return autoscaler.KindNodeGroup
}

// disruptedTaint is the taint Karpenter puts on a node it is about to remove (karpenter.sh/disrupted).
var disruptedTaint = corev1.Taint{Key: "karpenter.sh/disrupted", Effect: corev1.TaintEffectNoSchedule}

// withoutDisrupted is snap with Karpenter's disrupted taint on the nodes of NodeClaims being deleted (a copy when
// there are any): the nodes watch may show such a node without it for a moment.
func withoutDisrupted(snap *capacity.Snapshot) *capacity.Snapshot {
	if snap == nil || snap.Autoscale == nil {
		return snap
	}
	gone := map[string]bool{}
	for _, p := range snap.Autoscale.Pools {
		for _, id := range p.Disrupted {
			gone[id] = true
		}
	}
	var nodes []capacity.Node
	for i, n := range snap.Nodes {
		if n.ProviderID == "" || !gone[n.ProviderID] || slices.ContainsFunc(n.Taints, func(t corev1.Taint) bool { return t.MatchTaint(&disruptedTaint) }) {
			continue
		}
		if nodes == nil {
			nodes = slices.Clone(snap.Nodes)
		}
		nodes[i].Taints = append(slices.Clone(n.Taints), disruptedTaint)
	}
	if nodes == nil {
		return snap
	}
	c := *snap
	c.Nodes = nodes
	return &c
}
