package report

import (
	"testing"
	"time"
)

// TestWakeString: status's Wake line says the channel and how many runs listen (since when), or that none does or why
// it cannot tell, and the poll.
func TestWakeString(t *testing.T) {
	now := time.Date(2026, 12, 5, 10, 0, 0, 0, time.UTC)
	since := now.Add(-90*time.Second - 300*time.Millisecond)
	tests := []struct {
		name string
		w    Wake
		want string
	}{
		{"one run listens", Wake{Channel: "jobs", Listening: 1, Since: &since},
			"channel jobs: 1 run(s) listening, since 1m30s ago"},
		{"none, with a poll", Wake{Channel: "jobs", Poll: "30s"},
			"channel jobs: no run listening (a notification wakes the next run's passes); poll every 30s"},
		{"cannot tell", Wake{Channel: "jobs", ListenError: "connecting to PostgreSQL: refused"},
			"channel jobs: cannot tell who listens: connecting to PostgreSQL: refused"},
		{"a poll alone", Wake{Poll: "2s"}, "poll every 2s"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.w.String(now); got != tt.want {
				t.Errorf("%q, want %q", got, tt.want)
			}
		})
	}
}
