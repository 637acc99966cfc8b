package capacity

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/jobsched/jobsched/pkg/config"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	nodev1 "k8s.io/api/node/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/utils/ptr"
)

// cpus is a pod spec of one container requesting cpu (and 256Mi), changed by mods.
func cpus(cpu string, mods ...func(*corev1.PodSpec)) *corev1.PodSpec {
	return spec(append([]func(*corev1.PodSpec){func(s *corev1.PodSpec) {
		s.Containers[0].Resources.Requests = rl("cpu", cpu, "memory", "256Mi")
	}}, mods...)...)
}

// places calls Place for each claim named in seq ('A' is claim 0, 'B' claim 1, …) and says T or F for each.
func places(p *Placer, seq string) string {
	var out strings.Builder
	for _, c := range seq {
		if p.Place(int(c - 'A')) {
			out.WriteByte('T')
		} else {
			out.WriteByte('F')
		}
	}
	return out.String()
}

// sized is a node of cpu allocatable with free of it left, 1000Gi and 110 pods.
func sized(name, cpu, free string) Node {
	return node(name, func(n *Node) {
		n.Allocatable = rl("cpu", cpu, "memory", "1000Gi", "pods", "110")
		used := rl("cpu", cpu)[corev1.ResourceCPU]
		used.Sub(rl("cpu", free)[corev1.ResourceCPU])
		n.Requested = nil
		n.Requested.add(corev1.ResourceList{corev1.ResourceCPU: used})
	})
}

