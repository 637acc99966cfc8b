package autoscale

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/jobsched/jobsched/pkg/autoscaler"
	"github.com/jobsched/jobsched/pkg/capacity"
)

// withAutoscale is s with what the autoscaler said (source, pools) and limits.maxPending.
func withAutoscale(s *capacity.Snapshot, source string, maxPending int, pools ...autoscaler.Pool) *capacity.Snapshot {
	s.Autoscale, s.MaxPending = &autoscaler.State{Source: source, Pools: pools}, maxPending
	return s
}

// karpenter is a NodePool of limits and used (nil: no limit).
func karpenter(name string, limits, used corev1.ResourceList, mods ...func(*autoscaler.Pool)) autoscaler.Pool {
	p := autoscaler.Pool{Kind: autoscaler.KindNodePool, Name: name, Limits: limits, Used: used}
	for _, m := range mods {
		m(&p)
	}
	return p
}

func group(name string, maxSize, ready int) autoscaler.Pool {
	return autoscaler.Pool{Kind: autoscaler.KindNodeGroup, Name: name, Group: &autoscaler.Group{MaxSize: maxSize, Ready: ready, Target: ready, Registered: ready}}
}

// TestAutoscaleRoom: room = the nodes' fit + what the autoscaler can still add for the template − the pods already
// waiting for new nodes, at most limits.maxPending of ours waiting; each case pins one rule. The template's pod is
// 1 cpu and 1Gi; a node is 4 cpu.
func TestAutoscaleRoom(t *testing.T) {
	tpl := job(spec())
	none := nodes
	tainted := func(p *autoscaler.Pool) {
		p.Taints = []corev1.Taint{{Key: "gpu", Effect: corev1.TaintEffectNoSchedule}}
	}
	inGroup := func(n *capacity.Node) { n.Labels["cloud.google.com/gke-nodepool"] = "pool-batch" }
	shaped := func(p *autoscaler.Pool) { // Karpenter's kwok c-4x: 4 cpu, 3900m allocatable: 3 pods of 1 cpu
		p.Shape = &autoscaler.Shape{Capacity: rl("cpu", "4", "memory", "16Gi", "pods", "110"),
			Allocatable: rl("cpu", "3900m", "memory", "15Gi", "pods", "110"), From: "batch-old"}
	}
	launchingShaped := func(p *autoscaler.Pool) {
		shaped(p)
		p.Launching = map[string]autoscaler.Launch{"batch-x": {ProviderID: "kwok://batch-x", Allocatable: p.Shape.Allocatable}}
	}
	tests := []struct {
		name    string
		snap    *capacity.Snapshot
		claim   capacity.Claim
		fit     int    // Report(0).Fit before any Place
		binding string // in Report(0).Binding
		places  string // Place(0) until it fails, T per success
	}{
		{"from zero nodes, the node shape unknown: one Job learns it", withAutoscale(none(), autoscaler.Karpenter, 20, karpenter("batch", rl("cpu", "12"), rl("cpu", "0"))),
			capacity.Claim{Template: tpl}, 1, "1 on NodePool batch: its node shape is not known yet (no NodeClaim shows one): 1 pod(s) to learn it, of 12 left", "TF"},
		{"the node shape known: whole nodes within the limits", withAutoscale(none(), autoscaler.Karpenter, 20, karpenter("batch", rl("cpu", "12"), rl("cpu", "0"), shaped)),
			capacity.Claim{Template: tpl}, 9, "karpenter: 9 more on new nodes (9 on NodePool batch: 0 launching, 3 new node(s) within its limits of cpu=3900m memory=15Gi pods=110 (as NodeClaim batch-old))", strings.Repeat("T", 9) + "F"},
		{"a node that reports less capacity than allocatable is charged its allocatable", withAutoscale(none(), autoscaler.Karpenter, 50, karpenter("batch", rl("cpu", "12"), nil, func(p *autoscaler.Pool) {
			p.Shape = &autoscaler.Shape{Capacity: rl("cpu", "2", "memory", "64Mi", "pods", "1"), Allocatable: rl("cpu", "3900m", "memory", "15Gi", "pods", "110"), From: "kwok"}
		})), capacity.Claim{Template: tpl}, 9, "3 new node(s)", strings.Repeat("T", 9) + "F"},
		{"the pool's used resources count", withAutoscale(none(), autoscaler.Karpenter, 20, karpenter("batch", rl("cpu", "12", "memory", "100Gi"), rl("cpu", "8", "memory", "60Gi"), shaped)),
			capacity.Claim{Template: tpl}, 3, "3 on NodePool batch", "TTTF"},
		{"limits.maxPending binds", withAutoscale(none(), autoscaler.Karpenter, 5, karpenter("batch", rl("cpu", "12"), nil, shaped)),
			capacity.Claim{Template: tpl}, 5, "limits.maxPending: 0 of 5 pod(s) wait for new nodes", "TTTTTF"},
		{"our waiting pods count against maxPending", withAutoscale(none(), autoscaler.Karpenter, 7, karpenter("batch", rl("cpu", "12"), nil, shaped)),
			capacity.Claim{Template: tpl, Unbound: 4}, 3, "limits.maxPending: 4 of 7", "TTTF"},
		// Pods the pass decided wait for a new node (Unschedulable, in the autoscaler's grace or nominated) though they
		// fit on n1 by resources (a taken hostPort, an affinity): each counts against maxPending all the same.
		{"our pods waiting for a reason no node fixes count against maxPending", withAutoscale(nodes(node("n1")), autoscaler.Karpenter, 5, karpenter("batch", rl("cpu", "12"), nil, shaped)),
			capacity.Claim{Template: tpl, Unbound: 2, Waiting: 2}, 2 + 3, "limits.maxPending: 2 of 5", "TTTTTF"},
		{"while they reach maxPending, none fits on the nodes either", withAutoscale(nodes(node("n1")), autoscaler.Karpenter, 5, karpenter("batch", rl("cpu", "12"), nil, shaped)),
			capacity.Claim{Template: tpl, Unbound: 5, Waiting: 5}, 0, "limits.maxPending: 5 of 5 pod(s) wait for new nodes); its pods wait though they fit on the nodes", "F"},
		{"our waiting pods take the pool's room", withAutoscale(none(), autoscaler.Karpenter, 100, karpenter("batch", rl("cpu", "12"), nil, shaped)),
			capacity.Claim{Template: tpl, Unbound: 3, Podless: 2}, 4, "4 on NodePool batch", "TTTTF"},
		{"others' pods that fit on no node take the pool's room", withPending(withAutoscale(none(), autoscaler.Karpenter, 100, karpenter("batch", rl("cpu", "12"), nil, shaped)),
			pending("other", "big", rl("cpu", "2"))), capacity.Claim{Template: tpl}, 7, "7 on NodePool batch", strings.Repeat("T", 7) + "F"},
		{"a NodePool's pods limit counts one per pod", withAutoscale(none(), autoscaler.Karpenter, 20, karpenter("batch", rl("cpu", "12", "pods", "1"), rl("pods", "1"))),
			capacity.Claim{Template: tpl}, 0, "limits.pods: 0 left", "F"},
		{"our waiting pods use up the probe", withAutoscale(none(), autoscaler.Karpenter, 20, karpenter("batch", rl("cpu", "12"), nil)),
			capacity.Claim{Template: tpl, Unbound: 1}, 0, "0 pod(s) to learn it", "F"},
		{"a NodePool at its limit adds nothing: the nodes' fit alone", withAutoscale(nodes(sized("n1", "4", "2")), autoscaler.Karpenter, 20, karpenter("batch", rl("cpu", "12"), rl("cpu", "12"), shaped)),
			capacity.Claim{Template: tpl}, 2, "NodePool batch at its limits: no more node of capacity cpu=4 memory=16Gi pods=110 fits (as NodeClaim batch-old)", "TTF"},
		{"a node of less than the template adds nothing", withAutoscale(none(), autoscaler.Karpenter, 20, karpenter("batch", rl("cpu", "12"), nil, shaped)),
			capacity.Claim{Template: job(cpus("5"))}, 0, "NodePool batch 0 launching, 3 new node(s) within its limits", "F"},
		// As Karpenter (v1.13.0, KWOK) showed it in TestAutoscale: a NodeClaim launched for one pod of 1900m (capacity
		// its pod's requests, cpu=1900m pods=1) while the NodePool's status.resources still said 0; Karpenter counts
		// the claim against the limits at once (12 − 1.9 = 10.1 cpu: 2 more nodes of 4), so the launching node's room
		// (its pod and one more) and 2 new nodes of 2 pods: 5, not 7.
		{"NodeClaims the NodePool's status.resources does not count yet count", withAutoscale(none(), autoscaler.Karpenter, 20, karpenter("batch", rl("cpu", "12"), rl("cpu", "0", "nodes", "0"), func(p *autoscaler.Pool) {
			p.Shape = &autoscaler.Shape{Capacity: rl("cpu", "1900m", "memory", "64Mi", "pods", "1"), Allocatable: rl("cpu", "3900m", "memory", "8182Mi", "pods", "64"), From: "batch-2nlbh"}
			p.Launching = map[string]autoscaler.Launch{"batch-2nlbh": {ProviderID: "kwok://batch-2nlbh", Allocatable: p.Shape.Allocatable}}
			p.Claimed = rl("cpu", "1900m", "memory", "64Mi", "pods", "1", "nodes", "1")
		})), capacity.Claim{Template: job(cpus("1900m")), Unbound: 1}, 5, "5 on NodePool batch: 1 launching, 2 new node(s)", strings.Repeat("T", 5) + "F"},
		{"launching NodeClaims are room coming", withAutoscale(none(), autoscaler.Karpenter, 20, karpenter("batch", rl("cpu", "12"), rl("cpu", "12"), launchingShaped)),
			capacity.Claim{Template: tpl}, 3, "3 on NodePool batch", "TTTF"},
		// Karpenter removes a new node's karpenter.sh/unregistered taint first and says Registered on its NodeClaim
		// after: in between the node is usable (a fill's wait wakes then) and the NodeClaim still launching. Its room
		// is the node's, once.
		{"a launching NodeClaim whose node is up counts once, as the node", withAutoscale(nodes(node("n1", func(n *capacity.Node) { n.ProviderID = "kwok://batch-x" })),
			autoscaler.Karpenter, 20, karpenter("batch", rl("cpu", "4"), rl("cpu", "4"), launchingShaped)),
			capacity.Claim{Template: tpl}, 4, "cpu: 4 more fit on n1", "TTTTF"},
		// Karpenter consolidates n1: its NodeClaim is being deleted and counts against the limits no more (so a new
		// node of the shape fits within them), while the nodes' watch still shows n1 Ready without the disrupted
		// taint. Its room is counted once, on the new node: 3, not 4 on n1 and 3 more.
		{"a node whose NodeClaim is being deleted is no room", withAutoscale(nodes(node("n1", func(n *capacity.Node) { n.ProviderID = "kwok://batch-x" })),
			autoscaler.Karpenter, 20, karpenter("batch", rl("cpu", "4"), rl("cpu", "0"), shaped, func(p *autoscaler.Pool) { p.Disrupted = []string{"kwok://batch-x"} })),
			capacity.Claim{Template: tpl}, 3, "no Ready, schedulable node matches the template; karpenter: 3 more on new nodes", "TTTF"},
		{"at its limit of nodes", withAutoscale(none(), autoscaler.Karpenter, 20, karpenter("batch", rl("nodes", "2"), rl("nodes", "2"))),
			capacity.Claim{Template: tpl}, 0, "NodePool batch at its limit of 2 node(s)", "F"},
		{"a limit of nodes and the node shape", withAutoscale(none(), autoscaler.Karpenter, 20, karpenter("batch", rl("nodes", "3"), rl("nodes", "1"), shaped)),
			capacity.Claim{Template: tpl}, 6, "6 on NodePool batch", strings.Repeat("T", 6) + "F"},
		{"a NodePool without limits: maxPending bounds", withAutoscale(none(), autoscaler.Karpenter, 3, karpenter("batch", nil, nil)),
			capacity.Claim{Template: tpl}, 3, "limits.maxPending", "TTTF"},
		{"a NodePool the template cannot use", withAutoscale(none(), autoscaler.Karpenter, 20, karpenter("gpu", rl("cpu", "12"), nil, tainted, shaped)),
			capacity.Claim{Template: tpl}, 0, "no NodePool takes the template", "F"},
		{"pools add up", withAutoscale(none(), autoscaler.Karpenter, 20, karpenter("a", rl("cpu", "4"), nil, shaped), karpenter("b", rl("cpu", "8"), nil, shaped)),
			capacity.Claim{Template: tpl}, 9, "6 on NodePool b", strings.Repeat("T", 9) + "F"},
		{"a node group: maxSize − ready new nodes of its node's shape", withAutoscale(nodes(node("n1", inGroup)), autoscaler.ClusterAutoscaler, 20, group("pool-batch", 3, 1)),
			capacity.Claim{Template: tpl}, 4 + 8, "cluster-autoscaler: 8 more on new nodes (8 on node group pool-batch: maxSize 3: 2 new node(s) of cpu=4 memory=8Gi pods=110)", strings.Repeat("T", 12) + "F"},
		{"a node group at its maxSize", withAutoscale(nodes(node("n1", inGroup)), autoscaler.ClusterAutoscaler, 20, group("pool-batch", 1, 1)),
			capacity.Claim{Template: tpl}, 4, "at its maxSize of 1 node(s)", "TTTTF"},
		{"a node group with no node is unknown, not guessed", withAutoscale(nodes(node("n1")), autoscaler.ClusterAutoscaler, 20, group("pool-batch", 5, 0)),
			capacity.Claim{Template: tpl}, 4, "node shape from: unknown", "TTTTF"},
		{"quota still caps the room", withQuotas(withAutoscale(none(), autoscaler.Karpenter, 20, karpenter("batch", rl("cpu", "12"), nil, shaped)),
			quota("q", rl("pods", "3"), rl("pods", "0"))), capacity.Claim{Template: tpl}, 3, "quota q/pods: 3 more", "TTTF"},
		{"no autoscaler found: as nodes", withAutoscale(nodes(node("n1")), "", 20), capacity.Claim{Template: tpl}, 4, "cpu: 4 more fit on n1", "TTTTF"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			room := growingPlacer(tc.snap, []capacity.Claim{tc.claim})
			r := room.Report(0)
			if r.Fit != tc.fit || !strings.Contains(r.Binding, tc.binding) {
				t.Errorf("Report = %d (%s), want %d (…%s…)", r.Fit, r.Binding, tc.fit, tc.binding)
			}
			var got strings.Builder
			for range len(tc.places) {
				if room.Place(0) {
					got.WriteByte('T')
				} else {
					got.WriteByte('F')
					break
				}
			}
			if got.String() != tc.places {
				t.Errorf("places %s, want %s", got.String(), tc.places)
			}
			if after := room.Report(0); after.Fit != 0 && after.Fit != -1 {
				t.Errorf("after the places, Report = %d (%s), want 0", after.Fit, after.Binding)
			}
		})
	}
}

