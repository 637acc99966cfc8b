package cmd

import (
	"context"
	"errors"

	"github.com/rs/zerolog"

	"github.com/jobsched/jobsched/pkg/config"
)

// countsNodes says the capacity mode counts the room of the nodes, so that a node turning Ready (an autoscaler's
// new one, one uncordoned) may give room as a Job's end does: tick --fill-for wakes on either.
func countsNodes(c config.Capacity) bool {
	return c == config.CapacityNodes || c == config.CapacityAutoscale
}

var errWoken = errors.New("the other wait woke the next pass")

// jobOrNode returns once job or node returns, with what it returned, and ends the other. A node wait that fails
// while ctx runs (the Role grants no watch on nodes, say) is logged and left: the Job's end still wakes the pass.
func jobOrNode(ctx context.Context, job, node func(context.Context) (string, error)) (string, error) {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(errWoken)
	type result struct {
		name string
		err  error
		node bool
	}
	done := make(chan result, 2) // neither send blocks: the one not read ends on cancel
	go func() { name, err := job(ctx); done <- result{name, err, false} }()
	go func() { name, err := node(ctx); done <- result{"node/" + name, err, true} }()
	for {
		r := <-done
		if r.node && r.err != nil && ctx.Err() == nil {
			zerolog.Ctx(ctx).Info().Err(r.err).Msg("cannot wait for a node to turn Ready: waiting for a Job to finish only")
			continue
		}
		return r.name, r.err
	}
}
