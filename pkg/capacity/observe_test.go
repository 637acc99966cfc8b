package capacity

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/jobsched/jobsched/pkg/kube"
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
		kubeQuota("batch", "compute"),
		kubeQuota("other", "not-ours"),
	}
}

var wantNodes = []Node{
	{Name: "n1", Labels: map[string]string{"zone": "a"}, Ready: true,
		Allocatable: rl("cpu", "4", "memory", "8Gi", "pods", "110"), Requested: rl("cpu", "1500m", "memory", "1Gi"), Pods: 2},
	{Name: "n2", Labels: map[string]string{"zone": "a"}, Ready: true, Unschedulable: true, Taints: []corev1.Taint{gpuTaint},
		Allocatable: rl("cpu", "8", "memory", "16Gi", "pods", "110"), Requested: rl("cpu", "2", "memory", "2Gi"), Pods: 2},
	{Name: "n3", Labels: map[string]string{"zone": "a"}, Ready: false,
		Allocatable: rl("cpu", "4", "memory", "8Gi", "pods", "110"), Requested: corev1.ResourceList{}},
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

func TestObserve(t *testing.T) {
	boom := apierrors.NewInternalError(errors.New("etcd down"))
	tests := []struct {
		name          string
		mode          Mode
		reactors      map[string]k8stesting.ReactionFunc // resource → list reactor
		wantNodes     []Node
		wantMode      Mode
		wantQuotas    int
		wantForbidden bool
		wantErr       error
		wantActions   []string // resource?options of each list call
	}{
		{
			name: "nodes: aggregation per node", mode: ModeNodes, wantNodes: wantNodes, wantMode: ModeNodes, wantQuotas: 1,
			wantActions: []string{"nodes?limit=500", "pods?fieldSelector=status.phase%21%3DSucceeded%2Cstatus.phase%21%3DFailed&limit=500", "resourcequotas"},
		},
		{
			name: "quota: no node or pod list", mode: ModeQuota, wantMode: ModeQuota, wantQuotas: 1,
			wantActions: []string{"resourcequotas"},
		},
		{name: "off: no calls", mode: ModeOff},
		{
			name: "nodes forbidden: quota fallback", mode: ModeNodes, reactors: map[string]k8stesting.ReactionFunc{"nodes": forbidden("nodes")},
			wantMode: ModeQuota, wantQuotas: 1, wantForbidden: true,
			wantActions: []string{"nodes?limit=500", "resourcequotas"},
		},
		{
			name: "pods forbidden: quota fallback", mode: ModeNodes, reactors: map[string]k8stesting.ReactionFunc{"pods": forbidden("pods")},
			wantMode: ModeQuota, wantQuotas: 1, wantForbidden: true,
			wantActions: []string{"nodes?limit=500", "pods?fieldSelector=status.phase%21%3DSucceeded%2Cstatus.phase%21%3DFailed&limit=500", "resourcequotas"},
		},
		{
			name: "pods error is returned", mode: ModeNodes, reactors: map[string]k8stesting.ReactionFunc{"pods": failing(boom)},
			wantErr: boom,
		},
		{
			name: "quota forbidden is returned", mode: ModeQuota, reactors: map[string]k8stesting.ReactionFunc{"resourcequotas": forbidden("resourcequotas")},
			wantErr: apierrors.NewForbidden(schema.GroupResource{Resource: "resourcequotas"}, "", errors.New("x")),
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := fake.NewClientset(clusterObjects()...)
			for res, r := range tt.reactors {
				c.PrependReactor("list", res, r)
			}
			snap, err := Observe(context.Background(), c, "batch", tt.mode)
			if tt.wantErr != nil {
				if err == nil || !errors.Is(err, tt.wantErr) && apierrors.ReasonForError(err) != apierrors.ReasonForError(tt.wantErr) {
					t.Fatalf("Observe() error = %v, want %v", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("Observe() error = %v", err)
			}
			var got []string
			for _, a := range c.Actions() {
				la := a.(k8stesting.ListActionImpl)
				s := la.GetResource().Resource
				if q := toQuery(la.GetListOptions()); q != "" {
					s += "?" + q
				}
				got = append(got, s)
			}
			if fmt.Sprint(got) != fmt.Sprint(tt.wantActions) {
				t.Errorf("list calls = %q, want %q", got, tt.wantActions)
			}
			if tt.mode == ModeOff {
				if snap != nil {
					t.Errorf("Observe(off) = %+v, want nil", snap)
				}
				return
			}
			if snap.Mode != tt.wantMode || len(snap.Quotas) != tt.wantQuotas || !equality.Semantic.DeepEqual(snap.Nodes, tt.wantNodes) {
				t.Errorf("Observe() = mode %s, %d quotas, nodes\n%+v\nwant mode %s, %d quotas, nodes\n%+v",
					snap.Mode, len(snap.Quotas), snap.Nodes, tt.wantMode, tt.wantQuotas, tt.wantNodes)
			}
			if forbidden := snap.NodesForbidden != nil; forbidden != tt.wantForbidden ||
				forbidden && !apierrors.IsForbidden(snap.NodesForbidden) {
				t.Errorf("NodesForbidden = %v, want forbidden %v", snap.NodesForbidden, tt.wantForbidden)
			}
		})
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
	c := fake.NewClientset(kubeNode("n1", corev1.ConditionTrue, rl("cpu", "4", "pods", "110")))
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
	snap, err := Observe(context.Background(), c, "batch", ModeNodes)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"", "1", "2"}; fmt.Sprint(continues) != fmt.Sprint(want) {
		t.Errorf("continue tokens = %q, want %q", continues, want)
	}
	want := []Node{{Name: "n1", Labels: map[string]string{"zone": "a"}, Ready: true,
		Allocatable: rl("cpu", "4", "pods", "110"), Requested: rl("cpu", "600m"), Pods: 6}}
	if !equality.Semantic.DeepEqual(snap.Nodes, want) {
		t.Errorf("Nodes = %+v, want %+v", snap.Nodes, want)
	}
}

func TestObserveUnknownMode(t *testing.T) {
	c := fake.NewClientset()
	if _, err := Observe(context.Background(), c, "batch", "cluster"); err == nil {
		t.Error("Observe(cluster) error = nil, want an error")
	}
	if n := len(c.Actions()); n != 0 {
		t.Errorf("Observe(cluster) made %d calls, want 0", n)
	}
}

// BenchmarkObserve feeds 150,000 pods on 5,000 nodes through the aggregation path in pages of 500, as Observe does
// after each LIST page is decoded (decoding is the client's cost and not measured here).
func BenchmarkObserve(b *testing.B) {
	const numNodes, numPods = 5000, 150000
	base := make([]Node, numNodes)
	for i := range base {
		base[i] = newNode(kubeNode(fmt.Sprintf("node-%05d", i), corev1.ConditionTrue, rl("cpu", "32", "memory", "128Gi", "pods", "110")))
	}
	// 10 distinct pages cover every node once; they are fed numPods/numNodes times.
	pages := make([][]corev1.Pod, numNodes/kube.PageSize)
	for p := range pages {
		for i := 0; i < kube.PageSize; i++ {
			pod := kubePod("ns", "p", base[p*kube.PageSize+i].Name, corev1.PodRunning, rl("cpu", "250m", "memory", "512Mi"))
			if i%2 == 0 {
				pod.Spec.Containers = append(pod.Spec.Containers, ctr(nil, rl("cpu", "100m", "memory", "64Mi"))) // a sidecar-ish second container
			}
			pages[p] = append(pages[p], *pod)
		}
	}
	b.ReportAllocs()
	for b.Loop() {
		ns := make([]Node, numNodes)
		index := make(map[string]*Node, numNodes)
		for i := range base {
			ns[i] = base[i]
			ns[i].Requested = corev1.ResourceList{}
			index[ns[i].Name] = &ns[i]
		}
		for range numPods / numNodes {
			for _, page := range pages {
				addPods(index, page)
			}
		}
	}
	b.ReportMetric(float64(numPods), "pods/op")
}
