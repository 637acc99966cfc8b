package scheduler

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/jobsched/jobsched/pkg/capacity"
	"github.com/jobsched/jobsched/pkg/config"
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
	// Slots is the queue's room this pass, alone (its limits, its fit, the install's room), and Limit what bound it;
	// Blocked says why it may create nothing.
	Slots   int    `json:"slots"`
	Limit   string `json:"limit"`
	Blocked string `json:"blocked,omitempty"`
	// Selected are the rows read for it; Creates the Jobs it got in the share (the rest of what it read waits).
	Selected int              `json:"selected"`
	Creates  int              `json:"creates"`
	Capacity *capacity.Report `json:"capacity,omitempty"`
	Query    *QueryFinding    `json:"query,omitempty"`
	// GroupsAtCap are the groups (limits.perGroup) with maxActive unfinished Jobs, this pass's creates counted.
	GroupsAtCap []string `json:"groupsAtCap,omitempty"`

	exclude []string
}

// Excluded are the keys the queue's read leaves out (as Plan.Excluded, for the queue's backlog).
func (q QueuePlan) Excluded() []string { return slices.Clone(q.exclude) }

// installRoom is R, the room the install's limits leave for all queues together, and what bound it.
type installRoom struct {
	slots     int
	limit     string
	roomBound bool
}

// Decide is the pure part of the pass: from the configuration and one observation of the install it decides, for
// each queue on its own (its Jobs, its limits: see decideQueue), what to delete, which keys to exclude from its read,
// which tasks are retried and how many Jobs it may create; then the install's limits bound every queue: an
// Unschedulable pod of any queue blocks all of them (limits.blockOnUnschedulable), and no queue gets more slots than
// R = min(limits.maxPerTick, limits.maxActive − unfinished Jobs of all queues [, limits.maxQueued − queued]).
func Decide(cfg *config.Config, obs *Observation) *Plan {
	qs := cfg.AllQueues()
	parts := make([]*Plan, len(qs))
	unfinished, queued, unschedulable := 0, 0, 0
	first := ""
	for i := range qs {
		// Each queue reads its Jobs in obs.Jobs: no second copy of 10,000 summaries at the pass's peak.
		mine := func(j *JobSummary) bool { return len(qs) == 1 || cfg.QueueIndex(j.Queue) == i }
		p := decideQueue(cfg.QueueConfig(i), obs, mine) // its Jobs carry its name (QueueName), none for the implicit queue
		unfinished, queued, unschedulable = unfinished+p.Unfinished, queued+p.queued, unschedulable+p.Unschedulable
		if first == "" {
			first = p.firstUnschedulable()
		}
		parts[i] = p
	}
	r := roomOf(cfg, unfinished, queued)
	for _, p := range parts {
		if cfg.BlockOnUnschedulable() && unschedulable > 0 { // before any other reason: it is what the user must fix
			p.Limit, p.roomBound = "", false
			p.block(fmt.Sprintf("%d pod(s) Unschedulable (%s)", unschedulable, first))
			p.hard = true
			continue
		}
		if r.slots < p.Slots {
			p.Slots, p.Limit = max(r.slots, 0), r.limit
			p.roomBound = p.roomBound || r.roomBound
		}
		if p.Slots <= 0 && p.Blocked == "" {
			p.block(p.Limit)
		}
	}
	return (&Plan{Scheduler: cfg.Name, Namespace: cfg.Namespace, inst: r}).with(cfg, parts)
}

// roomOf is R: the install's limits across its queues. limits.maxQueued is only here: Kueue, not jobsched, decides
// when a Job runs, so what jobsched bounds with Kueue is how many of the install's Jobs wait there, queued, at once.
func roomOf(cfg *config.Config, unfinished, queued int) installRoom {
	r := activeRoom(cfg, unfinished)
	if cfg.KueueMode() {
		if free := cfg.MaxQueued() - queued; free < r.slots {
			r = installRoom{slots: max(free, 0), limit: fmt.Sprintf("limits.maxQueued: %d of %d queued", queued, cfg.MaxQueued())}
		}
	}
	return r
}

// activeRoom is min(maxPerTick, maxActive − unfinished) of cfg (a queue's or the install's limits) and what bound it.
func activeRoom(cfg *config.Config, unfinished int) installRoom {
	r := installRoom{slots: cfg.MaxPerTick(), limit: fmt.Sprintf("limits.maxPerTick: %d", cfg.MaxPerTick())}
	if free := cfg.MaxActive() - unfinished; free < r.slots {
		r = installRoom{slots: max(free, 0), limit: fmt.Sprintf("limits.maxActive: %d of %d unfinished", unfinished, cfg.MaxActive()), roomBound: true}
	}
	return r
}

