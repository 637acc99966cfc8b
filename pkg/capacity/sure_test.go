package capacity

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
)

// stranded says whether some order of binding our pods (counts per claim, each demanding cpu[c] millicores)
// strands one: kube-scheduler binds them one at a time in any order, each to any node it fits on (free: each node's
// millicores), and a pod that fits on none goes Unschedulable. It explores every order and choice (memoized).
func stranded(free []int64, cpu []int64, counts []int) bool {
	seen := map[string]bool{}
	var walk func(free []int64, counts []int) bool
	walk = func(free []int64, counts []int) bool {
		key := fmt.Sprint(free, counts)
		if v, ok := seen[key]; ok {
			return v
		}
		bad := false
		for c, n := range counts {
			if n == 0 || bad {
				continue
			}
			fit := false
			for k := range free {
				if free[k] < cpu[c] {
					continue
				}
				fit = true
				f, left := append([]int64(nil), free...), append([]int(nil), counts...)
				f[k] -= cpu[c]
				left[c]--
				if walk(f, left) {
					bad = true
					break
				}
			}
			bad = bad || !fit
		}
		seen[key] = bad
		return bad
	}
	return walk(free, counts)
}

// TestPlacerSureOfBinds: on two 8-CPU nodes, rows of 500m and 4 CPU in the order S S S L …: a Job whose pod fits
// only if kube-scheduler binds the others where the placement guessed is refused, and says so. Ten small and two
// large fit by the guess (13 of 16 CPU), but bound in some order (4.5 CPU of small ones on n1, 0.5 on n2, then a
// large one on n2) they leave the second large one no node. The rule stops at eight small ones: it is sure of
// those, not of nine (which no order strands either).
func TestPlacerSureOfBinds(t *testing.T) {
	big := func(n *Node) { n.Allocatable = rl("cpu", "8", "memory", "16Gi", "pods", "110") }
	p := NewPlacer(nodes(node("n1", big), node("n2", big)), []Claim{{Template: job(cpus("500m"))}, {Template: job(cpus("4"))}})
	if got, want := places(p, "AAABAAABAAAB"), "TTTTTTTTTTFF"; got != want {
		t.Errorf("Place(AAABAAABAAAB) = %s, want %s", got, want)
	}
	r := p.Report(0)
	if r.Fit != 0 || !strings.Contains(r.Binding, "wherever kube-scheduler binds our 2 unbound pod(s) of other sizes") {
		t.Errorf("Report(A) = %d, %q; want 0, wherever kube-scheduler binds our 2 unbound pod(s) of other sizes", r.Fit, r.Binding)
	}
	if n := p.AwaitsBinds(0); n != 2 {
		t.Errorf("AwaitsBinds(A) = %d, want 2 (the large pods)", n)
	}
	if n := p.AwaitsBinds(1); n != 0 {
		t.Errorf("AwaitsBinds(B) = %d, want 0: the third large one fits nowhere, however the others are bound", n)
	}
	if stranded([]int64{8000, 8000}, []int64{500, 4000}, []int{8, 2}) {
		t.Error("8 small and 2 large were placed, and some order of binding strands one")
	}
	if !stranded([]int64{8000, 8000}, []int64{500, 4000}, []int{10, 2}) {
		t.Error("the checker finds no order that strands a pod of 10 small and 2 large: it checks nothing")
	}
}

// TestPlacerSureOfBindsAnyMix: placements of random sizes on random nodes, with unbound pods already there: no
// order of binding what was placed strands a pod, and one template alone places as many as its guess.
func TestPlacerSureOfBindsAnyMix(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 5))
	sizes := []int64{500, 1000, 1500, 2000, 3000, 4000}
	refused := 0
	for round := range 300 {
		var ns []Node
		var free []int64
		for k := range 2 + rng.IntN(2) {
			cpu := []int64{4000, 6000, 8000}[rng.IntN(3)]
			ns = append(ns, node(fmt.Sprintf("n%d", k), func(n *Node) {
				n.Allocatable = rl("cpu", fmt.Sprintf("%dm", cpu), "memory", "1000Gi", "pods", "110")
			}))
			free = append(free, cpu)
		}
		claims := make([]Claim, 1+rng.IntN(3))
		cpu := make([]int64, len(claims))
		for c := range claims {
			cpu[c] = sizes[rng.IntN(len(sizes))]
			claims[c] = Claim{Template: job(cpus(fmt.Sprintf("%dm", cpu[c]))), Unbound: rng.IntN(2)}
		}
		p := NewPlacer(nodes(ns...), claims)
		counts := make([]int, len(claims))
		for c, cl := range p.claims {
			counts[c] = cl.claimed - cl.onNoNode
		}
		unsureBefore := stranded(free, cpu, counts)
		seq := make([]byte, 12)
		for i := range seq {
			seq[i] = byte('A' + rng.IntN(len(claims)))
		}
		got := places(p, string(seq))
		checkOthers(t, p)
		for i, ok := range got {
			if ok == 'T' {
				counts[seq[i]-'A']++
			}
		}
		refused += strings.Count(got, "F")
		if strings.Contains(got, "T") && stranded(free, cpu, counts) && !unsureBefore {
			t.Fatalf("round %d: nodes %v, claims %v; Place(%s) = %s leaves an order that strands a pod (%v)",
				round, free, cpu, seq, got, counts)
		}
		if len(claims) == 1 {
			if want := len(got) - strings.Count(got, "F"); want != p.claims[0].placed {
				t.Fatalf("round %d: one template placed %d, want %d", round, p.claims[0].placed, want)
			}
		}
	}
	if refused == 0 {
		t.Error("no Place was refused in 300 rounds: the mixes are not tight enough to test anything")
	}
}

// checkOthers: the counts the Placer keeps as it places (others, perPod) are those its claims' pods on the nodes
// give, counted afresh.
func checkOthers(t *testing.T, p *Placer) {
	t.Helper()
	if p.others == nil {
		return
	}
	for c := range p.claims {
		others, perPod := 0, 0
		for o, cl := range p.claims {
			if k := p.cost(o, c); o != c && k > 0 {
				others, perPod = others+cl.onNodes, perPod+cl.onNodes*k
			}
		}
		if p.others[c] != others || p.perPod[c] != perPod {
			t.Fatalf("claim %d: others %d, perPod %d kept; %d and %d counted afresh", c, p.others[c], p.perPod[c], others, perPod)
		}
	}
}

// TestPlacerSureOfBindsOneSize: several templates of one size on the same nodes place exactly what the nodes hold,
// as one template does: a pod of one costs another exactly one place.
func TestPlacerSureOfBindsOneSize(t *testing.T) {
	p := NewPlacer(nodes(node("n1"), node("n2")), []Claim{{Template: job(cpus("1"))}, {Template: job(cpus("1")), Unbound: 1}})
	if got, want := places(p, "ABABABABAB"), "TTTTTTTFFF"; got != want {
		t.Errorf("Place(ABABABABAB) = %s, want %s (8 CPU, one pod unbound)", got, want)
	}
}