// TestAutoscaleReport: the report names every pool with its limit, what it holds and what it adds for the template
// (status and dry-run show it), and what bound the room.
func TestAutoscaleReport(t *testing.T) {
	snap := withAutoscale(nodes(), autoscaler.Karpenter, 10,
		karpenter("batch", rl("cpu", "12"), rl("cpu", "4"), func(p *autoscaler.Pool) {
			p.Shape = &autoscaler.Shape{Capacity: rl("cpu", "4", "memory", "16Gi", "pods", "110"), Allocatable: rl("cpu", "3900m", "memory", "15Gi", "pods", "110"), From: "batch-a"}
			p.Launching = map[string]autoscaler.Launch{"batch-x": {ProviderID: "kwok://batch-x", Allocatable: rl("cpu", "1900m", "memory", "15Gi", "pods", "110")}}
		}),
		karpenter("gpu", nil, nil, func(p *autoscaler.Pool) {
			p.Taints = []corev1.Taint{{Key: "gpu", Effect: corev1.TaintEffectNoSchedule}}
		}))
	r := growingPlacer(snap, []capacity.Claim{{Template: job(spec()), Unbound: 1}}).Report(0)
	a := r.Autoscale
	if a == nil {
		t.Fatal("no autoscale report")
	}
	if a.Source != autoscaler.Karpenter || a.Adds != 6 || a.Waiting != 1 || len(a.Pools) != 2 {
		t.Fatalf("report %+v", a)
	}
	if got, want := a.Pools[0].Words(), "limit cpu=12, used cpu=4, 1 NodeClaim(s) launching; adds 6 more pod(s) (1 launching, 2 new node(s) within its limits of cpu=3900m memory=15Gi pods=110 (as NodeClaim batch-a))"; got != want {
		t.Errorf("batch: %q, want %q", got, want)
	}
	if got, want := a.Pools[1].Words(), "no limit, used nothing; the template cannot use it: taint gpu:NoSchedule not tolerated"; got != want {
		t.Errorf("gpu: %q, want %q", got, want)
	}
}