// with is the install's plan made of the queues' parts: for the one queue of a configuration without queues: that
// queue's plan itself, else the parts put together (Jobs, skips, counts), the slots min(R, the queues' slots), and
// the creates in the order share gave them.
func (p *Plan) with(cfg *config.Config, parts []*Plan) *Plan {
	qs := cfg.AllQueues()
	if len(parts) == 1 && qs[0].Implicit {
		q := *parts[0]
		q.parts, q.inst, q.order = parts, p.inst, p.order
		return &q
	}
	q := &Plan{Scheduler: p.Scheduler, Namespace: p.Namespace, Query: p.Query, parts: parts, inst: p.inst, order: p.order,
		retry: map[string]*JobStatus{}}
	// The install's Jobs and exclusions are the parts' put together, sorted: a copy of every Job, made again only when
	// a step gave a part new ones (not at each of the pass's steps, which would copy 10,000 Jobs each time).
	same := len(p.parts) == len(parts)
	for i := 0; same && i < len(parts); i++ {
		same = sameSlice(p.parts[i].Jobs, parts[i].Jobs) && sameSlice(p.parts[i].exclude, parts[i].exclude)
	}
	if same {
		q.Jobs, q.exclude = p.Jobs, p.exclude
	}
	sum := 0
	var limits []string
	blocked := map[string]bool{}
	for i, part := range parts {
		name := qs[i].Name
		if !same {
			q.Jobs = append(q.Jobs, part.Jobs...)
			q.exclude = append(q.exclude, part.exclude...)
		}
		q.Unfinished += part.Unfinished
		q.Unschedulable += part.Unschedulable
		q.Selected += part.Selected
		for _, sk := range part.Skipped {
			sk.Queue = name
			q.Skipped = append(q.Skipped, sk)
		}
		q.queued += part.queued
		q.hard = q.hard || part.hard
		q.roomBound = q.roomBound || part.roomBound
		sum += part.Slots
		limits = append(limits, name+": "+part.Limit)
		blocked[part.Blocked] = true
		q.Queues = append(q.Queues, QueuePlan{Name: name, Priority: qs[i].Priority, Weight: *qs[i].Weight,
			Unfinished: part.Unfinished, Slots: part.Slots, Limit: part.Limit, Blocked: part.Blocked, Selected: part.Selected,
			Creates: len(part.Creates), Capacity: part.Capacity, Query: part.Query, GroupsAtCap: part.groupsAtCap(qs[i].Limits.PerGroup),
			exclude: part.exclude})
	}
	if !same {
		slices.SortFunc(q.Jobs, func(a, b JobStatus) int { return strings.Compare(a.Name, b.Name) })
		slices.Sort(q.exclude)
	}
	q.Slots, q.Limit = sum, strings.Join(limits, "; ")
	if p.inst.slots <= sum { // the install's limits bind (or tie): they are what frees slots for every queue
		q.Slots, q.Limit = p.inst.slots, p.inst.limit
		q.roomBound = q.roomBound || p.inst.roomBound
	}
	if q.Slots <= 0 {
		q.Slots, q.Blocked = 0, q.Limit
		if len(blocked) == 1 && !blocked[""] { // every queue blocked for the one reason
			q.Blocked = parts[0].Blocked
		}
	}
	q.Creates = creates(parts, qs, p.order)
	return q
}

// sameSlice says a and b are the same slice (the same elements in the same memory), not equal ones.
func sameSlice[T any](a, b []T) bool {
	return len(a) == len(b) && (len(a) == 0 || &a[0] == &b[0])
}

// groupsAtCap are the groups of one queue's plan with g.MaxActive unfinished Jobs, its creates counted, sorted.
func (p *Plan) groupsAtCap(g *config.PerGroup) []string {
	if g == nil {
		return nil
	}
	n := maps.Clone(p.held)
	if n == nil {
		n = map[string]int{}
	}
	for _, c := range p.Creates {
		if grp, ok := c.Job.Annotations[render.AnnotationGroup]; ok {
			n[grp]++
		}
	}
	var out []string
	for grp, k := range n {
		if k >= g.MaxActive {
			out = append(out, grp)
		}
	}
	slices.Sort(out)
	return out
}

// creates are the parts' creates in the order the slots were given (order: the queue of each), or all of them in the
// queues' order before share.
func creates(parts []*Plan, qs []config.Queue, order []int) []Create {
	label := func(i int, c Create) Create {
		if !qs[i].Implicit {
			c.Queue = qs[i].Name
		}
		return c
	}
	var out []Create
	if order == nil {
		for i, part := range parts {
			for _, c := range part.Creates {
				out = append(out, label(i, c))
			}
		}
		return out
	}
	next := make([]int, len(parts))
	for _, i := range order {
		out = append(out, label(i, parts[i].Creates[next[i]]))
		next[i]++
	}
	return out
}

