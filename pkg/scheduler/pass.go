package scheduler

import (
	"context"
	"slices"

	batchv1 "k8s.io/api/batch/v1"

	"github.com/jobsched/jobsched/pkg/config"
)

// Reader is what the decision reads once it knows what it needs: capacity when the limits leave room, and each
// queue's rows (the row check, then the read, up to the queue's slots). A pass reads through its Scheduler
// (Run); status through one that reads no row (Estimate). Decided is told the plan as Decide makes it, before
// anything is read (the install's room is not derived yet): a pass starts its deletes there.
type Reader interface {
	Decided(p *Plan)
	// Capacity is obs with what the nodes and quotas hold, for plan p (asked only when p has room).
	Capacity(ctx context.Context, obs *Observation, p *Plan) *Observation
	// Check is queue i's row check for plan p; Read is its read, of at most the queue's slots.
	Check(ctx context.Context, p *Plan, i int) RowCheck
	Read(ctx context.Context, p *Plan, i int) Admission
}

// Decision is the pass's decision, the one function from its inputs to its plan that tick, dry-run and status
// (package report) call: from the observation and the cancel query's answers it decides (decideParts); then, each
// through r and each once, it observes capacity when there is room, fits each queue with the pass's one placer,
// checks and reads each queue's rows, and shares the install's slots with that same placer; last, the install's
// room and counts are derived from the queues' (rooms). It returns the plan, the observation with what capacity
// read (and without its Jobs: the plan keeps what it needs of them), and whether rows may still wait (a read
// returned all it asked for). The error is a configuration error (the query, the columns): the plan is then the
// one decided so far.
func Decision(ctx context.Context, cfg *config.Config, obs *Observation, c Cancellation, r Reader) (*Plan, *Observation, bool, error) {
	if r == nil {
		r = noReads{}
	}
	p, obs, wait, err := decideSteps(ctx, cfg, obs, c, r)
	p.rooms() // the one place the install's room and counts are derived
	return p, obs, wait, err
}

// decideSteps are Decision's steps up to the share.
func decideSteps(ctx context.Context, cfg *config.Config, obs *Observation, c Cancellation, r Reader) (*Plan, *Observation, bool, error) {
	p := decideParts(cfg, obs, c)
	r.Decided(p)
	o := *obs
	o.Jobs = nil
	obs = &o
	if p.open() {
		obs = r.Capacity(ctx, obs, p)
	}
	pl, _ := p.placer(cfg, obs, nil) // the pass's placer: the fit's, then the share's
	p = p.fit(obs, pl)
	for i := range p.parts {
		rc := r.Check(ctx, p, i)
		if config.IsConfigError(rc.Err) {
			return p, obs, false, rc.Err
		}
		p = p.checked(i, rc)
	}
	wait := false
	for i := range p.parts {
		a := r.Read(ctx, p, i)
		if config.IsConfigError(a.Err) {
			return p, obs, wait, a.Err
		}
		wait = wait || a.RowsWait
		p = p.admitted(i, a)
	}
	var share Placer // nil (everything fits) when capacity is not fitted, not a nil Room in an interface
	var claims [][]int
	if pl != nil {
		share = pl
		// Sized queues (sizes.go): the share places each create by its own shape, on a placer of the same
		// observation and claims as the fit's, with a claim per distinct shape of the rows read added after them
		// (claims of no pod: the room the fit counted is the same).
		if p.anySized() {
			_, base := p.claims(cfg, nil)
			if shapes, of := p.shapes(cfg, base); len(shapes) > 0 {
				sp, _ := p.placer(cfg, obs, shapes)
				share, claims = sp, of
			}
		}
	}
	return p.shared(cfg, share, claims, obs.Now), obs, wait, nil
}

// anySized says some queue takes its requests from its rows (job.requestsFrom).
func (p *Plan) anySized() bool {
	return slices.ContainsFunc(p.parts, func(part *queuePart) bool { return part.sized })
}

// open says some queue has slots by the decision: the pass observes capacity only then (a full or blocked pass costs
// no capacity LIST). Each queue's slots are bounded by the install's already (decideParts).
func (p *Plan) open() bool {
	for _, part := range p.parts {
		if part.Slots > 0 {
			return true
		}
	}
	return false
}

