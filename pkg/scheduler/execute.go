package scheduler

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/zerologr"
	"github.com/rs/zerolog"
	batchv1 "k8s.io/api/batch/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/workqueue"

	"github.com/jobsched/jobsched/pkg/capacity"
	"github.com/jobsched/jobsched/pkg/config"
	"github.com/jobsched/jobsched/pkg/jobmeta"
)

// execution is one pass's writes and what came of each: the execute steps of Run, the errors that fail the pass
// without stopping it, and its one `pass done` line, counted once from the plan and these outcomes (Summary).
type execution struct {
	s       *Scheduler
	ctx     context.Context
	held    context.Context // the creates run under it: the Guard's, else ctx
	action  Action
	log     zerolog.Logger
	start   time.Time
	deleted []error // each delete tried (nil: done), the retries' failed attempts included
	// behind are the deletes of finished Jobs running beside the rest of the pass (deletesBehind), joined by done.
	behind     sync.WaitGroup
	behindDone []func()
	created    []createOutcome // each of the plan's creates, in its order (nil: none tried)
	errs       []error
	release    func()
	cancel     context.CancelFunc
	// keeper is the Guard when it keeps the rate record (rate.go); cancelCreates ends the reserved creates' context.
	keeper        RecordKeeper
	cancelCreates context.CancelFunc
	// steps is how long each step took, for the debug line "pass steps" (where a pass's time goes).
	steps    *zerolog.Event
	stepFrom time.Time
}

type runLogKey struct{}

// WithRunLog is ctx with the run's logger: the one of ctx with the fields scheduler and namespace, for zerolog and,
// through zerologr, for client-go's contextual logging (klog.FromContext: a watch's retries), so that every line a
// run writes has one format and its fields. A ctx that has it already is returned as it is (no field twice).
func WithRunLog(ctx context.Context, cfg *config.Config) context.Context {
	if ctx.Value(runLogKey{}) != nil {
		return ctx
	}
	log := zerolog.Ctx(ctx).With().Str("scheduler", cfg.Name).Str("namespace", cfg.Namespace).Logger()
	ctx = logr.NewContext(log.WithContext(ctx), zerologr.New(&log))
	return context.WithValue(ctx, runLogKey{}, true)
}

// begin starts a pass: its logger, its --timeout.
func (s *Scheduler) begin(ctx context.Context, action Action) (context.Context, *execution) {
	x := &execution{s: s, action: action, start: time.Now(), release: func() {}, cancel: func() {}}
	ctx = WithRunLog(ctx, s.Config)
	x.log = *zerolog.Ctx(ctx)
	if s.Timeout > 0 {
		ctx, x.cancel = context.WithTimeoutCause(ctx, s.Timeout, fmt.Errorf("the pass ran out of its --timeout of %s", s.Timeout))
	}
	x.ctx, x.held = ctx, ctx
	x.stepFrom = x.start
	if x.log.Debug().Enabled() {
		x.steps = zerolog.Dict()
	}
	return ctx, x
}

// step records how long the step that just ended took, in milliseconds (debug only).
func (x *execution) step(name string) {
	if x.steps == nil {
		return
	}
	now := time.Now()
	x.steps.Float64(name, float64(now.Sub(x.stepFrom).Microseconds())/1000)
	x.stepFrom = now
}

func (x *execution) end() {
	x.release()
	x.cancel()
}

// hold takes g for an Execute pass; its refusal is returned for the observation (the plan then creates nothing).
func (x *execution) hold(g Guard) error {
	if g == nil || x.action != Execute {
		return nil
	}
	held, release, err := g.Take(x.ctx)
	if err != nil {
		return err
	}
	// The creates stop when the guard is lost and when the pass ends, also under a hold kept from pass to pass
	// (lease.Guard.Keep), whose context outlives this one.
	both, cancel := context.WithCancelCause(x.ctx)
	if held.Err() != nil { // already lost: not left to AfterFunc's goroutine
		cancel(context.Cause(held))
	}
	stop := context.AfterFunc(held, func() { cancel(context.Cause(held)) })
	x.held = both
	x.release = func() {
		stop()
		cancel(nil)
		release()
	}
	x.keeper, _ = g.(RecordKeeper)
	return nil
}

