package scheduler

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
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
	cfg := testConfig(t, func(c *config.Config) { c.Limits.MaxPerTick = ptr.To(1) })
	bad := []rows.Row{{Key: "bad", Columns: []rows.Column{{Name: "v", Value: "\xff"}}}}
	src := &source{Rows: append(bad, rowsFor("a", "b")...)}
	s := &Scheduler{Config: cfg, Source: src, Renderer: render.New(cfg, nil), Now: func() time.Time { return now }}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	res, err := s.Run(ctx, DryRun) // offline: only the source is asked
	if !errors.Is(err, context.Canceled) || len(res.Plan.Creates) != 0 || len(src.Calls) != 1 {
		t.Errorf("pass = %d creates, %d reads, %v; want none after the first, and context.Canceled", len(res.Plan.Creates), len(src.Calls), err)
	}
}

// asks is a source that records the Limit of each request.
type asks struct {
	source
	limits []int
}

func (a *asks) Select(ctx context.Context, sel rows.Selection) ([]rows.Row, error) {
	a.limits = append(a.limits, sel.Limit)
	return a.source.Select(ctx, sel)
}

// TestReadProperties checks the read's arithmetic, through an offline dry-run pass, over random slots (from none to the top of int), skip budgets and
// heads of good and bad rows: it ends; it admits exactly what one scan of the rows in order would (a create per
// good row until the slots are filled, a skip per bad row until the budget is spent); every request asks for at
// least one row and does not overflow; and it asks again only after a round that skipped.
func TestReadProperties(t *testing.T) {
	rnd := rand.New(rand.NewPCG(29, 1))
	slotChoices := []func() int{
		func() int { return rnd.IntN(5) },
		func() int { return rnd.IntN(100) },
		func() int { return config.MaxCount },
		func() int { return math.MaxInt - rnd.IntN(10) },
	}
	for i := range 2000 {
		slots, budget := slotChoices[rnd.IntN(len(slotChoices))](), 1+rnd.IntN(20)
		var all []rows.Row
		var good []bool
		for k := range rnd.IntN(60) {
			key := fmt.Sprintf("r%d", k)
			ok := rnd.IntN(3) > 0
			v := "x"
			if !ok {
				v = "\xff" // not UTF-8: no Job
			}
			all = append(all, rows.Row{Key: key, Columns: []rows.Column{{Name: "v", Value: v}}})
			good = append(good, ok)
		}
		// The model: one scan of the rows in order.
		wantCreates, wantSkips := 0, 0
		for _, ok := range good {
			if wantCreates == slots || wantSkips == budget {
				break
			}
			if ok {
				wantCreates++
			} else {
				wantSkips++
			}
		}
		src := &asks{source: source{Rows: all}}
		cfg := testConfig(t, func(c *config.Config) { c.Limits.MaxActive, c.Limits.MaxPerTick = ptr.To(math.MaxInt), ptr.To(slots) })
		s := &Scheduler{Config: cfg, Source: src, Renderer: render.New(cfg, nil), Now: func() time.Time { return now }, maxSkipped: budget}
		res, err := s.Run(context.Background(), DryRun) // offline: the read is the pass's only I/O
		name := fmt.Sprintf("case %d: %d slots, budget %d, %d rows", i, slots, budget, len(all))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		a := res.Plan
		if len(a.Creates) != wantCreates || len(a.Skipped) != wantSkips || a.Selected != wantCreates+wantSkips {
			t.Errorf("%s: %d creates, %d skips, %d selected; want %d, %d, %d", name, len(a.Creates), len(a.Skipped), a.Selected,
				wantCreates, wantSkips, wantCreates+wantSkips)
		}
		for _, limit := range src.limits {
			if limit < 1 {
				t.Errorf("%s: asked for %d rows (requests %v)", name, limit, src.limits)
			}
		}
		if len(src.limits) > 1+len(a.Skipped) {
			t.Errorf("%s: %d requests for %d skips, want at most one more request than skips", name, len(src.limits), len(a.Skipped))
		}
	}
}
