// Package kueue reads what Kueue says about this scheduler's Jobs (limits.capacity: kueue).
//
// It reads each Job's Workload and its conditions, and the LocalQueue's counts. It only reads, and only for status
// and dry-run: the pass decides from the Jobs alone (a Job Kueue holds is suspended), so a tick needs no access to
// Kueue's objects.
//
// Kueue's objects are read as unstructured through the dynamic client rather than through Kueue's Go types: those
// live in sigs.k8s.io/kueue, whose module brings controller-runtime and Kueue's own Kubernetes libraries into
// jobsched's build for the handful of fields read here.
package kueue

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"

	"github.com/jobsched/jobsched/pkg/apitext"
)

// The Kueue API jobsched reads (v1beta2, Kueue's storage version since v0.15).
var (
	WorkloadsResource   = schema.GroupVersionResource{Group: "kueue.x-k8s.io", Version: "v1beta2", Resource: "workloads"}
	LocalQueuesResource = schema.GroupVersionResource{Group: "kueue.x-k8s.io", Version: "v1beta2", Resource: "localqueues"}
)

// Kueue's labels on a Job (its LocalQueue, its WorkloadPriorityClass) and the managedBy of its MultiKueue controller.
const (
	QueueLabel    = "kueue.x-k8s.io/queue-name"
	PriorityLabel = "kueue.x-k8s.io/priority-class"
	MultiKueue    = "kueue.x-k8s.io/multikueue"
)

// The Workload conditions that say why a Job waits.
const (
	CondQuotaReserved = "QuotaReserved"
	CondAdmitted      = "Admitted"
	CondEvicted       = "Evicted"
	CondRequeued      = "Requeued"
	CondFinished      = "Finished"
)

// Condition is one Workload condition.
type Condition struct {
	Type    string    `json:"type"`
	Status  string    `json:"status"`
	Reason  string    `json:"reason,omitempty"`
	Message string    `json:"message,omitempty"`
	At      time.Time `json:"lastTransitionTime"`
}

// Workload is what jobsched keeps of one Workload: the Job it stands for and the conditions that say where it is.
type Workload struct {
	Name string    `json:"name"`
	Job  types.UID `json:"-"` // the Job that controls it
	// ClusterQueue is where its quota is reserved (status.admission), empty while it has none.
	ClusterQueue string      `json:"clusterQueue,omitempty"`
	Priority     *int64      `json:"priority,omitempty"`
	Conditions   []Condition `json:"conditions,omitempty"`
}

// Condition returns the Workload's condition of type t, if any.
func (w *Workload) Condition(t string) *Condition {
	for i := range w.Conditions {
		if w.Conditions[i].Type == t {
			return &w.Conditions[i]
		}
	}
	return nil
}

func (w *Workload) is(t string) bool {
	c := w.Condition(t)
	return c != nil && c.Status == string(metav1.ConditionTrue)
}

// Why says in words why Kueue holds the Job of w suspended: from its Evicted, QuotaReserved and Admitted
// conditions, with Kueue's own message (for example which flavor lacks quota).
func (w *Workload) Why() string {
	if w == nil {
		return "no Workload yet: Kueue has not seen the Job (is Kueue running, and does it manage batch/job?)"
	}
	msg := func(c *Condition) string {
		if c == nil {
			return ""
		}
		return apitext.Quote(strings.TrimSpace(strings.TrimSuffix(c.Reason+": "+c.Message, ": ")))
	}
	var parts []string
	if w.is(CondEvicted) {
		parts = append(parts, "evicted ("+msg(w.Condition(CondEvicted))+")")
		if rq := w.Condition(CondRequeued); rq != nil && rq.Status == string(metav1.ConditionFalse) {
			parts = append(parts, "not requeued ("+msg(rq)+")")
		}
	}
	switch {
	case w.is(CondAdmitted):
		parts = append(parts, "admitted to ClusterQueue "+w.ClusterQueue+": Kueue is starting it")
	case w.is(CondQuotaReserved):
		parts = append(parts, "quota reserved in ClusterQueue "+w.ClusterQueue+", waiting for admission checks ("+msg(w.Condition(CondAdmitted))+")")
	case w.Condition(CondQuotaReserved) != nil:
		parts = append(parts, "no quota reserved ("+msg(w.Condition(CondQuotaReserved))+")")
	default:
		parts = append(parts, "pending: Kueue has not tried to admit it yet")
	}
	return strings.Join(parts, "; ")
}

// LocalQueue is the LocalQueue's view of its Workloads.
type LocalQueue struct {
	Name         string `json:"name"`
	Found        bool   `json:"found"`
	ClusterQueue string `json:"clusterQueue,omitempty"`
	Pending      int64  `json:"pending"`   // waiting for quota
	Reserving    int64  `json:"reserving"` // quota reserved, maybe not yet admitted
	Admitted     int64  `json:"admitted"`
}