// queueSlots is queue i's slots in p as the steps before the read left them: the most rows its read admits.
func (p *Plan) queueSlots(i int) int { return max(p.parts[i].Slots, 0) }

// noReads is the Reader of the pure decision (Decide): capacity as the observation holds it, no row read.
type noReads struct{}

func (noReads) Decided(*Plan) {}
func (noReads) Capacity(_ context.Context, obs *Observation, _ *Plan) *Observation {
	return obs
}
func (noReads) Check(context.Context, *Plan, int) RowCheck { return RowCheck{} }
func (noReads) Read(context.Context, *Plan, int) Admission { return Admission{} }

// Estimate is the Reader of a report that reads no row (status): capacity as its observation holds it (the
// report observes it whole), no row check, and each queue's read taken to admit min(its backlog, its slots) rows,
// the backlog counted by Backlog for the plan before the read. The share of those is what the next pass creates
// when every waiting row can get a Job: Plan.Creates then stand for rows (they have no Job of their own).
type Estimate struct {
	// Backlog counts each queue's waiting rows for p (the keys p excludes left out); nil: none is counted, and the
	// plan creates nothing.
	Backlog func(ctx context.Context, p *Plan) ([]int, error)

	backlogs []int
	err      error
}

// Err is why Backlog could not count (nil: it could, or it was not asked).
func (e *Estimate) Err() error { return e.err }

// Decided does nothing: a report writes nothing.
func (e *Estimate) Decided(*Plan) {}

// Capacity is obs as the report observed it, whole.
func (e *Estimate) Capacity(_ context.Context, obs *Observation, _ *Plan) *Observation { return obs }

// Check reads no row.
func (e *Estimate) Check(context.Context, *Plan, int) RowCheck { return RowCheck{} }

// Read admits min(queue i's backlog, its slots) rows, each a Create without a Job of its own.
func (e *Estimate) Read(ctx context.Context, p *Plan, i int) Admission {
	if e.Backlog == nil {
		return Admission{}
	}
	if e.backlogs == nil && e.err == nil {
		e.backlogs, e.err = e.Backlog(ctx, p)
	}
	if e.err != nil || i >= len(e.backlogs) {
		return Admission{}
	}
	a := Admission{Creates: make([]Create, min(e.backlogs[i], p.queueSlots(i)))}
	for k := range a.Creates {
		a.Creates[k] = Create{Queue: p.parts[i].queueName, Job: &batchv1.Job{}}
	}
	return a
}

// passReads is the Reader of a pass: it reads through s, and records with x what its reads start and what fails.
type passReads struct {
	s *Scheduler
	x *execution
}

// Decided starts the deletes of finished Jobs (beside the rest of the pass), then deletes the cancelled Jobs before
// anything is created.
func (r passReads) Decided(p *Plan) {
	r.x.deletesBehind(p.finishedDeletes())
	r.x.deletes(p.Cancels())
	r.x.step("decide")
}

// Capacity reads what the nodes and quotas hold now.
func (r passReads) Capacity(ctx context.Context, obs *Observation, _ *Plan) *Observation {
	o := *obs
	o.Capacity, o.CapacityErr = r.s.readCapacity(ctx)
	r.x.step("capacity")
	return &o
}

// Check is queue i's row check; a failed read is the pass's failure (the queue creates nothing), and the Jobs of
// gone rows are deleted beside the rest.
func (r passReads) Check(ctx context.Context, p *Plan, i int) RowCheck {
	rc := r.s.checkRows(ctx, p, i, r.s.AllQueues()[i].Source)
	if !config.IsConfigError(rc.Err) {
		r.x.fail(rc.Err)
		r.x.deletesBehind(rc.Gone)
	}
	return rc
}

// Read is queue i's read (readQueue); a failed one is the pass's failure (the queue creates nothing).
func (r passReads) Read(ctx context.Context, p *Plan, i int) Admission {
	a := r.s.readQueue(ctx, p, i, r.s.AllQueues()[i])
	if !config.IsConfigError(a.Err) {
		r.x.fail(a.Err)
	}
	return a
}
