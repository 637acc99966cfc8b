package capacity

import (
	"cmp"
	"fmt"
	"math"
	"slices"

	corev1 "k8s.io/api/core/v1"
)

// The room kept for the next tick. The next tick's pod (the spec of the pod this pass runs in) must still find a
// node, wherever kube-scheduler puts our pods: those that hold a claim already and those placed now. Our pods are a
// multiset S (so many of each claim's template). Let T be the nodes the tick may use among those S's templates may
// use. The tick fails only if every node n of T gets a subset of S that fits there and leaves the tick no room;
// those subsets are disjoint. On n, a subset leaves no room when, in some resource r, its pods take more than
// beside_r (what n has beyond the tick; the pod slots count as a resource of 1 per pod); the fewest pods of S that
// do so, b_n, are the largest in r first. If b_n is more than the most pods of S that fit on n together (counted
// with the smallest first, an upper bound), or S has too few, n always keeps the tick's room: S is safe. Otherwise
// S is safe when |S| < Σ_T b_n, since blocking every node takes at least that many pods. A node of T where the tick
// does not fit even now counts b_n = 0. When T is empty the tick runs on nodes we do not use: no room is kept.
//
// For one template this is exact: b_n = c'+1 with c' the pods that fit on n beside the tick, and a node where
// c' = m (the most that fit there) always keeps the room; so any count up to Σ_T (c'+1) − 1 is safe, and one more
// is not (kube-scheduler may put c'+1 on every node).

// Unlimited is a count of pods without bound (for the words of the report).
const Unlimited = -1

// tickPod is the next tick's pod and where it may go.
type tickPod struct {
	demand corev1.ResourceList
	need   Amounts // demand over the Placer's space
	// claim c's pod takes claimDemand[c][r] of the Placer's resource r (the pod slots apart), in units, and desc[r]
	// are the claims by that, largest first.
	claimDemand [][]int64
	desc        [][]int
	on          []*tickRoom // per slot: nil when the tick may not use it
	ok          []bool      // scratch: the claims counted on a slot
}

// tickRoom is what our pods may take on a slot the tick may use, in units per resource and pod slots: most with this
// pass's pod gone, beside what is left beyond the tick (fits false when the tick does not fit there even with
// nothing more of ours). m is, per claim of the slot, how many of its pods fit in most.
type tickRoom struct {
	most, beside         []int64
	mostPods, besidePods int64
	fits                 bool
	m                    []int
}

// observeTick finds the slots the next tick may use and what our pods may take there.
func (p *Placer) observeTick() {
	tick := p.snap.NextPassPod
	if tick == nil || len(p.slots) == 0 {
		return
	}
	next := &corev1.Pod{Spec: *tick.Spec.DeepCopy()}
	next.Spec.NodeName = ""
	where := newPlacement(&next.Spec)
	demand := Demand(next)
	t := &tickPod{demand: demand, need: p.space.need(demand), on: make([]*tickRoom, len(p.slots)), ok: make([]bool, len(p.claims))}
	pods := len(p.space) // where the pod slots are
	for _, cl := range p.claims {
		t.claimDemand = append(t.claimDemand, cl.need[:pods])
	}
	for i := range pods {
		order := make([]int, len(p.claims))
		for c := range order {
			order[c] = c
		}
		slices.SortStableFunc(order, func(a, b int) int { return cmp.Compare(t.claimDemand[b][i], t.claimDemand[a][i]) })
		t.desc = append(t.desc, order)
	}
	atLeast0 := func(a Amounts) []int64 {
		out := make([]int64, pods)
		for i := range out {
			out[i] = max(a[i], 0)
		}
		return out
	}
	for k, s := range p.slots {
		if where.excluded(s.node) != "" {
			continue
		}
		most := s.base
		if s.node.Name == tick.Spec.NodeName {
			most = plus(s.base, t.need)
		}
		tr := &tickRoom{most: atLeast0(most), mostPods: most[pods]}
		if beside, ok := Minus(most, t.need); ok {
			tr.fits, tr.beside, tr.besidePods = true, atLeast0(beside), tr.mostPods-1
		}
		for _, c := range s.claims {
			m, _ := Fits(p.claims[c].need, most)
			tr.m = append(tr.m, m)
		}
		t.on[k] = tr
	}
	p.tick = t
}

// ours is S: per claim, its claimed pods and those placed, and more pods of claim with.
func (p *Placer) ours(with, more int) []int64 {
	n := make([]int64, len(p.claims))
	for c, cl := range p.claims {
		n[c] = int64(cl.claimed + cl.placed*cl.perJob)
	}
	n[with] += int64(more)
	return n
}

