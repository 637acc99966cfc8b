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
	r.sum[grp] = addTimes(r.sum[grp], asks, 1) // past its cap, the group is at it for the rest of the read
	return nil, r.over(r.sum[grp]) != ""
}
