package scheduler

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/jobsched/jobsched/pkg/capacity"
	"github.com/jobsched/jobsched/pkg/config"
	"github.com/jobsched/jobsched/pkg/rate"
	"github.com/jobsched/jobsched/pkg/render"
	"github.com/jobsched/jobsched/pkg/rows"
)

// Per-row requests (job.requestsFrom; users read these rules in `jobsched help sizes`, cmd/help/sizes.md).
//
// A sized queue's Jobs differ in what they ask, so the fit counts three shapes of its template, each a
// capacity.Claim of the pass's placer:
//   - the smallest (each sized resource at its least, 1m cpu or 1 of another), queue i's own claim: what fits of it
//     bounds the queue's slots, so that the read never asks for fewer rows than might fit; a row may ask that
//     little, so no smaller count would be safe to read;
//   - for the queue's pods bound to no node yet, and those its Jobs with no pod yet will make, one claim per size
//     among them (Claim.Demand: each pod's own demand, observed, or its Job's pod template's), so that each counts
//     what it asks; with capacity autoscale those of them that wait for a new node too (Claim.Waiting), against the
//     NodePools' limits and limits.maxPending;
//   - the largest (each sized resource at the larger of job.maxRequests and the template's), for any of those
//     whose demand was not kept: each is counted at the most it may ask;
//   - after the read, one claim per distinct shape among the rows admitted: the share places each create with
//     its own shape, in the query's order.
//
// Backfill (job.backfill): with it, a row of a sized queue that does not fit now is passed over, not a stop: the
// share goes on with the rows behind it, and the row is read again by the next pass, while it has waited less than
// maxWait since its column job.backfill.since. Once it has waited that long (or its column is NULL, absent or not a
// time) it stops its queue as in strict order, and no row of its queue behind it gets a Job until it does: its wait
// is bounded by maxWait and the time the queue's Jobs running then take to free the room it needs.
//
// The read is bounded: a sized queue reads at most min(its slots, MaxSizedRows) rows, where its slots count the
// smallest shape, limits.maxPerTick and limits.maxActive as for any queue. The share is strict order: a queue whose
// next row does not fit is out for the rest of the pass (the rows behind it are read ahead, not created, and read
// again by the next pass), so a large row is never passed by smaller ones behind it: it waits only for room to free.
// A row that could never fit (more than the allocatable of every node it may run on, or more than a ResourceQuota's
// hard limit) is skipped instead, with why, and the rows behind it go on.

// MaxSizedRows bounds the rows a pass reads for a queue with job.requestsFrom. Its slots count the smallest Job a
// row may ask for, which may be many times what the rows read will ask: without a bound, a queue of large rows on
// a large cluster would read (and hold, about one row each) hundreds of thousands of rows a pass to create a few.
// 1,000 is more than a pass creates on any cluster the benches run (a refill of tick --fill-for reads on).
const MaxSizedRows = 1000

// boundSized caps a sized queue's slots at MaxSizedRows: the read's bound (see above).
func (p *queuePart) boundSized() *queuePart {
	if !p.sized || p.Slots <= MaxSizedRows {
		return p
	}
	q := *p
	q.Slots, q.Limit, q.Bound = MaxSizedRows, fmt.Sprintf("job.requestsFrom: at most %d rows a pass", MaxSizedRows), BoundMaxPerTick
	q.roomBound, q.capacityBound = false, false
	return &q
}

// leastRequest is the smallest request of res a row may make: 1m of cpu, 1 of anything else.
func leastRequest(res corev1.ResourceName) resource.Quantity {
	if res == corev1.ResourceCPU {
		return *resource.NewMilliQuantity(1, resource.DecimalSI)
	}
	return *resource.NewQuantity(1, resource.DecimalSI)
}

// smallestShape is cfg's template with each sized resource at its least.
func smallestShape(cfg *config.Config) *batchv1.Job {
	req := corev1.ResourceList{}
	for _, res := range cfg.Job.SizedResources() {
		req[res] = leastRequest(res)
	}
	return render.Sized(cfg.Job, cfg.Template, req)
}

// largestShape is cfg's template with each sized resource at the most a row may ask (RowRequests.Most).
func largestShape(cfg *config.Config) *batchv1.Job {
	return render.Sized(cfg.Job, cfg.Template, RowRequestsOf(cfg).Most())
}

// RowRequests is what the Job of one row of a sized queue asks for, per sized resource, as known without reading
// a row (status shows it; dry-run shows each row's own): a row whose column is NULL, or a query without it, asks
// Default, the template worker's request (or, with none, its limit, which the API server takes as the request;
// a resource with neither is absent: no request); any other row at least 1m of cpu or 1 of another resource and
// at most Max (job.maxRequests).
type RowRequests struct {
	Default corev1.ResourceList `json:"default,omitempty"`
	Max     corev1.ResourceList `json:"max"`
}

