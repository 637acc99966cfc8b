package testkit

import (
	"context"
	"time"
)

// Pause waits d, or until ctx ends (then it returns ctx's error). It is for a scenario's schedule only: how long an
// outage lasts, when a fault strikes, the pace at which work arrives. A test that waits for something waits for that
// thing (a watch event, a channel, a row's state), never for a time.
func Pause(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
