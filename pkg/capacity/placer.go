package capacity

import (
	"cmp"
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/jobsched/jobsched/pkg/config"
)

// Claim is one template (one queue's) in a Placer, and our pods of it that already hold a claim on room: Unbound
// (not bound to a node yet) and Podless (the pods its pod-less Jobs will still make).
type Claim struct {
	Template         *batchv1.Job
	Unbound, Podless int
	// Waiting are those of Unbound the pass decided wait for a new node (limits.capacity: autoscale: Unschedulable,
	// and the autoscaler nominated a node for them or has not spoken yet). Each counts against limits.maxPending
	// whatever kept it off the nodes (a taken hostPort, an affinity: not only resources), and while they reach
	// maxPending the template gets no room on the nodes either: the nodes' fit is what they already failed.
	Waiting int
	// Demand, when set, is what each of its pods demands of the resources it names, instead of its template's: our
	// pods observed, or their Jobs' pod templates (their rows' own sizes, job.requestsFrom), placed with the
	// template's selectors and tolerations; what it does not name is the admitted template's (a LimitRange's
	// defaults).
	Demand corev1.ResourceList
	// ReadBound says the claim only bounds how many Jobs a read may admit (a sized queue's smallest shape: each row
	// read is then placed by its own shape): its room is the nodes' as placed, without sure.go's rule, which the
	// rows' shapes meet when they are placed. Against 1m of cpu every pod of ours is of another size, and the rule
	// would read nothing while any of them is unbound.
	ReadBound bool
}

// Placer places Jobs of several templates, one at a time, on one Snapshot: each placed pod goes to a node it fits
// on and is subtracted there, and each Job is charged to the quotas that apply to it, so that pods of different
// sizes share the nodes and the quota headroom exactly. It does no I/O.
//
// NewPlacer first takes out others' unbound pods (Snapshot.Pending), then places the claims' pods (unbound and
// podless, in claim order) where they fit; those that fit nowhere are still counted against the next tick's room.
// A pod goes to the node, among those it fits on, with the most room left after it (the fraction of cpu and memory
// free, kube-scheduler's default LeastAllocated score), the first by name on a tie: where kube-scheduler would
// plausibly put it. Wherever it goes, the count is the same for pods of one template (a pod that fits takes exactly
// one of the node's fits), and a Place returns false only when no considered node (or no quota, or the next tick's
// room) has room for the template's pods.
type Placer struct {
	snap   *Snapshot
	space  space  // the resources the pass's pods demand: a slot's room and a pod's need are over it
	scored [2]int // where scored's resources are in amounts, -1 when no pod demands one
	claims []*claim
	slots  []*slot // the nodes some claim may use, in the Snapshot's order
	quotas []*quotaLeft
	tick   *tickPod // nil when no room is kept for the next tick
	// claimed is our pods that held a claim before this pass (every claim's unbound + podless); placed is the pods
	// placed by Place. Both count against the next tick's room, wherever kube-scheduler puts them.
	claimed, placed int
	// unplaced are the indices in Snapshot.Pending of others' unbound pods that fit on no node (they wait for one).
	unplaced []int
	// grow is the room beyond the nodes (an autoscaler's: Grow), nil when none is counted.
	grow Growth
	// costs are, per pair of claims (a, c), what a pod of a may take of c's pods on a node (sure.go); scratch is
	// the room sure.go's loss counts on one node at a time. others and perPod are, per claim c, the pods of other
	// claims that hold room on the nodes c may use, and the per-pod bound of what they take of c's places: kept
	// as Place places, so that a Place costs sure.go one pass over the claims, not one per pair (nil until sure.go
	// first needs them).
	others, perPod []int
	costs          map[[2]int]int
	scratch        Amounts
}

