package report

import (
	"context"
	"testing"
	"time"

	"k8s.io/utils/ptr"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"

	"github.com/jobsched/jobsched/pkg/capacity"
	kueuemode "github.com/jobsched/jobsched/pkg/capacity/kueue"
	"github.com/jobsched/jobsched/pkg/config"
	"github.com/jobsched/jobsched/pkg/kueue"
	"github.com/jobsched/jobsched/pkg/render"
	"github.com/jobsched/jobsched/pkg/scheduler"
	"github.com/jobsched/jobsched/pkg/testkit"
)

func kueueMode(n int) func(*config.Config) {
	return func(c *config.Config) {
		c.Limits.Capacity, c.Limits.MaxQueued, c.Kueue = config.CapacityKueue, ptr.To(n), &config.Kueue{LocalQueue: "team-a"}
	}
}

// TestStatusKueue: status reads the Workloads and the LocalQueue (and only reads): each queued Job has Kueue's
// reason and its Workload, and the Kueue section has the LocalQueue's counts and the maxQueued bound.
func TestStatusKueue(t *testing.T) {
	q, r := makeJob("q").Suspended().Obj(), makeJob("r").Obj()
	wl := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload",
		"metadata": map[string]any{"name": "job-q-abcde", "namespace": "batch", "ownerReferences": []any{map[string]any{
			"apiVersion": "batch/v1", "kind": "Job", "name": q.Name, "uid": string(q.UID), "controller": true}}},
		"status": map[string]any{"conditions": []any{map[string]any{"type": "QuotaReserved", "status": "False", "reason": "Pending",
			"message":            "couldn't assign flavors to pod set main: insufficient unused quota for cpu in flavor default, 100m more needed",
			"lastTransitionTime": now.Format(time.RFC3339)}}},
	}}
	lq := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "LocalQueue",
		"metadata": map[string]any{"name": "team-a", "namespace": "batch"},
		"spec":     map[string]any{"clusterQueue": "cq"},
		"status":   map[string]any{"pendingWorkloads": int64(1), "admittedWorkloads": int64(1)},
	}}
	dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), map[schema.GroupVersionResource]string{
		kueue.WorkloadsResource: "WorkloadList", kueue.LocalQueuesResource: "LocalQueueList"}, wl, lq)
	cfg := testConfig(t, kueueMode(3))
	client := testkit.NewFake(q, r)
	s := &scheduler.Scheduler{Config: cfg, Kube: client, Dynamic: dyn, Source: &source{Rows: rowsFor("x")}, Renderer: render.New(cfg, nil), Now: func() time.Time { return now }}
	st, err := StatusOf(context.Background(), s)
	if err != nil {
		t.Fatal(err)
	}
	want := &kueuemode.Status{MaxQueued: 3, Queued: 1, LocalQueue: &kueue.LocalQueue{Name: "team-a", Found: true, ClusterQueue: "cq", Pending: 1, Admitted: 1}}
	if diff := cmp.Diff([]capacity.Field{{Key: "kueue", Value: want}}, st.Mode.Fields); diff != "" {
		t.Errorf("kueue (-want +got):\n%s", diff)
	}
	if st.States[scheduler.StateQueued] != 1 || st.Slots != 2 || st.Limit != "limits.maxQueued: 1 of 3 queued" {
		t.Errorf("states %v, slots %d (%s); want 1 queued, 2 slots bound by maxQueued", st.States, st.Slots, st.Limit)
	}
	for _, j := range st.Jobs {
		if j.Name == q.Name && (j.Holder != "job-q-abcde" || j.Reason != "no quota reserved (Pending: couldn't assign flavors to pod set main: insufficient unused quota for cpu in flavor default, 100m more needed)") {
			t.Errorf("the queued Job in status: %+v", j)
		}
	}
	for _, a := range dyn.Actions() {
		if v := a.GetVerb(); v != "list" && v != "get" {
			t.Errorf("status wrote to Kueue's objects: %s %s", v, a.GetResource().Resource)
		}
	}
	for _, a := range client.Actions() {
		if v := a.GetVerb(); v != "list" && v != "watch" && v != "get" {
			t.Errorf("status wrote: %s %s", v, a.GetResource().Resource)
		}
	}
}
