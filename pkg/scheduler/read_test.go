package scheduler

import (
	"context"
	"errors"
	"math"
	"testing"
	"time"

	"k8s.io/utils/ptr"

	"github.com/jobsched/jobsched/pkg/config"
	"github.com/jobsched/jobsched/pkg/render"
	"github.com/jobsched/jobsched/pkg/rows"
)

// TestReadWithHugeLimits: limits at the top of int (beyond what Validate accepts: the arithmetic must not depend on
// it) give a pass that reads its two rows and ends; need + budget − skipped once overflowed into a negative request
// that the read asked again forever.
func TestReadWithHugeLimits(t *testing.T) {
	cfg := testConfig(t, func(c *config.Config) {
		c.Limits.MaxActive, c.Limits.MaxPerTick = ptr.To(math.MaxInt), ptr.To(math.MaxInt)
	})
	s := &Scheduler{Config: cfg, Source: &source{Rows: rowsFor("a", "b")}, Renderer: render.New(cfg, nil),
		Now: func() time.Time { return now }, Timeout: time.Minute}
	res, err := s.Run(context.Background(), DryRun)
	if err != nil {
		t.Fatal(err)
	}
	if got := len(res.Plan.Creates); got != 2 || res.Plan.Slots != math.MaxInt {
		t.Errorf("%d creates in %d slots, want 2 in %d", got, res.Plan.Slots, math.MaxInt)
	}
}

// TestReadChecksItsContext: a read whose context has ended asks for no more rows after its first request, even from
// a source that does not look at the context (a --rows file), however many of them it skipped: the pass's deadline
// and SIGTERM end it.
func TestReadChecksItsContext(t *testing.T) {
	cfg := testConfig(t, nil)
	bad := []rows.Row{{Key: "bad", Columns: []rows.Column{{Name: "v", Value: "\xff"}}}}
	src := &source{Rows: append(bad, rowsFor("a", "b")...)}
	s := &Scheduler{Config: cfg, Now: func() time.Time { return now }}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	a, err := s.read(ctx, &Plan{Slots: 1}, Queue{Source: src, Renderer: render.New(cfg, nil)})
	if !errors.Is(err, context.Canceled) || len(a.Creates) != 0 || len(src.Calls) != 1 {
		t.Errorf("read = %d creates, %d reads, %v; want none after the first, and context.Canceled", len(a.Creates), len(src.Calls), err)
	}
}
