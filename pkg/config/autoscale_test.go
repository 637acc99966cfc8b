package config

import (
	"slices"
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

// TestAutoscalerEvents: limits.autoscalerEvents names whose Events speak for the autoscaler, defaulting to the
// names Karpenter and the cluster-autoscaler write; an empty or malformed name, or the key in another mode, is an
// error that names it.
func TestAutoscalerEvents(t *testing.T) {
	for _, tc := range []struct {
		name, limits string
		want         []string
	}{
		{"default", "limits:\n  capacity: autoscale\n", []string{"karpenter", "cluster-autoscaler"}},
		{"renamed", "limits:\n  capacity: autoscale\n  autoscalerEvents: [karpenter-team-a]\n", []string{"karpenter-team-a"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := Load(write(t, map[string]string{"jobsched.yaml": minimal + tc.limits}), "")
			if err != nil {
				t.Fatal(err)
			}
			if got := cfg.AutoscalerEvents(); !slices.Equal(got, tc.want) {
				t.Errorf("AutoscalerEvents() = %q, want %q", got, tc.want)
			}
		})
	}
	for _, tc := range []struct {
		name, limits string
		want         []string
	}{
		{"another mode", "limits:\n  autoscalerEvents: [karpenter]\n", []string{"limits.autoscalerEvents: is read only with limits.capacity: autoscale (it is nodes)"}},
		{"empty and malformed names", "limits:\n  capacity: autoscale\n  autoscalerEvents: ['', 'a b']\n",
			[]string{`limits.autoscalerEvents[0]: "" is not a component name, e.g. karpenter`,
				`limits.autoscalerEvents[1]: "a b" is not a component name, e.g. karpenter`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			loadFails(t, minimal+tc.limits, "", tc.want)
		})
	}
}
