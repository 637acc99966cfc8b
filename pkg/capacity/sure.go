package capacity

// Our unbound pods of several sizes. The Placer puts each pod where kube-scheduler would plausibly put it (best),
// but kube-scheduler picks at random among nodes of equal score, and scores with plugins the Placer does not. Pods
// of one claim are interchangeable: however kube-scheduler binds them, the nodes hold as many. Pods of different
// sizes are not: small pods bound on the node where a large one was counted can leave the large one no node, and it
// goes Unschedulable. So a Job goes on the nodes only when every claim's pods that hold room there fit wherever
// kube-scheduler binds the others, in any order.
//
// For claim c, let cap_c be how many of its pods fit on its nodes' base room (before our unbound pods: Σ cap_n over
// them), and n_c its pods that hold room on the nodes (its unbound and podless ones that fit, and those placed on
// the nodes this pass). The others' pods, however they are bound, take at most loss_c of those places, the smaller
// of two bounds:
//   - per pod: a pod u takes at most ⌈u_r/c_r⌉ of c's places from its node in a resource r that c asks for
//     (⌊(f−u)/c⌋ ≥ ⌊f/c⌋ − ⌈u/c⌉), at least the pod slot's one, and never more than a node holds of c;
//   - per node: on node n, the others that may use it take at most cap_n(f) − cap_n(f − T_n), T_n being all their
//     requests together (as though every one of them were bound there).
//
// Each of c's pods then finds a node, in any order of binding, when cap_c − loss_c ≥ n_c. A Job of c is placed on
// the nodes when that holds with its pods added to n_c, and still holds of every other claim with pods there, c's
// new pods counted among its others. For one template, or several of one size on the same nodes, a pod costs
// another one place and this is the count the placement gives already; on one node it is that node's exact count.
// With several sizes on several nodes it refuses only while our pods of other sizes are unbound: kube-scheduler
// binds them within moments, and the next pass counts them where they are.

// onNodesRoom is how many more pods of claim i, up to most, the nodes take wherever kube-scheduler binds our pods
// that hold room there (see above), and how many of those are of other claims; most, and 0, when no other claim's
// pods hold room on a node claim i may use, or claim i only bounds a read (Claim.ReadBound): the placement alone
// decides.
func (p *Placer) onNodesRoom(i, most int) (room, others int) {
	if p.claims[i].readBound {
		return most, 0
	}
	p.countOthers()
	if others = p.others[i]; others == 0 || most <= 0 {
		return most, others
	}
	spare := p.capacityOf(i) - p.claims[i].onNodes
	room = min(most, max(spare-p.loss(i, -1, 0, spare-most), 0))
	for c, cl := range p.claims {
		if c == i || cl.onNodes == 0 || p.cost(i, c) == 0 {
			continue
		}
		spare := p.capacityOf(c) - cl.onNodes
		ok := func(k int) bool { return spare-p.loss(c, i, k, spare) >= 0 }
		if ok(room) { // most often, by the per-pod bound alone
			continue
		}
		lo, hi := 0, room-1 // the most k with ok(k); ok(0) may fail: pods of c already unsure
		if !ok(0) {
			return 0, others
		}
		for lo < hi {
			if mid := lo + (hi-lo+1)/2; ok(mid) {
				lo = mid
			} else {
				hi = mid - 1
			}
		}
		room = lo
	}
	return room, others
}

// countOthers counts, once a Placer first needs them, each claim's others and perPod (see Placer.others); placed
// keeps them after.
func (p *Placer) countOthers() {
	if p.others != nil {
		return
	}
	p.others, p.perPod = make([]int, len(p.claims)), make([]int, len(p.claims))
	for o, cl := range p.claims {
		p.addOthers(o, cl.onNodes)
	}
}

// addOthers counts n more pods of claim o holding room on the nodes in every other claim's others and perPod.
func (p *Placer) addOthers(o, n int) {
	if n == 0 || p.others == nil {
		return
	}
	for c := range p.claims {
		if k := p.cost(o, c); c != o && k > 0 {
			p.others[c] += n
			p.perPod[c] += n * k
		}
	}
}

// loss is loss_c: the most of claim c's places on the nodes our other pods may take (with more pods of claim
// extra, when extra ≥ 0). A loss of at most enough is all the caller needs to know: when the per-pod bound is
// that low, it is returned without the per-node bound's walk of c's nodes (on thousands of nodes, with pods of
// several sizes placed, that walk per try was most of a pass).
func (p *Placer) loss(c, extra, more, enough int) int {
	count := func(o int) int {
		n := p.claims[o].onNodes
		if o == extra {
			n += more
		}
		return n
	}
	perPod := p.perPod[c]
	if extra >= 0 && extra != c {
		perPod += more * p.cost(extra, c)
	}
	if perPod == 0 || perPod <= enough {
		return perPod
	}
	cl, perNode := p.claims[c], 0
	for _, k := range cl.on {
		s := p.slots[k]
		base, _ := Fits(cl.need, s.base)
		if base == 0 {
			continue
		}
		left := append(p.scratch[:0], s.base...) // this runs per node and per try of onNodesRoom: no allocation
		for _, o := range s.claims {
			if n := count(o); o != c && n > 0 {
				takeN(left, p.claims[o].need, n)
			}
		}
		p.scratch = left
		after, _ := Fits(cl.need, left)
		if perNode += base - after; perNode >= perPod {
			return perPod
		}
	}
	return perNode
}

// takeN takes n pods of need from free, in place (it may go below 0: Fits counts that as no room).
func takeN(free, need Amounts, n int) {
	for r := range free {
		free[r] -= mulCount(need[r], int64(n))
	}
}

// capacityOf is cap_c: how many pods of claim c fit on the base room of the nodes it may use (counted once).
func (p *Placer) capacityOf(c int) int {
	cl := p.claims[c]
	if cl.capacity < 0 {
		cl.capacity, cl.most = 0, 0
		for _, k := range cl.on {
			n, _ := Fits(cl.need, p.slots[k].base)
			cl.capacity += n
			cl.most = max(cl.most, n)
		}
	}
	return cl.capacity
}

// cost is what one pod of claim a may take of claim c's places on a node: 0 when they share no node (counted once
// per pair).
func (p *Placer) cost(a, c int) int {
	key := [2]int{a, c}
	if k, ok := p.costs[key]; ok {
		return k
	}
	if p.costs == nil {
		p.costs = map[[2]int]int{}
	}
	k := 0
	if shareSlot(p.claims[a].on, p.claims[c].on) {
		p.capacityOf(c)
		u, need := p.claims[a].need, p.claims[c].need
		k = 1 // the pod slot
		for r := range len(need) - 1 {
			if need[r] > 0 && u[r] > 0 {
				k = max(k, int((u[r]+need[r]-1)/need[r]))
			}
		}
		k = max(min(k, p.claims[c].most), 1)
	}
	p.costs[key] = k
	return k
}

// shareSlot says whether two sorted lists of slots have one in common.
func shareSlot(a, b []int) bool {
	for i, j := 0, 0; i < len(a) && j < len(b); {
		switch {
		case a[i] == b[j]:
			return true
		case a[i] < b[j]:
			i++
		default:
			j++
		}
	}
	return false
}
