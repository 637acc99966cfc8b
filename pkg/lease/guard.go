package lease

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/rs/zerolog"
	"k8s.io/utils/clock"

	"github.com/jobsched/jobsched/pkg/kube"
)

// What a pass says of the Lease in its `pass done` line.
const (
	StateHeld      = "held"      // held from before the observation to the end of the creates
	StateLost      = "lost"      // it could not be renewed: the pass stopped creating
	StateForbidden = "forbidden" // the Role lacks its verbs: the pass ran unserialised
	StateError     = "error"     // it could not be read or written: the pass created nothing
	// otherwise "held by <holder>": another holder kept it for the whole wait; the pass created nothing
)

// Guard is a creating pass's hold on its scheduler's Lease (the scheduler's Guard): Take before the observation
// that decides the creates, the creates under the context it returns, the release at the end of the pass.
type Guard struct {
	Client               kube.CoordinationV1
	Namespace, Scheduler string
	Holder               string
	Duration             time.Duration // 0: DefaultDuration
	// Confirm is a read the pass's Role grants (cmd: a LIST of its Jobs). A Forbidden on the Lease is taken as the
	// Role's answer only once Confirm has succeeded and the Lease is still refused after it: an API server that has
	// just started refuses everything until its RBAC cache is filled, and such a pass must not create unserialised.
	// nil: every Forbidden is the Role's.
	Confirm func(ctx context.Context) error
	Clock   clock.WithTicker // nil: the real one (see Config.Clock)
	// Annotation, when set, is the key of the record the Lease carries for the pass (record.go).
	Annotation string
	// Keep keeps the Lease held from pass to pass (the passes of one tick --fill-for): Take's release leaves it
	// held, a Take while it is still held (not lost) returns that hold without a call, and Give gives it up. No
	// other holder can take it in between, so each pass is still the only one that creates. Not with Annotation:
	// the record is read as the Lease is taken and written as it is given up, once per pass.
	Keep bool

	mu     sync.Mutex
	state  string
	waited time.Duration
	held   *Held
	// transitions is the Lease's leaderTransitions as this Guard's last hold wrote it (nil before), and alone says
	// the hold before the last one was this Guard's too, with no other holder in between (see Alone).
	transitions *int
	alone       bool
}

// MaxWait bounds how long a pass waits for a live holder: one Lease duration (duration; 0: DefaultDuration) (a killed holder's Lease is taken over by
// then) and a second, and never more than half of what is left of the pass, so that a pass behind a long one still
// does its deletes and ends with its report.
func MaxWait(ctx context.Context, duration time.Duration) time.Duration {
	if duration <= 0 {
		duration = DefaultDuration
	}
	w := duration + time.Second
	if d, ok := ctx.Deadline(); ok {
		w = min(w, time.Until(d)/2)
	}
	return w
}

