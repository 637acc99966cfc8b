package scheduler

import (
	"fmt"
	"maps"
	"slices"

	corev1 "k8s.io/api/core/v1"

	"github.com/jobsched/jobsched/pkg/capacity"
	"github.com/jobsched/jobsched/pkg/config"
	"github.com/jobsched/jobsched/pkg/jobmeta"
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
	d := capacity.Demand(&corev1.Pod{Spec: c.Job.Spec.Template.Spec})
	n := int64(capacity.PodsPerJob(c.Job))
	for r, q := range d {
		q.Mul(n)
		d[r] = q
	}
	return d
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

// groupRequests is, with limits.perGroup.maxRequests, what each group's unfinished Jobs request and the creates
// the read admitted for it ask, against the cap: a group at it gets no more rows this pass.
type groupRequests struct {
	g   *config.PerGroup
	sum map[string]corev1.ResourceList
}

// newGroupRequests starts from what each group's unfinished Jobs hold (held is not changed).
func newGroupRequests(g *config.PerGroup, held map[string]corev1.ResourceList) groupRequests {
	r := groupRequests{g: g, sum: map[string]corev1.ResourceList{}}
	for grp, l := range held {
		r.sum[grp] = l.DeepCopy()
	}
	return r
}

// atCap says a group asking l holds at least the cap of some resource.
func (r groupRequests) atCap(l corev1.ResourceList) bool {
	for res, most := range r.g.MaxRequests {
		if q, ok := l[res]; ok && q.Cmp(most) >= 0 {
			return true
		}
	}
	return false
}

// over is the first resource (sorted) of which l asks more than the cap, "" when none.
func (r groupRequests) over(l corev1.ResourceList) corev1.ResourceName {
	for _, res := range slices.Sorted(maps.Keys(r.g.MaxRequests)) {
		most := r.g.MaxRequests[res]
		if q, ok := l[res]; ok && q.Cmp(most) > 0 {
			return res
		}
	}
	return ""
}

// close counts every group at its cap as holding limits.perGroup.maxActive Jobs in held (the read's count, which
// leaves such a group out), and returns held.
func (r groupRequests) close(held map[string]int) map[string]int {
	for grp, l := range r.sum {
		if r.atCap(l) {
			if held == nil {
				held = map[string]int{}
			}
			held[grp] = max(held[grp], r.g.MaxActive)
		}
	}
	return held
}

// admit counts create c against its group's cap: a skip when its Job alone asks more than the cap (it could never
// be created), wait when it would take its group over the cap (its group is then at it); else it is added.
func (r groupRequests) admit(c Create) (skip *Skip, wait bool) {
	grp, ok := c.Job.Annotations[jobmeta.AnnotationGroup]
	if !ok {
		return nil, false
	}
	asks := createAsks(c)
	if res := r.over(asks); res != "" {
		most := r.g.MaxRequests[res]
		return &Skip{Key: c.Key, Size: true, Reason: fmt.Sprintf("no Job: it asks for %s, more than limits.perGroup.maxRequests.%s (%s) lets a group hold",
			capacity.Quantities(asks), res, most.String())}, false
	}
	sum := addTimes(r.sum[grp].DeepCopy(), asks, 1)
	if r.over(sum) != "" {
		r.sum[grp] = sum // the group is past its share: at its cap for the rest of the read
		return nil, true
	}
	r.sum[grp] = sum
	return nil, false
}