// fail records the run-time failures of steps that do not stop the pass.
func (x *execution) fail(errs ...error) {
	for _, err := range errs {
		if err != nil {
			x.errs = append(x.errs, cause(x.ctx, err))
		}
	}
}

// failedWrite records the errors of writes (each names its Job and why it failed, the deadline included).
func (x *execution) failedWrite(errs ...error) {
	for _, err := range errs {
		if err != nil {
			x.errs = append(x.errs, err)
		}
	}
}

// fitted takes the plan after Fit: it fails the pass for what could not be observed and logs capacity's warnings,
// each once: what the install's one observation could not read is in every queue's report.
func (x *execution) fitted(p *Plan, obs *Observation) *Plan {
	x.fail(obs.PodsErr, obs.CapacityErr)
	logged := map[string]bool{}
	for _, part := range p.parts {
		if c := part.Capacity; c != nil && c.Warning != "" && !logged[c.Warning] {
			logged[c.Warning] = true
			x.log.Warn().Msg(c.Warning)
		}
	}
	return p
}

// done ends the pass with p (nil: the Jobs could not be listed, and stop says why) and logs its summary line.
// rowsWait is what the read said (see Result.RowsWait); rows read ahead (the share gave them no slot) wait too.
func (x *execution) done(p *Plan, obs *Observation, rowsWait bool, stop error) (Result, error) {
	x.joinDeletes()
	x.step("deletes behind")
	r := Result{Plan: p}
	if p != nil {
		r.RowsWait = rowsWait || p.ReadAhead > 0 || ((p.roomBound || p.NextCreate != nil) && p.Slots == 0)
	}
	if obs != nil {
		r.JobsResourceVersion = obs.JobsResourceVersion
	}
	err := stop
	if err == nil {
		err = errors.Join(x.errs...)
	}
	r.Summary = summarize(p, x.action.dryRun(), x.deleted, x.created)
	if p != nil {
		r.Outcomes = outcomes(p, x.created)
	}
	if g, ok := x.s.Guard.(guardReport); ok && x.action == Execute {
		state, waited := g.Report()
		r.Summary.Lease, r.Summary.LeaseWait = state, waited.Milliseconds()
	}
	if x.steps != nil { // before pass done, which ends a pass's lines (the Lease's release comes after it)
		x.log.Debug().Dict("ms", x.steps).Msg("pass steps")
	}
	r.Summary.Log(&x.log, err, time.Since(x.start))
	return r, err
}

// guardReport is a Guard that says what it held, for the pass done line (the Lease: held, lost, "held by X").
type guardReport interface {
	Report() (state string, waited time.Duration)
}

// deletes is an execute step: it deletes js (for an action that deletes) and returns once each delete is answered.
func (x *execution) deletes(js []JobStatus) {
	if x.action.deletes() {
		x.deleteOutcomes(x.s.executeDeletes(x.ctx, js))
	}
}

// deletesBehind is an execute step for finished Jobs: it starts their deletes (for an action that deletes) beside the
// rest of the pass, which done waits for. A finished Job holds no slot, its pods no node and no quota but a
// count/jobs.batch (which the API server's quota counts by its own clock), and its key is excluded from the pass:
// nothing the pass creates needs it gone, so no create waits for it, and it never waits on a step that may fail.
func (x *execution) deletesBehind(js []JobStatus) {
	if !x.action.deletes() || len(js) == 0 {
		return
	}
	var errs []error
	x.behind.Add(1)
	go func() {
		defer x.behind.Done()
		errs = x.s.executeDeletes(x.ctx, js)
	}()
	x.behindDone = append(x.behindDone, func() { x.deleteOutcomes(errs) })
}

// joinDeletes waits for the deletes started behind and records what came of them.
func (x *execution) joinDeletes() {
	x.behind.Wait()
	for _, record := range x.behindDone {
		record()
	}
	x.behindDone = nil
}

func (x *execution) deleteOutcomes(errs []error) {
	for _, err := range errs {
		x.deleted = append(x.deleted, err)
		x.failedWrite(err)
	}
}

