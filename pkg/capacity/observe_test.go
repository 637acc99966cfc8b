package capacity

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"k8s.io/utils/ptr"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	nodev1 "k8s.io/api/node/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	k8stesting "k8s.io/client-go/testing"

	"github.com/jobsched/jobsched/pkg/config"
	"github.com/jobsched/jobsched/pkg/jobmeta"
	"github.com/jobsched/jobsched/pkg/kube"
	"github.com/jobsched/jobsched/pkg/testkit"
)

func kubeNode(name string, ready corev1.ConditionStatus, alloc corev1.ResourceList) *corev1.Node {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"zone": "a"}}}
	n.Status.Allocatable = alloc
	n.Status.Conditions = []corev1.NodeCondition{
		{Type: corev1.NodeMemoryPressure, Status: corev1.ConditionFalse},
		{Type: corev1.NodeReady, Status: ready},
	}
	return n
}

func kubePod(ns, name, node string, phase corev1.PodPhase, req corev1.ResourceList) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	p.Spec.NodeName = node
	p.Spec.Containers = []corev1.Container{ctr(req, nil)}
	p.Status.Phase = phase
	return p
}

func kubeQuota(ns, name string) *corev1.ResourceQuota {
	return &corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: corev1.ResourceQuotaSpec{Hard: rl("pods", "10")}}
}

func clusterObjects() []runtime.Object {
	cordoned := kubeNode("n2", corev1.ConditionTrue, rl("cpu", "8", "memory", "16Gi", "pods", "110"))
	cordoned.Spec.Unschedulable = true
	cordoned.Spec.Taints = []corev1.Taint{gpuTaint}
	deleting := kubePod("other", "deleting", "n2", corev1.PodRunning, rl("cpu", "2"))
	deleting.DeletionTimestamp = &metav1.Time{}
	deleting.Finalizers = []string{"example.com/hold"}
	ours := kubePod("batch", "ours-unbound", "", corev1.PodPending, rl("cpu", "1")) // counted by the caller
	ours.Labels = map[string]string{jobmeta.LabelScheduler: "e2e"}
	tick := kubePod("batch", "tick-1", "n1", corev1.PodRunning, rl("cpu", "100m"))
	tick.Spec.NodeSelector = map[string]string{"zone": "a"}
	return []runtime.Object{
		cordoned,
		kubeNode("n1", corev1.ConditionTrue, rl("cpu", "4", "memory", "8Gi", "pods", "110")),
		kubeNode("n3", corev1.ConditionUnknown, rl("cpu", "4", "memory", "8Gi", "pods", "110")),
		kubePod("batch", "a", "n1", corev1.PodRunning, rl("cpu", "1")),
		kubePod("batch", "b", "n1", corev1.PodPending, rl("cpu", "500m", "memory", "1Gi")),
		kubePod("other", "c", "n2", corev1.PodRunning, rl("memory", "2Gi")),
		deleting,
		kubePod("batch", "pending", "", corev1.PodPending, rl("cpu", "1")),
		kubePod("batch", "done", "n1", corev1.PodSucceeded, rl("cpu", "1")),
		kubePod("batch", "failed", "n2", corev1.PodFailed, rl("cpu", "1")),
		kubePod("batch", "elsewhere", "gone", corev1.PodRunning, rl("cpu", "1")),
		ours,
		tick,
		kubeQuota("batch", "compute"),
		kubeQuota("other", "not-ours"),
		&corev1.LimitRange{ObjectMeta: metav1.ObjectMeta{Namespace: "batch", Name: "defaults"}},
		&corev1.LimitRange{ObjectMeta: metav1.ObjectMeta{Namespace: "other", Name: "not-ours"}},
		&nodev1.RuntimeClass{ObjectMeta: metav1.ObjectMeta{Name: "kata"}, Handler: "kata"},
	}
}

