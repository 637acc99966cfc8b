package config

import (
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/jobsched/jobsched/pkg/rate"
)

// Rate is limits.rate (the install's, a queue's, or limits.perGroup.rate: each group's): at most Creates creates in
// any window of length Per (a sliding window, `jobsched help rate`).
type Rate struct {
	Creates int             `json:"creates"`
	Per     metav1.Duration `json:"per"`
}

// The range of limits.rate.per: from a second (shorter is what maxPerTick and the API server's own limits are for)
// to a day (the window's history is kept on the Lease for that long).
const (
	MinRatePer = time.Second
	MaxRatePer = 24 * time.Hour
)

// Limit is the rate as pkg/rate counts it (the zero Limit for nil).
func (r *Rate) Limit() rate.Limit {
	if r == nil {
		return rate.Limit{}
	}
	return rate.Limit{Creates: r.Creates, Per: r.Per.Duration}
}

// HasRate says some limits.rate is set (the install's, a queue's or a group's): passes then keep the record on the
// Lease.
func (c *Config) HasRate() bool {
	if c.Limits.Rate != nil {
		return true
	}
	for _, q := range c.AllQueues() {
		if q.Limits.Rate != nil || q.Limits.PerGroup != nil && q.Limits.PerGroup.Rate != nil {
			return true
		}
	}
	return false
}

// PassMax is the most rows of one group a pass may read: perGroup.maxActive, and with a perGroup.rate at most its
// creates (a group no window knows yet still gets no more than that in one pass).
func (g *PerGroup) PassMax() int {
	if g.Rate != nil {
		return min(g.MaxActive, g.Rate.Creates)
	}
	return g.MaxActive
}

// validateRate checks one limits.rate at key.
func validateRate(bad func(key, format string, args ...any), key string, r *Rate) {
	if r == nil {
		return
	}
	switch {
	case r.Creates == 0: // not written, or written 0: either way a number is required
		bad(key+".creates", "required: at least 1 (to stop creating, set limits.maxPerTick: 0)")
	case r.Creates < 1:
		bad(key+".creates", "must be at least 1, not %d (to stop creating, set limits.maxPerTick: 0)", r.Creates)
	case r.Creates > MaxCount:
		bad(key+".creates", "must be at most %d, not %d", MaxCount, r.Creates)
	}
	switch d := r.Per.Duration; {
	case d == 0:
		bad(key+".per", "required: the window's length, e.g. 1m")
	case d < MinRatePer:
		bad(key+".per", "%s is shorter than %s", rate.ShortDuration(d), rate.ShortDuration(MinRatePer))
	case d > MaxRatePer:
		bad(key+".per", "%s is longer than %s", rate.ShortDuration(d), rate.ShortDuration(MaxRatePer))
	}
}

// validateRates checks every limits.rate, and that the install's and the queues' windows fit in their half of the
// Lease's record at their largest (rate.MaxWindowBytes: at most min(creates, 1001) times each).
func (c *Config) validateRates() []error {
	var errs []error
	validateRate(badAt(&errs, at{}), "limits.rate", c.Limits.Rate)
	if !c.explicitQueues() {
		return errs
	}
	size, over := 0, false
	if r := c.Limits.Rate; r != nil && len(errs) == 0 {
		size = rate.MaxWindowBytes(r.Limit()) + len(rate.ScopeInstall)
	}
	for i, q := range c.Queues {
		bad := badAt(&errs, c.queueAt(i))
		before := len(errs)
		validateRate(bad, "limits.rate", q.Limits.Rate)
		if g := q.Limits.PerGroup; g != nil {
			validateRate(bad, "limits.perGroup.rate", g.Rate)
		}
		if r := q.Limits.Rate; r != nil && len(errs) == before {
			size += rate.MaxWindowBytes(r.Limit()) + len(rate.QueueScope(q.Name))
			if size > rate.MaxRecordBytes/2 && !over {
				over = true // said once, at the first queue past it
				bad("limits.rate", "the windows of the install's and the queues' limits.rate up to this queue could take %d bytes "+
					"of the Lease's record, more than the %d they have (a window holds at most min(creates, 1001) times): lower creates",
					size, rate.MaxRecordBytes/2)
			}
		}
	}
	return errs
}
