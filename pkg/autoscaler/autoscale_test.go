package autoscaler

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/jobsched/jobsched/pkg/config"
	"github.com/jobsched/jobsched/pkg/testkit"
)

func q(s string) resource.Quantity { return resource.MustParse(s) }

// TestExcluded: a pod may land on a NodePool's nodes when it tolerates the template's taints (startupTaints are not
// there) and some value of each label it asks for is one the pool's nodes can carry: its template labels, what its
// requirements allow, any value of a well-known label, and no other label.
func TestExcluded(t *testing.T) {
	pool := Pool{Kind: KindNodePool, Name: "batch", Labels: map[string]string{"team": "a"},
		Requirements: []corev1.NodeSelectorRequirement{
			{Key: "karpenter.sh/capacity-type", Operator: corev1.NodeSelectorOpIn, Values: []string{"on-demand"}},
			{Key: "tier", Operator: corev1.NodeSelectorOpNotIn, Values: []string{"gold"}},
			{Key: "gen", Operator: corev1.NodeSelectorOpGt, Values: []string{"3"}},
		},
		Taints: []corev1.Taint{{Key: "batch", Value: "true", Effect: corev1.TaintEffectNoSchedule}}}
	tolerates := []corev1.Toleration{{Key: "batch", Operator: corev1.TolerationOpExists}}
	affinity := func(reqs ...corev1.NodeSelectorRequirement) *corev1.Affinity {
		return &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
			NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: reqs}}}}}
	}
	tests := []struct {
		name string
		spec corev1.PodSpec
		want string
	}{
		{"tolerates, asks nothing", corev1.PodSpec{Tolerations: tolerates}, ""},
		{"taint not tolerated", corev1.PodSpec{}, "taint batch=true:NoSchedule not tolerated"},
		{"the template's label", corev1.PodSpec{Tolerations: tolerates, NodeSelector: map[string]string{"team": "a"}}, ""},
		{"another value of the template's label", corev1.PodSpec{Tolerations: tolerates, NodeSelector: map[string]string{"team": "b"}},
			"label team: no value both the pod and the NodePool allow"},
		{"a value the requirement allows", corev1.PodSpec{Tolerations: tolerates, NodeSelector: map[string]string{"karpenter.sh/capacity-type": "on-demand"}}, ""},
		{"a value the requirement excludes", corev1.PodSpec{Tolerations: tolerates, NodeSelector: map[string]string{"karpenter.sh/capacity-type": "spot"}},
			"label karpenter.sh/capacity-type: no value both the pod and the NodePool allow"},
		{"NotIn leaves other values", corev1.PodSpec{Tolerations: tolerates, NodeSelector: map[string]string{"tier": "silver"}}, ""},
		{"NotIn excludes its value", corev1.PodSpec{Tolerations: tolerates, NodeSelector: map[string]string{"tier": "gold"}},
			"label tier: no value both the pod and the NodePool allow"},
		{"Gt meets Lt", corev1.PodSpec{Tolerations: tolerates, Affinity: affinity(corev1.NodeSelectorRequirement{Key: "gen", Operator: corev1.NodeSelectorOpLt, Values: []string{"6"}})}, ""},
		{"Gt misses Lt", corev1.PodSpec{Tolerations: tolerates, Affinity: affinity(corev1.NodeSelectorRequirement{Key: "gen", Operator: corev1.NodeSelectorOpLt, Values: []string{"4"}})},
			"label gen: no value both the pod and the NodePool allow"},
		{"a well-known label the pool leaves open", corev1.PodSpec{Tolerations: tolerates, NodeSelector: map[string]string{corev1.LabelTopologyZone: "z1"}}, ""},
		{"a provider's label the pool leaves open", corev1.PodSpec{Tolerations: tolerates, NodeSelector: map[string]string{"karpenter.kwok.sh/instance-size": "large"}}, ""},
		{"a label the pool's nodes lack", corev1.PodSpec{Tolerations: tolerates, NodeSelector: map[string]string{"disk": "ssd"}},
			"label disk: no value both the pod and the NodePool allow"},
		{"DoesNotExist on a label the pool's nodes lack", corev1.PodSpec{Tolerations: tolerates,
			Affinity: affinity(corev1.NodeSelectorRequirement{Key: "disk", Operator: corev1.NodeSelectorOpDoesNotExist})}, ""},
		{"DoesNotExist on the template's label", corev1.PodSpec{Tolerations: tolerates,
			Affinity: affinity(corev1.NodeSelectorRequirement{Key: "team", Operator: corev1.NodeSelectorOpDoesNotExist})},
			"label team: no value both the pod and the NodePool allow"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := pool.Excluded(&tc.spec); got != tc.want {
				t.Errorf("Excluded = %q, want %q", got, tc.want)
			}
		})
	}
	startup := Pool{Kind: KindNodePool, Name: "open"}
	if got := startup.Excluded(&corev1.PodSpec{}); got != "" {
		t.Errorf("a pool without taints or requirements: %q", got)
	}
}