// creates is the last execute step: it logs p's skips and creates p's Jobs (Execute, under the Guard; ServerDryRun
// with dryRun=All).
func (x *execution) creates(p *Plan) {
	for _, sk := range p.Skipped {
		x.log.Warn().Str("task", sk.Key).Msg(sk.Reason)
	}
	switch x.action {
	case Execute:
		x.warnRates(p)
		held, refused := x.reserve(p)
		x.created = x.s.executeCreates(held, p, false)
		for i := range x.created {
			x.created[i].refused = refused // none was started
		}
		x.settle(p)
		if x.cancelCreates != nil {
			x.cancelCreates()
		}
		if p.Blocked != "" && x.s.Events != nil {
			x.s.Events.PassBlocked(p.Blocked, p.Waits())
		}
	case ServerDryRun:
		x.created = x.s.executeCreates(x.ctx, p, true)
	default:
		return
	}
	notStarted, refused := 0, 0
	for i, o := range x.created {
		x.failedWrite(o.err, o.retireErr)
		switch o.result() {
		case OutcomeReservationRefused:
			refused++
		case OutcomeNotStarted:
			notStarted++
		case OutcomeNameTaken:
			x.log.Warn().Str("task", o.skip.Key).Str("job", p.Creates[i].Job.Name).Str("outcome", string(OutcomeNameTaken)).Msg(o.skip.Reason)
		}
	}
	if refused > 0 {
		x.log.Warn().Int("notCreated", refused).Str("outcome", string(OutcomeReservationRefused)).Msg("the rate reservation was not written on the Lease: no planned Job was created; the next pass creates them")
		x.failedWrite(fmt.Errorf("%d planned Job(s) not created: %w", refused, errRateReserve))
	}
	if notStarted > 0 {
		cause := context.Cause(x.held)
		x.log.Warn().Int("notCreated", notStarted).Err(cause).Msg("the pass stopped creating (its deadline, a signal, or a lost Lease); the next pass creates the rest")
		x.failedWrite(fmt.Errorf("%d planned Job(s) not created: %w", notStarted, cause))
	}
}

// Summary is what a pass did; every pass logs it as one line, `pass done`.
type Summary struct {
	DryRun         bool `json:"dryRun,omitempty"`
	Selected       int  `json:"selected"`
	WouldCreate    int  `json:"wouldCreate,omitempty"` // dry run: the Jobs the plan creates
	Created        int  `json:"created"`
	AlreadyPresent int  `json:"alreadyPresent"`
	NotCreated     int  `json:"notCreated,omitempty"` // planned, not tried: the pass stopped creating (its deadline, a signal, a lost Lease) or the Lease refused the rate reservation; the next pass takes them
	Skipped        int  `json:"skipped"`              // the plan's skips, and the creates whose name another Job held (OutcomeNameTaken)
	// SkippedSize counts, of Skipped, the rows skipped for their size (job.requestsFrom: Skip.Size).
	SkippedSize int `json:"skippedSize,omitempty"`
	ReadAhead   int `json:"readAhead,omitempty"` // with queues: rows read for a queue the share gave no slot; the next pass reads them again
	// Passed counts, of ReadAhead, the rows that did not fit now and that smaller rows behind them passed (job.backfill).
	Passed  int    `json:"passed,omitempty"`
	Blocked string `json:"blocked,omitempty"`
	Deleted int    `json:"deleted"`
	Failed  int    `json:"failed"`
	Retried int    `json:"retried"` // attempts > 1 created
	Dead    int    `json:"dead"`    // tasks with no attempt left whose record is kept
	// Cancelled are the unfinished Jobs the pass deletes because source.cancelQuery returns their key (their
	// deletes are counted in deleted or failed too).
	Cancelled int `json:"cancelled"`
	// Lease is what the Guard says of the pass's hold (held, lost, forbidden, "held by X"); LeaseWait how long
	// taking it waited, in milliseconds.
	Lease     string `json:"lease,omitempty"`
	LeaseWait int64  `json:"leaseWait,omitempty"`
}