// TestGrowOneSizeAtATime pins that pods of one size at a time wait for new nodes: a Job whose pod differs in size
// from ours that wait for one (when the pass began, or placed there by it) is not placed on new nodes, though it
// still is on the nodes that exist. A is 1 cpu, B 2 cpu; the NodePool adds 3 nodes of 3900m.
func TestGrowOneSizeAtATime(t *testing.T) {
	shaped := func(p *autoscaler.Pool) {
		p.Shape = &autoscaler.Shape{Capacity: rl("cpu", "4", "memory", "16Gi", "pods", "110"),
			Allocatable: rl("cpu", "3900m", "memory", "15Gi", "pods", "110"), From: "batch-old"}
	}
	grown := func(s *capacity.Snapshot) *capacity.Snapshot {
		return withAutoscale(s, autoscaler.Karpenter, 100, karpenter("batch", rl("cpu", "12"), nil, shaped))
	}
	a, b := job(cpus("1")), job(cpus("2"))
	halfFull := node("n1", func(n *capacity.Node) { n.Requested, n.Pods = req("cpu", "2"), 1 }) // 2 of its 4 cpu free
	for _, tc := range []struct {
		name   string
		snap   *capacity.Snapshot
		claims []capacity.Claim
		seq    string
		want   string
	}{
		{"the first size placed on new nodes keeps them", grown(nodes()), []capacity.Claim{{Template: a}, {Template: b}}, "ABAB", "TFTF"},
		{"either size may be first", grown(nodes()), []capacity.Claim{{Template: a}, {Template: b}}, "BAB", "TFT"},
		{"ours that wait hold them for their size", grown(nodes()), []capacity.Claim{{Template: a, Unbound: 1, Waiting: 1}, {Template: b}}, "BA", "FT"},
		{"ours of two sizes waiting: no size more", grown(nodes()), []capacity.Claim{{Template: a, Unbound: 1, Waiting: 1}, {Template: b, Unbound: 1, Waiting: 1}}, "AB", "FF"},
		{"the nodes that exist take any size", grown(nodes(halfFull)), []capacity.Claim{{Template: a}, {Template: b}}, "BABA", "TTFT"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := places(growingPlacer(tc.snap, tc.claims), tc.seq); got != tc.want {
				t.Errorf("%s: %s, want %s", tc.seq, got, tc.want)
			}
		})
	}
}