// TestPlacer places the Jobs of several templates one at a time and compares every claim's Report after them.
func TestPlacer(t *testing.T) {
	tolerates := tolerate(corev1.Toleration{Key: "dedicated", Operator: corev1.TolerationOpExists})
	high := func(s *corev1.PodSpec) { s.PriorityClassName = "high" }
	full := func(n *Node) { n.Requested, n.Pods = req("cpu", "4"), 1 }
	tests := []struct {
		name   string
		snap   *Snapshot
		claims []Claim
		seq    string // the claims placed, in order
		want   string // T where Place returned true
		report []Report
	}{
		{
			name: "2-CPU pods then 500m pods fill a 4-CPU node", snap: nodes(node("n1")),
			claims: []Claim{{Template: job(cpus("2"))}, {Template: job(cpus("500m"))}},
			seq:    "AAAB", want: "TTFF",
			report: []Report{
				{Fit: 0, Binding: "cpu: 0 more fit on n1", Demand: rl("cpu", "2", "memory", "256Mi"),
					Nodes: []NodeFit{{Name: "n1", Limit: "cpu", Free: fr("cpu", "0", "memory", "7680Mi", "pods", "108")}}},
				{Fit: 0, Binding: "cpu: 0 more fit on n1", Demand: rl("cpu", "500m", "memory", "256Mi"),
					Nodes: []NodeFit{{Name: "n1", Limit: "cpu", Free: fr("cpu", "0", "memory", "7680Mi", "pods", "108")}}},
			},
		},
		{
			name: "interleaved: a 500m pod fits where a 2-CPU one no longer does", snap: nodes(node("n1")),
			claims: []Claim{{Template: job(cpus("2"))}, {Template: job(cpus("500m"))}},
			seq:    "BABABABB", want: "TTTFTFTF",
			report: []Report{
				{Fit: 0, Binding: "cpu: 0 more fit on n1", Demand: rl("cpu", "2", "memory", "256Mi"),
					Nodes: []NodeFit{{Name: "n1", Limit: "cpu", Free: fr("cpu", "0", "memory", "6912Mi", "pods", "105")}}},
				{Fit: 0, Binding: "cpu: 0 more fit on n1", Demand: rl("cpu", "500m", "memory", "256Mi"),
					Nodes: []NodeFit{{Name: "n1", Limit: "cpu", Free: fr("cpu", "0", "memory", "6912Mi", "pods", "105")}}},
			},
		},
		{
			name: "our unbound pods of one template take room from the other", snap: nodes(node("n1")),
			claims: []Claim{{Template: job(cpus("2")), Unbound: 1}, {Template: job(cpus("500m")), Podless: 2}},
			seq:    "AB", want: "FT",
			report: []Report{
				{Fit: 0, Binding: "cpu: 0 more fit on n1, after 3 unbound", Demand: rl("cpu", "2", "memory", "256Mi"),
					Nodes: []NodeFit{{Name: "n1", Fits: 1, Limit: "cpu", Free: fr("cpu", "3500m", "memory", "7936Mi", "pods", "109")}}},
				{Fit: 1, Binding: "cpu: 1 more fit on n1, after 3 unbound", Demand: rl("cpu", "500m", "memory", "256Mi"),
					Nodes: []NodeFit{{Name: "n1", Fits: 7, Limit: "cpu", Free: fr("cpu", "3500m", "memory", "7936Mi", "pods", "109")}}},
			},
		},
		{
			name: "each template counted with its own RuntimeClass's overhead", snap: func() *Snapshot {
				s := nodes(node("n1"))
				s.RuntimeClasses = map[string]*nodev1.RuntimeClass{"kata": runtimeClass(rl("cpu", "250m"))}
				return s
			}(),
			claims: []Claim{{Template: job(cpus("1", func(s *corev1.PodSpec) { s.RuntimeClassName = ptr.To("kata") }))}, {Template: job(cpus("1"))}},
			seq:    "AAABA", want: "TTTFF",
			report: []Report{
				{Fit: 0, Binding: "cpu: 0 more fit on n1", Demand: rl("cpu", "1250m", "memory", "256Mi"),
					Nodes: []NodeFit{{Name: "n1", Limit: "cpu", Free: fr("cpu", "250m", "memory", "7424Mi", "pods", "107")}}},
				{Fit: 0, Binding: "cpu: 0 more fit on n1", Demand: rl("cpu", "1", "memory", "256Mi"),
					Nodes: []NodeFit{{Name: "n1", Limit: "cpu", Free: fr("cpu", "250m", "memory", "7424Mi", "pods", "107")}}},
			},
		},
		{
			name:   "someone else's unbound pod is counted where it costs all templates the most",
			snap:   withPending(nodes(node("n1"), node("n2", func(n *Node) { n.Requested = req("cpu", "500m") })), pending("other", "p", rl("cpu", "1500m"))),
			claims: []Claim{{Template: job(cpus("2"))}, {Template: job(cpus("500m"))}},
			report: []Report{
				{Fit: 2, Binding: "nodes: 2 more fit on 2 nodes (limited by cpu on 2)", Demand: rl("cpu", "2", "memory", "256Mi"),
					Nodes: []NodeFit{
						{Name: "n1", Fits: 1, Limit: "cpu", Free: fr("cpu", "2500m", "memory", "8Gi", "pods", "109")},
						{Name: "n2", Fits: 1, Limit: "cpu", Free: fr("cpu", "3500m", "memory", "8Gi", "pods", "110")},
					},
					Pending: []PendingFit{{Pod: "other/p", Node: "n1", Costs: 1}}},
				{Fit: 12, Binding: "nodes: 12 more fit on 2 nodes (limited by cpu on 2)", Demand: rl("cpu", "500m", "memory", "256Mi"),
					Nodes: []NodeFit{
						{Name: "n1", Fits: 5, Limit: "cpu", Free: fr("cpu", "2500m", "memory", "8Gi", "pods", "109")},
						{Name: "n2", Fits: 7, Limit: "cpu", Free: fr("cpu", "3500m", "memory", "8Gi", "pods", "110")},
					},
					Pending: []PendingFit{{Pod: "other/p", Node: "n1", Costs: 3}}},
			},
		},
		{
			name: "a Job of 2 pods is placed whole or not at all", snap: nodes(node("n1")),
			claims: []Claim{{Template: job(cpus("1500m"), func(j *batchv1.Job) { j.Spec.Parallelism = new(int32(2)) })}, {Template: job(cpus("1"))}},
			seq:    "BBABBB", want: "TTFTTF", // the A refused had room for one of its 2 pods
			report: []Report{
				{Fit: 0, Binding: "cpu: 0 more fit on n1 (0 Job(s) of 2 pods)", PodsPerJob: 2, Demand: rl("cpu", "1500m", "memory", "256Mi"),
					Nodes: []NodeFit{{Name: "n1", Limit: "cpu", Free: fr("cpu", "0", "memory", "7Gi", "pods", "106")}}},
				{Fit: 0, Binding: "cpu: 0 more fit on n1", Demand: rl("cpu", "1", "memory", "256Mi"),
					Nodes: []NodeFit{{Name: "n1", Limit: "cpu", Free: fr("cpu", "0", "memory", "7Gi", "pods", "106")}}},
			},
		},
		{
			name: "a pod that fits only on a tainted node it tolerates", snap: nodes(node("n1", full), node("n2", taint(gpuTaint))),
			claims: []Claim{{Template: job(cpus("1", tolerates))}, {Template: job(cpus("1"))}},
			seq:    "ABAAAA", want: "TFTTTF",
			report: []Report{
				{Fit: 0, Binding: "nodes: 0 more fit on 2 nodes (limited by cpu on 2)", Demand: rl("cpu", "1", "memory", "256Mi"),
					Nodes: []NodeFit{
						{Name: "n1", Limit: "cpu", Free: fr("cpu", "0", "memory", "8Gi", "pods", "109")},
						{Name: "n2", Limit: "cpu", Free: fr("cpu", "0", "memory", "7Gi", "pods", "106")},
					}},
				{Fit: 0, Binding: "cpu: 0 more fit on n1", Demand: rl("cpu", "1", "memory", "256Mi"),
					Nodes: []NodeFit{
						{Name: "n1", Limit: "cpu", Free: fr("cpu", "0", "memory", "8Gi", "pods", "109")},
						{Name: "n2", Excluded: "taint dedicated=gpu:NoSchedule not tolerated"},
					}},
			},
		},
		{
			name: "pods spread to the node with the most room left", snap: nodes(node("n1"), node("n2", func(n *Node) { n.Requested = req("cpu", "1") })),
			claims: []Claim{{Template: job(cpus("1"))}},
			seq:    "AA", want: "TT",
			report: []Report{
				{Fit: 5, Binding: "nodes: 5 more fit on 2 nodes (limited by cpu on 2)", Demand: rl("cpu", "1", "memory", "256Mi"),
					Nodes: []NodeFit{
						{Name: "n1", Fits: 3, Limit: "cpu", Free: fr("cpu", "3", "memory", "7936Mi", "pods", "109")},
						{Name: "n2", Fits: 2, Limit: "cpu", Free: fr("cpu", "2", "memory", "7936Mi", "pods", "109")},
					}},
			},
		},
		{
			name: "a template that asks for no cpu goes by the memory left", snap: nodes(node("n1", func(n *Node) { n.Requested = req("memory", "6Gi") }), node("n2", func(n *Node) { n.Requested = req("cpu", "3", "memory", "2Gi") })),
			claims: []Claim{{Template: job(spec(func(s *corev1.PodSpec) { s.Containers[0].Resources.Requests = rl("memory", "1Gi") }))}},
			seq:    "AA", want: "TT",
			report: []Report{
				{Fit: 6, Binding: "nodes: 6 more fit on 2 nodes (limited by memory on 2)", Demand: rl("memory", "1Gi"),
					Nodes: []NodeFit{
						{Name: "n1", Fits: 2, Limit: "memory", Free: fr("memory", "2Gi", "pods", "110")},
						{Name: "n2", Fits: 4, Limit: "memory", Free: fr("memory", "4Gi", "pods", "108")},
					}},
			},
		},
		{
			name: "a tie goes to the first node", snap: nodes(node("n1"), node("n2")),
			claims: []Claim{{Template: job(cpus("1"))}},
			seq:    "A", want: "T",
			report: []Report{
				{Fit: 7, Binding: "nodes: 7 more fit on 2 nodes (limited by cpu on 2)", Demand: rl("cpu", "1", "memory", "256Mi"),
					Nodes: []NodeFit{
						{Name: "n1", Fits: 3, Limit: "cpu", Free: fr("cpu", "3", "memory", "7936Mi", "pods", "109")},
						{Name: "n2", Fits: 4, Limit: "cpu", Free: fr("cpu", "4", "memory", "8Gi", "pods", "110")},
					}},
			},
		},
		{
			name: "the share of the node left counts, not the amount: to the big node", snap: nodes(sized("big", "100", "30"), sized("small", "2", "1500m")),
			claims: []Claim{{Template: job(cpus("1"))}},
			seq:    "A", want: "T",
			report: []Report{
				{Fit: 30, Binding: "nodes: 30 more fit on 2 nodes (limited by cpu on 2)", Demand: rl("cpu", "1", "memory", "256Mi"),
					Nodes: []NodeFit{
						{Name: "big", Fits: 29, Limit: "cpu", Free: fr("cpu", "29", "memory", "1023744Mi", "pods", "109")},
						{Name: "small", Fits: 1, Limit: "cpu", Free: fr("cpu", "1500m", "memory", "1000Gi", "pods", "110")},
					}},
			},
		},
		{
			name: "the share of the node left counts, not the amount: to the small node", snap: nodes(sized("big", "100", "20"), sized("small", "2", "1500m")),
			claims: []Claim{{Template: job(cpus("1"))}},
			seq:    "A", want: "T",
			report: []Report{
				{Fit: 20, Binding: "nodes: 20 more fit on 2 nodes (limited by cpu on 2)", Demand: rl("cpu", "1", "memory", "256Mi"),
					Nodes: []NodeFit{
						{Name: "big", Fits: 20, Limit: "cpu", Free: fr("cpu", "20", "memory", "1000Gi", "pods", "110")},
						{Name: "small", Limit: "cpu", Free: fr("cpu", "500m", "memory", "1023744Mi", "pods", "109")},
					}},
			},
		},
		{
			name: "nodes that offer no memory still take pods that request none", snap: nodes(node("n1", func(n *Node) { n.Allocatable = rl("cpu", "4", "pods", "110") })),
			claims: []Claim{{Template: job(&corev1.PodSpec{Containers: []corev1.Container{ctr(rl("cpu", "1"), nil)}})}},
			seq:    "A", want: "T",
			report: []Report{
				{Fit: 3, Binding: "cpu: 3 more fit on n1", Demand: rl("cpu", "1"),
					Nodes: []NodeFit{{Name: "n1", Fits: 3, Limit: "cpu", Free: fr("cpu", "3", "pods", "109")}}},
			},
		},
		{
			name: "a quota used beyond its hard limit stops only the templates it charges",
			snap: withQuotas(&Snapshot{Mode: config.CapacityQuota}, quota("gpu", rl("requests.nvidia.com/gpu", "1"), rl("requests.nvidia.com/gpu", "2"))),
			claims: []Claim{{Template: job(cpus("1", func(s *corev1.PodSpec) { s.Containers[0].Resources.Limits = rl("nvidia.com/gpu", "1") }))},
				{Template: job(cpus("1"))}},
			seq: "AB", want: "FT",
			report: []Report{
				{Fit: 0, Binding: "quota gpu/requests.nvidia.com/gpu: 0 more", Demand: rl("cpu", "1", "memory", "256Mi", "nvidia.com/gpu", "1"),
					Quota: []QuotaFit{{Name: "gpu", Resource: "requests.nvidia.com/gpu", Fits: 0}}},
				{Fit: -1, Binding: "no node or quota limit applies", Demand: rl("cpu", "1", "memory", "256Mi")},
			},
		},
		{
			name: "a quota shared by two templates, one also under a quota of its PriorityClass",
			snap: withQuotas(&Snapshot{Mode: config.CapacityQuota},
				quota("compute", rl("requests.cpu", "3", "pods", "10"), rl("pods", "1")),
				quota("high", rl("pods", "1"), nil, func(q *corev1.ResourceQuota) {
					q.Spec.ScopeSelector = &corev1.ScopeSelector{MatchExpressions: []corev1.ScopedResourceSelectorRequirement{
						{ScopeName: corev1.ResourceQuotaScopePriorityClass, Operator: corev1.ScopeSelectorOpIn, Values: []string{"high"}},
					}}
				})),
			claims: []Claim{{Template: job(cpus("1", high))}, {Template: job(cpus("500m")), Podless: 1}},
			seq:    "AABBBB", want: "TFTTTF",
			report: []Report{
				{Fit: 0, Binding: "quota compute/requests.cpu: 0 more", Demand: rl("cpu", "1", "memory", "256Mi"),
					Quota: []QuotaFit{{Name: "compute", Resource: "pods", Fits: 4}, {Name: "compute", Resource: "requests.cpu", Fits: 0},
						{Name: "high", Resource: "pods", Fits: 0}}},
				{Fit: 0, Binding: "quota compute/requests.cpu: 0 more", Demand: rl("cpu", "500m", "memory", "256Mi"),
					Quota: []QuotaFit{{Name: "compute", Resource: "pods", Fits: 4}, {Name: "compute", Resource: "requests.cpu", Fits: 0}}},
			},
		},
		{
			name: "count/jobs.batch counts Jobs of every template", snap: withQuotas(&Snapshot{Mode: config.CapacityQuota},
				quota("objects", rl("count/jobs.batch", "3"), nil)),
			claims: []Claim{{Template: job(cpus("1"), func(j *batchv1.Job) { j.Spec.Parallelism = new(int32(2)) })}, {Template: job(cpus("1")), Podless: 1}},
			seq:    "ABAB", want: "TTTF",
			report: []Report{
				{Fit: 0, Binding: "quota objects/count/jobs.batch: 0 more", PodsPerJob: 2, Demand: rl("cpu", "1", "memory", "256Mi"),
					Quota: []QuotaFit{{Name: "objects", Resource: "count/jobs.batch", Fits: 0}}},
				{Fit: 0, Binding: "quota objects/count/jobs.batch: 0 more", Demand: rl("cpu", "1", "memory", "256Mi"),
					Quota: []QuotaFit{{Name: "objects", Resource: "count/jobs.batch", Fits: 0}}},
			},
		},
		{
			name: "the next tick's room is kept across templates", snap: withNextPassPod(nodes(node("n1"))),
			claims: []Claim{{Template: job(cpus("2"))}, {Template: job(cpus("500m"))}},
			seq:    "ABBBBA", want: "TTTTFF",
			report: []Report{
				{Fit: 0, Binding: "cpu: 0 more fit on n1", Demand: rl("cpu", "2", "memory", "256Mi"),
					Nodes: []NodeFit{{Name: "n1", Limit: "cpu", Free: fr("cpu", "500m", "memory", "7Gi", "pods", "106")}},
					Tick:  "room kept for the next tick (cpu=50m memory=64Mi) on one of 1 node(s)"},
				{Fit: 0, Binding: "tick: 0 more pod(s) fit on 1 node(s) with room kept for the next tick", Demand: rl("cpu", "500m", "memory", "256Mi"),
					Nodes: []NodeFit{{Name: "n1", Fits: 1, Limit: "cpu", Free: fr("cpu", "500m", "memory", "7Gi", "pods", "106")}},
					Tick:  "room kept for the next tick (cpu=50m memory=64Mi) on one of 1 node(s)"},
			},
		},
		{
			name: "the next tick's room counts every pod of the Jobs placed", snap: withNextPassPod(nodes(node("n1"))),
			claims: []Claim{{Template: job(cpus("1"), func(j *batchv1.Job) { j.Spec.Parallelism = new(int32(2)) })}},
			seq:    "AA", want: "TF",
			report: []Report{
				{Fit: 0, Binding: "tick: 1 more pod(s) fit on 1 node(s) with room kept for the next tick (0 Job(s) of 2 pods)", PodsPerJob: 2,
					Demand: rl("cpu", "1", "memory", "256Mi"),
					Nodes:  []NodeFit{{Name: "n1", Fits: 2, Limit: "cpu", Free: fr("cpu", "2", "memory", "7680Mi", "pods", "108")}},
					Tick:   "room kept for the next tick (cpu=50m memory=64Mi) on one of 1 node(s)"},
			},
		},
		{
			name: "capacity off: every Job is placed", claims: []Claim{{Template: job(cpus("2"))}, {Template: job(cpus("500m"))}},
			seq: "ABAB", want: "TTTT",
			report: []Report{{Fit: -1, Binding: "capacity off"}, {Fit: -1, Binding: "capacity off"}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := NewPlacer(tt.snap, tt.claims)
			if got := places(p, tt.seq); got != tt.want {
				t.Errorf("Place(%s) = %s, want %s", tt.seq, got, tt.want)
			}
			for i, want := range tt.report {
				if got := p.Report(i); !equality.Semantic.DeepEqual(got, want) {
					t.Errorf("Report(%d) =\n%+v\nwant\n%+v", i, got, want)
				}
			}
		})
	}
}