var wantNodes = []Node{
	{Name: "n1", Labels: map[string]string{"zone": "a"}, Ready: true,
		Allocatable: rl("cpu", "4", "memory", "8Gi", "pods", "110"), Requested: req("cpu", "1600m", "memory", "1Gi"), Pods: 3},
	{Name: "n2", Labels: map[string]string{"zone": "a"}, Ready: true, Unschedulable: true, Taints: []corev1.Taint{gpuTaint},
		Allocatable: rl("cpu", "8", "memory", "16Gi", "pods", "110"), Requested: req("cpu", "2", "memory", "2Gi"), Pods: 2},
	{Name: "n3", Labels: map[string]string{"zone": "a"}, Ready: false,
		Allocatable: rl("cpu", "4", "memory", "8Gi", "pods", "110"), Requested: nil},
}

func forbidden(resource string) k8stesting.ReactionFunc {
	return func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewForbidden(schema.GroupResource{Resource: resource}, "",
			errors.New(`User "system:serviceaccount:batch:jobsched" cannot list resource`))
	}
}

func failing(err error) k8stesting.ReactionFunc {
	return func(k8stesting.Action) (bool, runtime.Object, error) { return true, nil, err }
}

// fieldFiltering makes the fake clientset apply the pod field selectors Observe uses (the fake ignores them; the
// API server does not).
func fieldFiltering(c *testkit.Fake) {
	c.PrependReactor("list", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
		sel, err := fields.ParseSelector(a.(k8stesting.ListActionImpl).GetListOptions().FieldSelector)
		if err != nil {
			return true, nil, err
		}
		obj, err := c.Tracker().List(corev1.SchemeGroupVersion.WithResource("pods"), corev1.SchemeGroupVersion.WithKind("Pod"), a.GetNamespace())
		if err != nil {
			return true, nil, err
		}
		list := obj.(*corev1.PodList)
		var kept []corev1.Pod
		for _, p := range list.Items {
			if sel.Matches(fields.Set{"metadata.name": p.Name, "spec.nodeName": p.Spec.NodeName, "status.phase": string(p.Status.Phase)}) {
				kept = append(kept, p)
			}
		}
		list.Items = kept
		return true, list, nil
	})
}

func template(mods ...func(*corev1.PodSpec)) *batchv1.Job {
	return job(spec(mods...))
}

