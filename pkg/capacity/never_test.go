package capacity

import (
	"testing"

	"github.com/jobsched/jobsched/pkg/config"
)

// TestNever pins when a Job could never fit, however much room frees: its pod exceeds the allocatable of every
// node it may use (not merely what is free now), or a quota's hard limit; and when it could.
func TestNever(t *testing.T) {
	gpuNode := func(n *Node) {
		n.Taints = append(n.Taints, gpuTaint)
		n.Allocatable = rl("cpu", "16", "memory", "64Gi", "pods", "110")
	}
	tests := []struct {
		name  string
		snap  *Snapshot
		claim Claim
		want  string
	}{
		{"fits an empty node though the node is full now", nodes(node("n1", func(n *Node) { n.Requested, n.Pods = req("cpu", "4"), 1 })),
			Claim{Template: job(cpus("3"))}, ""},
		{"at the allocatable exactly", nodes(node("n1")), Claim{Template: job(cpus("4"))}, ""},
		{"more cpu than any node", nodes(node("n1"), node("n2", func(n *Node) { n.Allocatable = rl("cpu", "6", "memory", "8Gi", "pods", "110") })),
			Claim{Template: job(cpus("7"))},
			"it asks for cpu=7 memory=256Mi, more than the allocatable of any of the 2 node(s) it may run on (the largest, n2: cpu=6 memory=8Gi)"},
		{"a larger node it may not use does not count", nodes(node("n1"), node("gpu", gpuNode)),
			Claim{Template: job(cpus("8"))},
			"it asks for cpu=8 memory=256Mi, more than the allocatable of any of the 1 node(s) it may run on (the largest, n1: cpu=4 memory=8Gi)"},
		{"quota: within the hard limit though used up now",
			withQuotas(&Snapshot{Mode: config.CapacityQuota}, quota("compute", rl("requests.cpu", "4"), rl("requests.cpu", "4"))),
			Claim{Template: job(cpus("4"))}, ""},
		{"quota: more than its hard limit",
			withQuotas(&Snapshot{Mode: config.CapacityQuota}, quota("compute", rl("requests.cpu", "4"), rl("requests.cpu", "0"))),
			Claim{Template: job(cpus("4500m"))}, "it asks for cpu=4500m memory=256Mi, more than ResourceQuota compute allows in all (requests.cpu: 4)"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := NewPlacer(tc.snap, []Claim{tc.claim})
			if got := p.Never(0); got != tc.want {
				t.Errorf("Never = %q, want %q", got, tc.want)
			}
		})
	}
	if got := NewPlacer(nil, []Claim{{Template: job(cpus("100"))}}).Never(0); got != "" {
		t.Errorf("capacity off: Never = %q, want none", got)
	}
}

// TestPlacerMixedSizes places Jobs of several shapes of one template in a given order on one 4-CPU node: each takes
// its own size, so 1, 1 and 2 CPU fill it exactly, and a 3-CPU one after two of 1 does not fit.
func TestPlacerMixedSizes(t *testing.T) {
	claims := []Claim{{Template: job(cpus("1"))}, {Template: job(cpus("2"))}, {Template: job(cpus("3"))}}
	for _, tc := range []struct{ seq, want string }{
		{"AABA", "TTTF"}, // 1+1+2 = 4: full
		{"AACA", "TTFT"}, // 1+1, then 3 does not fit, a 1 still does
		{"CAA", "TTF"},   // 3+1 = 4
		{"BBA", "TTF"},
	} {
		if got := places(NewPlacer(nodes(node("n1")), claims), tc.seq); got != tc.want {
			t.Errorf("%s: %s, want %s", tc.seq, got, tc.want)
		}
	}
}
