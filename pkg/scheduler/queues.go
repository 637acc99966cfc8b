package scheduler

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/jobsched/jobsched/pkg/capacity"
	"github.com/jobsched/jobsched/pkg/config"
	"github.com/jobsched/jobsched/pkg/jobmeta"
	"github.com/jobsched/jobsched/pkg/rate"
	"github.com/jobsched/jobsched/pkg/render"
	"github.com/jobsched/jobsched/pkg/rows"
)

// Queue is one queue's I/O, in the order of config.Config.Queues: where its rows come from and how they become Jobs.
type Queue struct {
	Source   rows.Source
	Renderer *render.Renderer
}

// AllQueues are the queues' I/O in the order of config.Config.AllQueues: s.Queues, or (a Scheduler built with
// Source and Renderer only) its one queue. Every reader of a queue's source or renderer goes through it.
func (s *Scheduler) AllQueues() []Queue {
	if len(s.Queues) > 0 {
		return s.Queues
	}
	return []Queue{{Source: s.Source, Renderer: s.Renderer}}
}

// QueuePlan is one queue's part of a plan (Plan.Queues).
type QueuePlan struct {
	Name       string `json:"name"`
	Priority   int    `json:"priority"`
	Weight     int    `json:"weight"`
	Unfinished int    `json:"unfinished"`
	// Holds is what the queue's unfinished Jobs hold, suspended ones not counted (with Kueue: the queued): per
	// resource, the sum over them of their pod template's requests, as kube-scheduler counts a pod's
	// (capacity.Demand), times the pods each runs at once (capacity.PodsPerJob); nil for none. A sized queue's
	// Jobs count each at its own size.
	Holds corev1.ResourceList `json:"holds,omitempty"`
	// Slots is the queue's room this pass, alone (its limits, its fit, the install's room), and Limit what bound it;
	// Blocked says why it may create nothing.
	Slots   int    `json:"slots"`
	Limit   string `json:"limit"`
	Blocked string `json:"blocked,omitempty"`
	// NextCreate is as Plan.NextCreate, for the queue's own slots.
	NextCreate *time.Time `json:"nextCreate,omitempty"`
	// Selected are the rows read for it; Creates the Jobs it got in the share (the rest of what it read waits).
	Selected int              `json:"selected"`
	Creates  int              `json:"creates"`
	Capacity *capacity.Report `json:"capacity,omitempty"`
	Query    *QueryFinding    `json:"query,omitempty"`
	// GroupsAtCap are the groups (limits.perGroup) with maxActive unfinished Jobs, this pass's creates counted.
	GroupsAtCap []string `json:"groupsAtCap,omitempty"`

	// Bound is what bound the queue's slots, from a fixed set (as Plan.Bound).
	Bound Bound `json:"-"`

	exclude []string
}

// Excluded are the keys the queue's read leaves out (as Plan.Excluded, for the queue's backlog).
func (q QueuePlan) Excluded() []string { return slices.Clone(q.exclude) }

// installRoom is R, the room the install's limits leave for all queues together, and what bound it.
type installRoom struct {
	slots     int
	limit     string
	bound     Bound
	roomBound bool
	next      time.Time // the install's limits.rate bound it: its next create (rate.go)
}

// Decide is the pure part of the pass: Decision with no cancel query asked and no row read, the capacity fitted
// when obs holds it (see decideParts).
func Decide(cfg *config.Config, obs *Observation) *Plan {
	p, _, _, _ := Decision(context.Background(), cfg, obs, Cancellation{}, nil) // reads nothing: no error
	return p
}