func TestObserve(t *testing.T) {
	boom := apierrors.NewInternalError(errors.New("etcd down"))
	allPods := "pods?fieldSelector=status.phase%21%3DSucceeded%2Cstatus.phase%21%3DFailed&limit=500"
	kata := func(s *corev1.PodSpec) { s.RuntimeClassName = ptr.To("kata") }
	gvisor := func(s *corev1.PodSpec) { s.RuntimeClassName = ptr.To("gvisor") }
	tests := []struct {
		name         string
		opts         Options
		reactors     map[string]k8stesting.ReactionFunc // "verb resource" → reactor
		wantNodes    []Node
		wantMode     config.Capacity
		wantQuotas   int
		wantLRs      int
		wantRC       bool
		wantPending  []string
		wantTick     *corev1.PodSpec
		wantWarnings []string // substrings, one per warning
		wantErr      error
		wantActions  []string // verb resource?options of each call
	}{
		{
			name: "nodes: aggregation per node", opts: Options{Nodes: true, Templates: []*batchv1.Job{template()}, Scheduler: "e2e"},
			wantNodes: wantNodes, wantMode: config.CapacityNodes, wantQuotas: 1, wantLRs: 1, wantPending: []string{"batch/pending"},
			wantActions: []string{"list limitranges", "list nodes?limit=500", "list " + allPods, "list resourcequotas"},
		},
		{
			name: "nodes: the tick is the pod the pass runs in", opts: Options{Nodes: true, Templates: []*batchv1.Job{template()}, Scheduler: "e2e", Self: "tick-1"},
			wantNodes: wantNodes, wantMode: config.CapacityNodes, wantQuotas: 1, wantLRs: 1, wantPending: []string{"batch/pending"},
			wantTick: &corev1.PodSpec{NodeName: "n1", NodeSelector: map[string]string{"zone": "a"}, Containers: []corev1.Container{ctr(rl("cpu", "100m"), nil)}},
			wantActions: []string{"list limitranges", "list nodes?limit=500", "list pods?fieldSelector=metadata.name%3Dtick-1",
				"list " + allPods, "list resourcequotas"},
		},
		{
			name: "nodes: our pod is not found: no tick, said", opts: Options{Nodes: true, Templates: []*batchv1.Job{template()}, Scheduler: "e2e", Self: "laptop"},
			wantNodes: wantNodes, wantMode: config.CapacityNodes, wantQuotas: 1, wantLRs: 1, wantPending: []string{"batch/pending"},
			wantWarnings: []string{`no pod "laptop" in batch`},
			wantActions: []string{"list limitranges", "list nodes?limit=500", "list pods?fieldSelector=metadata.name%3Dlaptop",
				"list " + allPods, "list resourcequotas"},
		},
		{
			name: "nodes: no tick asked", opts: Options{Nodes: true, Templates: []*batchv1.Job{template()}, Scheduler: "e2e", Self: "tick-1", NoNextPassRoom: true},
			wantNodes: wantNodes, wantMode: config.CapacityNodes, wantQuotas: 1, wantLRs: 1, wantPending: []string{"batch/pending"},
			wantActions: []string{"list limitranges", "list nodes?limit=500", "list " + allPods, "list resourcequotas"},
		},
		{
			name: "quota: no node or pod list", opts: Options{Templates: []*batchv1.Job{template()}}, wantMode: config.CapacityQuota, wantQuotas: 1, wantLRs: 1,
			wantActions: []string{"list limitranges", "list resourcequotas"},
		},
		{
			name: "quota: the template's RuntimeClass", opts: Options{Templates: []*batchv1.Job{template(kata)}}, wantMode: config.CapacityQuota, wantQuotas: 1, wantLRs: 1,
			wantRC: true, wantActions: []string{"list limitranges", "get runtimeclasses/kata", "list resourcequotas"},
		},
		{
			name: "quota: each RuntimeClass the templates name, once", wantMode: config.CapacityQuota, wantQuotas: 1, wantLRs: 1,
			opts:   Options{Templates: []*batchv1.Job{template(kata), template(), template(gvisor), template(kata)}},
			wantRC: true, wantWarnings: []string{"RuntimeClass gvisor does not exist"},
			wantActions: []string{"list limitranges", "get runtimeclasses/kata", "get runtimeclasses/gvisor", "list resourcequotas"},
		},
		{
			name: "nodes forbidden: quota fallback", opts: Options{Nodes: true, Templates: []*batchv1.Job{template()}},
			reactors: map[string]k8stesting.ReactionFunc{"list nodes": forbidden("nodes")},
			wantMode: config.CapacityQuota, wantQuotas: 1, wantLRs: 1, wantWarnings: []string{"using quota for this pass"},
			wantActions: []string{"list limitranges", "list nodes?limit=500", "list resourcequotas"},
		},
		{
			name: "pods forbidden: quota fallback", opts: Options{Nodes: true, Templates: []*batchv1.Job{template()}, NoNextPassRoom: true},
			reactors: map[string]k8stesting.ReactionFunc{"list pods": forbidden("pods")},
			wantMode: config.CapacityQuota, wantQuotas: 1, wantLRs: 1, wantWarnings: []string{"using quota for this pass"},
			wantActions: []string{"list limitranges", "list nodes?limit=500", "list " + allPods, "list resourcequotas"},
		},
		{
			name: "limitranges forbidden: said, and the template is counted as written", opts: Options{Templates: []*batchv1.Job{template()}},
			reactors: map[string]k8stesting.ReactionFunc{"list limitranges": forbidden("limitranges")},
			wantMode: config.CapacityQuota, wantQuotas: 1, wantWarnings: []string{"the Role needs list on limitranges"},
			wantActions: []string{"list limitranges", "list resourcequotas"},
		},
		{
			name: "runtimeclass forbidden: said, and counted without overhead", opts: Options{Templates: []*batchv1.Job{template(kata)}},
			reactors: map[string]k8stesting.ReactionFunc{"get runtimeclasses": forbidden("runtimeclasses")},
			wantMode: config.CapacityQuota, wantQuotas: 1, wantLRs: 1, wantWarnings: []string{"needs get on runtimeclasses"},
			wantActions: []string{"list limitranges", "get runtimeclasses/kata", "list resourcequotas"},
		},
		{
			name: "runtimeclass missing: said", opts: Options{Templates: []*batchv1.Job{template(gvisor)}},
			wantMode: config.CapacityQuota, wantQuotas: 1, wantLRs: 1, wantWarnings: []string{"RuntimeClass gvisor does not exist"},
			wantActions: []string{"list limitranges", "get runtimeclasses/gvisor", "list resourcequotas"},
		},
		{
			name: "pods error is returned", opts: Options{Nodes: true, Templates: []*batchv1.Job{template()}},
			reactors: map[string]k8stesting.ReactionFunc{"list pods": failing(boom)}, wantErr: boom,
		},
		{
			name: "limitranges error is returned", opts: Options{Templates: []*batchv1.Job{template()}},
			reactors: map[string]k8stesting.ReactionFunc{"list limitranges": failing(boom)}, wantErr: boom,
		},
		{
			name: "quota forbidden is returned", opts: Options{Templates: []*batchv1.Job{template()}},
			reactors: map[string]k8stesting.ReactionFunc{"list resourcequotas": forbidden("resourcequotas")},
			wantErr:  apierrors.NewForbidden(schema.GroupResource{Resource: "resourcequotas"}, "", errors.New("x")),
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := testkit.NewFake(clusterObjects()...)
			fieldFiltering(c)
			for vr, r := range tt.reactors {
				verb, res, _ := strings.Cut(vr, " ")
				c.PrependReactor(verb, res, r)
			}
			snap, err := Observe(context.Background(), c, "batch", tt.opts)
			if tt.wantErr != nil {
				if err == nil || !errors.Is(err, tt.wantErr) && apierrors.ReasonForError(err) != apierrors.ReasonForError(tt.wantErr) {
					t.Fatalf("Observe() error = %v, want %v", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("Observe() error = %v", err)
			}
			if got := actions(c); fmt.Sprint(got) != fmt.Sprint(tt.wantActions) {
				t.Errorf("calls = %q, want %q", got, tt.wantActions)
			}
			if snap.Mode != tt.wantMode || len(snap.Quotas) != tt.wantQuotas || len(snap.LimitRanges) != tt.wantLRs ||
				(len(snap.RuntimeClasses) == 1) != tt.wantRC || !equality.Semantic.DeepEqual(snap.Nodes, tt.wantNodes) {
				t.Errorf("Observe() = mode %s, %d quotas, %d LimitRanges, RuntimeClass %v, nodes\n%+v\nwant mode %s, %d quotas, %d LimitRanges, RuntimeClass %v, nodes\n%+v",
					snap.Mode, len(snap.Quotas), len(snap.LimitRanges), snap.RuntimeClasses, snap.Nodes,
					tt.wantMode, tt.wantQuotas, tt.wantLRs, tt.wantRC, tt.wantNodes)
			}
			var pending []string
			for _, p := range snap.Pending {
				pending = append(pending, p.Namespace+"/"+p.Name)
			}
			if fmt.Sprint(pending) != fmt.Sprint(tt.wantPending) {
				t.Errorf("Pending = %v, want %v", pending, tt.wantPending)
			}
			var tick *corev1.PodSpec
			if snap.NextPassPod != nil {
				tick = &snap.NextPassPod.Spec
			}
			if !equality.Semantic.DeepEqual(tick, tt.wantTick) {
				t.Errorf("Tick = %+v, want %+v", tick, tt.wantTick)
			}
			if len(snap.Warnings) != len(tt.wantWarnings) {
				t.Fatalf("Warnings = %q, want %d like %q", snap.Warnings, len(tt.wantWarnings), tt.wantWarnings)
			}
			for i, w := range tt.wantWarnings {
				if !strings.Contains(snap.Warnings[i], w) {
					t.Errorf("Warnings[%d] = %q, want it to contain %q", i, snap.Warnings[i], w)
				}
			}
		})
	}
}

// actions are the client's calls as "verb resource[/name][?query]", the concurrent per-node LISTs sorted.
func actions(c *testkit.Fake) []string {
	var got []string
	for _, a := range c.Actions() {
		s := a.GetVerb() + " " + a.GetResource().Resource
		switch a := a.(type) {
		case k8stesting.ListActionImpl:
			if q := toQuery(a.GetListOptions()); q != "" {
				s += "?" + q
			}
		case k8stesting.GetActionImpl:
			s += "/" + a.GetName()
		}
		got = append(got, s)
	}
	return got
}

// TestObservePerNode: when the template may use few of many nodes, the pods of those nodes are listed one node at a
// time (and the unbound ones once), and the counts are those of the full listing.
func TestObservePerNode(t *testing.T) {
	objs := []runtime.Object{}
	for i := range 24 { // 3 nodes of 24 is few enough to list per node
		n := kubeNode(fmt.Sprintf("n%02d", i), corev1.ConditionTrue, rl("cpu", "4", "memory", "8Gi", "pods", "110"))
		if i < 2 {
			n.Labels["pool"] = "gpu"
		}
		objs = append(objs, n, kubePod("other", fmt.Sprintf("p%02d", i), n.Name, corev1.PodRunning, rl("cpu", "1")))
	}
	objs = append(objs, kubePod("other", "waiting", "", corev1.PodPending, rl("cpu", "2")))
	tpl := template(func(s *corev1.PodSpec) { s.NodeSelector = map[string]string{"pool": "gpu"} })
	observe := func(o Options) (*Snapshot, []string) {
		c := testkit.NewFake(objs...)
		fieldFiltering(c)
		snap, err := Observe(context.Background(), c, "batch", o)
		if err != nil {
			t.Fatal(err)
		}
		got := actions(c)
		slices.Sort(got)
		return snap, got
	}
	snap, got := observe(Options{Nodes: true, Templates: []*batchv1.Job{tpl}, NoNextPassRoom: true})
	byNode := "list pods?fieldSelector=spec.nodeName%3D"
	phases := "%2Cstatus.phase%21%3DSucceeded%2Cstatus.phase%21%3DFailed&limit=500"
	want := []string{"list limitranges", "list nodes?limit=500", byNode + phases, byNode + "n00" + phases, byNode + "n01" + phases, "list resourcequotas"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("calls =\n%q\nwant\n%q", got, want)
	}
	if snap.Listed != "pods of 2 node(s)" {
		t.Errorf("Listed = %q", snap.Listed)
	}
	// Two templates: the pods of the nodes either may use, each node once.
	pinned := template(func(s *corev1.PodSpec) { s.NodeName = "n05" })
	two, got := observe(Options{Nodes: true, Templates: []*batchv1.Job{tpl, pinned, tpl}, NoNextPassRoom: true})
	want = []string{"list limitranges", "list nodes?limit=500", byNode + phases, byNode + "n00" + phases, byNode + "n01" + phases,
		byNode + "n05" + phases, "list resourcequotas"}
	if fmt.Sprint(got) != fmt.Sprint(want) || two.Listed != "pods of 3 node(s)" {
		t.Errorf("two templates: %s, calls =\n%q\nwant\n%q", two.Listed, got, want)
	}
	// A template that may use every node lists every pod, whatever the others.
	if mixed, _ := observe(Options{Nodes: true, Templates: []*batchv1.Job{tpl, template()}, NoNextPassRoom: true}); mixed.Listed != "all pods" {
		t.Errorf("Listed = %q, want all pods", mixed.Listed)
	}
	all, _ := observe(Options{Nodes: true, Templates: []*batchv1.Job{template()}, NoNextPassRoom: true})
	if all.Listed != "all pods" {
		t.Errorf("Listed = %q, want all pods", all.Listed)
	}
	for i := range 2 {
		if !equality.Semantic.DeepEqual(snap.Nodes[i], all.Nodes[i]) {
			t.Errorf("node %s per node = %+v, listing all = %+v", snap.Nodes[i].Name, snap.Nodes[i], all.Nodes[i])
		}
	}
	if len(snap.Pending) != 1 || len(all.Pending) != 1 {
		t.Errorf("Pending per node %v, listing all %v; want the one unbound pod in both", snap.Pending, all.Pending)
	}
	rep := Fit(tpl, snap, 0, 0)
	if rep.Fit != 4 { // 2 nodes × (4 − 1 cpu) = 6 pods of 1 cpu, minus the 2-cpu unbound pod
		t.Errorf("Fit() = %d (%s), want 4", rep.Fit, rep.Binding)
	}
	// A node's LIST that fails is the error, with its node and cause (not the cancel it gave the others).
	c := testkit.NewFake(objs...)
	fieldFiltering(c)
	c.PrependReactor("list", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if a.(k8stesting.ListActionImpl).GetListOptions().FieldSelector == "spec.nodeName=n01,"+NonTerminal {
			return true, nil, apierrors.NewInternalError(errors.New("etcd down"))
		}
		return false, nil, nil
	})
	_, err := Observe(context.Background(), c, "batch", Options{Nodes: true, Templates: []*batchv1.Job{tpl}, NoNextPassRoom: true})
	if err == nil || !strings.Contains(err.Error(), "on node n01") || !strings.Contains(err.Error(), "etcd down") {
		t.Errorf("a failed LIST of n01's pods: Observe error %v, want it named with its cause", err)
	}
}