// claim is one Claim while the Placer works on it.
type claim struct {
	tpl        *batchv1.Job
	pod        *corev1.Pod // as admitted
	demand     corev1.ResourceList
	need       Amounts               // demand over the Placer's space
	shows      []corev1.ResourceName // what a report shows of a node's room: demand's resources and pods, sorted
	perJob     int
	claimed    int // unbound + podless
	onNoNode   int // of claimed, those that fit on no node: they wait for one
	forNewNode int // of claimed, those the pass decided wait for a new node (Claim.Waiting)
	placed     int // Jobs placed
	// onNodes are its pods that hold room on the nodes: claimed − waiting, and those placed there (sure.go).
	// capacity is how many of its pods fit on the base room of its nodes (-1 until counted), most on one of them.
	onNodes, capacity, most int
	awaits                  int        // AwaitsBinds
	readBound               bool       // Claim.ReadBound
	excluded                []string   // per node of the Snapshot (its order): why the claim may not use it, "" if it may
	on                      []int      // the slots it may use
	at                      []int      // as on: its place in that slot's claims
	want                    [2]float64 // its cpu and memory, for the score
	warnings                []string   // about quotas the API server would reject its pods under
	per                     []int64    // per quota entry: what one pod (or Job) adds, in the entry's unit; 0 = not charged
}

// slot is one node some claim may use.
type slot struct {
	node  *Node
	index int // node's in the Snapshot
	// base is allocatable − requested, after others' unbound pods: what the next tick's room is counted on. shown is
	// base − this pass's placements (what the report shows), free is shown − our claimed pods (where pods go).
	base, shown, free Amounts
	claims            []int // the claims that may use it
	pending           []pendingOn
	// fit is, per claim of claims, how many of its pods fit in free; left and alloc are free's and allocatable's cpu
	// and memory, for the score. setFree keeps them.
	fit         []int
	left, alloc [2]float64
}

// scored are the resources of kube-scheduler's default LeastAllocated score.
var scored = [2]corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory}

// setFree makes free the slot's free room, and counts what fits in it.
func (p *Placer) setFree(s *slot, free Amounts) {
	s.free = free
	s.fit = s.fit[:0]
	for _, c := range s.claims {
		n, _ := Fits(p.claims[c].need, free)
		s.fit = append(s.fit, n)
	}
	for i, at := range p.scored {
		if at >= 0 {
			s.left[i] = float64(free[at])
		}
	}
}

// pendingOn is someone else's unbound pod counted on a slot, and what it costs each claim there (as slot.claims).
type pendingOn struct {
	pod   string
	costs []int
}

// quotaLeft is one resource of one ResourceQuota: what is left of it, in its unit (millicores for cpu).
type quotaLeft struct {
	quota      string
	key        corev1.ResourceName
	podCharged bool // charged per pod (else per Job: count/jobs.batch)
	left       int64
	hard       int64 // the quota's hard limit: what left may ever be
	unit       corev1.ResourceName
}

// NewPlacer makes the Placer of claims on snap (nil: capacity off, every Place succeeds).
func NewPlacer(snap *Snapshot, claims []Claim) *Placer {
	p := &Placer{snap: snap}
	if snap == nil {
		for _, c := range claims {
			p.claims = append(p.claims, &claim{tpl: c.Template, perJob: PodsPerJob(c.Template)})
		}
		return p
	}
	for _, c := range claims {
		pod := snap.admitted(c.Template)
		cl := &claim{tpl: c.Template, pod: pod, demand: Demand(pod), perJob: PodsPerJob(c.Template),
			claimed: c.Unbound + c.Podless, capacity: -1, readBound: c.ReadBound}
		if c.Demand != nil {
			cl.demand = maps.Clone(cl.demand)
			maps.Copy(cl.demand, c.Demand)
		}
		cl.forNewNode = min(max(c.Waiting, 0), cl.claimed)
		cl.shows = slices.Sorted(maps.Keys(cl.demand))
		if !slices.Contains(cl.shows, corev1.ResourcePods) {
			cl.shows = append(cl.shows, corev1.ResourcePods)
			slices.Sort(cl.shows)
		}
		p.claimed += cl.claimed
		p.claims = append(p.claims, cl)
		if snap.Mode == config.CapacityNodes {
			where := newPlacement(&pod.Spec)
			cl.excluded = make([]string, len(snap.Nodes))
			for j := range snap.Nodes {
				cl.excluded[j] = where.excluded(&snap.Nodes[j])
			}
		}
	}
	p.space = p.counted()
	for i, r := range scored {
		p.scored[i] = p.space.index(r)
	}
	for _, cl := range p.claims {
		cl.need = p.space.need(cl.demand)
		for i, at := range p.scored {
			if at >= 0 {
				cl.want[i] = float64(cl.need[at])
			}
		}
	}
	if snap.Mode == config.CapacityNodes {
		for j := range snap.Nodes {
			var s *slot
			for c, cl := range p.claims {
				if cl.excluded[j] != "" {
					continue
				}
				if s == nil {
					s = &slot{node: &snap.Nodes[j], index: j, base: p.space.free(&snap.Nodes[j])}
					p.slots = append(p.slots, s)
				}
				cl.on, cl.at = append(cl.on, len(p.slots)-1), append(cl.at, len(s.claims))
				s.claims = append(s.claims, c)
			}
		}
	}
	p.takePending()
	for _, s := range p.slots {
		s.shown = s.base
		p.setFree(s, s.base)
		for i, r := range scored {
			s.alloc[i] = float64(units(s.node.Allocatable[r], r))
		}
	}
	p.observeTick()
	p.observeQuotas(claims)
	for _, cl := range p.claims {
		for k := range cl.claimed {
			s := p.best(cl)
			if s == nil {
				cl.onNoNode = cl.claimed - k
				break // the rest fit nowhere either: room only shrinks
			}
			free, _ := Minus(s.free, cl.need)
			p.setFree(s, free)
		}
		cl.onNodes = cl.claimed - cl.onNoNode
	}
	return p
}

