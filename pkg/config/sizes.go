package config

import (
	"maps"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
)

// MaxRequest is the largest job.maxRequests a configuration may give (1E, 10^18 of the resource's unit): far beyond
// any node, and where the capacity fit's counts still hold it (they saturate above).
var MaxRequest = resource.MustParse("1E")

// Sized says the job takes its worker's requests from the rows (job.requestsFrom).
func (j Job) Sized() bool { return len(j.RequestsFrom) > 0 }

// SizedResources are the resources of job.requestsFrom, sorted: the order each row's are read and reported in.
func (j Job) SizedResources() []corev1.ResourceName { return slices.Sorted(maps.Keys(j.RequestsFrom)) }

// validateSizes checks job.requestsFrom and job.maxRequests: each resource a container may request, each column
// named, each resource bounded by a positive maxRequests, and no maxRequests without its requestsFrom.
func validateSizes(bad func(key, format string, args ...any), job Job) {
	for _, r := range job.SizedResources() {
		why := resourceNameProblem(r)
		if why != "" {
			bad("job.requestsFrom", "%q %s", r, why)
			continue
		}
		key := "job.requestsFrom." + string(r)
		if job.RequestsFrom[r] == "" {
			bad(key, "the column name is empty: name the column whose value is each row's %s request", r)
		}
		if _, ok := job.MaxRequests[r]; !ok {
			bad("job.maxRequests."+string(r), "required with job.requestsFrom.%s: the most one row may ask (e.g. %s: %s)", r, r, example(r))
		}
	}
	for _, r := range slices.Sorted(maps.Keys(job.MaxRequests)) {
		q := job.MaxRequests[r]
		_, sized := job.RequestsFrom[r]
		switch {
		case !sized && resourceNameProblem(r) != "":
			bad("job.maxRequests", "%q is read only with job.requestsFrom naming it (the column each row's request comes from)", r)
		case !sized:
			bad("job.maxRequests."+string(r), "is read only with job.requestsFrom.%s (the column each row's request comes from)", r)
		case resourceNameProblem(r) != "": // said of requestsFrom
		default:
			mostProblem(bad, "job.maxRequests."+string(r), q)
		}
	}
}

// Backfill is job.backfill: with job.requestsFrom, a row that does not fit now is passed by the rows behind it that
// do, until it has waited MaxWait since its column Since; then the rows behind it wait for it (strict order).
type Backfill struct {
	Since   string          `json:"since"`
	MaxWait metav1.Duration `json:"maxWait"`
}

// validateBackfill checks job.backfill: read only with job.requestsFrom, its column named and its maxWait positive.
func validateBackfill(bad func(key, format string, args ...any), job Job) {
	b := job.Backfill
	switch {
	case b == nil:
		return
	case !job.Sized():
		bad("job.backfill", "is read only with job.requestsFrom: without it every row of the queue asks the same, and one that does not fit has no smaller one behind it")
		return
	}
	if b.Since == "" {
		bad("job.backfill.since", "name the column that holds when each row began to wait (a timestamp, e.g. created_at)")
	}
	if b.MaxWait.Duration <= 0 {
		bad("job.backfill.maxWait", "must be more than 0 (e.g. 10m): the longest a row is passed by smaller rows behind it")
	}
}

// example is a typical request of r, for the errors.
func example(r corev1.ResourceName) string {
	switch r {
	case corev1.ResourceCPU:
		return "4"
	case corev1.ResourceMemory, corev1.ResourceEphemeralStorage:
		return "16Gi"
	}
	return "1"
}

// resourceNameProblem says why r is not a resource a container may request ("" when it is): cpu, memory,
// ephemeral-storage, hugepages-<size>, or an extended resource (a name with a domain outside kubernetes.io, such as
// nvidia.com/gpu), as the API server's validation of container resources takes them (k8s.io/kubernetes
// pkg/apis/core/v1/helper: IsExtendedResourceName; that module is not a dependency of this one).
func resourceNameProblem(r corev1.ResourceName) string {
	const want = "is not a resource a container requests: cpu, memory, ephemeral-storage, hugepages-<size>, or an extended resource with a domain (e.g. nvidia.com/gpu)"
	s := string(r)
	switch {
	case r == corev1.ResourceCPU || r == corev1.ResourceMemory || r == corev1.ResourceEphemeralStorage:
		return ""
	case strings.HasPrefix(s, corev1.ResourceHugePagesPrefix):
		if _, err := resource.ParseQuantity(strings.TrimPrefix(s, corev1.ResourceHugePagesPrefix)); err != nil {
			return want
		}
		return ""
	case !strings.Contains(s, "/") || strings.Contains(s, corev1.ResourceDefaultNamespacePrefix) ||
		strings.HasPrefix(s, corev1.DefaultResourceRequestsPrefix):
		return want
	case len(validation.IsQualifiedName(corev1.DefaultResourceRequestsPrefix+s)) > 0:
		return want
	}
	return ""
}

// Worker is the index of the container of tpl whose requests job.requestsFrom sets: job.container's, else the only
// one (Parse checks there is one); -1 when there is none.
func (j Job) Worker(tpl []corev1.Container) int {
	for i, c := range tpl {
		if j.Container == "" || c.Name == j.Container {
			return i
		}
	}
	return -1
}

// validateGroupRequests checks limits.perGroup.maxRequests: each a resource a container may request, more than 0.
func validateGroupRequests(bad func(key, format string, args ...any), most map[corev1.ResourceName]resource.Quantity) {
	for _, r := range slices.Sorted(maps.Keys(most)) {
		q := most[r]
		if why := resourceNameProblem(r); why != "" {
			bad("limits.perGroup.maxRequests", "%q %s", r, why)
			continue
		}
		mostProblem(bad, "limits.perGroup.maxRequests."+string(r), q)
	}
}

// mostProblem checks q, the most of a resource a key allows (key): more than 0, at most MaxRequest.
func mostProblem(bad func(key, format string, args ...any), key string, q resource.Quantity) {
	switch {
	case q.Sign() <= 0:
		bad(key, "must be more than 0, not %s", q.String())
	case q.Cmp(MaxRequest) > 0:
		bad(key, "%s is more than %s", q.String(), MaxRequest.String())
	}
}