func toQuery(o metav1.ListOptions) string {
	v := url.Values{}
	if o.FieldSelector != "" {
		v.Set("fieldSelector", o.FieldSelector)
	}
	if o.Limit != 0 {
		v.Set("limit", strconv.FormatInt(o.Limit, 10))
	}
	if o.Continue != "" {
		v.Set("continue", o.Continue)
	}
	return v.Encode()
}

// TestObservePaginates serves pods two to a page and checks every page is aggregated and each continue token passed.
func TestObservePaginates(t *testing.T) {
	c := testkit.NewFake(kubeNode("n1", corev1.ConditionTrue, rl("cpu", "4", "pods", "110")))
	var continues []string
	c.PrependReactor("list", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
		opts := a.(k8stesting.ListActionImpl).GetListOptions()
		continues = append(continues, opts.Continue)
		page, _ := strconv.Atoi(opts.Continue)
		list := &corev1.PodList{Items: []corev1.Pod{
			*kubePod("batch", "a", "n1", corev1.PodRunning, rl("cpu", "100m")),
			*kubePod("batch", "b", "n1", corev1.PodRunning, rl("cpu", "100m")),
		}}
		if page < 2 {
			list.Continue = strconv.Itoa(page + 1)
		}
		return true, list, nil
	})
	snap, err := Observe(context.Background(), c, "batch", Options{Nodes: true, Templates: []*batchv1.Job{template()}})
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"", "1", "2"}; fmt.Sprint(continues) != fmt.Sprint(want) {
		t.Errorf("continue tokens = %q, want %q", continues, want)
	}
	want := []Node{{Name: "n1", Labels: map[string]string{"zone": "a"}, Ready: true,
		Allocatable: rl("cpu", "4", "pods", "110"), Requested: req("cpu", "600m"), Pods: 6}}
	if !equality.Semantic.DeepEqual(snap.Nodes, want) {
		t.Errorf("Nodes = %+v, want %+v", snap.Nodes, want)
	}
}