// TestPlacerAnyInterleaving: 2-CPU and 500m pods on one 4-CPU node, placed in every order of 10 tries: a Place
// succeeds exactly when the pod fits in what is left, the node is never over-committed, Report says how many more
// fit after each, and once neither fits the node is full.
func TestPlacerAnyInterleaving(t *testing.T) {
	demand := []int{2000, 500} // millicores of claim A and B
	for seq := range 1 << 10 {
		p := NewPlacer(nodes(node("n1")), []Claim{{Template: job(cpus("2"))}, {Template: job(cpus("500m"))}})
		used := 0
		var order strings.Builder
		for bit := range 10 {
			c := seq >> bit & 1
			order.WriteByte(byte('A' + c))
			fits := used+demand[c] <= 4000
			if got := p.Place(c); got != fits {
				t.Fatalf("%s: Place(%c) = %v with %dm used, want %v", order.String(), 'A'+c, got, used, fits)
			}
			if fits {
				used += demand[c]
			}
			for i, d := range demand {
				if got, want := p.Report(i).Fit, (4000-used)/d; got != want {
					t.Fatalf("%s: Report(%c).Fit = %d with %dm used, want %d", order.String(), 'A'+i, got, used, want)
				}
			}
		}
		for p.Place(0) || p.Place(1) {
		}
		if free := p.Report(0).Nodes[0].Free.List()[corev1.ResourceCPU]; !free.IsZero() {
			t.Errorf("%s then both until neither fits: %s cpu left, want 0", order.String(), free.String())
		}
	}
}