// decideParts is the decide step of Decision: from the configuration and one observation of the install it decides,
// for each queue on its own (its Jobs, its limits: see decideQueue), what to delete, which keys to exclude from its
// read, which tasks are retried and how many Jobs it may create; then the install's limits bound every queue: an
// Unschedulable pod of any queue blocks all of them (limits.blockOnUnschedulable), and no queue gets more slots than
// R = min(limits.maxPerTick, limits.maxActive − unfinished Jobs of all queues [, limits.maxQueued − queued]). The
// Jobs c cancels are deleted (DeleteCancelled) and hold no slot, and each queue whose cancel query could not be asked
// is blocked (see Cancellation).
func decideParts(cfg *config.Config, obs *Observation, c Cancellation) *Plan {
	qs := cfg.AllQueues()
	parts := make([]*queuePart, len(qs))
	unfinished, queued, unschedulable := 0, 0, 0
	first := ""
	for i := range qs {
		// Each queue reads its Jobs in obs.Jobs: no second copy of 10,000 summaries at the pass's peak.
		mine := func(j *JobSummary) bool { return jobQueue(cfg, j) == i }
		p := decideQueue(cfg.QueueConfig(i), obs, mine, c.Jobs) // its Jobs carry its name (QueueName), none for the implicit queue
		p.sized = cfg.QueueConfig(i).Job.Sized()
		if p.sized {
			p.backfill = cfg.QueueConfig(i).Job.Backfill
		}
		unfinished, queued, unschedulable = unfinished+p.Unfinished, queued+p.queued, unschedulable+p.Unschedulable
		if first == "" {
			first = p.firstUnschedulable()
		}
		parts[i] = p
	}
	rt := decideRates(cfg, obs)
	r := roomOf(cfg, unfinished, queued)
	if n, limit, next, ok := rt.bound(rate.ScopeInstall, r.slots); ok {
		r = installRoom{slots: n, limit: limit, bound: BoundRate, next: next}
	}
	for i, p := range parts {
		if cfg.BlockOnUnschedulable() && unschedulable > 0 { // before any other reason: it is what the user must fix
			p.Limit, p.roomBound = "", false
			p.block(BoundUnschedulable, fmt.Sprintf("%d pod(s) Unschedulable (%s)", unschedulable, first))
			p.hard = true
			continue
		}
		if n, limit, next, ok := rt.bound(rate.QueueScope(qs[i].Name), p.Slots); ok && p.Blocked == "" {
			p.Slots, p.Limit, p.Bound, p.nextCreate, p.roomBound = n, limit, BoundRate, next, false
		}
		if limit, next, ok := rt.groupsClosed(cfg, i); ok && p.Blocked == "" && p.Slots > 0 {
			p.Slots, p.Limit, p.nextCreate, p.roomBound = 0, limit, next, false
		}
		p.groupRoom = rt.groupRoom(i)
		if r.slots < p.Slots {
			p.Slots, p.Limit, p.Bound, p.nextCreate = max(r.slots, 0), r.limit, r.bound, r.next
			p.roomBound = p.roomBound || r.roomBound
		}
		if p.Slots <= 0 && p.Blocked == "" {
			p.block(p.Bound, p.Limit)
		}
	}
	for i := range c.Failed { // it cannot tell which of its rows are cancelled: over any other reason
		if i < len(parts) {
			parts[i].block(BoundReadFailed, "reading rows failed")
		}
	}
	p := &Plan{Scheduler: cfg.Name, Namespace: cfg.Namespace, WaitsNote: obs.WaitsNote, planState: planState{inst: r, rates: rt}}
	p.assemble(cfg, parts)
	return p
}

// jobQueue is the index of j's queue in cfg.AllQueues (see config.Config.QueueIndex).
func jobQueue(cfg *config.Config, j *JobSummary) int {
	if len(cfg.Queues) <= 1 { // AllQueues: the one queue (its implicit one is built anew each call)
		return 0
	}
	return cfg.QueueIndex(j.Queue)
}

// roomOf is R: the install's limits across its queues, and the capacity mode's bound on the install (a
// capacity.Bounder's, given its unfinished and queued Jobs).
func roomOf(cfg *config.Config, unfinished, queued int) installRoom {
	r := activeRoom(cfg, unfinished)
	if b, ok := capacity.ModeOf(cfg.Limits.Capacity).(capacity.Bounder); ok {
		if free, limit := b.Bound(cfg, capacity.Counts{Unfinished: unfinished, Queued: queued}); free < r.slots {
			r = installRoom{slots: max(free, 0), limit: limit, bound: BoundCapacity}
		}
	}
	return r
}