// summarize is the summary of a pass: the plan's counts (nil: the Jobs could not be listed) and what came of each
// delete and create the pass tried (the record Result.Outcomes shows). It is the one place the pass is counted:
// every row the plan selected is in exactly one of created, alreadyPresent, skipped (the plan's, and a create that
// found its name taken), failed, notCreated (its reservation refused included) and readAhead; every delete tried in
// deleted or failed.
func summarize(p *Plan, dryRun bool, deleted []error, outcomes []createOutcome) Summary {
	s := Summary{DryRun: dryRun}
	if p == nil {
		s.Blocked = "cannot list Jobs"
		return s
	}
	s.Selected, s.Skipped, s.ReadAhead, s.Blocked, s.Dead = p.Selected, len(p.Skipped), p.ReadAhead, p.Blocked, p.Count(StateDead)
	s.Passed = p.Passed
	s.Cancelled = len(p.Cancels())
	for _, sk := range p.Skipped {
		if sk.Size {
			s.SkippedSize++
		}
	}
	if dryRun {
		s.WouldCreate = len(p.Creates)
	}
	for _, err := range deleted {
		if err != nil {
			s.Failed++
		} else {
			s.Deleted++
		}
	}
	for i, o := range outcomes {
		switch o.result() {
		case OutcomeNotStarted, OutcomeReservationRefused:
			s.NotCreated++
		case OutcomeFailed:
			s.Failed++
		case OutcomeCreated:
			s.Created++
			if p.Creates[i].Attempt > 1 {
				s.Retried++
			}
		case OutcomePresent:
			s.AlreadyPresent++
		case OutcomeNameTaken:
			s.Skipped++
		}
		switch {
		case o.retireErr != nil:
			s.Failed++
		case o.retired:
			s.Deleted++
		}
	}
	return s
}

// Log writes the summary line: at level error when the pass failed (err), else info.
func (s Summary) Log(log *zerolog.Logger, err error, d time.Duration) {
	ev := log.Info()
	if err != nil {
		ev = log.Error().Err(err)
	}
	if s.DryRun {
		ev = ev.Bool("dryRun", true).Int("wouldCreate", s.WouldCreate)
	}
	if s.NotCreated > 0 {
		ev = ev.Int("notCreated", s.NotCreated)
	}
	if s.ReadAhead > 0 {
		ev = ev.Int("readAhead", s.ReadAhead)
	}
	if s.SkippedSize > 0 {
		ev = ev.Int("skippedSize", s.SkippedSize)
	}
	if s.Passed > 0 {
		ev = ev.Int("passed", s.Passed)
	}
	if s.Lease != "" {
		ev = ev.Str("lease", s.Lease).Int64("leaseWait", s.LeaseWait)
	}
	ev.Int("selected", s.Selected).Int("created", s.Created).Int("alreadyPresent", s.AlreadyPresent).
		Int("skipped", s.Skipped).Str("blocked", s.Blocked).Int("deleted", s.Deleted).Int("failed", s.Failed).
		Int("retried", s.Retried).Int("dead", s.Dead).Int("cancelled", s.Cancelled).
		Int64("duration", d.Milliseconds()).Msg("pass done")
}

// executeDeletes deletes finished Jobs, concurrently; one failure does not stop the others. It returns the error of
// each (nil: deleted).
func (s *Scheduler) executeDeletes(ctx context.Context, deletes []JobStatus) []error {
	errs := make([]error, len(deletes))
	s.parallel(ctx, len(deletes), func(i int) { errs[i] = s.delete(ctx, deletes[i]) })
	return errs
}

// createOutcome is what came of one planned create: not started (the pass's context ended first, or refused: the
// Lease refused the rate reservation), failed (err), or created, already present, or a name collision (res; skip
// says with what); and of its superseded attempt's delete, once it exists (retired, or retireErr). It is the pass's
// record of its creates: summarize counts it, and Result.Outcomes shows it (result).
type createOutcome struct {
	started   bool
	refused   bool
	res       createResult
	err       error
	skip      Skip
	retired   bool
	retireErr error
}

// result is what came of the create, as an Outcome says it.
func (o createOutcome) result() OutcomeResult {
	switch {
	case o.refused:
		return OutcomeReservationRefused
	case !o.started:
		return OutcomeNotStarted
	case o.err != nil:
		return OutcomeFailed
	case o.res == created:
		return OutcomeCreated
	case o.res == present:
		return OutcomePresent
	}
	return OutcomeNameTaken
}

// OutcomeResult is what came of a planned create (Outcome.Result).
type OutcomeResult string

