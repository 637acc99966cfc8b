package scheduler

import (
	"context"
	"errors"
	"fmt"
	"time"

	"k8s.io/client-go/dynamic"

	"github.com/jobsched/jobsched/pkg/config"
	"github.com/jobsched/jobsched/pkg/kube"
	"github.com/jobsched/jobsched/pkg/render"
	"github.com/jobsched/jobsched/pkg/rows"
)

// MaxSkippedRows bounds the rows one pass reads past and skips (rows that cannot make a Job): the work of a pass is
// bounded by rows read, not by rounds, and a queue with this many bad rows at its head still moves, a page a pass.
const MaxSkippedRows = 10000

// Workers bounds the creates, and apart from them the deletes, in flight. Not more: with --kube-qps the creates past
// the pace would wait in the client's limiter already started, and a pass that lost its Lease would count them
// failed instead of leaving them for the next pass (notCreated). The bench's bare client runs as many.
const Workers = 16

// Action is what a command lets a pass do.
type Action int

const (
	// Execute deletes finished Jobs, then creates Jobs for the rows there is room for (the tick command).
	Execute Action = iota
	// DeleteOnly only deletes finished Jobs: it lists Jobs and nothing else, and reads no row (the gc command).
	DeleteOnly
	// DryRun makes the whole plan and writes nothing.
	DryRun
	// ServerDryRun is DryRun that also sends each planned create to the API server with dryRun=All.
	ServerDryRun
)

func (m Action) deletes() bool { return m == Execute || m == DeleteOnly }
func (m Action) dryRun() bool  { return m == DryRun || m == ServerDryRun }

// Guard is what a pass holds while it creates, taken before the observation that decides the creates (a Lease:
// one pass at a time). Take returns a context that ends the moment the guard is lost, under which the creates run
// (a lost guard stops them at once: none is started after), and a release for the end of the pass; an error means
// another holder: the pass still deletes, and creates nothing (Blocked says why).
type Guard interface {
	Take(ctx context.Context) (held context.Context, release func(), err error)
}

// Scheduler runs passes for one configuration. Kube is nil when the pass is offline (the cluster is taken as empty);
// Source is nil for gc. Timeout bounds a whole pass (0: no bound beyond the caller's context).
type Scheduler struct {
	Config *config.Config
	Kube   kube.Interface
	// Dynamic reads Kueue's objects for the reports (limits.capacity: kueue); nil: they cannot say why Kueue holds
	// a Job.
	Dynamic dynamic.Interface
	// Queues are the queues' sources and renderers, in the order of Config.AllQueues (the command sets them); a
	// Scheduler of one queue may give its Source and Renderer instead. Read them through AllQueues.
	Source   rows.Source
	Renderer *render.Renderer
	Queues   []Queue
	Now      func() time.Time
	Timeout  time.Duration
	Events   Events // nil: none
	Guard    Guard  // nil: none; taken by Execute passes only
	// Follow, when set, keeps the observation between passes (tick --fill-for): the first pass lists, the later ones
	// read what the watches followed (see Follow). nil: each pass lists.
	Follow *Follow
	// BeforeCreates, when set, is called once before the first create of a pass (the command sets its collector
	// policy there: see cmd).
	BeforeCreates func()

	maxSkipped int // MaxSkippedRows unless a test sets it
	workers    int // Workers unless a test sets it (1: the writes in plan order)
}

// Result is what a pass decided and did. Beside the plan and the summary, it carries what a caller needs to decide
// whether to run another pass at once (tick --fill-for): Limit (what bound the slots), Blocked, RowsWait and the
// resourceVersion of the Jobs list.
type Result struct {
	Plan *Plan // nil when the Jobs could not be listed
	// Outcomes are what came of each of Plan.Creates, in its order, beside the plan: what only making them tells (a
	// name another Job holds, a rate reservation the Lease refused: Plan.NotKnown). nil when none was tried (dry-run).
	Outcomes []Outcome
	Summary  Summary
	// JobsResourceVersion is the resourceVersion this pass listed its Jobs at ("" offline, or when the list failed): a
	// next pass can list at least that new, to see every Job this one created.
	JobsResourceVersion string
	// RowsWait says rows may still wait for a Job: a read returned all it asked for, or the pass had no room (bound by
	// room a finishing Job frees, it read no row: the pass after a Job's end tells); false when the source ran out, or
	// the pass was blocked otherwise.
	RowsWait bool
}

// Limit is what bound the pass's slots ("" when the Jobs could not be listed).
func (r Result) Limit() string {
	if r.Plan == nil {
		return ""
	}
	return r.Plan.Limit
}

// Blocked is why the pass could create nothing ("" when it could).
func (r Result) Blocked() string { return r.Summary.Blocked }

// RoomBound says the slots were bound by room that a finishing Job frees (limits.maxActive, the nodes, the quota),
// not by limits.maxPerTick or the backlog.
func (r Result) RoomBound() bool { return r.Plan != nil && r.Plan.roomBound }

// CapacityBound says the capacity mode's fit bound the pass's slots: a node turning usable may let the next pass
// create (with nodes, autoscale), where with limits.maxActive binding only a Job's end can.
func (r Result) CapacityBound() bool { return r.Plan != nil && r.Plan.capacityBound }