// activeRoom is min(maxPerTick, maxActive − unfinished) of cfg (a queue's or the install's limits) and what bound it.
func activeRoom(cfg *config.Config, unfinished int) installRoom {
	r := installRoom{slots: cfg.MaxPerTick(), limit: fmt.Sprintf("limits.maxPerTick: %d", cfg.MaxPerTick()), bound: BoundMaxPerTick}
	if free := cfg.MaxActive() - unfinished; free < r.slots {
		r = installRoom{slots: max(free, 0), limit: fmt.Sprintf("limits.maxActive: %d of %d unfinished", unfinished, cfg.MaxActive()),
			bound: BoundMaxActive, roomBound: true}
	}
	return r
}

// assemble is the last of decideParts: the install's plan made of the queues' parts, each field derived here once:
// the Jobs (the one queue's as they are, else all queues' sorted by name, once), the counts and the exclusions and
// the queues' rows (Queues). The install's room is derived at the end of Decision (rooms), once every step that
// bounds a queue's slots has. Later steps change only what they decide.
func (p *Plan) assemble(cfg *config.Config, parts []*queuePart) {
	qs := cfg.AllQueues()
	p.parts = parts
	if len(parts) == 1 {
		part := parts[0]
		p.Jobs, p.exclude = part.Jobs, part.exclude
	} else {
		for _, part := range parts {
			p.Jobs = append(p.Jobs, part.Jobs...)
			p.exclude = append(p.exclude, part.exclude...)
		}
		slices.SortFunc(p.Jobs, func(a, b JobStatus) int { return strings.Compare(a.Name, b.Name) })
		slices.Sort(p.exclude)
	}
	for i, part := range parts {
		part.Jobs = nil // the install's list is the one list: the steps mark its deletes there
		p.Unfinished += part.Unfinished
		p.Unschedulable += part.Unschedulable
		p.Waiting += part.Waiting
		if due := part.waitDue; !due.IsZero() && (p.WaitDue == nil || due.Before(*p.WaitDue)) {
			p.WaitDue = &due
		}
		p.queued += part.queued
		if !qs[i].Implicit {
			p.Queues = append(p.Queues, QueuePlan{Name: qs[i].Name, Priority: qs[i].Priority, Weight: *qs[i].Weight,
				Unfinished: part.Unfinished, Holds: part.Holds, GroupsAtCap: part.groupsAtCap(qs[i].Limits.PerGroup), exclude: part.exclude})
		}
	}
	p.Holds = sumHolds(parts)
}

// sumHolds is the install's Holds: its queues' summed (the one queue's own list for a single queue).
func sumHolds(parts []*queuePart) corev1.ResourceList {
	if len(parts) == 1 {
		return parts[0].Holds
	}
	var sum corev1.ResourceList
	for _, part := range parts {
		sum = addTimes(sum, part.Holds, 1) // the queues' own lists stay as they are
	}
	return sum
}

