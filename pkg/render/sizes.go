package render

import (
	"fmt"
	"strconv"
	"strings"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/jobsched/jobsched/pkg/config"
	"github.com/jobsched/jobsched/pkg/rows"
)

// The per-row requests (job.requestsFrom, `jobsched help sizes`). A row's column becomes the worker container's
// request of its resource only as a quantity jobsched parsed, checked (more than 0, at most job.maxRequests) and
// wrote back in its canonical form, rounded up to what the API server keeps (cpu to 1m, the others to 1): no text
// of the row reaches the Job through it. NULL, or a row without the column, keeps the template's request.
//
// The limits rule (WithRequests), as Kubernetes needs a request at most its limit:
//   - a template limit equal to the template's request (or a limit without a request, which the API server takes
//     as the request) follows the row's request;
//   - a larger limit is kept, unless the row asks more: then it is raised to the row's request;
//   - no limit stays no limit;
//   - a resource that cannot be overcommitted (an extended resource such as nvidia.com/gpu, hugepages-*) gets
//     the row's request as its limit too, as the API server requires them equal.

// maxQuotedValue is how much of a value that is not a quantity a skip reason shows, quoted.
const maxQuotedValue = 64

// RowRequests are row's requests of the resources of cfg's job.requestsFrom, each parsed and bounded; a resource whose
// column is NULL or absent is left out (the template's stands). A value that is not a quantity, not more than 0 or
// over job.maxRequests is a *RowError with Size set.
func RowRequests(job config.Job, row rows.Row) (corev1.ResourceList, error) {
	var out corev1.ResourceList
	for _, res := range job.SizedResources() {
		col := job.RequestsFrom[res]
		i := columnIndex(row.Columns, col)
		if i < 0 || row.Columns[i].Null {
			continue
		}
		q, why := Request(res, row.Columns[i].Value, job.MaxRequests[res])
		if why != "" {
			return nil, &RowError{Key: row.Key, Reason: fmt.Sprintf("the %s request (column %q) %s", res, col, why), Size: true}
		}
		if out == nil {
			out = corev1.ResourceList{}
		}
		out[res] = q
	}
	return out, nil
}

// Request is text as a request of res, at most most: the quantity in canonical form, rounded up (cpu to 1m, the rest
// to whole units), or why it cannot be one (the value quoted, at most 64 bytes of it, control bytes escaped).
func Request(res corev1.ResourceName, text string, most resource.Quantity) (resource.Quantity, string) {
	q, err := resource.ParseQuantity(text)
	if err != nil {
		return resource.Quantity{}, quoteValue(text) + " is not a quantity (e.g. 500m, 2Gi)"
	}
	if q.Sign() <= 0 {
		return resource.Quantity{}, q.String() + " is not more than 0"
	}
	if q.Cmp(most) > 0 {
		return resource.Quantity{}, fmt.Sprintf("%s is over job.maxRequests.%s (%s)", q.String(), res, most.String())
	}
	var out resource.Quantity // a new value: its text is made from the number, never the row's
	out.Add(q)
	scale := resource.Scale(0)
	if res == corev1.ResourceCPU {
		scale = resource.Milli
	}
	out.RoundUp(scale)
	return out, ""
}

// quoteValue is v as a Go string literal (control bytes and invalid UTF-8 escaped), cut to maxQuotedValue bytes.
func quoteValue(v string) string {
	if len(v) <= maxQuotedValue {
		return strconv.Quote(v)
	}
	return strconv.Quote(strings.ToValidUTF8(v[:maxQuotedValue], "")) + "…"
}

// WithRequests sets req as container c's requests by the limits rule above; c is changed.
func WithRequests(c *corev1.Container, req corev1.ResourceList) {
	for res, q := range req {
		tplReq, hasReq := c.Resources.Requests[res]
		tplLim, hasLim := c.Resources.Limits[res]
		if !hasReq && hasLim { // the API server defaults a missing request to the limit
			tplReq, hasReq = tplLim, true
		}
		if c.Resources.Requests == nil {
			c.Resources.Requests = corev1.ResourceList{}
		}
		c.Resources.Requests[res] = q.DeepCopy()
		raise := false
		switch {
		case !overcommits(res):
			raise = true
		case !hasLim:
		case hasReq && tplLim.Cmp(tplReq) == 0, tplLim.Cmp(q) < 0:
			raise = true
		}
		if raise {
			if c.Resources.Limits == nil {
				c.Resources.Limits = corev1.ResourceList{}
			}
			c.Resources.Limits[res] = q.DeepCopy()
		}
	}
}

// overcommits says a container's request of res may be below its limit: not for extended resources (a name with a
// domain outside kubernetes.io) nor hugepages, whose request must equal the limit.
func overcommits(res corev1.ResourceName) bool {
	s := string(res)
	if strings.HasPrefix(s, corev1.ResourceHugePagesPrefix) {
		return false
	}
	return !strings.Contains(s, "/") || strings.Contains(s, corev1.ResourceDefaultNamespacePrefix)
}

// Sized is tpl with its worker container (job.container, else the only one) asking req by the limits rule: the
// shape of a Job whose row asks req. tpl is not changed; nil req is tpl itself.
func Sized(job config.Job, tpl *batchv1.Job, req corev1.ResourceList) *batchv1.Job {
	if len(req) == 0 {
		return tpl
	}
	out := tpl.DeepCopy()
	cs := out.Spec.Template.Spec.Containers
	if w := job.Worker(cs); w >= 0 {
		WithRequests(&cs[w], req)
	}
	return out
}

// sizeJob sets the worker's requests of job from row (RowRequests, WithRequests).
func (r *Renderer) sizeJob(row rows.Row, job *batchv1.Job) error {
	if !r.cfg.Job.Sized() {
		return nil
	}
	req, err := RowRequests(r.cfg.Job, row)
	if err != nil || len(req) == 0 {
		return err
	}
	cs := job.Spec.Template.Spec.Containers
	if w := r.cfg.Job.Worker(cs); w >= 0 {
		WithRequests(&cs[w], req)
	}
	return nil
}

// Requests are the worker's requests of job (a Job of r's) when its rows size it (job.requestsFrom), else nil: what
// dry-run shows of each create.
func (r *Renderer) Requests(job *batchv1.Job) corev1.ResourceList {
	if !r.cfg.Job.Sized() || job == nil {
		return nil
	}
	cs := job.Spec.Template.Spec.Containers
	if w := r.cfg.Job.Worker(cs); w >= 0 {
		return cs[w].Resources.Requests.DeepCopy()
	}
	return nil
}