// BenchmarkObserve feeds 150,000 pods on 5,000 nodes through the aggregation path in pages of 500, as Observe does
// after each LIST page is decoded (decoding is the client's cost and not measured here). B/node-held is what the
// summed nodes hold of the live heap, a pass's snapshot of them.
func BenchmarkObserve(b *testing.B) {
	const numNodes, numPods = 5000, 150000
	base := make([]Node, numNodes)
	for i := range base {
		base[i] = newNode(kubeNode(fmt.Sprintf("node-%05d", i), corev1.ConditionTrue, rl("cpu", "32", "memory", "128Gi", "pods", "110")))
	}
	// 10 distinct pages cover every node once; they are fed numPods/numNodes times.
	pages := make([][]corev1.Pod, numNodes/kube.PageSize)
	for p := range pages {
		for i := range kube.PageSize {
			pod := kubePod("ns", "p", base[p*kube.PageSize+i].Name, corev1.PodRunning, rl("cpu", "250m", "memory", "512Mi"))
			if i%2 == 0 {
				pod.Spec.Containers = append(pod.Spec.Containers, ctr(nil, rl("cpu", "100m", "memory", "64Mi"))) // a sidecar-ish second container
			}
			pages[p] = append(pages[p], *pod)
		}
	}
	b.ReportAllocs()
	var held uint64
	for b.Loop() {
		held, _ = liveHeap(func() []Node {
			ns := make([]Node, numNodes)
			agg := &aggregator{index: make(map[string]*Node, numNodes)}
			for i := range base {
				ns[i] = base[i]
				ns[i].Requested = nil
				agg.index[ns[i].Name] = &ns[i]
			}
			for range numPods / numNodes {
				for _, page := range pages {
					for i := range page {
						if r, ok := agg.record(&page[i]); ok {
							agg.add(r)
						}
					}
				}
			}
			return ns
		})
	}
	b.ReportMetric(float64(numPods), "pods/op")
	b.ReportMetric(float64(held)/numNodes, "B/node-held") // the snapshot's nodes with their sums, the feed's parts shared
}