// rooms is the last step of Decision: the install's room from its queues': for the one queue of a configuration
// without queues: that queue's room itself, else min(R, the queues' slots) and each queue's row of Queues; and the
// rows read (Selected), the install's and each queue's. The steps before it (decide, fit, a check or read that
// fails) each set what they decide of a queue's room; none derives the install's.
func (p *Plan) rooms() {
	p.Selected = 0
	for i := range p.parts {
		part := p.part(i)
		part.Selected = part.checkedRows + part.readRows
		p.Selected += part.Selected
		if p.Queues != nil {
			p.Queues[i].Selected = part.Selected
		}
	}
	if p.Queues == nil {
		part := p.parts[0]
		p.Slots, p.Limit, p.Blocked, p.Capacity, p.hard, p.roomBound = part.Slots, part.Limit, part.Blocked, part.Capacity, part.hard, part.roomBound
		p.capacityBound, p.Bound, p.waits = part.capacityBound, part.Bound, part.Bound.Waits()
		p.NextCreate = timeOrNil(part.nextCreate)
		return
	}
	var next time.Time
	sum := 0
	var limits, reasons []string // reasons: why each queue creates nothing (its block, else its limit)
	blocked := map[string]bool{}
	bounds := map[Bound]bool{}
	p.hard, p.roomBound, p.capacityBound, p.Blocked, p.waits = false, false, false, "", true
	for i, part := range p.parts {
		q := &p.Queues[i]
		q.Slots, q.Limit, q.Blocked, q.Capacity, q.NextCreate = part.Slots, part.Limit, part.Blocked, part.Capacity, timeOrNil(part.nextCreate)
		q.Bound, bounds[part.Bound] = part.Bound, true
		p.waits = p.waits && part.Bound.Waits()
		if !part.nextCreate.IsZero() && (next.IsZero() || part.nextCreate.Before(next)) {
			next = part.nextCreate // the first queue whose window opens
		}
		p.hard = p.hard || part.hard
		p.roomBound = p.roomBound || part.roomBound
		p.capacityBound = p.capacityBound || part.capacityBound
		sum += part.Slots
		limits = append(limits, q.Name+": "+part.Limit)
		reason := part.Blocked
		if reason == "" {
			reason = part.Limit
		}
		reasons = append(reasons, q.Name+": "+reason)
		blocked[part.Blocked] = true
	}
	p.Slots, p.Limit, p.Bound = sum, strings.Join(limits, "; "), BoundQueues
	if len(bounds) == 1 { // every queue bound alike
		p.Bound = p.parts[0].Bound
	}
	if p.inst.slots <= sum { // the install's limits bind (or tie): they are what frees slots for every queue
		p.Slots, p.Limit, p.Bound, p.waits = p.inst.slots, p.inst.limit, p.inst.bound, p.inst.bound.Waits()
		p.roomBound = p.roomBound || p.inst.roomBound
		p.capacityBound = false // no queue gets more for a new node
		if !p.inst.next.IsZero() {
			next = p.inst.next
		}
	}
	p.NextCreate = timeOrNil(next)
	if p.Slots <= 0 {
		p.Slots, p.Blocked = 0, p.Limit
		switch {
		case len(blocked) == 1 && !blocked[""]: // every queue blocked for the one reason
			p.Blocked = p.parts[0].Blocked
		case p.Limit != p.inst.limit: // the queues' own reasons, not the install's
			p.Blocked = strings.Join(reasons, "; ")
		}
	}
}

// next is a copy of p for a step to change: the queues' parts and rows are copied, so p is not changed.
func (p *Plan) next() *Plan {
	q := *p
	q.parts, q.Queues = slices.Clone(p.parts), slices.Clone(p.Queues)
	return &q
}

// part is queue i's part of p (a plan from next), copied for the step to change.
func (p *Plan) part(i int) *queuePart {
	c := *p.parts[i]
	p.parts[i] = &c
	return &c
}

// mark is a step's deletes js marked in p's Jobs (p a plan from next), each with its reason.
func (p *Plan) mark(js []JobStatus) {
	if len(js) == 0 {
		return
	}
	p.Jobs = slices.Clone(p.Jobs)
	for _, d := range js {
		if i, ok := p.jobIndex(d.Name); ok && p.Jobs[i].UID == d.UID {
			p.Jobs[i].Delete = d.Delete
		}
	}
}

// skip adds a queue's skips to the part and to the install's, labelled with the queue.
func (p *Plan) skip(part *queuePart, skips []Skip) {
	for _, sk := range skips {
		sk.Queue = part.queueName
		part.Skipped = append(slices.Clip(part.Skipped), sk)
		p.Skipped = append(slices.Clip(p.Skipped), sk)
	}
}