// RowRequestsOf is what a row of cfg (a queue's config) asks for (nil for a queue without job.requestsFrom).
func RowRequestsOf(cfg *config.Config) *RowRequests {
	if !cfg.Job.Sized() {
		return nil
	}
	r := &RowRequests{Max: corev1.ResourceList{}}
	var worker *corev1.Container
	if cfg.Template != nil {
		cs := cfg.Template.Spec.Template.Spec.Containers
		if w := cfg.Job.Worker(cs); w >= 0 {
			worker = &cs[w]
		}
	}
	for _, res := range cfg.Job.SizedResources() {
		r.Max[res] = cfg.Job.MaxRequests[res]
		if worker == nil {
			continue
		}
		own, ok := worker.Resources.Requests[res]
		if !ok {
			own, ok = worker.Resources.Limits[res]
		}
		if ok {
			if r.Default == nil {
				r.Default = corev1.ResourceList{}
			}
			r.Default[res] = own
		}
	}
	return r
}

// Most is, per sized resource, the most any row may ask: the larger of Max and Default.
func (r *RowRequests) Most() corev1.ResourceList {
	most := maps.Clone(r.Max)
	for res, q := range r.Default {
		if q.Cmp(most[res]) > 0 {
			most[res] = q
		}
	}
	return most
}

// claims are the pass's placer's claims: queue i's (claim i: its template, or for a sized queue its smallest
// shape), then the largest shape of each sized queue, with its pods that claim room, then shapes (one claim each).
// base is the index of shapes' first claim.
func (p *Plan) claims(cfg *config.Config, shapes []*batchv1.Job) (claims []capacity.Claim, base int) {
	claims = make([]capacity.Claim, len(p.parts), len(p.parts)+len(shapes))
	for i, part := range p.parts {
		qc := cfg.QueueConfig(i)
		if !part.sized || qc.Template == nil {
			claims[i] = capacity.Claim{Template: qc.Template, Unbound: part.unboundPods, Podless: part.podlessPods, Waiting: part.Waiting}
			continue
		}
		claims[i] = capacity.Claim{Template: smallestShape(qc), ReadBound: true}
		unbound, waiting := part.unboundPods, part.Waiting
		for _, s := range part.unboundSizes {
			claims = append(claims, capacity.Claim{Template: qc.Template, Demand: s.demand, Unbound: s.pods, Podless: s.podless, Waiting: s.waiting})
			unbound, waiting = unbound-s.pods, waiting-s.waiting
		}
		claims = append(claims, capacity.Claim{Template: largestShape(qc), Unbound: unbound, Podless: part.podlessPods, Waiting: waiting})
	}
	base = len(claims)
	for _, s := range shapes {
		claims = append(claims, capacity.Claim{Template: s})
	}
	return claims, base
}

// MaxShapes bounds the claims a pass's placer holds for one sized queue's sizes, each claim costing a record per
// node it may use: a queue's admitted creates of its first MaxShapes−1 distinct sizes are placed each as its own,
// those of any size after them as one shape that asks, per resource, the most any of them asks (overflowShape), so
// that each is counted at least at its size. At 5,000 nodes a claim holds about 270 kB and costs about 2 ms of
// placement (BenchmarkPlacerShapes): 1,000 sizes would hold 270 MB.
const MaxShapes = 32

// shapes are the distinct shapes of the sized queues' admitted creates (the first create's Job of each, at most
// MaxShapes a queue), and per queue the claim of each of its admitted creates, shapes counted from base (nil for a
// queue that is not sized). A create with no pod of its own (status's estimate) is placed as its queue's smallest
// shape.
func (p *Plan) shapes(cfg *config.Config, base int) ([]*batchv1.Job, [][]int) {
	var shapes []*batchv1.Job
	var of [][]int
	index := map[string]int{}
	for i, part := range p.parts {
		if !part.sized {
			continue
		}
		if of == nil {
			of = make([][]int, len(p.parts))
		}
		of[i] = make([]int, len(part.admittedCreates))
		own := 0       // the shapes this queue added
		var over []int // its creates of a size after its first MaxShapes−1
		for k, c := range part.admittedCreates {
			if c.Job == nil || len(c.Job.Spec.Template.Spec.Containers) == 0 {
				of[i][k] = i
				continue
			}
			key := shapeKey(c.Job)
			n, ok := index[key]
			if !ok {
				if own >= MaxShapes-1 {
					over = append(over, k)
					continue
				}
				n, own = len(shapes), own+1
				index[key] = n
				shapes = append(shapes, c.Job)
			}
			of[i][k] = base + n
		}
		if len(over) > 0 {
			for _, k := range over {
				of[i][k] = base + len(shapes)
			}
			shapes = append(shapes, overflowShape(cfg.QueueConfig(i), part.admittedCreates, over))
		}
	}
	return shapes, of
}