// AwaitsBinds says the capacity fit found room for a Job but not for certain while our pods of other sizes were
// unbound (pkg/capacity's sure.go): once one of them is bound, the next pass may create it.
func (r Result) AwaitsBinds() bool { return r.Plan != nil && r.Plan.awaitsBinds }

// HardBlocked says the pass was blocked for a reason a finishing Job does not change: an Unschedulable pod, another
// holder of the guard, pods or capacity that could not be observed.
func (r Result) HardBlocked() bool { return r.Plan != nil && r.Plan.hard }

// Run is one pass, whole, for every queue of the install, and always ends with its `pass done` line. It is a line
// of steps, each a function of the value before it; only the execute steps write, and each writes what the plan
// holds at that point. Steps 3 to 8 are Decision, the one function from a pass's inputs to its plan (status and
// dry-run call it too), reading through the pass's Reader (passReads):
//
//  0. take the Guard, if any (Execute only);
//  1. observe, once for the install: its Jobs and (unless DeleteOnly) its pods (with Follow, what its
//     watches kept since the last pass, with that pass's own writes applied);
//  2. cancel (unless DeleteOnly): ask each queue's source.cancelQuery about the keys of its unfinished Jobs (Cancel;
//     no read without a cancel query or an unfinished Job, each read bounded by source.timeout); a queue whose
//     cancel query fails is blocked, a wrong one stops the pass once the finished Jobs' deletes have run;
//  3. decide, once, per queue: the deletes (the cancelled Jobs' among them, holding no slot), the exclusions, the
//     room the queue's limits and the install's leave;
//  4. start the deletes of finished Jobs (all queues), which hold no slot, so they run beside the steps after and
//     the pass waits for them before it ends; no create waits on them; then delete the cancelled Jobs, before
//     anything is created;
//  5. observe capacity when there is room; fit each queue alone: its slots, with the pass's one placer;
//  6. check each queue's finished tasks' rows: worker bugs skipped, the Jobs of gone rows deleted (beside, as 4);
//  7. read, per queue with slots, the rows there is room for, and admit each: creates and skips;
//  8. share the install's slots among the queues' creates with the same placer (see share), and derive the
//     install's room and counts from the queues' (rooms);
//  9. execute the creates in that order (Execute; ServerDryRun sends them with dryRun=All); with limits.rate they are
//     reserved in the Lease's record first and settled after (rate.go). What only executing can tell (a name
//     another scheduler's Job holds, a reservation the Lease refuses) is each create's Outcome, beside the plan.
//
// The returned error is a *config.Error when the configuration is wrong (the query, the columns); any other error
// is a run-time failure. The plan is returned whenever the Jobs could be listed, and the summary always.
func (s *Scheduler) Run(ctx context.Context, action Action) (Result, error) {
	ctx, x := s.begin(ctx, action)
	defer x.end()
	held := x.hold(s.Guard) // 0
	x.step("guard")
	if s.Follow != nil && held == nil && !alone(s.Guard) {
		s.Follow.Resync() // another holder wrote since this run's last pass: what was followed is not all of it
	}
	obs, err := s.observe(ctx, action != DeleteOnly) // 1
	x.step("observe")
	if err != nil {
		return x.done(nil, nil, false, cause(ctx, err))
	}
	obs.GuardRefused = held
	if action == DeleteOnly {
		p := Decide(s.Config, obs) // 3, reading nothing
		x.deletesBehind(p.Deletes())
		return x.done(p, obs, false, nil)
	}
	obs.Windows = s.readWindows(ctx, x.keeper, len(obs.Jobs) > 0)
	c, err := s.Cancel(ctx, obs) // 2
	x.step("cancel")
	if err != nil { // a wrong cancel query: the finished Jobs' deletes run all the same
		p := Decide(s.Config, obs)
		x.deletesBehind(p.Deletes())
		return x.done(p, obs, false, err)
	}
	for _, err := range c.Failed {
		x.fail(err)
	}
	p, obs, wait, err := Decision(ctx, s.Config, obs, c, passReads{s: s, x: x}) // 3–8
	x.step("check, read and share")
	x.fitted(p, obs)
	if err != nil {
		return x.done(p, obs, wait, err)
	}
	if action.dryRun() {
		p = s.explainQueues(ctx, p)
	}
	x.creates(p) // 9
	x.step("creates")
	return x.done(p, obs, wait, nil)
}

// alone says that nobody else held g since this process's last hold (lease.Guard.Alone); true without a Guard.
func alone(g Guard) bool {
	if g == nil {
		return true
	}
	a, ok := g.(interface{ Alone() bool })
	return ok && a.Alone()
}

// explainQueues is each queue's plan with what the query doctor says of its read (dry-run).
func (s *Scheduler) explainQueues(ctx context.Context, p *Plan) *Plan {
	q := p.next()
	for i := range p.parts {
		part := q.part(i)
		part.Query = s.ExplainQueue(ctx, p, i)
		if q.Queues != nil {
			q.Queues[i].Query = part.Query
		} else {
			q.Query = part.Query
		}
	}
	return q
}

// cause names the pass's deadline or a signal when they are why err happened.
func cause(ctx context.Context, err error) error {
	if c := context.Cause(ctx); c != nil && !errors.Is(err, c) {
		return fmt.Errorf("%w (%w)", err, c)
	}
	return err
}