// groupsAtCap are the groups of one queue's plan with g.MaxActive unfinished Jobs, its creates counted, sorted.
func (p *queuePart) groupsAtCap(g *config.PerGroup) []string {
	if g == nil {
		return nil
	}
	n := maps.Clone(p.held)
	if n == nil {
		n = map[string]int{}
	}
	for _, c := range p.Creates {
		if grp, ok := c.Job.Annotations[jobmeta.AnnotationGroup]; ok {
			n[grp]++
		}
	}
	var out []string
	for grp, k := range n {
		if k >= g.MaxActive {
			out = append(out, grp)
		}
	}
	if g.MaxRequests != nil { // and those whose Jobs and creates ask at least limits.perGroup.maxRequests of some resource
		r := newGroupRequests(g, p.heldRequests)
		for _, c := range p.Creates {
			if grp, ok := c.Job.Annotations[jobmeta.AnnotationGroup]; ok {
				r.sum[grp] = addTimes(r.sum[grp], createAsks(c), 1)
			}
		}
		for grp, l := range r.sum {
			if r.atCap(l) && n[grp] < g.MaxActive {
				out = append(out, grp)
			}
		}
	}
	slices.Sort(out)
	return out
}

// fit is the step after the deletes: it bounds each queue's slots by what fits on the nodes and in the quotas now,
// as obs holds it, for that queue alone (see fitQueue), with the pass's placer pl, and a sized queue's by
// MaxSizedRows (sizes.go), and returns the new plan (p is not changed).
func (p *Plan) fit(obs *Observation, pl capacity.Room) *Plan {
	q := p.next()
	for i, part := range p.parts {
		q.parts[i] = part.fitQueue(obs, pl, i).boundSized()
		q.awaitsBinds = q.awaitsBinds || q.parts[i].awaitsBinds
	}
	return q
}

// placer is the capacity mode's Room for every queue's template on obs's capacity, with the pods the queues' Jobs
// already claim room for, and shapes' claims after them (see Plan.claims); nil when capacity is not fitted (a mode
// that counts none, offline, or not observed). base is the claim of shapes[0].
func (p *Plan) placer(cfg *config.Config, obs *Observation, shapes []*batchv1.Job) (pl capacity.Room, base int) {
	if obs.Capacity == nil {
		return nil, 0
	}
	claims, base := p.claims(cfg, shapes)
	return capacity.ModeOf(cfg.Limits.Capacity).Room(obs.Capacity, claims), base
}

// Placer places one more Job of claim c (queue c's template, or a shape of a sized queue: Plan.claims) on the
// capacity left, and says whether it fits.
type Placer interface {
	Place(c int) bool
}

// bindsPlacer is a Placer that can tell that claim c's last Place found room but not for certain while our pods
// of other sizes were unbound (capacity.Placer's AwaitsBinds): how many, or 0.
type bindsPlacer interface {
	AwaitsBinds(c int) int
}

// neverPlacer is a Placer that can tell that a Job of claim c would fit on no node and in no quota however much
// room is freed (capacity.Placer's Never): why, or "".
type neverPlacer interface {
	Never(c int) string
}

// shareQueue is what share knows of a queue.
type shareQueue struct {
	Priority, Weight int
	Unfinished       int // its unfinished Jobs before the pass
	Admitted         int // the creates its read admitted, in the query's order
	// Claims are the claim of each admitted create for a sized queue (job.requestsFrom); nil: every create is the
	// queue's own claim (its index).
	Claims []int
	// Passable says, per admitted create, that rows behind it may pass it when it does not fit now (job.backfill:
	// it has waited less than maxWait); nil: none may (strict order).
	Passable []bool
}

// notKept is an admitted create share did not keep and went on past: the k-th of its queue could never fit, for
// why (a skip), or (passed) did not fit now and let the rows behind it pass (job.backfill).
type notKept struct {
	k      int
	why    string
	passed bool
}

