package cmd

import (
	"context"
	"errors"
	"strings"
	"time"

	"github.com/rs/zerolog"

	"github.com/jobsched/jobsched/pkg/listen"
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
	binds    bool      // the fit awaits our unbound pods: one bound may let the next pass create (Result.AwaitsBinds)
	ends     bool      // by the capacity fit, and a pod's end frees its room: it may (scheduler.PodEndFrees)
	rowsWait bool      // rows may still wait for a Job
	limit    string    // what bound the slots
	next     time.Time // a limits.rate bound the slots: when its window allows the next create (zero: none)
	waitDue  time.Time // when a pod that waits (the plan's WaitDue: for the autoscaler's answer) blocks (zero: none)
}

// wakeOn is what besides a Job's end may let the pass after p create.
func (p fillPass) wakeOn() scheduler.WakeOn {
	return scheduler.WakeOn{Nodes: p.nodes, Binds: p.binds, Ends: p.ends}
}

// filler runs passes for fillFor. pass runs one whole pass (refill 0 is the first; woke says what started a
// refill); wait returns once something happened after it that may let the next pass create (a Job of this scheduler
// ended: scheduler.Follow.Wait). poll, when set, bounds each wait: the next pass then runs although nothing happened
// (a queue with source.cancelQuery: a cancel is noticed only by a pass; source.poll).
//
// With cover (source.notify or source.poll) the run covers its whole fillFor: a pass that leaves nothing to wait
// for (the backlog is empty, maxPerTick bound it, it is blocked) is followed by idle, which returns when a Job
// ends (as wait does, but holding no Lease), and the run ends only when its time has passed (with a poll, after a
// last pass at that time), a pass failed, or it is told to stop. wake, when set, delivers the listener's wakes (listen.Listener.Wake): one ends any wait, and
// what arrives during a pass is one more pass.
type filler struct {
	fillFor time.Duration
	poll    func() time.Duration
	now     func() time.Time
	pass    func(ctx context.Context, refill int, woke string) fillPass
	wait    func(ctx context.Context, on scheduler.WakeOn) (string, error)

	cover bool
	idle  func(ctx context.Context, on scheduler.WakeOn) (string, error)
	wake  <-chan string
	// minWake is the least time from one pass's start to the next that a wake starts: however fast notifications
	// come, passes run at most once every minWake.
	minWake time.Duration
}

// minWakeGap is tick's minWake: a notification's pass starts within it, and a flood of notifications costs at most
// four passes a second (each takes the Lease and reads once).
const minWakeGap = 250 * time.Millisecond

// What woke a refill: the field woke of its pass done line. The listener adds listen.WokeNotify and
// listen.WokeListener.
const (
	wokeJob       = "jobEnd"         // one of its Jobs ended
	wokeNode      = "nodeReady"      // a node turned usable
	wokeBound     = "podBound"       // one of its pods was bound, which the fit awaited (scheduler.WakeOn.Binds)
	wokePodEnd    = "podEnd"         // one of its pods left its node, before its Job is marked finished (WakeOn.Ends)
	wokePoll      = "poll"           // source.poll, or the poll for cancels
	wokeRate      = "rateWindow"     // the limits.rate window allows the next create
	wokeWaitDue   = "autoscalerWord" // a pod's wait (the plan's WaitDue) is over
	wokeWatchLost = "watchLost"      // a watch was lost or came back after failing: the next pass observes afresh
)

// cancelPoll is the filler's poll while a queue has source.cancelQuery (jobsched help cancel): a cancel takes
// effect within it and a pass, at the cost of a pass that often while the loop waits.
const cancelPoll = 5 * time.Second

var (
	errFillOver   = errors.New("--fill-for has passed")
	errPoll       = errors.New("the poll is due")
	errWindowOpen = errors.New("the rate window opens")
	errWaitDue    = errors.New("a pod's wait is due")
)

// wokeBy is a wait's end by the listener, with what woke it.
type wokeBy struct{ why string }

func (w wokeBy) Error() string { return "woken: " + w.why }

// waitFor is the wait after pass p: for a Job to end when room bound it, and when a limits.rate bound it, at most
// until its window allows the next create (without room to wait for, just that).
func (f filler) waitFor(ctx context.Context, p fillPass) (string, error) {
	if p.next.IsZero() {
		return f.wait(ctx, p.wakeOn())
	}
	wctx, cancel := context.WithTimeoutCause(ctx, p.next.Sub(f.now()), errWindowOpen)
	defer cancel()
	if !p.room {
		<-wctx.Done()
		return "", context.Cause(wctx)
	}
	return f.wait(wctx, p.wakeOn())
}

