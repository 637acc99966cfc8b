package config

import (
	"testing"
)

// TestMaxPending: limits.maxPending is a count of limits.capacity: autoscale, defaulting to maxPerTick; set in
// another mode it is an error that names the mode.
func TestMaxPending(t *testing.T) {
	for _, tc := range []struct {
		name, limits string
		want         int
	}{
		{"default: maxPerTick", "limits:\n  capacity: autoscale\n  maxPerTick: 7\n", 7},
		{"set", "limits:\n  capacity: autoscale\n  maxPending: 25\n", 25},
		{"zero: nothing waits for new nodes", "limits:\n  capacity: autoscale\n  maxPending: 0\n", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := Load(write(t, map[string]string{"jobsched.yaml": minimal + tc.limits}), "")
			if err != nil {
				t.Fatal(err)
			}
			if got := cfg.MaxPending(); got != tc.want {
				t.Errorf("MaxPending() = %d, want %d", got, tc.want)
			}
		})
	}
	for _, tc := range []struct {
		name, limits string
		want         []string
	}{
		{"another mode", "limits:\n  maxPending: 3\n", []string{"limits.maxPending: is read only with limits.capacity: autoscale (it is nodes)"}},
		{"negative", "limits:\n  capacity: autoscale\n  maxPending: -1\n", []string{"limits.maxPending: must not be negative, not -1"}},
		{"too large", "limits:\n  capacity: autoscale\n  maxPending: 1000001\n", []string{"limits.maxPending: must be at most 1000000, not 1000001"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			loadFails(t, minimal+tc.limits, "", tc.want)
		})
	}
}
