package drain

import (
	"testing"
	"time"
)

// TestEstimateDrain: the rate is the succeeded Jobs of the last hour over the time since the earliest of them
// started (at most an hour); the backlog over that rate is the estimate.
func TestEstimateDrain(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	ago := func(d time.Duration) time.Time { return now.Add(-d) }
	// n Jobs that ran one after the other, each for dur, the last ending at now.
	serial := func(n int, dur time.Duration) []Run {
		var out []Run
		for i := range n {
			end := ago(time.Duration(n-1-i) * dur)
			out = append(out, Run{Start: end.Add(-dur), End: end})
		}
		return out
	}
	secs := func(f float64) *float64 { return &f }
	tests := []struct {
		name    string
		backlog int
		capped  bool
		runs    []Run
		want    Estimate
	}{
		{name: "the last hour's rate", backlog: 120, runs: serial(24, 150*time.Second), // 24 Jobs over the hour
			want: Estimate{Succeeded: 24, WindowSeconds: 3600, PerHour: 24, Seconds: secs(5 * 3600),
				Message: "backlog 120 rows, about 5h at the last hour's rate (24 Jobs succeeded, 24 an hour)"}},
		{name: "older Jobs and a start before the hour do not count beyond it", backlog: 35,
			runs: []Run{{Start: ago(3 * time.Hour), End: ago(2 * time.Hour)}, {Start: ago(90 * time.Minute), End: ago(30 * time.Minute)}, {Start: ago(20 * time.Minute), End: ago(time.Minute)}},
			want: Estimate{Succeeded: 2, WindowSeconds: 3600, PerHour: 2, Seconds: secs(35 * 1800),
				Message: "backlog 35 rows, about 17h at the last hour's rate (2 Jobs succeeded, 2 an hour)"}},
		{name: "a shorter window: the rate since the earliest start", backlog: 12, runs: serial(4, 20*time.Second), // 4 in 80 s
			want: Estimate{Succeeded: 4, WindowSeconds: 80, PerHour: 180, Seconds: secs(240),
				Message: "backlog 12 rows, about 4m at the rate of the last 80s (4 Jobs succeeded, 180 an hour)"}},
		{name: "capped: a lower bound", backlog: 10000, capped: true, runs: serial(10, 6*time.Minute),
			want: Estimate{Succeeded: 10, WindowSeconds: 3600, PerHour: 10, Seconds: secs(1000 * 3600),
				Message: "backlog 10000+ rows, at least about 41d at the last hour's rate (10 Jobs succeeded, 10 an hour)"}},
		{name: "a Job that ended exactly an hour ago still counts", backlog: 10, runs: []Run{{Start: ago(2 * time.Hour), End: ago(time.Hour)}},
			want: Estimate{Succeeded: 1, WindowSeconds: 3600, PerHour: 1, Seconds: secs(10 * 3600),
				Message: "backlog 10 rows, about 10h at the last hour's rate (1 Jobs succeeded, 1 an hour)"}},
		{name: "a window of 59 min is still the last hour's rate", backlog: 1, runs: serial(1, 59*time.Minute),
			want: Estimate{Succeeded: 1, WindowSeconds: 59 * 60, PerHour: 1 / (59 * time.Minute).Hours(), Seconds: secs(59 * 60),
				Message: "backlog 1 rows, about 59m at the last hour's rate (1 Jobs succeeded, 1 an hour)"}},
		{name: "no Job succeeded in the hour", backlog: 7, runs: []Run{{Start: ago(3 * time.Hour), End: ago(2 * time.Hour)}},
			want: Estimate{Message: "backlog 7 rows; no Job of this scheduler succeeded in the last hour (that status still sees) to estimate from"}},
		{name: "empty backlog, with a rate", backlog: 0, runs: serial(2, time.Minute),
			want: Estimate{Succeeded: 2, WindowSeconds: 120, PerHour: 60, Seconds: secs(0), Message: "backlog empty"}},
		{name: "empty backlog, no rate", backlog: 0, want: Estimate{Message: "backlog empty"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Of(tt.backlog, tt.capped, now, tt.runs)
			if got.Succeeded != tt.want.Succeeded || got.WindowSeconds != tt.want.WindowSeconds || got.PerHour != tt.want.PerHour ||
				got.Message != tt.want.Message || (got.Seconds == nil) != (tt.want.Seconds == nil) ||
				(got.Seconds != nil && *got.Seconds != *tt.want.Seconds) {
				gs := "nil"
				if got.Seconds != nil {
					gs = time.Duration(*got.Seconds * float64(time.Second)).String()
				}
				t.Errorf("got %+v (seconds %s)\nwant %+v", got, gs, tt.want)
			}
		})
	}
}