// TestParseStatus reads the node groups of the cluster-autoscaler's documented YAML status (testdata), and refuses
// the text of older releases and what is not its status.
func TestParseStatus(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("testdata", "cluster-autoscaler-status.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	got, err := ParseStatus(string(data))
	if err != nil {
		t.Fatal(err)
	}
	want := []Pool{
		{Kind: KindNodeGroup, Name: "pool-batch", Group: &Group{MinSize: 0, MaxSize: 10, Target: 4, Ready: 2, Registered: 3}},
		{Kind: KindNodeGroup, Name: "pool-small", Group: &Group{MinSize: 1, MaxSize: 2, Target: 2, Ready: 2, Registered: 2}},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("groups (-want +got):\n%s", diff)
	}
	for name, bad := range map[string]string{
		"empty":       "",
		"text status": "Cluster-autoscaler status at 2018-07-25 22:59:22.067828801 +0000 UTC:\nCluster-wide:\n  Health: Healthy",
		"not YAML":    "nodeGroups: [",
		"not its own": "foo: bar\n",
	} {
		if _, err := ParseStatus(bad); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

func nodePoolObj(name string, limits map[string]any, used map[string]any, ready string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": map[string]any{"name": name},
		"spec": map[string]any{"template": map[string]any{
			"metadata": map[string]any{"labels": map[string]any{"team": "a"}},
			"spec": map[string]any{
				"nodeClassRef":  map[string]any{"group": "karpenter.kwok.sh", "kind": "KWOKNodeClass", "name": "default"},
				"requirements":  []any{map[string]any{"key": "karpenter.sh/capacity-type", "operator": "In", "values": []any{"on-demand"}, "minValues": int64(1)}},
				"taints":        []any{map[string]any{"key": "batch", "effect": "NoSchedule"}},
				"startupTaints": []any{map[string]any{"key": "starting", "effect": "NoSchedule"}},
			}}},
		"status": map[string]any{"resources": used,
			"conditions": []any{map[string]any{"type": "Ready", "status": ready, "reason": "NodeClassNotReady", "message": "", "lastTransitionTime": "2026-12-01T00:00:00Z"}}},
	}}
	if limits != nil {
		if err := unstructured.SetNestedMap(u.Object, limits, "spec", "limits"); err != nil {
			panic(err) // spec is a map above
		}
	}
	return u
}

func nodeClaimObj(name, pool string, registered string, alloc map[string]any, created string) *unstructured.Unstructured {
	capacity := map[string]any{}
	for k := range alloc {
		capacity[k] = "4"
	}
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "karpenter.sh/v1", "kind": "NodeClaim",
		"metadata": map[string]any{"name": name, "labels": map[string]any{"karpenter.sh/nodepool": pool}, "creationTimestamp": created},
		"status": map[string]any{"allocatable": alloc, "capacity": capacity, "providerID": "kwok://" + name,
			"conditions": []any{map[string]any{"type": "Registered", "status": registered, "reason": "x", "message": "", "lastTransitionTime": "2026-12-01T00:00:00Z"}}},
	}}
}

