package scheduler

import (
	"maps"
	"slices"

	corev1 "k8s.io/api/core/v1"

	"github.com/jobsched/jobsched/pkg/capacity"
	"github.com/jobsched/jobsched/pkg/config"
)

// Weights by resources (users read these rules in `jobsched help queues`).
//
// Where every queue's Jobs ask the same (no job.requestsFrom, equal templates), a queue's use of the install is its
// count of unfinished Jobs plus the slots it got this pass, and the share compares use / weight exactly (before).
// Where sizes differ, a count would let a queue of large Jobs hold many times the room of one of small Jobs at the
// same weight, so the share weighs resources instead, as Kueue's fair sharing and DRF do: a queue's use is its
// dominant share, the largest over resources of what it holds and was given this pass over what all queues hold
// and ask this pass (the room they compete for), and the slot goes to the smallest use / weight. What a queue holds
// is the requests of its unfinished Jobs that are not suspended (QueuePlan.Holds: Kueue decides for those it
// holds); what it was given, each create's pod requests times its pods per Job.

// weigher is the share's use of each queue by resources, each a vector over the resources any of them holds or asks.
type weigher struct {
	total []float64   // per resource: what all queues hold and ask this pass
	held  [][]float64 // per queue, per resource: what it holds, and the creates kept so far
	asks  [][][]float64
}

// newWeigher is the weigher of queues holding holds[i] and asking asks[i][k] for their k-th admitted create.
func newWeigher(holds []corev1.ResourceList, asks [][]corev1.ResourceList) *weigher {
	names := map[corev1.ResourceName]bool{}
	for i := range holds {
		for r := range holds[i] {
			names[r] = true
		}
		for _, a := range asks[i] {
			for r := range a {
				names[r] = true
			}
		}
	}
	order := slices.Sorted(maps.Keys(names))
	vec := func(l corev1.ResourceList) []float64 {
		v := make([]float64, len(order))
		for j, r := range order {
			if q, ok := l[r]; ok {
				v[j] = float64(q.MilliValue())
			}
		}
		return v
	}
	w := &weigher{total: make([]float64, len(order)), held: make([][]float64, len(holds)), asks: make([][][]float64, len(holds))}
	for i := range holds {
		w.held[i] = vec(holds[i])
		for j, x := range w.held[i] {
			w.total[j] += x
		}
		for _, a := range asks[i] {
			v := vec(a)
			w.asks[i] = append(w.asks[i], v)
			for j, x := range v {
				w.total[j] += x
			}
		}
	}
	return w
}

// use is queue i's dominant share: the largest, over resources, of what it holds over the total.
func (w *weigher) use(i int) float64 {
	u := 0.0
	for j, x := range w.held[i] {
		if w.total[j] > 0 {
			u = max(u, x/w.total[j])
		}
	}
	return u
}

// keep adds queue i's k-th admitted create to what it holds.
func (w *weigher) keep(i, k int) {
	for j, x := range w.asks[i][k] {
		w.held[i][j] += x
	}
}

// createAsks is what a create's Job asks of the cluster: its pod's requests (capacity.Demand) times its pods.
func createAsks(c Create) corev1.ResourceList {
	return addTimes(nil, capacity.Demand(&corev1.Pod{Spec: c.Job.Spec.Template.Spec}), capacity.PodsPerJob(c.Job))
}

// uses are the uses of queues a and b, or nil without w (by count).
func (w *weigher) uses(a, b int) *[2]float64 {
	if w == nil {
		return nil
	}
	return &[2]float64{w.use(a), w.use(b)}
}

// weigher is the share's weigher of p's queues: nil when one queue, or every queue's Jobs ask alike (no
// job.requestsFrom, and their templates' pods ask the same, as many pods per Job).
func (p *Plan) weigher(cfg *config.Config) *weigher {
	if len(p.parts) < 2 {
		return nil
	}
	same, first := true, ""
	for i, part := range p.parts {
		size := capacity.Quantities(createAsks(Create{Job: cfg.QueueConfig(i).Template}))
		same = same && !part.sized && (i == 0 || size == first)
		first = size
	}
	if same {
		return nil
	}
	holds := make([]corev1.ResourceList, len(p.parts))
	asks := make([][]corev1.ResourceList, len(p.parts))
	for i, part := range p.parts {
		holds[i] = part.Holds
		for _, c := range part.admittedCreates {
			asks[i] = append(asks[i], createAsks(c))
		}
	}
	return newWeigher(holds, asks)
}