// TestNeverGrowing pins Never with the autoscaler's growth (capacity autoscale): a Job that fits no node it may use
// could still fit on a new node a pool may add, unless that pool's node shape, or its limits in all, cannot hold
// its pod; a pool whose node shape is not known yet may add one.
func TestNeverGrowing(t *testing.T) {
	shaped := func(p *autoscaler.Pool) { // Karpenter's kwok c-4x: 3900m allocatable
		p.Shape = &autoscaler.Shape{Capacity: rl("cpu", "4", "memory", "16Gi", "pods", "110"),
			Allocatable: rl("cpu", "3900m", "memory", "15Gi", "pods", "110"), From: "batch-old"}
	}
	big := func(p *autoscaler.Pool) {
		p.Shape = &autoscaler.Shape{Capacity: rl("cpu", "16", "memory", "64Gi", "pods", "110"),
			Allocatable: rl("cpu", "16", "memory", "64Gi", "pods", "110"), From: "big-old"}
	}
	tainted := func(p *autoscaler.Pool) {
		p.Taints = []corev1.Taint{{Key: "gpu", Effect: corev1.TaintEffectNoSchedule}}
	}
	grown := func(s *capacity.Snapshot, pools ...autoscaler.Pool) *capacity.Snapshot {
		return withAutoscale(s, autoscaler.Karpenter, 100, pools...)
	}
	const nor = ", nor could any NodePool add one it fits on (its node shape, or its limits in all)"
	tests := []struct {
		name string
		snap *capacity.Snapshot
		cpu  string
		want string
	}{
		{"larger than the nodes, a new node holds it", grown(nodes(node("n1")), karpenter("batch", rl("cpu", "40"), nil, big)), "6", ""},
		{"larger than the nodes and the NodePool's node shape", grown(nodes(node("n1")), karpenter("batch", rl("cpu", "40"), nil, shaped)), "6",
			"it asks for cpu=6 memory=256Mi, more than the allocatable of any of the 1 node(s) it may run on (the largest, n1: cpu=4 memory=8Gi)" + nor},
		{"the node shape not known yet: within the limits, it may", grown(nodes(node("n1")), karpenter("batch", rl("cpu", "12"), nil)), "6", ""},
		{"the node shape not known yet: over the limits in all", grown(nodes(node("n1")), karpenter("batch", rl("cpu", "12"), nil)), "13",
			"it asks for cpu=13 memory=256Mi, more than the allocatable of any of the 1 node(s) it may run on (the largest, n1: cpu=4 memory=8Gi)" + nor},
		{"no node yet, a new node holds it", grown(nodes(), karpenter("batch", rl("cpu", "12"), nil, shaped)), "3", ""},
		{"no node yet, and no new node would hold it", grown(nodes(), karpenter("batch", rl("cpu", "12"), nil, shaped)), "5",
			"it asks for cpu=5 memory=256Mi, and no node it may run on exists" + nor},
		{"a pool the pod may not use adds nothing for it", grown(nodes(), karpenter("gpu", rl("cpu", "40"), nil, big, tainted)), "5",
			"it asks for cpu=5 memory=256Mi, and no node it may run on exists" + nor},
		{"fits a node now full", grown(nodes(node("n1", func(n *capacity.Node) { n.Requested, n.Pods = req("cpu", "4"), 1 })), karpenter("batch", rl("cpu", "12"), rl("cpu", "12"), shaped)), "3", ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := growingPlacer(tc.snap, []capacity.Claim{{Template: job(cpus(tc.cpu))}})
			if got := p.Never(0); got != tc.want {
				t.Errorf("Never = %q, want %q", got, tc.want)
			}
		})
	}
}

// TestHugeLimitAddsRoom: a NodePool's limit beyond any cluster (1e30 cpu) counts as a bound no cluster reaches, not
// as 0 (Quantity.MilliValue's overflow, capacity's units): the pool's limit then binds nothing, and maxPending binds.
func TestHugeLimitAddsRoom(t *testing.T) {
	shaped := func(p *autoscaler.Pool) {
		p.Shape = &autoscaler.Shape{Capacity: rl("cpu", "4", "memory", "16Gi", "pods", "110"),
			Allocatable: rl("cpu", "3900m", "memory", "15Gi", "pods", "110"), From: "batch-old"}
	}
	for name, mods := range map[string][]func(*autoscaler.Pool){"node shape known": {shaped}, "node shape unknown": nil} {
		snap := withAutoscale(nodes(), autoscaler.Karpenter, 5, karpenter("batch", rl("cpu", "1e30"), rl("cpu", "0"), mods...))
		if r := growingPlacer(snap, []capacity.Claim{{Template: job(spec())}}).Report(0); r.Fit == 0 {
			t.Errorf("%s: a NodePool of limits.cpu 1e30 adds nothing: %s", name, r.Binding)
		}
	}
}
