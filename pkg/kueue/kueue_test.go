package kueue

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	clienttesting "k8s.io/client-go/testing"
)

var t0 = time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)

func cond(typ, status, reason, msg string) map[string]any {
	return map[string]any{"type": typ, "status": status, "reason": reason, "message": msg, "lastTransitionTime": t0.Format(time.RFC3339)}
}

// workload is a Workload as Kueue makes it for a Job: controlled by the Job, with the given conditions.
func workload(name string, job types.UID, cq string, conds ...map[string]any) *unstructured.Unstructured {
	cs := make([]any, len(conds))
	for i, c := range conds {
		cs[i] = c
	}
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload",
		"metadata": map[string]any{"name": name, "namespace": "ns", "ownerReferences": []any{map[string]any{
			"apiVersion": "batch/v1", "kind": "Job", "name": "j-" + name, "uid": string(job), "controller": true}}},
		"spec":   map[string]any{"queueName": "team-a", "priority": int64(100)},
		"status": map[string]any{"conditions": cs},
	}}
	if cq != "" {
		if err := unstructured.SetNestedField(u.Object, cq, "status", "admission", "clusterQueue"); err != nil {
			panic(err) // status is a map above
		}
	}
	return u
}

func localQueueObj() *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "LocalQueue",
		"metadata": map[string]any{"name": "team-a", "namespace": "ns"},
		"spec":     map[string]any{"clusterQueue": "cq"},
		"status":   map[string]any{"pendingWorkloads": int64(3), "reservingWorkloads": int64(2), "admittedWorkloads": int64(2)},
	}}
}

func fakeDynamic(objs ...runtime.Object) *dynamicfake.FakeDynamicClient {
	return dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), map[schema.GroupVersionResource]string{
		WorkloadsResource: "WorkloadList", LocalQueuesResource: "LocalQueueList"}, objs...)
}

func TestObserve(t *testing.T) {
	pending := workload("a", "uid-a", "", cond(CondQuotaReserved, "False", "Pending", "couldn't assign flavors to pod set main: insufficient unused quota for cpu in flavor default, 1 more needed"))
	orphan := workload("b", "uid-b", "")
	orphan.SetOwnerReferences(nil)
	snap, err := Observe(context.Background(), fakeDynamic(pending, orphan, localQueueObj()), "ns", "team-a")
	if err != nil {
		t.Fatal(err)
	}
	p := int64(100)
	want := &Snapshot{
		Workloads: map[types.UID]*Workload{"uid-a": {Name: "a", Job: "uid-a", Priority: &p, Conditions: []Condition{{
			Type: CondQuotaReserved, Status: "False", Reason: "Pending", At: t0,
			Message: "couldn't assign flavors to pod set main: insufficient unused quota for cpu in flavor default, 1 more needed"}}}},
		LocalQueue: &LocalQueue{Name: "team-a", Found: true, ClusterQueue: "cq", Pending: 3, Reserving: 2, Admitted: 2},
	}
	if diff := cmp.Diff(want, snap); diff != "" {
		t.Errorf("snapshot (-want +got):\n%s", diff)
	}
}

func TestObserveNoLocalQueue(t *testing.T) {
	snap, err := Observe(context.Background(), fakeDynamic(), "ns", "team-a")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(&LocalQueue{Name: "team-a"}, snap.LocalQueue); diff != "" {
		t.Errorf("local queue (-want +got):\n%s", diff)
	}
}

// TestObserveUnavailable: without RBAC on Kueue's objects, or without Kueue, the snapshot says so and the read is not
// an error; any other failure is.
func TestObserveUnavailable(t *testing.T) {
	gr := schema.GroupResource{Group: "kueue.x-k8s.io", Resource: "workloads"}
	tests := []struct {
		name    string
		verb    string
		err     error
		want    string // in Unavailable; "" = an error is returned
		wantErr string
	}{
		{"no list on workloads", "list", apierrors.NewForbidden(gr, "", nil), "cannot list workloads (grant get and list on workloads and localqueues", ""},
		{"no get on localqueues", "get", apierrors.NewForbidden(schema.GroupResource{Group: "kueue.x-k8s.io", Resource: "localqueues"}, "team-a", nil), "cannot get localqueues", ""},
		{"Kueue not installed", "list", apierrors.NewNotFound(gr, ""), "is not served: is Kueue installed?", ""},
		{"the API server fails", "list", apierrors.NewInternalError(errors.New("etcd is gone")), "", "listing Kueue Workloads in ns"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dyn := fakeDynamic(localQueueObj())
			dyn.PrependReactor(tc.verb, "*", func(clienttesting.Action) (bool, runtime.Object, error) { return true, nil, tc.err })
			snap, err := Observe(context.Background(), dyn, "ns", "team-a")
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want one mentioning %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(snap.Unavailable, tc.want) || !strings.Contains(snap.Unavailable, "counted as queued") {
				t.Errorf("Unavailable = %q, want it to mention %q and that suspended Jobs count as queued", snap.Unavailable, tc.want)
			}
		})
	}
}

func TestWhy(t *testing.T) {
	summary := func(u *unstructured.Unstructured) *Workload {
		w, ok := summarize(u)
		if !ok {
			t.Fatal("not summarized")
		}
		return w
	}
	tests := []struct {
		name string
		w    *Workload
		want string
	}{
		{"no Workload", nil, "no Workload yet: Kueue has not seen the Job"},
		{"new", summary(workload("a", "u", "")), "pending: Kueue has not tried to admit it yet"},
		{"insufficient quota", summary(workload("a", "u", "", cond(CondQuotaReserved, "False", "Pending", "insufficient unused quota for cpu in flavor default"))),
			"no quota reserved (Pending: insufficient unused quota for cpu in flavor default)"},
		{"waiting for checks", summary(workload("a", "u", "cq", cond(CondQuotaReserved, "True", "QuotaReserved", "Quota reserved in ClusterQueue cq"),
			cond(CondAdmitted, "False", "UnsatisfiedAdmissionChecks", "The workload has not all admission checks"))),
			"quota reserved in ClusterQueue cq, waiting for admission checks (UnsatisfiedAdmissionChecks: The workload has not all admission checks)"},
		{"admitted", summary(workload("a", "u", "cq", cond(CondQuotaReserved, "True", "QuotaReserved", ""), cond(CondAdmitted, "True", "Admitted", ""))),
			"admitted to ClusterQueue cq: Kueue is starting it"},
		{"evicted and requeued", summary(workload("a", "u", "", cond(CondEvicted, "True", "Preempted", "Preempted to accommodate a workload due to prioritization"),
			cond(CondRequeued, "True", "Preempted", ""), cond(CondQuotaReserved, "False", "Preempted", "Preempted to accommodate a workload"))),
			"evicted (Preempted: Preempted to accommodate a workload due to prioritization); no quota reserved (Preempted: Preempted to accommodate a workload)"},
		{"evicted, not requeued", summary(workload("a", "u", "", cond(CondEvicted, "True", "Deactivated", "deactivated"),
			cond(CondRequeued, "False", "Deactivated", "not active"))),
			"evicted (Deactivated: deactivated); not requeued (Deactivated: not active); pending: Kueue has not tried to admit it yet"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := tc.w.Why()
			if !strings.HasPrefix(got, tc.want) {
				t.Errorf("Why() = %q, want %q", got, tc.want)
			}
		})
	}
}