// shareResult is what share decided: the queue of each slot given, in order; per queue the admitted creates it went
// on past (nil: none anywhere); per queue the admitted create whose misfit put the queue out (-1: none).
type shareResult struct {
	order   []int
	left    [][]notKept
	stopped []int
	// holder is the queue that holds the room for its row past job.backfill.maxWait (-1: none): the queues of its
	// priority or lower got no slot after it.
	holder int
	// awaits is, per queue, how many of our pods of other sizes were unbound when its last create that did not fit
	// would have fit once they are bound (bindsPlacer); nil: none.
	awaits []int
}

// leave records that queue i's next create is not kept (n), for the share to go on with the one behind it.
func (r *shareResult) leave(i int, n notKept) {
	if r.left == nil {
		r.left = make([][]notKept, len(r.stopped))
	}
	r.left[i] = append(r.left[i], n)
}

// share gives the install's slots to the queues' admitted creates, one slot at a time. Candidates are the queues
// with an admitted create not yet kept that are not out; the slot goes to the highest priority, among equal
// priorities to the one with the smallest (unfinished + kept) / weight (compared by cross-multiplying), ties to the
// first in the configuration. The chosen queue's next create is placed (pl: nil places everything); one that does
// not fit puts its queue out for this pass, and the slot goes on to the others (a smaller pod of another queue may
// still fit), unless it is a sized queue's create that could never fit (neverPlacer): that one is skipped and the
// queue goes on with its next create; or one the rows behind may pass (Passable, job.backfill): that one waits for
// a later pass and the queue goes on with its next create. A create that fits once our unbound pods of other sizes
// are bound (bindsPlacer) is not passed: its queue is out until they are, and no row behind takes its room.
//
// With w (queues whose Jobs ask different sizes: weigh.go) a queue's use is its dominant share of resources instead of
// its count, and the slot goes to the smallest use / weight.
//
// A queue with job.backfill put out by a row that has waited its maxWait (not Passable) holds the room for it: no
// queue of its priority or lower gets a slot after it in the pass, so that no other queue's smaller rows take the
// room its Jobs free either (its wait stays bounded across queues).
func share(qs []shareQueue, slots int, pl Placer, w *weigher) shareResult {
	kept := make([]int, len(qs))
	next := make([]int, len(qs)) // per queue, its next admitted create: kept and skipped ones are behind it
	res := shareResult{stopped: make([]int, len(qs)), holder: -1}
	for i := range res.stopped {
		res.stopped[i] = -1
	}
	for len(res.order) < slots {
		best := -1
		for i, q := range qs {
			if res.stopped[i] >= 0 || next[i] >= q.Admitted || (res.holder >= 0 && q.Priority <= qs[res.holder].Priority) {
				continue
			}
			if best < 0 || before(q, kept[i], qs[best], kept[best], w.uses(i, best)) {
				best = i
			}
		}
		if best < 0 {
			break
		}
		c := best
		if qs[best].Claims != nil {
			c = qs[best].Claims[next[best]]
		}
		if pl != nil && !pl.Place(c) {
			awaits := 0
			if bp, ok := pl.(bindsPlacer); ok {
				if awaits = bp.AwaitsBinds(c); awaits > 0 {
					if res.awaits == nil {
						res.awaits = make([]int, len(qs))
					}
					res.awaits[best] = awaits
				}
			}
			if np, ok := pl.(neverPlacer); ok && qs[best].Claims != nil {
				if why := np.Never(c); why != "" {
					res.leave(best, notKept{k: next[best], why: why})
					next[best]++
					continue
				}
			}
			if p := qs[best].Passable; p != nil && p[next[best]] && awaits == 0 {
				res.leave(best, notKept{k: next[best], passed: true})
				next[best]++
				continue
			} else if p != nil && awaits == 0 {
				res.holder = best // it holds the room for that row: only higher priorities go on
			}
			res.stopped[best] = next[best]
			continue
		}
		if w != nil {
			w.keep(best, next[best])
		}
		kept[best]++
		next[best]++
		res.order = append(res.order, best)
	}
	return res
}