// Snapshot is one read of Kueue's objects in the namespace.
type Snapshot struct {
	// Workloads are keyed by the UID of the Job that controls each.
	Workloads  map[types.UID]*Workload `json:"-"`
	LocalQueue *LocalQueue             `json:"localQueue,omitempty"`
	// Unavailable says why Kueue's objects could not be read (no RBAC, no Kueue): the mode then counts every
	// suspended Job as queued and cannot say why Kueue holds it.
	Unavailable string `json:"unavailable,omitempty"`
}

// Observe lists the Workloads of namespace ns (all of them: a Workload carries none of the Job's labels; it is
// matched to its Job by owner) and gets LocalQueue lq. Forbidden, or Kueue's API missing, is not an error: the
// snapshot says so in Unavailable. Any other failure is.
func Observe(ctx context.Context, dyn dynamic.Interface, ns, lq string) (*Snapshot, error) {
	snap := &Snapshot{Workloads: map[types.UID]*Workload{}}
	if dyn == nil {
		snap.Unavailable = "no client for Kueue's API"
		return snap, nil
	}
	unavailable := func(what string, err error) bool {
		switch {
		case apierrors.IsForbidden(err):
			snap.Unavailable = fmt.Sprintf("cannot %s (grant get and list on workloads and localqueues of kueue.x-k8s.io in %s): "+
				"every suspended Job is counted as queued, with no reason", what, ns)
		case apierrors.IsNotFound(err) && what == "list workloads":
			snap.Unavailable = "Kueue's API (kueue.x-k8s.io/v1beta2) is not served: is Kueue installed? Every suspended Job is counted as queued"
		default:
			return false
		}
		return true
	}
	opts := metav1.ListOptions{Limit: 500}
	for {
		list, err := dyn.Resource(WorkloadsResource).Namespace(ns).List(ctx, opts)
		if err != nil {
			if unavailable("list workloads", err) {
				return snap, nil
			}
			return nil, fmt.Errorf("listing Kueue Workloads in %s: %w", ns, err)
		}
		for i := range list.Items {
			if w, ok := summarize(&list.Items[i]); ok {
				snap.Workloads[w.Job] = w
			}
		}
		if opts.Continue = list.GetContinue(); opts.Continue == "" {
			break
		}
	}
	q, err := dyn.Resource(LocalQueuesResource).Namespace(ns).Get(ctx, lq, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		snap.LocalQueue = &LocalQueue{Name: lq}
	case err != nil:
		if unavailable("get localqueues", err) {
			return snap, nil
		}
		return nil, fmt.Errorf("getting Kueue LocalQueue %s/%s: %w", ns, lq, err)
	default:
		snap.LocalQueue = localQueue(q)
	}
	return snap, nil
}

// summarize keeps what status needs of a Workload; ok is false for one no Job controls.
func summarize(u *unstructured.Unstructured) (*Workload, bool) {
	var job types.UID
	for _, ref := range u.GetOwnerReferences() {
		if ref.Controller != nil && *ref.Controller && ref.Kind == "Job" && strings.HasPrefix(ref.APIVersion, "batch/") {
			job = ref.UID
		}
	}
	if job == "" {
		return nil, false
	}
	w := &Workload{Name: u.GetName(), Job: job}
	w.ClusterQueue, _, _ = unstructured.NestedString(u.Object, "status", "admission", "clusterQueue")
	if p, ok, _ := unstructured.NestedInt64(u.Object, "spec", "priority"); ok {
		w.Priority = &p
	}
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, c := range conds {
		m, ok := c.(map[string]any)
		if !ok {
			continue
		}
		str := func(k string) string { s, _ := m[k].(string); return s }
		at, _ := time.Parse(time.RFC3339, str("lastTransitionTime"))
		w.Conditions = append(w.Conditions, Condition{Type: str("type"), Status: str("status"), Reason: str("reason"),
			Message: str("message"), At: at.UTC()})
	}
	sort.SliceStable(w.Conditions, func(i, j int) bool { return w.Conditions[i].Type < w.Conditions[j].Type })
	return w, true
}

func localQueue(u *unstructured.Unstructured) *LocalQueue {
	q := &LocalQueue{Name: u.GetName(), Found: true}
	q.ClusterQueue, _, _ = unstructured.NestedString(u.Object, "spec", "clusterQueue")
	q.Pending, _, _ = unstructured.NestedInt64(u.Object, "status", "pendingWorkloads")
	q.Reserving, _, _ = unstructured.NestedInt64(u.Object, "status", "reservingWorkloads")
	q.Admitted, _, _ = unstructured.NestedInt64(u.Object, "status", "admittedWorkloads")
	return q
}