// What came of a planned create. The plan cannot know two of them before the create is made (Plan.NotKnown):
// OutcomeNameTaken and OutcomeReservationRefused.
const (
	OutcomeCreated = OutcomeResult("created")
	// OutcomePresent: this scheduler's Job of the task already holds the name (another pass made it).
	OutcomePresent = OutcomeResult("alreadyPresent")
	// OutcomeNameTaken: another Job holds the name (another scheduler's, another task's, or one made by hand): the row
	// is skipped (Reason says by what), every pass while it does.
	OutcomeNameTaken = OutcomeResult("nameTaken")
	// OutcomeReservationRefused: with limits.rate, the Lease did not take the reservation: no create was started.
	OutcomeReservationRefused = OutcomeResult("reservationRefused")
	// OutcomeNotStarted: the pass stopped creating first (its deadline, a signal, a lost Lease).
	OutcomeNotStarted = OutcomeResult("notStarted")
	// OutcomeFailed: the API server refused the create (Reason).
	OutcomeFailed = OutcomeResult("failed")
)

// Outcome is what came of one of the plan's creates when the pass made it, beside the plan (Result.Outcomes): the
// create as the plan says it (its Job's name, its task, its queue) and what happened.
type Outcome struct {
	Queue  string        `json:"queue,omitempty"`
	Key    string        `json:"key"`
	Job    string        `json:"job"`
	Result OutcomeResult `json:"result"`
	Reason string        `json:"reason,omitempty"` // why it is not created: the skip's reason, or the error
}

// outcomes are the record of p's creates as Outcomes, in the plan's order (nil when none was tried).
func outcomes(p *Plan, record []createOutcome) []Outcome {
	if record == nil {
		return nil
	}
	out := make([]Outcome, len(record))
	for i, o := range record {
		c := p.Creates[i]
		out[i] = Outcome{Queue: c.Queue, Key: c.Key, Job: c.Job.Name, Result: o.result()}
		switch out[i].Result {
		case OutcomeNameTaken:
			out[i].Reason = o.skip.Reason
		case OutcomeFailed:
			out[i].Reason = o.err.Error()
		case OutcomeReservationRefused:
			out[i].Reason = errRateReserve.Error()
		}
	}
	return out
}

// executeCreates creates the Jobs p plans, concurrently; one failure does not stop the others. With serverDryRun
// they go to the API server with dryRun=All: it validates and admits them and stores nothing. Creates not started
// when the pass's context ends are left for the next pass. It returns the outcome of each of p.Creates.
//
// Where the creates differ in size, they go in the plan's order one run of equal size at a time (sizeRuns), each
// run concurrently: the fit placed them in that order, as kube-scheduler places pods (LeastAllocated, one at a time
// in the order they come), and a large pod bound after small ones created after it could find the room the fit
// kept for it split across nodes.
func (s *Scheduler) executeCreates(ctx context.Context, p *Plan, serverDryRun bool) []createOutcome {
	if s.BeforeCreates != nil && len(p.Creates) > 0 {
		s.BeforeCreates()
	}
	out := make([]createOutcome, len(p.Creates))
	for _, run := range sizeRuns(p.Creates) {
		s.parallel(ctx, run[1]-run[0], func(k int) {
			i := run[0] + k
			c := p.Creates[i]
			o := &out[i]
			o.started = true
			o.res, o.skip, o.err = s.create(ctx, c, serverDryRun, p)
			// The attempt a retry supersedes goes only once the retry exists: a pass killed in between loses no count.
			if o.err == nil && o.res != collision && c.Supersedes != nil && !serverDryRun {
				o.retireErr = s.delete(ctx, *c.Supersedes)
				o.retired = o.retireErr == nil
			}
		})
	}
	return out
}

// sizeRuns splits creates into runs of consecutive creates whose Jobs ask the same (createAsks), as [start, end)
// index pairs in order: one run when they all do.
func sizeRuns(creates []Create) [][2]int {
	var runs [][2]int
	last := ""
	for i, c := range creates {
		size := capacity.Quantities(createAsks(c))
		if i == 0 || size != last {
			runs = append(runs, [2]int{i, i})
		}
		runs[len(runs)-1][1], last = i+1, size
	}
	return runs
}

// parallel runs fn(0..n-1) with at most workers in flight and starts no new one once ctx is done; it returns how
// many it started.
func (s *Scheduler) parallel(ctx context.Context, n int, fn func(i int)) int {
	var started atomic.Int64
	workqueue.ParallelizeUntil(ctx, cmp.Or(s.workers, Workers), n, func(i int) {
		started.Add(1)
		fn(i)
	})
	return int(started.Load())
}