// counted are the resources some pod of this pass demands, sorted: the claims' pods, others' unbound pods and the
// next tick's. A slot's room holds those and the pod slots, nothing else of the node (no pod here reads the rest).
func (p *Placer) counted() space {
	var names space
	of := func(d corev1.ResourceList) {
		for r := range d {
			if r != corev1.ResourcePods && !slices.Contains(names, r) {
				names = append(names, r)
			}
		}
	}
	for _, cl := range p.claims {
		of(cl.demand)
	}
	for i := range p.snap.Pending {
		of(p.snap.Pending[i].Demand)
	}
	if tick := p.snap.NextPassPod; tick != nil {
		next := &corev1.Pod{Spec: tick.Spec} // as observeTick counts it: unbound
		next.Spec.NodeName = ""
		of(Demand(next))
	}
	slices.Sort(names)
	return names
}

// takePending takes from the slots the room of others' unbound pods that could land there. Each goes, in order, to
// the slot among those it may use and fits on where it costs the claims there the most pods (kube-scheduler may
// pick any of them; the worst one is assumed); a pod that fits on none of them is not counted (it cannot take our
// room now).
func (p *Placer) takePending() {
	before := make([][]int, len(p.slots)) // per slot, per claim there: how many fit on its base
	count := func(k int) []int {
		if before[k] == nil {
			s := p.slots[k]
			for _, c := range s.claims {
				n, _ := Fits(p.claims[c].need, s.base)
				before[k] = append(before[k], n)
			}
		}
		return before[k]
	}
	for i := range p.snap.Pending {
		pd := &p.snap.Pending[i]
		need := p.space.need(pd.Demand)
		where := newPlacement(&pd.Spec)
		best, bestCost, cost := -1, -1, 0
		var costs, bestCosts []int
		for k, s := range p.slots {
			if !FitsIn(s.base, need) || where.excluded(s.node) != "" {
				continue
			}
			costs, cost = costs[:0], 0
			for j, c := range s.claims {
				costs = append(costs, count(k)[j]-fitsAfter(p.claims[c].need, s.base, need))
				cost += costs[j]
			}
			if cost > bestCost {
				best, bestCosts, bestCost = k, append(bestCosts[:0], costs...), cost
			}
		}
		if best < 0 {
			p.unplaced = append(p.unplaced, i)
			continue
		}
		s := p.slots[best]
		s.base, _ = Minus(s.base, need)
		s.pending = append(s.pending, pendingOn{pod: pd.Namespace + "/" + pd.Name, costs: slices.Clone(bestCosts)})
		before[best] = nil
	}
}

