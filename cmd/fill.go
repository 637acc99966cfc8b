package cmd

import (
	"context"
	"errors"
	"time"

	"github.com/rs/zerolog"

	"github.com/jobsched/jobsched/pkg/scheduler"
)

// tick --fill-for: after a pass bound by room while rows wait, wait for one of this scheduler's Jobs to end, then
// run the next whole pass; until the time is up, the backlog is empty, nothing can start, or the process is told to
// stop. The first pass lists what it observes and the passes after it decide from what the watches since then
// followed (scheduler.Follow): the wait is on those watches too.

// Why an invocation with --fill-for ended: the reason of its last line, "fill ended".
const (
	endBacklogEmpty = "the backlog is empty"
	endBlocked      = "blocked: "           // + the pass's reason (an Unschedulable pod, a failed observation, …)
	endNotRoom      = "not bound by room: " // + what bound the slots (limits.maxPerTick)
	endFailed       = "the pass failed"
	endTime         = "--fill-for has passed"
	endTerminated   = "terminated"
	endCannotWait   = "cannot wait for a Job: " // + why
)

// fillPass is what the loop needs to know of one pass.
type fillPass struct {
	err      error
	blocked  string    // why nothing can start until something else changes ("" when a Job's end makes room)
	room     bool      // the slots were bound by room: capacity, the quota, limits.maxActive
	nodes    bool      // by the capacity fit: a node turning usable may add room (scheduler.Result.CapacityBound)
	rowsWait bool      // rows may still wait for a Job
	limit    string    // what bound the slots
	next     time.Time // a limits.rate bound the slots: when its window allows the next create (zero: none)
	wordDue  time.Time // when a pod that waits for the autoscaler's word blocks without it (zero: none)
}

// filler runs passes for fillFor. pass runs one whole pass (refill 0 is the first); wait returns once something
// happened after it that may let the next pass create (a Job of this scheduler ended: scheduler.Follow.Wait). poll,
// when set, bounds each wait: the next pass then runs although nothing happened (a queue with source.cancelQuery: a
// cancel is noticed only by a pass).
type filler struct {
	fillFor time.Duration
	poll    time.Duration
	now     func() time.Time
	pass    func(ctx context.Context, refill int) fillPass
	wait    func(ctx context.Context, nodes bool) (string, error)
}

// cancelPoll is the filler's poll while a queue has source.cancelQuery (jobsched help cancel): a cancel takes
// effect within it and a pass, at the cost of a pass that often while the loop waits.
const cancelPoll = 5 * time.Second

var (
	errFillOver   = errors.New("--fill-for has passed")
	errPoll       = errors.New("the poll for cancels is due")
	errWindowOpen = errors.New("the rate window opens")
	errWordDue    = errors.New("the autoscaler's word is due")
)

// waitFor is the wait after pass p: for a Job to end when room bound it, and when a limits.rate bound it, at most
// until its window allows the next create (without room to wait for, just that).
func (f filler) waitFor(ctx context.Context, p fillPass) (string, error) {
	if p.next.IsZero() {
		return f.wait(ctx, p.nodes)
	}
	wctx, cancel := context.WithTimeoutCause(ctx, p.next.Sub(f.now()), errWindowOpen)
	defer cancel()
	if !p.room {
		<-wctx.Done()
		return "", context.Cause(wctx)
	}
	return f.wait(wctx, p.nodes)
}

// run returns the error of the last pass: the invocation did what its passes did. It never starts a pass once
// fillFor has passed, so with each pass bounded by --timeout it ends by fillFor + --timeout (and the last pass's
// reports).
func (f filler) run(ctx context.Context) error {
	log := zerolog.Ctx(ctx)
	end := f.now().Add(f.fillFor)
	for refill := 0; ; refill++ {
		p := f.pass(ctx, refill)
		reason := f.stop(ctx, p, end)
		if reason == "" {
			ev := log.Info().Int("refill", refill).Str("limit", p.limit)
			if !p.next.IsZero() {
				ev = ev.Time("nextCreate", p.next)
			}
			ev.Msg("waiting for a Job to finish")
			left, why := end.Sub(f.now()), errFillOver
			if f.poll > 0 && f.poll < left {
				left, why = f.poll, errPoll
			}
			if due := p.wordDue.Sub(f.now()); !p.wordDue.IsZero() && due < left {
				left, why = due, errWordDue
			}
			wctx, cancel := context.WithTimeoutCause(ctx, left, why)
			waitFrom := f.now()
			name, err := f.waitFor(wctx, p)
			cancel()
			switch {
			case ctx.Err() != nil:
				reason = endTerminated
			case errors.Is(err, errFillOver):
				reason = endTime
			case errors.Is(err, errPoll):
				log.Debug().Msg("no Job ended within the poll for cancels: the next pass")
			case errors.Is(err, errWordDue):
				log.Debug().Msg("a pod's wait for the autoscaler's word is over: the next pass")
			case errors.Is(err, errWindowOpen):
				log.Debug().Msg("the rate window opened: the next pass")
			case errors.Is(err, scheduler.ErrLost):
				log.Debug().Err(err).Msg("the next pass observes afresh")
			case err != nil:
				reason = endCannotWait + err.Error()
			default:
				log.Debug().Str("by", name).Dur("waited", f.now().Sub(waitFrom)).Msg("a Job ended or a node turned Ready: the next pass")
			}
			if reason == "" && !f.now().Before(end) {
				reason = endTime
			}
		}
		if reason != "" {
			log.Info().Str("reason", reason).Int("passes", refill+1).Msg("fill ended")
			return p.err
		}
	}
}

// stop says why no pass follows p ("" when the next one waits for a Job to end).
func (f filler) stop(ctx context.Context, p fillPass, end time.Time) string {
	switch {
	case p.err != nil:
		return endFailed
	case ctx.Err() != nil:
		return endTerminated
	case p.blocked != "":
		return endBlocked + p.blocked
	case !p.rowsWait:
		return endBacklogEmpty
	case !p.room && p.next.IsZero():
		return endNotRoom + p.limit
	case !f.now().Before(end):
		return endTime
	}
	return ""
}
