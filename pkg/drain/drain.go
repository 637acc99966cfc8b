// Package drain estimates how long a backlog takes at the rate Jobs have been succeeding.
package drain

import (
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/util/duration"
)

// Window is how far back status looks at this scheduler's succeeded Jobs to tell how fast the backlog drains.
const Window = time.Hour

// Run is when one of this scheduler's Jobs started (status.startTime) and succeeded (its Complete condition).
type Run struct{ Start, End time.Time }

// Estimate is how long the backlog will take at the rate this scheduler's Jobs have been succeeding: the
// succeeded Jobs status still sees whose Complete condition is at most Window old, over the time from the
// earliest start among them (at most Window ago) to now.
type Estimate struct {
	Succeeded     int     `json:"succeeded"`     // Jobs that succeeded in the window
	WindowSeconds float64 `json:"windowSeconds"` // the window's length; 0 when no Job succeeded in it
	PerHour       float64 `json:"perHour"`       // Succeeded over the window, per hour
	// Seconds is the backlog over the rate (a lower bound when the backlog is capped); absent without a rate.
	Seconds *float64 `json:"seconds,omitempty"`
	Message string   `json:"message"`
}

// Of estimates how long backlog rows (more when capped) take at the rate runs show.
func Of(backlog int, capped bool, now time.Time, runs []Run) Estimate {
	rows := fmt.Sprintf("%d rows", backlog)
	if capped {
		rows = fmt.Sprintf("%d+ rows", backlog)
	}
	var d Estimate
	from := now
	for _, r := range runs {
		if r.End.After(now) || now.Sub(r.End) > Window {
			continue
		}
		d.Succeeded++
		from = minTime(from, r.Start)
	}
	from = maxTime(from, now.Add(-Window))
	if d.Succeeded == 0 || !now.After(from) {
		d.Succeeded = 0
		if backlog == 0 {
			d.Message = "backlog empty"
			return d
		}
		d.Message = fmt.Sprintf("backlog %s; no Job of this scheduler succeeded in the last hour (that status still sees) to estimate from", rows)
		return d
	}
	window := now.Sub(from)
	d.WindowSeconds = window.Seconds()
	d.PerHour = float64(d.Succeeded) / window.Hours()
	secs := float64(backlog) / float64(d.Succeeded) * window.Seconds()
	d.Seconds = &secs
	if backlog == 0 {
		d.Message = "backlog empty"
		return d
	}
	rate := "the last hour's rate"
	if window < Window-time.Minute {
		rate = "the rate of the last " + duration.HumanDuration(window)
	}
	about := "about"
	if capped {
		about = "at least about"
	}
	d.Message = fmt.Sprintf("backlog %s, %s %s at %s (%d Jobs succeeded, %.0f an hour)", rows, about,
		duration.HumanDuration(time.Duration(secs*float64(time.Second))), rate, d.Succeeded, d.PerHour)
	return d
}

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

func maxTime(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}