// share is the queue of each slot the share gives p's queues, each with its admitted creates (claims: the claim of
// each create of a sized queue, Plan.shapes; a queue with job.backfill lets rows pass those of its creates that
// have waited less than its maxWait at now), and the creates it went on past.
func (p *Plan) share(cfg *config.Config, pl Placer, claims [][]int, now time.Time) shareResult {
	qs := cfg.AllQueues()
	in := make([]shareQueue, len(p.parts))
	for i, part := range p.parts {
		in[i] = shareQueue{Priority: qs[i].Priority, Weight: *qs[i].Weight, Unfinished: part.Unfinished, Admitted: len(part.admittedCreates)}
		if i < len(claims) {
			in[i].Claims = claims[i]
		}
		if b := part.backfill; b != nil {
			in[i].Passable = make([]bool, len(part.admittedCreates))
			for k, c := range part.admittedCreates {
				in[i].Passable[k] = mayPass(c.waitingSince, b.MaxWait.Duration, now)
			}
		}
	}
	return share(in, p.inst.slots, pl, p.weigher(cfg))
}

// before says queue a (with ka kept) takes a slot before queue b (kb kept), b being earlier in the configuration;
// u, when set, are their uses by resources (weigher.uses).
func before(a shareQueue, ka int, b shareQueue, kb int, u *[2]float64) bool {
	if a.Priority != b.Priority {
		return a.Priority > b.Priority
	}
	if u != nil { // ua/wa < ub/wb
		return u[0]*float64(max(b.Weight, 1)) < u[1]*float64(max(a.Weight, 1))
	}
	// (ua+ka)/wa < (ub+kb)/wb
	return (a.Unfinished+ka)*max(b.Weight, 1) < (b.Unfinished+kb)*max(a.Weight, 1)
}

// shared is the plan after the share: each queue's creates are those of its admitted ones it got slots for (the
// first in its query's order; the rest were read ahead, not skipped: ReadAhead), the install's creates are in the
// order the slots were given, and the failed attempt each kept retry supersedes is marked for its delete
// (DeleteRetried), which runs once the retry exists.
func (p *Plan) shared(cfg *config.Config, pl Placer, claims [][]int, now time.Time) *Plan {
	qs := cfg.AllQueues()
	res := p.share(cfg, pl, claims, now)
	order := res.order
	kept := make([]int, len(p.parts))
	for _, i := range order {
		kept[i]++
	}
	q := p.next()
	for i, part := range p.parts {
		var left []notKept
		if res.left != nil {
			left = res.left[i]
		}
		part = q.part(i)
		var skips []Skip
		var passed []notKept
		for _, n := range left {
			if n.passed {
				passed = append(passed, n)
				continue
			}
			skips = append(skips, Skip{Key: part.admittedCreates[n.k].Key, Reason: "no Job: " + n.why, Size: true})
		}
		q.ReadAhead += len(part.admittedCreates) - kept[i] - len(skips) // the passed rows are read again next pass
		q.Passed += len(passed)
		if len(left) == 0 {
			part.Creates = part.admittedCreates[:kept[i]:kept[i]]
		} else {
			part.Creates = keptAround(part.admittedCreates, left, kept[i])
			q.skip(part, skips)
		}
		awaits := 0
		if res.awaits != nil {
			awaits = res.awaits[i]
			q.awaitsBinds = q.awaitsBinds || awaits > 0
		}
		switch k := res.stopped[i]; {
		case k >= 0 && part.sized:
			part.strictStop(kept[i], part.admittedCreates[k], part.backfill, now, awaits)
		case len(passed) > 0:
			part.passedBy(kept[i], len(passed), part.admittedCreates[passed[0].k].Requests, part.backfill)
		case res.holder >= 0 && k < 0 && qs[i].Priority <= qs[res.holder].Priority && kept[i]+len(skips) < len(part.admittedCreates):
			part.heldBy(kept[i], qs[res.holder].Name)
		}
		if q.Queues != nil {
			q.Queues[i].Creates, q.Queues[i].GroupsAtCap = kept[i], part.groupsAtCap(qs[i].Limits.PerGroup)
		}
	}
	q.Creates = nil
	var retired []JobStatus
	next := make([]int, len(p.parts))
	for _, i := range order {
		c := q.parts[i].Creates[next[i]]
		next[i]++
		if c.Supersedes != nil {
			old := *c.Supersedes
			old.Delete = DeleteRetried
			c.Supersedes = &old
			retired = append(retired, old)
		}
		q.Creates = append(q.Creates, c)
	}
	q.mark(retired)
	return q
}