// tickSafe says whether our pods n leave the next tick room on some node wherever kube-scheduler puts them.
func (p *Placer) tickSafe(n []int64) bool {
	if p.tick == nil {
		return true
	}
	var total, sum int64
	for _, x := range n {
		total += x
	}
	if total == 0 {
		return true
	}
	usable := 0
	for k := range p.slots {
		tr, ok := p.usable(k, n)
		if !ok {
			continue
		}
		usable++
		if !tr.fits {
			continue
		}
		b := p.leastBlocking(k, n)
		if b < 0 {
			return true
		}
		if sum += b; sum > total { // blocking the nodes so far takes more pods than we have
			return true
		}
	}
	return usable == 0 || sum > total
}

// usable is the tick's room on slot k when the tick may use it and some of n may too.
func (p *Placer) usable(k int, n []int64) (*tickRoom, bool) {
	tr := p.tick.on[k]
	if tr == nil || !slices.ContainsFunc(p.slots[k].claims, func(c int) bool { return n[c] != 0 }) {
		return nil, false
	}
	return tr, true
}

// leastBlocking is b_n on slot k: the fewest of our pods n that leave the next tick no room there, or -1 when no
// subset of them that fits there does (n[c] == unlimited: as many as wanted). Only claims that may use the slot
// and fit a pod there count.
func (p *Placer) leastBlocking(k int, n []int64) int64 {
	t, tr := p.tick, p.tick.on[k]
	ok := t.ok
	clear(ok)
	all, counted := int64(0), false // how many pods the candidates have; unlimited when one has no bound
	for j, c := range p.slots[k].claims {
		if n[c] == 0 || tr.m[j] < 1 {
			continue
		}
		ok[c], counted = true, true
		if all != Unlimited {
			if n[c] == Unlimited {
				all = Unlimited
			} else {
				all = addCount(all, n[c])
			}
		}
	}
	if !counted {
		return -1
	}
	least := int64(-1)
	fewest := func(k int64) {
		if least < 0 || k < least {
			least = k
		}
	}
	if all == Unlimited || all > tr.besidePods {
		fewest(tr.besidePods + 1)
	}
	most := tr.mostPods // the most of them that fit there together
	if all != Unlimited {
		most = min(most, all)
	}
	for r, order := range t.desc {
		count, taken := int64(0), int64(0)
		for _, c := range order { // largest first
			d := t.claimDemand[c][r]
			if !ok[c] {
				continue
			}
			if d <= 0 {
				break
			}
			if need := (tr.beside[r]-taken)/d + 1; n[c] == Unlimited || need <= n[c] {
				fewest(count + need)
				break
			}
			count, taken = count+n[c], taken+n[c]*d
		}
		left, fit := tr.most[r], int64(0)
		for _, c := range slices.Backward(order) { // smallest first
			d := t.claimDemand[c][r]
			if !ok[c] {
				continue
			}
			take := n[c]
			if d > 0 && (take == Unlimited || left/d < take) {
				take = left / d
			}
			if take == Unlimited {
				fit = Unlimited
				break
			}
			fit, left = fit+take, left-take*d
		}
		if fit != Unlimited {
			most = min(most, fit)
		}
	}
	if least < 0 || least > most {
		return -1
	}
	return least
}

// addCount adds counts that do not overflow in practice (pods), saturating.
func addCount(a, b int64) int64 {
	if a > math.MaxInt64-b {
		return math.MaxInt64
	}
	return a + b
}

// mulCount multiplies counts (not negative: pods, a quota's units per pod), saturating: a Job's parallelism is an
// int32 and a pod's memory an int64 of bytes.
func mulCount(a, b int64) int64 {
	if a != 0 && b > math.MaxInt64/a {
		return math.MaxInt64
	}
	return a * b
}

// tickRoomFor is how many more pods of claim i (up to room) our pods may take with the next tick's room kept, and
// that room in words.
func (p *Placer) tickRoomFor(i, room int) (int, string) {
	if p.tick == nil {
		return room, ""
	}
	if !p.tickSafe(p.ours(i, 0)) {
		return 0, p.tickWords(i)
	}
	lo, hi := 0, room // tickSafe holds at lo; find the largest such count
	for lo < hi {
		mid := lo + (hi-lo+1)/2
		if p.tickSafe(p.ours(i, mid)) {
			lo = mid
		} else {
			hi = mid - 1
		}
	}
	return lo, p.tickWords(i)
}

// tickWords says the room kept for the next tick, for our pods of the claims that have some and of claim i,
// however many.
func (p *Placer) tickWords(i int) string {
	t := p.tick
	n := p.ours(i, 0)
	for c := range n {
		if n[c] > 0 || c == i {
			n[c] = Unlimited
		}
	}
	usable := 0
	for k, s := range p.slots {
		tr, ok := p.usable(k, n)
		if !ok {
			continue
		}
		usable++
		if tr.fits && p.leastBlocking(k, n) < 0 {
			return fmt.Sprintf("the next tick (%s) fits on %s beside our pods", Quantities(t.demand), s.node.Name)
		}
	}
	if usable == 0 {
		return "the next tick runs on none of the template's nodes: no room kept"
	}
	return fmt.Sprintf("room kept for the next tick (%s) on one of %d node(s)", Quantities(t.demand), usable)
}