// observeQuotas makes the quota entries every claim is charged to, with what the claims' podless pods will take.
func (p *Placer) observeQuotas(claims []Claim) {
	type entry struct {
		q   *quotaLeft
		per []int64
	}
	var entries []entry
	for i := range p.snap.Quotas {
		q := &p.snap.Quotas[i]
		for _, key := range slices.Sorted(maps.Keys(q.Spec.Hard)) {
			e := entry{per: make([]int64, len(p.claims))}
			left := q.Spec.Hard[key].DeepCopy()
			left.Sub(q.Status.Used[key])
			var name corev1.ResourceName
			for c, cl := range p.claims {
				if !quotaApplies(&cl.pod.Spec, q) {
					continue
				}
				per, n, podCharged := perPod(key, cl.demand, limitsDemand(cl.pod))
				name = n
				if per.Sign() <= 0 {
					if n == corev1.ResourceCPU || n == corev1.ResourceMemory {
						cl.warnings = append(cl.warnings, fmt.Sprintf("quota %s constrains %s but the template sets none and no "+
							"LimitRange gives a default: the API server rejects its pods", q.Name, key))
					}
					continue
				}
				e.per[c] = units(per, n)
				if e.q == nil {
					e.q = &quotaLeft{quota: q.Name, key: key, podCharged: podCharged, unit: n}
				}
			}
			if e.q == nil {
				continue
			}
			e.q.left = units(left, name)
			e.q.hard = units(q.Spec.Hard[key], name)
			if e.q.podCharged { // quota charges a pod when it is created
				for c := range p.claims {
					if take := mulCount(int64(claims[c].Podless), e.per[c]); e.q.left < math.MinInt64+take {
						e.q.left = math.MinInt64
					} else {
						e.q.left -= take
					}
				}
			}
			entries = append(entries, e)
		}
	}
	for _, cl := range p.claims {
		cl.per = make([]int64, len(entries))
	}
	for j, e := range entries {
		p.quotas = append(p.quotas, e.q)
		for c, cl := range p.claims {
			cl.per[j] = e.per[c]
		}
	}
}

// best is the slot where one more pod of cl goes: the one it fits on with the most cpu and memory left in
// proportion to the node's (LeastAllocated), the first on a tie; nil when it fits on none.
func (p *Placer) best(cl *claim) *slot {
	var best *slot
	bestScore := math.Inf(-1)
	for j, k := range cl.on {
		s := p.slots[k]
		if s.fit[cl.at[j]] < 1 {
			continue
		}
		if sc := leastAllocated(s, cl); sc > bestScore {
			best, bestScore = s, sc
		}
	}
	return best
}

// leastAllocated is the share of the node's cpu and memory left free after a pod of cl, averaged.
func leastAllocated(s *slot, cl *claim) float64 {
	score := 0.0
	for i := range scored {
		if s.alloc[i] > 0 {
			score += (s.left[i] - cl.want[i]) / s.alloc[i]
		}
	}
	return score / 2
}

// Place places one more Job of claim i (PodsPerJob pods) and charges it to its quotas, if it fits: on nodes it may
// use and fits on, in every quota that charges it, and with the next tick's room kept. It returns false, changing
// nothing, when it does not fit.
func (p *Placer) Place(i int) bool {
	cl := p.claims[i]
	if p.snap == nil {
		return true
	}
	for j, q := range p.quotas {
		if need := p.charge(cl, j); need > 0 && q.left < need {
			return false
		}
	}
	if p.snap.Mode == config.CapacityNodes && (p.grow != nil && p.grow.Holds(i) || !p.placeOnNodes(cl, i) && (p.grow == nil || !p.grow.Place(i))) {
		return false
	}
	for j, q := range p.quotas {
		q.left -= p.charge(cl, j)
	}
	cl.placed++
	p.placed += cl.perJob
	return true
}

// placeOnNodes places one Job of claim cl (i) on the nodes, the next tick's room kept, if it fits there wherever
// kube-scheduler binds our other pods (sure.go); it changes nothing when it does not.
func (p *Placer) placeOnNodes(cl *claim, i int) bool {
	cl.awaits = 0
	if !p.tickSafe(p.ours(i, cl.perJob)) {
		return false
	}
	type saved struct {
		s           *slot
		shown, free Amounts
	}
	var undo []saved
	back := func() bool {
		for _, u := range slices.Backward(undo) {
			u.s.shown = u.shown
			p.setFree(u.s, u.free)
		}
		return false
	}
	for range cl.perJob {
		s := p.best(cl)
		if s == nil {
			return back()
		}
		undo = append(undo, saved{s, s.shown, s.free})
		s.shown, _ = Minus(s.shown, cl.need)
		free, _ := Minus(s.free, cl.need)
		p.setFree(s, free)
	}
	if room, others := p.onNodesRoom(i, cl.perJob); room < cl.perJob {
		cl.awaits = others
		return back()
	}
	cl.onNodes += cl.perJob
	p.addOthers(i, cl.perJob)
	return true
}