// eachQueue is the plan after step ran on each queue's part (i, its config.QueueConfig, the part). The first error
// stops it: the parts after it are kept as they were.
func (p *Plan) eachQueue(cfg *config.Config, step func(i int, qcfg *config.Config, part *Plan) (*Plan, error)) (*Plan, error) {
	parts := slices.Clone(p.parts)
	var err error
	for i, part := range p.parts {
		if parts[i], err = step(i, cfg.QueueConfig(i), part); err != nil {
			break
		}
	}
	return p.with(cfg, parts), err
}

// Fit is the step after the deletes: it bounds each queue's slots by what fits on the nodes and in the quotas now,
// as obs holds it, for that queue alone (see fitQueue), and returns the new plan (p is not changed).
func (p *Plan) Fit(cfg *config.Config, obs *Observation) *Plan {
	pl := p.placer(cfg, obs)
	p, _ = p.eachQueue(cfg, func(i int, qcfg *config.Config, part *Plan) (*Plan, error) {
		return part.fitQueue(qcfg, obs, func() capacity.Report { return pl.Report(i) }), nil
	})
	return p
}

// placer is a capacity.Placer of every queue's template on obs's capacity, with the pods the queues' Jobs already
// claim room for; nil when capacity is not fitted (off, Kueue, offline, or not observed).
func (p *Plan) placer(cfg *config.Config, obs *Observation) *capacity.Placer {
	if obs.Capacity == nil || cfg.Limits.Capacity == config.CapacityOff || cfg.KueueMode() {
		return nil
	}
	claims := make([]capacity.Claim, len(p.parts))
	for i, part := range p.parts {
		claims[i] = capacity.Claim{Template: cfg.QueueConfig(i).Template, Unbound: part.unboundPods, Podless: part.podlessPods}
	}
	return capacity.NewPlacer(obs.Capacity, claims)
}

// sharePlacer is placer as share takes it: nil (everything fits) when capacity is not fitted.
func (p *Plan) sharePlacer(cfg *config.Config, obs *Observation) Placer {
	if pl := p.placer(cfg, obs); pl != nil {
		return pl
	}
	return nil
}

// Placer places one more Job of queue i on the capacity left, and says whether it fits.
type Placer interface {
	Place(i int) bool
}

// shareQueue is what share knows of a queue.
type shareQueue struct {
	Priority, Weight int
	Unfinished       int // its unfinished Jobs before the pass
	Admitted         int // the creates its read admitted, in the query's order
}

// share gives the install's slots to the queues' admitted creates, one slot at a time, and returns the queue of each
// slot given, in order. Candidates are the queues with an admitted create not yet kept that are not out; the slot
// goes to the highest priority, among equal priorities to the one with the smallest (unfinished + kept) / weight
// (compared by cross-multiplying), ties to the first in the configuration. The chosen queue's next create is placed
// (pl: nil places everything); one that does not fit puts its queue out for this pass, and the slot goes on to the
// others (a smaller pod of another queue may still fit).
func share(qs []shareQueue, slots int, pl Placer) []int {
	kept := make([]int, len(qs))
	out := make([]bool, len(qs))
	var order []int
	for len(order) < slots {
		best := -1
		for i, q := range qs {
			if out[i] || kept[i] >= q.Admitted {
				continue
			}
			if best < 0 || before(q, kept[i], qs[best], kept[best]) {
				best = i
			}
		}
		if best < 0 {
			break
		}
		if pl != nil && !pl.Place(best) {
			out[best] = true
			continue
		}
		kept[best]++
		order = append(order, best)
	}
	return order
}

// before says queue a (with ka kept) takes a slot before queue b (kb kept), b being earlier in the configuration.
func before(a shareQueue, ka int, b shareQueue, kb int) bool {
	if a.Priority != b.Priority {
		return a.Priority > b.Priority
	}
	// (ua+ka)/wa < (ub+kb)/wb
	return (a.Unfinished+ka)*max(b.Weight, 1) < (b.Unfinished+kb)*max(a.Weight, 1)
}

// shared is the plan after the share: each queue keeps the creates it got slots for (the first in its query's order;
// the rest were read ahead, not skipped), and the install's creates are in the order the slots were given.
func (p *Plan) shared(cfg *config.Config, pl Placer) *Plan {
	qs := cfg.AllQueues()
	in := make([]shareQueue, len(p.parts))
	for i, part := range p.parts {
		in[i] = shareQueue{Priority: qs[i].Priority, Weight: *qs[i].Weight, Unfinished: part.Unfinished, Admitted: len(part.Creates)}
	}
	order := share(in, p.inst.slots, pl)
	kept := make([]int, len(p.parts))
	for _, i := range order {
		kept[i]++
	}
	parts := make([]*Plan, len(p.parts))
	for i, part := range p.parts {
		q := *part
		q.Creates = part.Creates[:kept[i]:kept[i]]
		parts[i] = &q
	}
	r := *p
	r.order = order
	if order == nil {
		r.order = []int{}
	}
	return r.with(cfg, parts)
}