func deleting(u *unstructured.Unstructured) *unstructured.Unstructured {
	u.SetDeletionTimestamp(&metav1.Time{Time: time.Date(2026, 12, 1, 0, 0, 5, 0, time.UTC)})
	return u
}

func dynamicClient(objs ...runtime.Object) *dynamicfake.FakeDynamicClient {
	return dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(),
		map[schema.GroupVersionResource]string{NodePools: "NodePoolList", NodeClaims: "NodeClaimList"}, objs...)
}

// TestRead: Karpenter's NodePools (requirements, taints without the startupTaints, limits, status.resources, Ready)
// and their launching NodeClaims (launched, not registered); a NodePool or NodeClaim that cannot be read fails no
// pass: its pool adds nothing and says why (a template that cannot use it is kept off it by its taints and labels,
// read apart); without Karpenter's API the cluster-autoscaler's ConfigMap; neither, or no grant, is a State without
// source that says why.
func TestRead(t *testing.T) {
	ctx := context.Background()
	dyn := dynamicClient(
		nodePoolObj("batch", map[string]any{"cpu": "12"}, map[string]any{"cpu": "8", "nodes": "2"}, "True"),
		nodePoolObj("broken", nil, nil, "False"),
		nodeClaimObj("batch-a", "batch", "False", map[string]any{"cpu": "3900m", "pods": "110"}, "2026-12-01T00:00:02Z"),
		nodeClaimObj("batch-b", "batch", "True", map[string]any{"cpu": "3800m"}, "2026-12-01T00:00:01Z"),
		nodeClaimObj("batch-c", "batch", "Unknown", nil, "2026-12-01T00:00:03Z"),                                   // not launched: in no status.resources yet
		deleting(nodeClaimObj("batch-d", "batch", "True", map[string]any{"cpu": "3900m"}, "2026-12-01T00:00:00Z")), // being deleted: Karpenter counts it no more
		nodePoolObj("malformed", map[string]any{"cpu": "a lot"}, nil, "True"),                                      // fails no pass: it adds nothing
		nodeClaimObj("malformed-a", "malformed", "False", map[string]any{"cpu": "many"}, "2026-12-01T00:00:02Z"),
	)
	st, err := Read(ctx, dyn, testkit.NewFake())
	if err != nil {
		t.Fatal(err)
	}
	want := &State{Source: Karpenter, Pools: []Pool{
		{Kind: KindNodePool, Name: "batch", Limits: corev1.ResourceList{"cpu": q("12")}, Used: corev1.ResourceList{"cpu": q("8"), "nodes": q("2")},
			// Each NodeClaim charged the larger of its capacity and allocatable: KWOK's report their pods' requests as
			// capacity (here pods 4 of an allocatable 110), Karpenter charges the node's.
			Claimed:   corev1.ResourceList{"cpu": q("8"), "pods": q("110"), "nodes": q("3")},
			Launching: map[string]Launch{"batch-a": {ProviderID: "kwok://batch-a", Allocatable: corev1.ResourceList{"cpu": q("3900m"), "pods": q("110")}}},
			Disrupted: []string{"kwok://batch-d"},
			Shape:     &Shape{Capacity: corev1.ResourceList{"cpu": q("4"), "pods": q("4")}, Allocatable: corev1.ResourceList{"cpu": q("3900m"), "pods": q("110")}, From: "batch-a"},
			Labels:    map[string]string{"team": "a"}, Requirements: []corev1.NodeSelectorRequirement{{Key: "karpenter.sh/capacity-type", Operator: "In", Values: []string{"on-demand"}}},
			Taints: []corev1.Taint{{Key: "batch", Effect: corev1.TaintEffectNoSchedule}}},
		{Kind: KindNodePool, Name: "broken", Labels: map[string]string{"team": "a"},
			Requirements: []corev1.NodeSelectorRequirement{{Key: "karpenter.sh/capacity-type", Operator: "In", Values: []string{"on-demand"}}},
			Taints:       []corev1.Taint{{Key: "batch", Effect: corev1.TaintEffectNoSchedule}}, Unavailable: "not Ready: NodeClassNotReady"},
		{Kind: KindNodePool, Name: "malformed", Labels: map[string]string{"team": "a"},
			Requirements: []corev1.NodeSelectorRequirement{{Key: "karpenter.sh/capacity-type", Operator: "In", Values: []string{"on-demand"}}},
			Taints:       []corev1.Taint{{Key: "batch", Effect: corev1.TaintEffectNoSchedule}},
			Unavailable:  `cannot read it: spec.limits: quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'; cannot read NodeClaim malformed-a: status.allocatable: quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'`},
	}}
	if diff := cmp.Diff(want, st, cmp.Comparer(func(a, b resource.Quantity) bool { return a.Cmp(b) == 0 })); diff != "" {
		t.Errorf("state (-want +got):\n%s", diff)
	}

	data, err := os.ReadFile(filepath.Join("testdata", "cluster-autoscaler-status.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "cluster-autoscaler-status"}, Data: map[string]string{"status": string(data)}}
	notServed := dynamicClient()
	notServed.PrependReactor("list", "nodepools", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewNotFound(schema.GroupResource{Group: "karpenter.sh", Resource: "nodepools"}, "")
	})
	forbidden := dynamicClient()
	forbidden.PrependReactor("list", "nodepools", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewForbidden(schema.GroupResource{Group: "karpenter.sh", Resource: "nodepools"}, "", nil)
	})
	if st, err := Read(ctx, notServed, testkit.NewFake(cm)); err != nil || st.Source != ClusterAutoscaler || len(st.Pools) != 2 {
		t.Errorf("no Karpenter, a cluster-autoscaler: %+v, %v", st, err)
	}
	st, err = Read(ctx, forbidden, testkit.NewFake())
	if err != nil || st.Source != "" || !strings.Contains(st.Note, "cannot read Karpenter's NodePools") || !strings.Contains(st.Note, "no cluster-autoscaler") {
		t.Errorf("no grant, no cluster-autoscaler: %+v, %v", st, err)
	}
	kube := testkit.NewFake()
	kube.PrependReactor("get", "configmaps", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewForbidden(schema.GroupResource{Resource: "configmaps"}, "cluster-autoscaler-status", nil)
	})
	st, err = Read(ctx, nil, kube)
	if err != nil || st.Source != "" || !strings.Contains(st.Note, "cannot get ConfigMap kube-system/cluster-autoscaler-status") {
		t.Errorf("no grant on the ConfigMap: %+v, %v", st, err)
	}
	broken := dynamicClient()
	broken.PrependReactor("list", "nodepools", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewInternalError(context.DeadlineExceeded)
	})
	if _, err := Read(ctx, broken, testkit.NewFake()); err == nil {
		t.Error("a failed list is no error")
	}
}