// run returns the error of the last pass: the invocation did what its passes did. It never starts a pass after
// fillFor (with a poll, the last starts at its end), so with each pass bounded by --timeout it ends by fillFor +
// --timeout (and the last pass's reports).
func (f filler) run(ctx context.Context) error {
	log := zerolog.Ctx(ctx)
	end := f.now().Add(f.fillFor)
	woke := ""
	for refill := 0; ; refill++ {
		f.drainWake() // what was notified so far, this pass reads
		started := f.now()
		p := f.pass(ctx, refill, woke)
		reason := f.stop(ctx, p, end)
		if reason == "" {
			woke, reason = f.waitNext(ctx, p, end, refill)
		}
		if reason == "" && (woke == listen.WokeNotify || woke == listen.WokeListener) {
			if reason = f.holdOff(ctx, started); reason == "" && !f.now().Before(end) {
				reason = endTime
			}
		}
		if reason != "" {
			log.Info().Str("reason", reason).Int("passes", refill+1).Msg("fill ended")
			return p.err
		}
	}
}

// holdOff waits until minWake has passed since started (a pass's start), and says why no pass follows ("" when one
// does).
func (f filler) holdOff(ctx context.Context, started time.Time) string {
	d := started.Add(f.minWake).Sub(f.now())
	if d <= 0 {
		return ""
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return endTerminated
	case <-t.C:
		return ""
	}
}

// drainWake takes a pending wake: the pass about to start covers it.
func (f filler) drainWake() {
	select {
	case <-f.wake:
	default:
	}
}

// waitNext waits after pass p for what starts the next pass, and says what it was, or why none follows.
func (f filler) waitNext(ctx context.Context, p fillPass, end time.Time, refill int) (woke, reason string) {
	log := zerolog.Ctx(ctx)
	busy := f.busy(p)
	if busy {
		ev := log.Info().Int("refill", refill).Str("limit", p.limit)
		if !p.next.IsZero() {
			ev = ev.Time("nextCreate", p.next)
		}
		ev.Msg("waiting for a Job to finish")
	} else {
		log.Debug().Int("refill", refill).Msg("waiting for a notification, the poll or a Job's end")
	}
	left, why := end.Sub(f.now()), errFillOver
	last := false // the wait ends at the window's end with the poll's pass
	if poll := f.pollNow(); poll > 0 && poll < left {
		left, why = poll, errPoll
	} else if poll > 0 && f.cover {
		// The window's end is the last poll: a row inserted since the one before is read by this run, not the next.
		why, last = errPoll, true
	}
	if due := p.waitDue.Sub(f.now()); !p.waitDue.IsZero() && due < left {
		left, why = due, errWaitDue
	}
	wctx, cancel := context.WithTimeoutCause(ctx, left, why)
	defer cancel()
	if f.wake != nil {
		var cancelWake context.CancelCauseFunc
		wctx, cancelWake = context.WithCancelCause(wctx)
		woken := make(chan struct{})
		go func() {
			defer close(woken)
			select {
			case w := <-f.wake:
				cancelWake(wokeBy{w})
			case <-wctx.Done():
			}
		}()
		defer func() { cancelWake(nil); <-woken }()
	}
	waitFrom := f.now()
	var name string
	var err error
	if busy {
		name, err = f.waitFor(wctx, p)
	} else {
		name, err = f.idle(wctx, p.wakeOn())
	}
	var w wokeBy
	switch {
	case ctx.Err() != nil:
		return "", endTerminated
	case errors.As(err, &w):
		woke = w.why
	case errors.Is(err, errFillOver):
		return "", endTime
	case errors.Is(err, errPoll):
		woke = wokePoll
	case errors.Is(err, errWaitDue):
		woke = wokeWaitDue
	case errors.Is(err, errWindowOpen):
		woke = wokeRate
	case errors.Is(err, scheduler.ErrLost):
		log.Debug().Err(err).Msg("the next pass observes afresh")
		woke = wokeWatchLost
	case err != nil:
		return "", endCannotWait + err.Error()
	case strings.HasPrefix(name, "node/"):
		woke = wokeNode
	case strings.HasPrefix(name, "pod/"):
		woke = wokeBound
	case strings.HasPrefix(name, "left/"):
		woke = wokePodEnd
	default:
		woke = wokeJob
	}
	log.Debug().Str("woke", woke).Str("by", name).Dur("waited", f.now().Sub(waitFrom)).Msg("the next pass")
	if !f.now().Before(end) && !(last && woke == wokePoll) {
		return "", endTime
	}
	return woke, ""
}

// busy says the run waits after p for what p was bound by (room, a rate window), as a run without cover does;
// else (cover only) it idles.
func (f filler) busy(p fillPass) bool {
	return p.err == nil && p.blocked == "" && p.rowsWait && (p.room || !p.next.IsZero())
}

// pollNow is the poll of the next wait (0: none).
func (f filler) pollNow() time.Duration {
	if f.poll == nil {
		return 0
	}
	return f.poll()
}

// stop says why no pass follows p ("" when the next one waits). With cover only the time, a failed pass and a
// signal end the run.
func (f filler) stop(ctx context.Context, p fillPass, end time.Time) string {
	switch {
	case p.err != nil:
		return endFailed
	case ctx.Err() != nil:
		return endTerminated
	case f.cover && !f.now().Before(end):
		return endTime
	case f.cover:
		return ""
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