// TestSummarizePod: what a pass keeps of one of its Pending pods, and which hold nothing.
func TestSummarizePod(t *testing.T) {
	owner := testkit.MakeJob("r").Obj()
	pod := testkit.MakePod(owner).Obj().Name
	tests := []struct {
		name   string
		pod    *testkit.PodWrapper
		want   PodSummary
		wantOK bool
	}{
		{name: "bound", pod: testkit.MakePod(owner).Bound("node-0"), want: PodSummary{Name: pod, Job: "uid-r", Bound: true}, wantOK: true},
		{name: "unschedulable, what it requests kept", pod: testkit.MakePod(owner).Unschedulable("full").Requests(rl("cpu", "2", "memory", "1Gi")),
			want: PodSummary{Name: pod, Job: "uid-r", Unschedulable: true, Message: "full", Demand: rl("cpu", "2", "memory", "1Gi")}, wantOK: true},
		{name: "bound: what it requests counts on its node", pod: testkit.MakePod(owner).Bound("node-0").Requests(rl("cpu", "2")),
			want: PodSummary{Name: pod, Job: "uid-r", Bound: true}, wantOK: true},
		{name: "gated is not unschedulable", pod: testkit.MakePod(owner).Gated(), want: PodSummary{Name: pod, Job: "uid-r", Demand: corev1.ResourceList{}}, wantOK: true},
		{name: "deleting holds nothing", pod: testkit.MakePod(owner).Bound("node-0").Deleting(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))},
		{name: "no controller holds nothing", pod: testkit.MakePod(owner).Bound("node-0").Orphan()},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := SummarizePod(tc.pod.Obj())
			sameDemand := equality.Semantic.DeepEqual(got.Demand, tc.want.Demand)
			got.Demand, tc.want.Demand = nil, nil // the rest compares as printed
			if ok != tc.wantOK || !sameDemand || fmt.Sprintf("%+v", got) != fmt.Sprintf("%+v", tc.want) {
				t.Errorf("SummarizePod = %+v, %v; want %+v, %v", got, ok, tc.want, tc.wantOK)
			}
		})
	}
}