// event is an Event of pod as Karpenter's recorder writes it (source.component karpenter), created at at.
func event(pod, reason, msg string, at time.Time) *corev1.Event {
	return &corev1.Event{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: pod + "." + reason + at.Format("150405"),
		CreationTimestamp: metav1.NewTime(at)},
		InvolvedObject: corev1.ObjectReference{Kind: "Pod", Namespace: "ns", Name: pod}, Reason: reason, Message: msg,
		Source: corev1.EventSource{Component: "karpenter"}, LastTimestamp: metav1.NewTime(at)}
}

// writtenBy is e written by component (source.component and reportingController), its writer's clock saying last.
func writtenBy(e *corev1.Event, component string, last time.Time) *corev1.Event {
	e.Source.Component, e.ReportingController, e.LastTimestamp = component, component, metav1.NewTime(last)
	e.Name += "." + component
	return e
}

// TestWaits: the latest of a pod's Events that speak of the autoscaler decides: Nominated and TriggeredScaleUp
// provide, Karpenter's FailedScheduling at the limits or with no instance type, and NotTriggerScaleUp do not;
// kube-scheduler's FailedScheduling says nothing, nor does an Event of another writer than the autoscaler's (anyone
// may create Events); a writer's time is bounded by when the API server stored the Event. A forbidden list is an
// error.
func TestWaits(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	later, forged := t0.Add(time.Minute), time.Date(2099, 1, 1, 0, 0, 0, 0, time.UTC)
	kube := testkit.NewFake(
		event("a", "FailedScheduling", "0/3 nodes are available: 3 Insufficient cpu.", later),
		event("a", "Nominated", "Pod should schedule on: nodeclaim/batch-x", t0),
		event("b", "Nominated", "Pod should schedule on: nodeclaim/batch-y", t0),
		event("b", "FailedScheduling", "Failed to schedule pod, all available instance types exceed limits for nodepool (NodePool=batch)", later),
		event("c", "FailedScheduling", "Failed to schedule pod, no instance type has enough resources", t0),
		event("d", "NotTriggerScaleUp", "pod didn't trigger scale-up: 1 max node group size reached", t0),
		event("d", "TriggeredScaleUp", "pod triggered scale-up: [{pool-batch 2->3 (max: 10)}]", later),
		event("e", "FailedScheduling", "0/3 nodes are available", t0),
		event("f", "NotTriggerScaleUp", "pod didn't trigger scale-up: 1 max node group size reached", t0),
		// A Nominated anyone could write: another component's, dated 2099, says nothing against Karpenter's word.
		event("h", "FailedScheduling", "Failed to schedule pod, all available instance types exceed limits for nodepool (NodePool=batch)", t0),
		writtenBy(event("h", "Nominated", "Pod should schedule on: nodeclaim/forged", t0), "mallory", forged),
		// One that names Karpenter but dates itself 2099 ranks at its creation: Karpenter's later word outranks it.
		writtenBy(event("i", "Nominated", "Pod should schedule on: nodeclaim/forged", t0), "karpenter", forged),
		event("i", "FailedScheduling", "Failed to schedule pod, all available instance types exceed limits for nodepool (NodePool=batch)", later),
		// The events.k8s.io API sets only reportingController.
		func() *corev1.Event {
			e := event("j", "Nominated", "Pod should schedule on: nodeclaim/batch-z", t0)
			e.Source.Component, e.ReportingController = "", "karpenter"
			return e
		}(),
	)
	got, err := Waits(context.Background(), kube, "ns", []string{"a", "b", "c", "d", "e", "f", "g", "h", "i", "j"}, config.DefaultAutoscalerEvents)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]Wait{
		"a": {Provided: true, Event: "Nominated: Pod should schedule on: nodeclaim/batch-x"},
		"b": {Event: "FailedScheduling: Failed to schedule pod, all available instance types exceed limits for nodepool (NodePool=batch)"},
		"c": {Event: "FailedScheduling: Failed to schedule pod, no instance type has enough resources"},
		"d": {Provided: true, Event: "TriggeredScaleUp: pod triggered scale-up: [{pool-batch 2->3 (max: 10)}]"},
		"f": {Event: "NotTriggerScaleUp: pod didn't trigger scale-up: 1 max node group size reached"},
		"h": {Event: "FailedScheduling: Failed to schedule pod, all available instance types exceed limits for nodepool (NodePool=batch)"},
		"i": {Event: "FailedScheduling: Failed to schedule pod, all available instance types exceed limits for nodepool (NodePool=batch)"},
		"j": {Provided: true, Event: "Nominated: Pod should schedule on: nodeclaim/batch-z"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("waits (-want +got):\n%s", diff)
	}
	var lists []string
	for _, a := range kube.Actions() {
		if l, ok := a.(k8stesting.ListAction); ok {
			lists = append(lists, l.GetListRestrictions().Fields.String())
		}
	}
	if len(lists) != 10 || !strings.Contains(lists[0], "involvedObject.kind=Pod") {
		t.Errorf("lists %v, want one per pod with a field selector on it", lists)
	}
	forbidden := testkit.NewFake()
	forbidden.PrependReactor("list", "events", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewForbidden(schema.GroupResource{Resource: "events"}, "", nil)
	})
	if _, err := Waits(context.Background(), forbidden, "ns", []string{"a"}, config.DefaultAutoscalerEvents); !apierrors.IsForbidden(err) {
		t.Errorf("forbidden: %v", err)
	}
}