// overflowShape is the shape of queue config qc whose worker asks, per sized resource, the most that the creates
// over of creates ask: placed as it, each of them is counted at least at its own size.
func overflowShape(qc *config.Config, creates []Create, over []int) *batchv1.Job {
	most := corev1.ResourceList{}
	for _, k := range over {
		cs := creates[k].Job.Spec.Template.Spec.Containers
		w := qc.Job.Worker(cs)
		if w < 0 {
			continue
		}
		for _, res := range qc.Job.SizedResources() {
			if q, ok := cs[w].Resources.Requests[res]; ok {
				if m, seen := most[res]; !seen || q.Cmp(m) > 0 {
					most[res] = q
				}
			}
		}
	}
	return render.Sized(qc.Job, qc.Template, most)
}

// shapeKey says what of a Job's pod its fit depends on and may differ between a queue's rows: every container's
// requests and limits (the rest of the pod is the queue's template).
func shapeKey(job *batchv1.Job) string {
	var b strings.Builder
	list := func(l corev1.ResourceList) {
		for _, r := range slices.Sorted(maps.Keys(l)) {
			v := l[r]
			b.WriteString(string(r) + "=" + v.String() + ",")
		}
	}
	for _, c := range job.Spec.Template.Spec.Containers {
		list(c.Resources.Requests)
		b.WriteByte('/')
		list(c.Resources.Limits)
		b.WriteByte(';')
	}
	return b.String()
}

// unboundSize is a size among a sized queue's pods bound to no node (and those its Jobs with no pod yet will make):
// how many, and how many of them wait for a new node. Past MaxShapes−1 sizes, the pods of any other size count in
// one more entry (over) that asks, per resource, the most any of them asks.
type unboundSize struct {
	demand        corev1.ResourceList
	key           string // requestsWords(demand); "" for the overflow entry
	pods, waiting int
	podless       int // the pods its Jobs with no pod yet will make (JobSummary.Demand)
	over          bool
}

// unboundOfSize is the entry of demand's size in p.unboundSizes, added when new (or the overflow entry, raised to
// hold demand, once MaxShapes−1 sizes have one).
func (p *queuePart) unboundOfSize(demand corev1.ResourceList) *unboundSize {
	key := requestsWords(demand)
	for i := range p.unboundSizes {
		if s := &p.unboundSizes[i]; !s.over && s.key == key {
			return s
		}
	}
	n := len(p.unboundSizes)
	if n < MaxShapes-1 {
		p.unboundSizes = append(p.unboundSizes, unboundSize{demand: demand, key: key})
		return &p.unboundSizes[n]
	}
	if !p.unboundSizes[n-1].over {
		p.unboundSizes = append(p.unboundSizes, unboundSize{demand: corev1.ResourceList{}, over: true})
		n++
	}
	s := &p.unboundSizes[n-1]
	for r, q := range demand {
		if m, ok := s.demand[r]; !ok || q.Cmp(m) > 0 {
			s.demand[r] = q
		}
	}
	return s
}

// requestsWords is a Job's requests in words, sorted: "cpu=3 memory=1Gi" ("the template's requests" for none).
func requestsWords(l corev1.ResourceList) string {
	if len(l) == 0 {
		return "the template's requests"
	}
	return capacity.Quantities(l)
}

// waitingSince is row's value of column as a time (its text as the source renders a timestamp, RFC 3339), zero
// when the row has no such column, it is NULL, or not a time.
func waitingSince(row rows.Row, column string) time.Time {
	for _, c := range row.Columns {
		if c.Name != column || c.Null {
			continue
		}
		if t, err := time.Parse(time.RFC3339Nano, c.Value); err == nil {
			return t
		}
		return time.Time{}
	}
	return time.Time{}
}

// mayPass says rows behind a row that began to wait at since (zero: not known) may still pass it at now, by
// job.backfill's maxWait.
func mayPass(since time.Time, maxWait time.Duration, now time.Time) bool {
	return now.Sub(since) < maxWait // from the zero time, Sub is the longest Duration: never less
}

// waitWords is how long a row that began to wait at since (zero: not known) has waited at now, in words.
func waitWords(since, now time.Time) string {
	if since.IsZero() {
		return "for a time not known (its job.backfill.since column is NULL, absent or not a time)"
	}
	return rate.ShortDuration(now.Sub(since).Truncate(time.Second))
}