// AwaitsBinds is, when the last Place of claim i on the nodes found room there but not for certain (sure.go), how
// many of our pods of other claims were unbound: once kube-scheduler binds them, the next pass may place it. 0
// otherwise.
func (p *Placer) AwaitsBinds(i int) int {
	return p.claims[i].awaits
}

// Never says why one Job of claim i could never fit, however much room is freed: in capacity nodes, its pod fits
// in the allocatable of no node it may use (each as if empty) and, with the autoscaler's growth (autoscale), on no
// new node it could add (Growth.MayAdd); in any mode, it takes more of a ResourceQuota than its hard limit. ""
// when it could fit (or no node may take it at all and nothing grows: Report says so, and nothing is read).
func (p *Placer) Never(i int) string {
	if p.snap == nil {
		return ""
	}
	cl := p.claims[i]
	if p.snap.Mode == config.CapacityNodes && (len(cl.on) > 0 || p.grow != nil) {
		var largest *Node // by cpu, else the first
		fitsOne := false
		for _, k := range cl.on {
			n := p.slots[k].node
			if f, _ := Fits(cl.need, p.space.empty(n.Allocatable)); f >= 1 {
				fitsOne = true
				break
			}
			if largest == nil || n.Allocatable.Cpu().Cmp(*largest.Allocatable.Cpu()) > 0 {
				largest = n
			}
		}
		var why string
		switch {
		case fitsOne || p.grow != nil && p.grow.MayAdd(i):
		case largest != nil:
			why = fmt.Sprintf("it asks for %s, more than the allocatable of any of the %d node(s) it may run on (the largest, %s: %s)",
				Quantities(cl.demand), len(cl.on), largest.Name, allocatableOf(cl.demand, largest))
		default:
			why = fmt.Sprintf("it asks for %s, and no node it may run on exists", Quantities(cl.demand))
		}
		if why != "" && p.grow != nil {
			why += fmt.Sprintf(", nor could any %s add one it fits on (its node shape, or its limits in all)", p.grow.Adds())
		}
		if why != "" {
			return why
		}
	}
	for j, q := range p.quotas {
		if need := p.charge(cl, j); need > 0 && need > q.hard {
			hard := quantity(q.hard, q.unit)
			return fmt.Sprintf("it asks for %s, more than ResourceQuota %s allows in all (%s: %s)", Quantities(cl.demand), q.quota, q.key, hard.String())
		}
	}
	return ""
}

// allocatableOf is node n's allocatable of the resources of demand, in words.
func allocatableOf(demand corev1.ResourceList, n *Node) string {
	l := corev1.ResourceList{}
	for r := range demand {
		if v, ok := n.Allocatable[r]; ok {
			l[r] = v
		}
	}
	return Quantities(l)
}

// charge is what one Job of cl takes of quota entry j, in its unit.
func (p *Placer) charge(cl *claim, j int) int64 {
	if p.quotas[j].podCharged {
		return mulCount(cl.per[j], int64(cl.perJob))
	}
	return cl.per[j]
}