// strictStop is a sized queue's part after the share put it out at create c, a row that does not fit now (strict
// order, sizes.go; with job.backfill b, one that has waited its maxWait at now, or whose wait is not known): its
// slots are the creates it kept, bound by capacity (a Job's end or a new node frees room; with awaits, our pods of
// other sizes bound), and the rows behind that row wait for the next pass.
func (p *queuePart) strictStop(kept int, c Create, b *config.Backfill, now time.Time, awaits int) {
	p.Slots = kept
	why := "the rows behind it wait (strict order)"
	switch {
	case awaits > 0 && b != nil:
		why = "the rows behind it wait for those binds rather than take its room"
	case b != nil:
		why = fmt.Sprintf("it has waited %s (job.backfill.maxWait: %s): the rows behind it wait for it",
			waitWords(c.waitingSince, now), rate.ShortDuration(b.MaxWait.Duration))
	}
	p.Limit = fmt.Sprintf("capacity: the next row in the query's order asks for %s, %s; %s", requestsWords(c.Requests), notFree(awaits), why)
	p.Bound, p.roomBound, p.capacityBound = BoundCapacity, true, true
	if p.Slots == 0 && p.Blocked == "" {
		p.block(BoundCapacity, p.Limit)
	}
}

// passedBy is a queue's part with job.backfill b after the share let rows behind n of its rows pass them (the first
// asks for asks), rows that do not fit now: its slots are the creates it kept, bound by capacity, and those rows are
// read again next pass.
func (p *queuePart) passedBy(kept, n int, asks corev1.ResourceList, b *config.Backfill) {
	p.Slots = kept
	p.Limit = fmt.Sprintf("capacity: %d row(s) ask for more than is free now (the first %s); the rows behind them that fit "+
		"passed them (job.backfill: each for at most %s)", n, requestsWords(asks), rate.ShortDuration(b.MaxWait.Duration))
	p.Bound, p.roomBound, p.capacityBound = BoundCapacity, true, true
	if p.Slots == 0 && p.Blocked == "" {
		p.block(BoundCapacity, p.Limit)
	}
}

// notFree says why a row's size does not fit now: more than is free, or (awaits: our unbound pods of other sizes)
// more than is free for certain until they are bound.
func notFree(awaits int) string {
	if awaits > 0 {
		return fmt.Sprintf("more than is sure to be free until %d unbound pod(s) of ours of other sizes are bound", awaits)
	}
	return "more than is free now"
}

// heldBy is a queue's part after the share gave it no more slots because queue holder holds the room for a row that
// has waited its job.backfill.maxWait: its slots are the creates it kept, bound by that room.
func (p *queuePart) heldBy(kept int, holder string) {
	p.Slots = kept
	p.Limit = fmt.Sprintf("capacity: queue %s holds the room for a row that has waited its job.backfill.maxWait; the rows "+
		"behind wait for it", holder)
	p.Bound, p.roomBound, p.capacityBound = BoundCapacity, true, true
	if p.Slots == 0 && p.Blocked == "" {
		p.block(BoundCapacity, p.Limit)
	}
}

// keptAround are the first n of admitted that are not in left (in order): the creates a queue keeps when the share
// went on past some of those before them.
func keptAround(admitted []Create, left []notKept, n int) []Create {
	out := make([]Create, 0, n)
	for k, c := range admitted {
		if len(out) == n {
			break
		}
		if len(left) > 0 && left[0].k == k {
			left = left[1:]
			continue
		}
		out = append(out, c)
	}
	return out
}
