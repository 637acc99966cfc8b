package capacity

import corev1 "k8s.io/api/core/v1"

// Growth is room beyond the nodes for a Placer's claims: what an autoscaler can still add (limits.capacity:
// autoscale, pkg/capacity/autoscale). The Placer places a Job on the nodes when it fits there, else asks the
// Growth; the Growth reads the claims through the Placer (Claims, Claim, Need, Empty, Unplaced).
type Growth interface {
	// Holds says whether claim c gets no room at all, on the nodes either: its pods wait for new nodes already and
	// no more of ours may.
	Holds(c int) bool
	// Place places one Job of claim c on new nodes if they take it, and says whether they did.
	Place(c int) bool
	// MayAdd says whether a new node could ever hold one pod of claim c, were the limits all free.
	MayAdd(c int) bool
	// Report is how many more Jobs of claim c new nodes take, in words, and sets what r shows of them.
	Report(c int, r *Report) (int, string)
	// Adds names what adds the nodes, for the words of Never ("NodePool", "node group").
	Adds() string
}

// Grow gives p the room g adds beyond the nodes (a mode's Room sets it before any Place).
func (p *Placer) Grow(g Growth) { p.grow = g }

// ClaimView is what a Growth reads of one of a Placer's claims.
type ClaimView struct {
	Demand corev1.ResourceList // what each of its pods demands
	Spec   *corev1.PodSpec     // its pod's, as the API server admits it (selectors, tolerations)
	PerJob int                 // pods per Job
	// OnNoNode are those of its pods holding a claim already that fit on no node; ForNewNode those the pass
	// decided wait for a new node (Claim.Waiting).
	OnNoNode, ForNewNode int
}

// Claims is how many claims p places.
func (p *Placer) Claims() int { return len(p.claims) }

// Claim is what a Growth reads of claim c.
func (p *Placer) Claim(c int) ClaimView {
	cl := p.claims[c]
	return ClaimView{Demand: cl.demand, Spec: &cl.pod.Spec, PerJob: cl.perJob, OnNoNode: cl.onNoNode, ForNewNode: cl.forNewNode}
}

// Need is one pod of demand over p's resources (what Fits, FitsIn and Minus count).
func (p *Placer) Need(demand corev1.ResourceList) Amounts { return p.space.need(demand) }

// Empty is a node of allocatable with nothing on it, over p's resources.
func (p *Placer) Empty(allocatable corev1.ResourceList) Amounts { return p.space.empty(allocatable) }

// Unplaced are others' unbound pods (of the Snapshot's Pending) that fit on no node: they wait for new nodes too.
func (p *Placer) Unplaced() []*Pending {
	out := make([]*Pending, 0, len(p.unplaced))
	for _, k := range p.unplaced {
		out = append(out, &p.snap.Pending[k])
	}
	return out
}

// Excluded says why a pod of spec may not land on node n ("" when it may): its selectors, affinity and tolerations,
// as the Placer counts them.
func Excluded(spec *corev1.PodSpec, n *Node) string { return newPlacement(spec).excluded(n) }