// placesFit checks, for one template, that Place succeeds exactly Fit times (at most 1000: -1, no limit, is 1000)
// and that Report after each placement says one Job less.
func placesFit(t *testing.T, r Report, placer func() *Placer) {
	t.Helper()
	p := placer()
	n := 0
	for ; n < 1000 && p.Place(0); n++ {
		if got, want := p.Report(0).Fit, r.Fit-n-1; r.Fit >= 0 && got != want {
			t.Errorf("Report(0).Fit after %d placements = %d, want %d", n+1, got, want)
		}
	}
	if want := r.Fit; want < 0 && n != 1000 || want >= 0 && n != want {
		t.Errorf("Place succeeded %d times, want Fit() = %d (%s)", n, want, r.Binding)
	}
}

// TestPlacerTickSound places pods of two templates (cpu and memory) on two small nodes in random orders, after some
// of ours already unbound, and checks the room kept for the next tick against every way kube-scheduler could put
// our pods (any of them on any node they fit on, or left unbound): after each successful Place, no such placement
// leaves the tick without a node; and with one template, a Place refused for the tick is refused because one such
// placement exists.
func TestPlacerTickSound(t *testing.T) {
	rng := rand.New(rand.NewPCG(20, 4))
	sizes := []int64{250, 500, 1000, 1500, 2000}
	for scenario := range 3000 {
		type box struct{ cpu, mem, pods int64 } // room on a node, in millicores, Mi and pod slots
		var boxes []box
		var ns []Node
		for i := range 1 + rng.IntN(2) {
			alloc, used := []int64{2000, 4000}[rng.IntN(2)], 250*rng.Int64N(5)
			mem := []int64{2048, 4096, 65536}[rng.IntN(3)]
			slots := []int64{3, 5, 110}[rng.IntN(3)]
			boxes = append(boxes, box{alloc - used, mem, slots})
			ns = append(ns, node(fmt.Sprintf("n%d", i), func(n *Node) {
				n.Allocatable = rl("cpu", fmt.Sprintf("%dm", alloc), "memory", fmt.Sprintf("%dMi", mem), "pods", fmt.Sprint(slots))
				n.Requested = req("cpu", fmt.Sprintf("%dm", used))
			}))
		}
		tick := 50 * (1 + rng.Int64N(20))
		snap := nodes(ns...)
		snap.NextPassPod = &corev1.Pod{Spec: corev1.PodSpec{Containers: []corev1.Container{ctr(rl("cpu", fmt.Sprintf("%dm", tick), "memory", "64Mi"), nil)}}}
		d := []int64{sizes[rng.IntN(len(sizes))], sizes[rng.IntN(len(sizes))]}
		mems := []int64{0, 256, 1024}
		dm := []int64{mems[rng.IntN(3)], mems[rng.IntN(3)]}
		one := rng.IntN(3) == 0 // pods of claim A only
		mk := func(cpu, mem int64) *batchv1.Job {
			req := rl("cpu", fmt.Sprintf("%dm", cpu))
			if mem > 0 {
				req[corev1.ResourceMemory] = rl("memory", fmt.Sprintf("%dMi", mem))[corev1.ResourceMemory]
			}
			return job(&corev1.PodSpec{Containers: []corev1.Container{ctr(req, nil)}})
		}
		var n [2]int64 // our pods: unbound, then placed
		n[0] = rng.Int64N(2)
		if !one {
			n[1] = rng.Int64N(2)
		}
		p := NewPlacer(snap, []Claim{{Template: mk(d[0], dm[0]), Unbound: int(n[0])}, {Template: mk(d[1], dm[1]), Podless: int(n[1])}})
		// blocked says whether some placement of a of A and b of B leaves the tick no node.
		blocked := func(a, b int64) bool {
			var try func(i int, a, b int64) bool
			try = func(i int, a, b int64) bool {
				if i == len(boxes) {
					return true // every node is blocked; the rest stay unbound
				}
				for x := int64(0); x <= a; x++ {
					for y := int64(0); y <= b; y++ {
						cpu, mem, pods := boxes[i].cpu-x*d[0]-y*d[1], boxes[i].mem-x*dm[0]-y*dm[1], boxes[i].pods-x-y
						if cpu < 0 || mem < 0 || pods < 0 || cpu >= tick && mem >= 64 && pods >= 1 {
							continue // does not fit, or leaves the tick room here
						}
						if try(i+1, a-x, b-y) {
							return true
						}
					}
				}
				return false
			}
			return try(0, a, b)
		}
		for range 12 {
			c := rng.IntN(2)
			if one {
				c = 0
			}
			before := p.Report(c)
			if ok := p.Place(c); ok {
				n[c]++
				if blocked(n[0], n[1]) {
					t.Fatalf("scenario %d: nodes %+v, tick %dm, pods %dm and %dm: %d and %d placed, and kube-scheduler can leave the tick no node",
						scenario, boxes, tick, d[0], d[1], n[0], n[1])
				}
			} else if one && strings.HasPrefix(before.Binding, "tick") && !blocked(n[0]+1, n[1]) {
				t.Fatalf("scenario %d: nodes %+v, tick %dm, pods of %dm: %d placed, one more refused for the tick, but no placement blocks it",
					scenario, boxes, tick, d[0], n[0])
			}
		}
	}
}