// delete removes a finished Job and, through the garbage collector, its pods. The UID precondition makes sure a
// Job created again under the same name by a concurrent pass is never deleted by this one.
func (s *Scheduler) delete(ctx context.Context, j JobStatus) error {
	log := zerolog.Ctx(ctx).With().Str("job", j.Name).Str("task", j.Key).Logger()
	policy := metav1.DeletePropagationBackground
	err := s.Kube.BatchV1().Jobs(s.Config.Namespace).Delete(ctx, j.Name, metav1.DeleteOptions{
		PropagationPolicy: &policy,
		Preconditions:     &metav1.Preconditions{UID: &j.UID},
	})
	switch {
	case err == nil:
		s.Follow.gone(s.Config.Namespace, j)
		msg := "deleted finished Job"
		if j.Delete == DeleteCancelled {
			msg = "cancelled Job: deleted"
		}
		log.Info().Str("state", string(j.State)).Int("attempt", j.Attempt).Str("why", j.Delete).Msg(msg)
		if s.Events != nil {
			s.Events.JobDeleted(j)
		}
	case apierrors.IsNotFound(err) || apierrors.IsConflict(err):
		log.Debug().Msg("finished Job already deleted by someone else")
	default:
		log.Error().Err(err).Msg("deleting finished Job")
		return fmt.Errorf("deleting Job %s (task %q): %w", j.Name, j.Key, err)
	}
	return nil
}

type createResult int

const (
	created createResult = iota
	present
	collision
)

// create creates one Job. AlreadyExists means another pass (or an earlier try) created it: the Job is already present,
// unless it belongs to another task, queue or scheduler, which is a name collision: the row is skipped, and the skip
// says why.
func (s *Scheduler) create(ctx context.Context, c Create, serverDryRun bool, p *Plan) (createResult, Skip, error) {
	log := zerolog.Ctx(ctx).With().Str("job", c.Job.Name).Str("task", c.Key).Logger()
	jobs := s.Kube.BatchV1().Jobs(s.Config.Namespace)
	opts := metav1.CreateOptions{FieldManager: "jobsched"}
	if serverDryRun {
		opts.DryRun = []string{metav1.DryRunAll}
	}
	job, err := jobs.Create(ctx, c.Job, opts)
	if err == nil {
		log.Info().Bool("serverDryRun", serverDryRun).Int("attempt", c.Attempt).Msg("created Job")
		if !serverDryRun {
			s.Follow.made(job)
			if s.Events != nil {
				s.Events.JobCreated(job, c, fmt.Sprintf("%d slot(s) this pass, bound by %s", p.Slots, p.Limit))
			}
		}
		return created, Skip{}, nil
	}
	if !apierrors.IsAlreadyExists(err) {
		log.Error().Err(err).Msg("creating Job")
		return 0, Skip{}, fmt.Errorf("creating Job %s (task %q): %w", c.Job.Name, c.Key, err)
	}
	existing, err := jobs.Get(ctx, c.Job.Name, metav1.GetOptions{})
	if err != nil {
		return 0, Skip{}, fmt.Errorf("creating Job %s (task %q): it exists, and reading it failed: %w", c.Job.Name, c.Key, err)
	}
	if !s.ours(existing, c) {
		reason := collisionReason(c.Job.Name, existing.Annotations[jobmeta.AnnotationTaskKey], existing.Labels[jobmeta.LabelQueue])
		if sched := existing.Labels[jobmeta.LabelScheduler]; sched != s.Config.Name {
			reason = fmt.Sprintf("name collision: Job %s exists and is not this scheduler's (scheduler label %q)", c.Job.Name, sched)
		}
		return collision, Skip{Queue: c.Queue, Key: c.Key, Reason: reason}, nil
	}
	log.Debug().Msg("Job already present")
	s.Follow.made(existing)
	return present, Skip{}, nil
}

// ours says job, found under c's name, is c's: this scheduler's, of c's task and of c's queue (a Job without the
// queue label is the queue's the pass takes it for, see config.Config.QueueIndex).
func (s *Scheduler) ours(job *batchv1.Job, c Create) bool {
	sameQueue := c.Queue == "" || s.Config.QueueIndex(job.Labels[jobmeta.LabelQueue]) == s.Config.QueueIndex(c.Queue)
	return job.Labels[jobmeta.LabelScheduler] == s.Config.Name && job.Annotations[jobmeta.AnnotationTaskKey] == c.Key && sameQueue
}
