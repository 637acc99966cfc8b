package capacity

import (
	"fmt"
	"testing"
)

// BenchmarkPlacerShapes measures a pass's placement with per-row sizes (job.requestsFrom) on 5,000 nodes, beside
// one template: a Placer of 1 claim (one size) and of 1 + N shapes (N distinct sizes among the rows read), each
// placing 1,000 Jobs in turn; it reports the time of NewPlacer and the placements, and the heap the Placer holds.
func BenchmarkPlacerShapes(b *testing.B) {
	ns := make([]Node, 5000)
	for i := range ns {
		ns[i] = node(fmt.Sprintf("node-%05d", i), func(n *Node) { n.Requested, n.Pods = req("cpu", "1500m", "memory", "3Gi"), 12 })
	}
	snap := nodes(ns...)
	for _, shapes := range []int{1, 10, 100, 1000} {
		claims := make([]Claim, shapes)
		for k := range claims {
			claims[k] = Claim{Template: job(cpus(fmt.Sprintf("%dm", 100+k)))}
		}
		b.Run(fmt.Sprintf("shapes-%d", shapes), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				p := NewPlacer(snap, claims)
				for k := range 1000 {
					if !p.Place(k % shapes) {
						b.Fatal("no room")
					}
				}
			}
			held, _ := liveHeap(func() *Placer { return NewPlacer(snap, claims) })
			b.ReportMetric(float64(held)/1e6, "MB-held")
		})
	}
}
