package scheduler

import (
	"context"
	"fmt"
	"maps"
	"math"
	"time"

	"github.com/rs/zerolog"

	"github.com/jobsched/jobsched/pkg/jobmeta"
	"github.com/jobsched/jobsched/pkg/rate"
	"github.com/jobsched/jobsched/pkg/rows"
)

// RowCheck is what the source says about the rows of the finished tasks the plan asked about (succeeded, dead and
// due for a retry): the step between the decision and the read, with a value of its own.
type RowCheck struct {
	// WorkerBugs are the succeeded tasks whose row the query still selects: the row is excluded from the read, so it
	// gets no second Job, and is reported as skipped with its key.
	WorkerBugs []Skip
	// Gone are the Jobs of dead tasks, and of tasks due for a retry, whose row the query no longer selects (someone
	// fixed or closed it): they are deleted, with Delete = DeleteRowGone, and the due ones are not retried.
	Gone []JobStatus
	// Err is why the source could not be asked: the queue creates nothing this pass (see Plan.checked).
	Err error
}

// checkRows asks queue i's source, in one read pushed down like the others, which of its succeeded, dead and due
// keys the query still selects.
func (s *Scheduler) checkRows(ctx context.Context, p *Plan, i int, src rows.Source) RowCheck {
	keys := p.parts[i].checkKeys()
	if src == nil || len(keys) == 0 {
		return RowCheck{}
	}
	selected, err := src.Selected(ctx, keys)
	if err != nil {
		return RowCheck{Err: err}
	}
	return p.check(i, selected, s.Config.QueueConfig(i).GC.SucceededRetention.Duration)
}

// checkKeys are the keys checkRows asks the source about: the succeeded, dead and due tasks.
func (p *queuePart) checkKeys() []string {
	return append(append(append([]string(nil), p.succeeded...), p.dead...), p.due...)
}

// check is the pure part of checkRows: selected are the keys the query still returns; succeededRetention is the
// queue's gc.succeededRetention, for the worker bugs' warning.
func (p *Plan) check(i int, selected []string, succeededRetention time.Duration) RowCheck {
	part := p.parts[i]
	still := map[string]bool{}
	for _, k := range selected {
		still[k] = true
	}
	var rc RowCheck
	deleted := map[string]bool{} // succeeded Jobs this pass deletes (gc.succeededRetention has passed)
	for _, j := range p.Jobs {
		if j.Queue == part.queueName && j.State == StateSucceeded && j.Delete != "" {
			deleted[j.Key] = true
		}
	}
	retention := rate.ShortDuration(succeededRetention)
	for _, key := range part.succeeded {
		if !still[key] {
			continue
		}
		// The row is excluded while a Job of its key exists: once the succeeded Job is deleted, it is a new task.
		why := fmt.Sprintf("no second Job while that Job is kept (gc.succeededRetention: %s)", retention)
		if deleted[key] {
			why = fmt.Sprintf("that Job is deleted now (gc.succeededRetention: %s), so the next pass creates a second Job for the row", retention)
		}
		rc.WorkerBugs = append(rc.WorkerBugs, Skip{Key: key, Reason: "worker bug: the row is still selected although its Job succeeded; " + why})
	}
	gone := map[string]bool{}
	for _, k := range append(append([]string(nil), part.dead...), part.due...) {
		gone[k] = !still[k]
	}
	for _, j := range p.Jobs {
		if j.Queue == part.queueName && gone[j.Key] && j.Delete == "" && (j.State == StateDead || j.State == StateBackoff) {
			j.Delete = DeleteRowGone
			rc.Gone = append(rc.Gone, j)
		}
	}
	return rc
}

// checked is the plan after queue i's row check: its worker bugs skipped (rows the check selected), its gone rows'
// Jobs marked for their delete and not retried. A check that failed blocks the queue: it creates nothing this pass.
func (p *Plan) checked(i int, rc RowCheck) *Plan {
	if rc.Err == nil && len(rc.WorkerBugs) == 0 && len(rc.Gone) == 0 {
		return p
	}
	q := p.next()
	part := q.part(i)
	if rc.Err != nil {
		part.block(BoundReadFailed, "reading rows failed")
		return q
	}
	q.skip(part, rc.WorkerBugs)
	part.checkedRows = len(rc.WorkerBugs)
	q.mark(rc.Gone)
	part.retry = maps.Clone(part.retry)
	for _, g := range rc.Gone {
		delete(part.retry, g.Key)
	}
	return q
}

// Admission is the read step's value: the rows read and what each became, a Create or a Skip.
type Admission struct {
	Selected int // rows read and admitted or skipped (not the rows read ahead, nor, when the read failed, its creates)
	Creates  []Create
	Skipped  []Skip
	// RowsWait says the last read returned all it asked for: the source may hold more rows than the pass took.
	RowsWait bool
	// Err is why the read failed: the queue creates nothing this pass (see Plan.admitted); what it admitted is not
	// in Creates (its rows are read again by the next pass), what it skipped stays skipped.
	Err error
}

