package cmd

import (
	"context"
	"errors"
	"time"

	"github.com/rs/zerolog"
	"k8s.io/apimachinery/pkg/types"

	"github.com/jobsched/jobsched/pkg/jobend"
)

// tick --fill-for: after a pass bound by room while rows wait, wait for one of this scheduler's Jobs to end (a watch
// from the pass's own list), then run the next whole pass; until the time is up, the backlog is empty, nothing can
// start, or the process is told to stop. Each pass is a fresh one: the loop keeps nothing of a pass but what it
// needs to wait (the resourceVersion to watch from, and which Jobs had already finished).

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
	blocked  string // why nothing can start until something else changes ("" when a Job's end makes room)
	room     bool   // the slots were bound by room: capacity, the quota, limits.maxActive
	rowsWait bool   // rows may still wait for a Job
	limit    string // what bound the slots
	rv       string // the resourceVersion of the pass's Jobs list
	finished map[types.UID]bool
}

// filler runs passes for fillFor. pass runs one whole pass (refill 0 is the first); wait returns once a Job of
// this scheduler ends after rv (see jobend.Wait).
type filler struct {
	fillFor time.Duration
	now     func() time.Time
	pass    func(ctx context.Context, refill int) fillPass
	wait    func(ctx context.Context, rv string, finished map[types.UID]bool) (string, error)
}

var errFillOver = errors.New("--fill-for has passed")

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
			log.Info().Int("refill", refill).Str("limit", p.limit).Msg("waiting for a Job to finish")
			wctx, cancel := context.WithTimeoutCause(ctx, end.Sub(f.now()), errFillOver)
			name, err := f.wait(wctx, p.rv, p.finished)
			cancel()
			switch {
			case ctx.Err() != nil:
				reason = endTerminated
			case errors.Is(err, errFillOver):
				reason = endTime
			case errors.Is(err, jobend.ErrExpired):
				log.Debug().Err(err).Msg("the next pass observes afresh")
			case err != nil:
				reason = endCannotWait + err.Error()
			default:
				log.Debug().Str("by", name).Msg("a Job ended or a node turned Ready: the next pass")
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
	case !p.room:
		return endNotRoom + p.limit
	case p.rv == "":
		return endCannotWait + "the pass has no resourceVersion of its Jobs to watch from"
	case !f.now().Before(end):
		return endTime
	}
	return ""
}