// BenchmarkPlacer is one pass of two queues on 5,000 nodes with room kept for the next tick: the Placer made, each
// queue's Report, then 200 Jobs placed one queue after the other, and the Reports again.
func BenchmarkPlacer(b *testing.B) {
	ns := make([]Node, 5000)
	for i := range ns {
		ns[i] = node(fmt.Sprintf("node-%05d", i), func(n *Node) { n.Requested, n.Pods = req("cpu", "1500m", "memory", "3Gi"), 12 })
	}
	snap := withNextPassPod(nodes(ns...))
	claims := []Claim{{Template: job(cpus("2")), Unbound: 10}, {Template: job(cpus("500m")), Podless: 10}}
	b.ReportAllocs()
	for b.Loop() {
		p := NewPlacer(snap, claims)
		p.Report(0)
		p.Report(1)
		for i := range 200 {
			if !p.Place(i % 2) {
				b.Fatalf("Place %d refused", i)
			}
		}
		p.Report(0)
		p.Report(1)
	}
}

// TestClaimDemand pins Claim.Demand: it replaces the admitted template's demand for the resources it names only;
// the rest stays the template's as admitted (here a LimitRange's default memory). On a node of 4 cpu and 1Gi, pods
// of 1 cpu and the default 512Mi: 2 fit (memory binds); were the memory left out, a third would.
func TestClaimDemand(t *testing.T) {
	snap := nodes(node("n1", func(n *Node) { n.Allocatable = rl("cpu", "4", "memory", "1Gi", "pods", "110") }))
	snap.LimitRanges = []corev1.LimitRange{limitRange("defaults", rl("memory", "512Mi"), rl("memory", "512Mi"))}
	tpl := job(&corev1.PodSpec{Containers: []corev1.Container{{Name: "worker", Resources: corev1.ResourceRequirements{Requests: rl("cpu", "3")}}}})
	p := NewPlacer(snap, []Claim{{Template: tpl, Demand: rl("cpu", "1")}})
	if got := places(p, "AAA"); got != "TTF" {
		t.Errorf("places %s, want TTF: each pod 1 cpu (Demand) and 512Mi (the LimitRange's, kept)", got)
	}
}