// Take takes the Lease, waiting at most MaxWait. Held by another holder for the whole wait it returns a
// *HeldError, and any other failure that error: the pass creates nothing. Without the Role's verbs it says so once
// and returns ctx: the pass creates unserialised, as before the Lease.
func (g *Guard) Take(ctx context.Context) (context.Context, func(), error) {
	log := zerolog.Ctx(ctx)
	keep := g.keeps()
	if h := g.kept(); h != nil {
		return h.Context(), func() {}, nil
	}
	cfg := Config{Client: g.Client, Namespace: g.Namespace, Name: Name(g.Scheduler), Holder: g.Holder, Duration: g.Duration,
		Clock: g.Clock, Annotation: g.Annotation}
	if keep {
		cfg.Parent = context.WithoutCancel(ctx) // the hold outlives the pass; Give ends it
	}
	cfg.defaults()
	start := cfg.Clock.Now()
	cfg.Wait = MaxWait(ctx, g.Duration)
	h, err := Acquire(ctx, cfg)
	if errors.Is(err, ErrForbidden) && g.Confirm != nil {
		if cerr := g.Confirm(ctx); cerr != nil {
			err = fmt.Errorf("%v; and the check that the Role is loaded failed: %w", err, cerr) // no longer ErrForbidden
		} else {
			cfg.Wait = MaxWait(ctx, g.Duration)
			h, err = Acquire(ctx, cfg) // a Forbidden now is the Role's
		}
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	g.waited = cfg.Clock.Since(start)
	if err != nil {
		g.held = nil // a hold of an earlier Take, lost or given: what Report says is this Take's outcome
	}
	var he *HeldError
	switch {
	case err == nil:
		g.state, g.held = StateHeld, h
		// Each new holder adds one transition (a holder taking back the Lease it released included): one more than
		// this Guard last wrote, or as many while it still held it, means nobody else held it in between.
		t := h.transitions()
		g.alone = g.transitions != nil && (t == *g.transitions || t == *g.transitions+1)
		g.transitions = &t
		context.AfterFunc(h.Context(), func() {
			if cause := context.Cause(h.Context()); errors.Is(cause, ErrLost) {
				log.Warn().Err(cause).Msg("lost the Lease: this pass creates nothing more")
			}
		})
		if keep {
			return h.Context(), func() {}, nil
		}
		return h.Context(), func() { g.release(ctx, h) }, nil
	case errors.As(err, &he):
		g.state = "held by " + he.Holder
		return nil, nil, err
	case errors.Is(err, ErrForbidden):
		g.state = StateForbidden
		log.Warn().Err(err).Msg("caps not guaranteed under racing passes: the Role does not grant get, create and update on coordination.k8s.io leases")
		return ctx, func() {}, nil
	default:
		g.state = StateError
		return nil, nil, err
	}
}

// kept is the hold Keep kept from the last Take while it is still this Guard's (nil: none, or lost), which a Take
// returns as it is: held, with no wait, by this Guard alone since the Take that took it.
func (g *Guard) kept() *Held {
	g.mu.Lock()
	defer g.mu.Unlock()
	h := g.held
	if !g.keeps() || h == nil || g.state != StateHeld || h.Context().Err() != nil {
		return nil
	}
	g.waited, g.alone = 0, true
	return h
}

// keeps says Take keeps its holds (Keep, without the rate record).
func (g *Guard) keeps() bool { return g.Keep && g.Annotation == "" }

// Give gives up the hold Keep kept, if any (the end of a fill run, or a wait long enough that another pass should
// get its turn): released, or left to expire when ctx has ended (a signal: what was in flight lands first).
func (g *Guard) Give(ctx context.Context) {
	g.mu.Lock()
	h := g.held
	keeping := g.keeps() && g.state == StateHeld
	if keeping {
		g.state = "" // the next Take takes it again
	}
	g.mu.Unlock()
	if keeping && h != nil {
		g.release(ctx, h)
	}
}

// Alone says no other holder took the Lease between this Guard's last hold and the one before it, so nobody else
// created or deleted under it in between (what this process followed of the cluster is all that changed by a
// holder); also true without a Lease (the Role lacks its verbs: passes are not serialised). False after the first
// Take, a refusal, or a Lease that another holder took.
func (g *Guard) Alone() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.state == StateForbidden || (g.state == StateHeld && g.alone)
}

// release gives the Lease up, so the next pass takes it at once. A pass cut short (its deadline, a signal) may
// still have creates in flight: its Lease is left to expire instead, and so is a lost one.
func (g *Guard) release(ctx context.Context, h *Held) {
	if h.Lost() != nil || ctx.Err() != nil {
		h.Stop()
		return
	}
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if err := h.Release(rctx); err != nil {
		zerolog.Ctx(ctx).Warn().Err(err).Msg("the Lease was not released: the next pass takes it when it expires")
	}
}

// Report is what the pass done line says of the Lease: its state ("" before Take) and how long Take waited.
func (g *Guard) Report() (state string, waited time.Duration) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.held != nil && g.held.Lost() != nil {
		return StateLost, g.waited
	}
	return g.state, g.waited
}
