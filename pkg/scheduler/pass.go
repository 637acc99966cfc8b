package scheduler

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/rs/zerolog"
	"k8s.io/client-go/kubernetes"

	"github.com/jobsched/jobsched/pkg/config"
	"github.com/jobsched/jobsched/pkg/render"
	"github.com/jobsched/jobsched/pkg/rows"
)

// MaxSkippedRows bounds the rows one pass reads past and skips (rows that cannot make a Job): the work of a pass is
// bounded by rows read, not by rounds, and a queue with this many bad rows at its head still moves, a page a pass.
const MaxSkippedRows = 10000

// workers bounds the creates and deletes in flight.
const workers = 16

// Mode is what a command lets a pass do.
type Mode int

const (
	// Tick deletes finished Jobs, then creates Jobs for the rows there is room for.
	Tick Mode = iota
	// GC only deletes finished Jobs: it lists Jobs and nothing else, and reads no row.
	GC
	// DryRun makes the whole plan and writes nothing.
	DryRun
	// ServerDryRun is DryRun that also sends each planned create to the API server with dryRun=All.
	ServerDryRun
)

func (m Mode) deletes() bool { return m == Tick || m == GC }
func (m Mode) dryRun() bool  { return m == DryRun || m == ServerDryRun }

// Scheduler runs passes for one configuration. Kube is nil when the pass is offline (the cluster is taken as empty);
// Source is nil for gc. Timeout bounds a whole pass (0: no bound beyond the caller's context).
type Scheduler struct {
	Config   *config.Config
	Kube     kubernetes.Interface
	Source   rows.Source
	Renderer *render.Renderer
	Now      func() time.Time
	Timeout  time.Duration
	Events   Events // nil: none
	// CreateGCPercent, when > 0, is the collector's GOGC from the creates on (jobsched lists at a low GOGC: see main).
	CreateGCPercent int

	maxSkipped int // MaxSkippedRows unless a test sets it
}

// Run is one pass, whole, and always ends with its `pass done` line:
//
//  1. list this scheduler's Jobs (and, unless gc, its Pending pods) and decide;
//  2. delete the finished Jobs past their retention, whatever happens next;
//  3. observe capacity: if that fails, create nothing (the pass fails);
//  4. read the rows there is room for: if the database fails, create nothing (the pass fails);
//  5. create their Jobs (or, in a dry run, only plan them).
//
// The returned error is a *config.Error when the configuration is wrong (the query, the columns); any other error
// is a run-time failure. The plan is returned whenever the Jobs could be listed, and the summary always.
func (s *Scheduler) Run(ctx context.Context, mode Mode) (_ *Plan, sum Summary, err error) {
	start := time.Now()
	log := zerolog.Ctx(ctx).With().Str("scheduler", s.Config.Name).Str("namespace", s.Config.Namespace).Logger()
	ctx = log.WithContext(ctx)
	if s.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeoutCause(ctx, s.Timeout, fmt.Errorf("the pass ran out of its --timeout of %s", s.Timeout))
		defer cancel()
	}
	sum.DryRun = mode.dryRun()
	var errs []error
	fail := func(err error) { errs = append(errs, err) }
	defer func() { sum.Log(&log, err, time.Since(start)) }()

	obs := &Observation{Now: s.Now().UTC()}
	var podsErr error
	if s.Kube != nil {
		if obs.Jobs, err = s.listJobs(ctx); err != nil {
			sum.Blocked = "cannot list Jobs"
			return nil, sum, cause(ctx, err)
		}
		if mode != GC {
			obs.Pods, podsErr = s.listPendingPods(ctx)
		}
	}
	p := Decide(s.Config, obs)
	obs.Jobs = nil // the plan keeps what it needs of them
	if mode.deletes() {
		s.executeDeletes(ctx, p.Deletes(), &sum, fail)
	}
	if mode == GC {
		sum.fromPlan(p)
		return p, sum, errors.Join(errs...)
	}
	if podsErr != nil { // without the pods the pass cannot tell what is unschedulable
		p.block("cannot list Pending pods")
		fail(cause(ctx, podsErr))
	}
	if p.Slots > 0 {
		if snap, err := s.observeCapacity(ctx); err != nil {
			p.block("capacity unknown: " + err.Error())
			fail(cause(ctx, err))
		} else if snap != nil {
			obs.Capacity = snap
			p.decideSlots(s.Config, obs)
			if w := p.Capacity.Warning; w != "" {
				log.Warn().Msg(w)
			}
		}
	}
	err = s.checkRows(ctx, p)
	if err == nil {
		if mode.deletes() {
			s.executeDeletes(ctx, p.deletes(DeleteRowGone), &sum, fail)
		}
		err = s.read(ctx, p)
	}
	if err != nil {
		if config.IsConfigError(err) {
			sum.fromPlan(p)
			return p, sum, err
		}
		p.block("reading rows failed")
		fail(cause(ctx, err))
	}
	sum.fromPlan(p)
	if mode.dryRun() {
		p.Query = s.explain(ctx, p)
	}
	for _, sk := range p.Skipped {
		log.Warn().Str("task", sk.Key).Msg(sk.Reason)
	}
	switch mode {
	case Tick:
		s.executeCreates(ctx, p, false, &sum, fail)
		if p.Blocked != "" && s.Events != nil {
			s.Events.PassBlocked(p.Blocked)
		}
	case ServerDryRun:
		s.executeCreates(ctx, p, true, &sum, fail)
	}
	return p, sum, errors.Join(errs...)
}