// Report is how many more Jobs of claim i fit after the placements so far, and why (see Fit). With one claim and
// no placement it is Fit's report.
func (p *Placer) Report(i int) Report {
	if p.snap == nil {
		return Report{Fit: -1, Binding: "capacity off"}
	}
	cl := p.claims[i]
	r := Report{Fit: -1, Demand: cl.demand, Listed: p.snap.Listed}
	if cl.perJob > 1 {
		r.PodsPerJob = cl.perJob
	}
	if p.snap.Mode == config.CapacityNodes {
		r.Fit, r.Binding = p.reportNodes(i, &r)
		slices.SortFunc(r.Nodes, func(a, b NodeFit) int { return cmp.Compare(a.Name, b.Name) }) // whatever the Snapshot's order
		if p.grow != nil {
			more, why := p.grow.Report(i, &r)
			r.Fit, r.Binding = r.Fit+more, r.Binding+"; "+why
			if p.grow.Holds(i) {
				r.Fit, r.Binding = 0, why+"; its pods wait though they fit on the nodes: none fits there either"
			}
		}
	}
	for j, q := range p.quotas {
		per := cl.per[j]
		if per <= 0 {
			continue
		}
		k := max(q.left, 0) / per
		if q.podCharged {
			k /= int64(cl.perJob)
		}
		qf := QuotaFit{Name: q.quota, Resource: string(q.key), Fits: int(k)}
		r.Quota = append(r.Quota, qf)
		if r.Fit < 0 || qf.Fits < r.Fit {
			r.Fit, r.Binding = qf.Fits, fmt.Sprintf("quota %s/%s: %d more", q.quota, q.key, qf.Fits)
		}
	}
	if r.Fit < 0 {
		r.Binding = "no node or quota limit applies"
	}
	r.Warning = strings.Join(append(slices.Clone(p.snap.Warnings), cl.warnings...), "; ")
	return r
}

// reportNodes is the node side of Report(i): the Jobs that fit, and why.
func (p *Placer) reportNodes(i int, r *Report) (int, string) {
	cl := p.claims[i]
	r.Nodes = make([]NodeFit, len(p.snap.Nodes)) // in the Snapshot's order: Report sorts them
	for j := range p.snap.Nodes {
		r.Nodes[j] = NodeFit{Name: p.snap.Nodes[j].Name, Excluded: cl.excluded[j]}
	}
	if len(cl.on) == 0 {
		return 0, "no Ready, schedulable node matches the template"
	}
	room := 0                  // pods that fit where pods go
	limits := map[string]int{} // how many considered nodes each resource binds on
	var lim string
	for j, k := range cl.on {
		s := p.slots[k]
		room += s.fit[cl.at[j]]
		shown, bound := Fits(cl.need, s.shown)
		l := string(p.space.name(bound))
		limits[l]++
		lim = l
		r.Nodes[s.index].Fits, r.Nodes[s.index].Limit, r.Nodes[s.index].Free = shown, l, p.shown(cl, s.shown)
		at := slices.Index(s.claims, i)
		for _, pd := range s.pending {
			r.Pending = append(r.Pending, PendingFit{Pod: pd.pod, Node: s.node.Name, Costs: pd.costs[at]})
		}
	}
	pods, tick := p.tickRoomFor(i, room)
	r.Tick = tick
	tickBinds := pods < room
	sure, others := p.onNodesRoom(i, pods)
	sureBinds := sure < pods
	pods = sure
	if sureBinds {
		r.AwaitsBinds = others
	}
	fit := pods / cl.perJob
	var s string
	switch {
	case sureBinds:
		s = fmt.Sprintf("nodes: %d more fit on %d node(s) wherever kube-scheduler binds our %d unbound pod(s) of other sizes",
			pods, len(cl.on), others)
	case tickBinds:
		s = fmt.Sprintf("tick: %d more pod(s) fit on %d node(s) with room kept for the next tick", pods, len(cl.on))
	case len(cl.on) == 1:
		s = fmt.Sprintf("%s: %d more fit on %s", lim, pods, p.slots[cl.on[0]].node.Name)
	default:
		var by []string
		for _, l := range slices.Sorted(maps.Keys(limits)) {
			by = append(by, fmt.Sprintf("%s on %d", l, limits[l]))
		}
		s = fmt.Sprintf("nodes: %d more fit on %d nodes (limited by %s)", pods, len(cl.on), strings.Join(by, ", "))
	}
	if p.claimed > 0 {
		s += fmt.Sprintf(", after %d unbound", p.claimed)
	}
	if cl.perJob > 1 {
		s += fmt.Sprintf(" (%d Job(s) of %d pods)", fit, cl.perJob)
	}
	return fit, s
}

// shown is what a report shows of free for cl: cl.shows's entries.
func (p *Placer) shown(cl *claim, free Amounts) Free {
	f := Free{Names: cl.shows, Units: make([]int64, len(cl.shows))}
	for i, r := range cl.shows {
		if at := p.space.index(r); at >= 0 {
			f.Units[i] = free[at]
		}
	}
	return f
}