// read reads the rows there is room for in queue i's part of p from the queue's source and admits each. The rows are
// read with the keys that have a Job excluded; a row that cannot get a Job is skipped and more rows are read in its place, asking each time for what is
// still needed plus as many as were skipped so far, so a head of bad rows costs a few reads, not a stalled queue.
// The rows a --rows file left out as repeated keys are skipped too: the file is read with them. The request saturates
// (the slots may be near the top of int), and every round after the first checks ctx: a source that does not (a
// --rows file) still ends with the pass's deadline.
func (s *Scheduler) read(ctx context.Context, p *Plan, i int, q Queue) (a Admission) {
	defer func() {
		if a.Err != nil { // none of its creates: not counted as read
			a.Selected -= len(a.Creates)
			a.Creates = nil
		}
	}()
	if f, ok := q.Source.(*rows.File); ok {
		defer func() {
			fs := fileSkips(f)
			a.Skipped, a.Selected = append(a.Skipped, fs...), a.Selected+len(fs) // rows of the file, read and skipped
		}()
	}
	part := p.parts[i]
	if part.Slots <= 0 || q.Source == nil {
		return a
	}
	exclude := append([]string(nil), part.exclude...)
	held := maps.Clone(part.held) // with limits.perGroup: the group's unfinished Jobs, and the creates admitted so far
	pg := s.Config.AllQueues()[i].Limits.PerGroup
	if pg != nil && pg.Rate != nil {
		held = rateHeld(pg, part.held, part.groupRoom)
	}
	var requests groupRequests // with limits.perGroup.maxRequests: what each group's Jobs and admitted creates ask
	if pg != nil && pg.MaxRequests != nil {
		requests = newGroupRequests(pg, part.heldRequests)
		held = requests.close(held)
	}
	need, budget := part.Slots, MaxSkippedRows
	if s.maxSkipped > 0 {
		budget = s.maxSkipped
	}
	skipped := len(part.Skipped) // the worker bugs count against the budget, as rows skipped this pass
	for round := 0; need > 0 && skipped < budget; round++ {
		if err := ctx.Err(); err != nil && round > 0 { // the first request is the source's to refuse
			a.Err = err
			return a
		}
		ask := need // + min(skipped, budget−skipped): what is needed and as many as were skipped, within the budget
		if more := min(skipped, budget-skipped); ask <= math.MaxInt-more {
			ask += more
		}
		var got []rows.Row
		got, err := q.Source.Select(ctx, rows.Selection{Exclude: exclude, Limit: ask, Held: held})
		if err != nil {
			a.Err = err
			return a
		}
		for _, row := range got {
			exclude = append(exclude, row.Key)
			if need == 0 || skipped == budget {
				break // read ahead for rows that were not needed after all, or past the budget
			}
			a.Selected++
			c, skip, err := p.admit(i, q.Renderer, row)
			switch {
			case err != nil:
				a.Err = err
				return a
			case skip != nil:
				a.Skipped = append(a.Skipped, *skip)
				skipped++
			default:
				if requests.g != nil {
					if skip, wait := requests.admit(c); skip != nil {
						a.Skipped = append(a.Skipped, *skip)
						skipped++
						continue
					} else if wait {
						a.Selected-- // its group's share is taken: it waits, as a row of a group at its cap
						held = requests.close(held)
						continue
					}
				}
				a.Creates = append(a.Creates, c)
				need--
				if g, ok := c.Job.Annotations[jobmeta.AnnotationGroup]; ok {
					if held == nil {
						held = map[string]int{}
					}
					held[g]++ // a next read (after skips) leaves the group's room to what is left of it
				}
			}
		}
		a.RowsWait = len(got) == ask
		if len(got) < ask { // the source has no more rows
			break
		}
	}
	if need > 0 && skipped >= budget {
		zerolog.Ctx(ctx).Warn().Int("skipped", skipped).Msg("stopped reading: too many selected rows in a row could not get a Job; the next pass reads on")
	}
	return a
}

// readQueue is the read step of queue i: read when it has slots, and when it has none, prove its source answers all
// the same (a pass that reads no row would not see a lost database while the queue is full), unless the row check
// already read from it this pass.
func (s *Scheduler) readQueue(ctx context.Context, p *Plan, i int, q Queue) Admission {
	if part := p.parts[i]; part.Slots <= 0 && q.Source != nil && len(part.checkKeys()) == 0 {
		if err := q.Source.Ping(ctx); err != nil {
			return Admission{Err: err}
		}
	}
	return s.read(ctx, p, i, q)
}

// fileSkips are the skips of the rows a --rows file left out: a value no row can hold (not valid UTF-8), and a
// repeated key (one Job per key: the first row of a key is the task).
func fileSkips(f *rows.File) []Skip {
	var out []Skip
	for _, inv := range f.Invalid {
		out = append(out, Skip{Key: inv.Key, Reason: fmt.Sprintf("--rows line %d %s: no Job", inv.Line, inv.Reason)})
	}
	for _, d := range f.Duplicates {
		out = append(out, Skip{Key: d.Key, Reason: fmt.Sprintf("--rows line %d repeats the key of line %d: no second Job", d.Line, d.First)})
	}
	return out
}

// admitted is the plan after queue i's read: its creates (before the share) and the rows it skipped. A read that
// failed blocks the queue.
func (p *Plan) admitted(i int, a Admission) *Plan {
	q := p.next()
	part := q.part(i)
	if a.Err != nil {
		part.block(BoundReadFailed, "reading rows failed")
	}
	part.admittedCreates, part.readRows = a.Creates, a.Selected
	q.skip(part, a.Skipped)
	return q
}