// cause names the pass's deadline or a signal when they are why err happened.
func cause(ctx context.Context, err error) error {
	if c := context.Cause(ctx); c != nil && !errors.Is(err, c) {
		return fmt.Errorf("%w (%w)", err, c)
	}
	return err
}

// read fills p with the rows there is room for. The rows are read with the keys that have a Job excluded; a row
// that cannot get a Job is skipped and more rows are read in its place, asking each time for what is still needed
// plus as many as were skipped so far, so a head of bad rows costs a few reads, not a stalled queue.
func (s *Scheduler) read(ctx context.Context, p *Plan) error {
	if p.Slots == 0 || s.Source == nil {
		return nil
	}
	exclude := append([]string(nil), p.exclude...)
	need, budget := p.Slots, MaxSkippedRows
	if s.maxSkipped > 0 {
		budget = s.maxSkipped
	}
	for need > 0 && len(p.Skipped) < budget {
		ask := min(need+len(p.Skipped), need+budget-len(p.Skipped))
		got, err := s.Source.Select(ctx, exclude, ask)
		if err != nil {
			return err
		}
		for _, row := range got {
			exclude = append(exclude, row.Key)
			if need == 0 || len(p.Skipped) == budget {
				break // read ahead for rows that were not needed after all, or past the budget
			}
			p.Selected++
			ok, err := p.admit(s.Renderer, row)
			if err != nil {
				return err
			}
			if ok {
				need--
			}
		}
		if len(got) < ask { // the source has no more rows
			break
		}
	}
	if need > 0 && len(p.Skipped) >= budget {
		zerolog.Ctx(ctx).Warn().Int("skipped", len(p.Skipped)).Msg("stopped reading: too many selected rows in a row could not get a Job; the next pass reads on")
	}
	return nil
}

// checkRows asks the source, in one read pushed down like the others, which of the keys of succeeded, dead and
// due-for-retry tasks the query still selects. A succeeded task whose row is still selected is a worker bug (the row
// is excluded from the read, so it gets no second Job, and is reported as skipped with its key); a dead task or one
// due for a retry whose row is gone (fixed or closed by someone) loses its Job.
func (s *Scheduler) checkRows(ctx context.Context, p *Plan) error {
	keys := append(append(append([]string(nil), p.succeeded...), p.dead...), p.due...)
	if s.Source == nil || len(keys) == 0 {
		return nil
	}
	selected, err := s.Source.Selected(ctx, keys)
	if err != nil {
		return err
	}
	still := map[string]bool{}
	for _, k := range selected {
		still[k] = true
	}
	for _, key := range p.succeeded {
		if still[key] {
			p.Skipped = append(p.Skipped, Skip{Key: key, Reason: "worker bug: the row is still selected although its Job succeeded; no second Job is created"})
		}
	}
	p.rowsGone(selected)
	return nil
}

// admit renders row into a Create, or records why it is skipped. Only a configuration problem is an error.
func (p *Plan) admit(r *render.Renderer, row rows.Row) (bool, error) {
	attempt, last := 1, p.retry[row.Key]
	if last != nil {
		attempt = last.Attempt + 1
	}
	job, err := r.Job(row, attempt)
	var rowErr *render.RowError
	if errors.As(err, &rowErr) {
		p.Skipped = append(p.Skipped, Skip{Key: rowErr.Key, Reason: "no Job: " + rowErr.Reason})
		return false, nil
	}
	if err != nil {
		return false, err
	}
	if other, ok := p.job(job.Name); ok && other.Key != row.Key {
		p.Skipped = append(p.Skipped, Skip{Key: row.Key, Reason: fmt.Sprintf("name collision: Job %s exists for task %q", job.Name, other.Key)})
		return false, nil
	}
	p.Creates = append(p.Creates, Create{Key: row.Key, Attempt: attempt, Job: job, Supersedes: last})
	return true, nil
}
