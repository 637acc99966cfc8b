package jobend

import (
	"context"
	"errors"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

// node is a node named name, Ready or not, with spec.unschedulable cordoned and taints of the given keys (effect
// NoSchedule, or as the key says: "k:NoExecute", "k:PreferNoSchedule").
func node(name string, ready, cordoned bool, taints ...string) *corev1.Node {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: corev1.NodeSpec{Unschedulable: cordoned}}
	status := corev1.ConditionFalse
	if ready {
		status = corev1.ConditionTrue
	}
	n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeMemoryPressure, Status: corev1.ConditionFalse}, {Type: corev1.NodeReady, Status: status}}
	for _, t := range taints {
		effect := corev1.TaintEffectNoSchedule
		for _, e := range []corev1.TaintEffect{corev1.TaintEffectNoExecute, corev1.TaintEffectPreferNoSchedule} {
			if len(t) > len(e) && t[len(t)-len(e)-1:] == ":"+string(e) {
				t, effect = t[:len(t)-len(e)-1], e
			}
		}
		n.Spec.Taints = append(n.Spec.Taints, corev1.Taint{Key: t, Effect: effect})
	}
	return n
}

// TestNodeUsable: which change of a node wakes the wait (it may now hold pods it could not) and which does not.
// Each case starts from the nodes listed, then applies its writes in order through the fake clientset's watch; the
// wait must return the node of the one write that may add room, the last, and none before it.
func TestNodeUsable(t *testing.T) {
	type write struct {
		node   *corev1.Node
		delete bool
	}
	tests := []struct {
		name    string
		listed  []*corev1.Node
		writes  []write
		want    string
		blocked bool // no write wakes it: the wait ends with its context
	}{
		{name: "a node turns Ready", listed: []*corev1.Node{node("a", false, false)},
			writes: []write{{node: node("a", true, false)}}, want: "a"},
		{name: "a new node, Ready", writes: []write{{node: node("b", true, false)}}, want: "b"},
		{name: "a new node not Ready, then Ready", writes: []write{{node: node("b", false, false)}, {node: node("b", true, false)}}, want: "b"},
		{name: "an autoscaler's node loses its startup taint", listed: []*corev1.Node{node("k", true, false, "karpenter.sh/unregistered:NoExecute")},
			writes: []write{{node: node("k", true, false)}}, want: "k"},
		{name: "a Ready node loses a NoSchedule taint", listed: []*corev1.Node{node("a", true, false, "dedicated", "gpu")},
			writes: []write{{node: node("a", true, false, "gpu")}}, want: "a"},
		{name: "uncordoned", listed: []*corev1.Node{node("a", true, true)},
			writes: []write{{node: node("a", true, false)}}, want: "a"},
		{name: "nothing that adds room", listed: []*corev1.Node{node("a", true, false), node("c", true, true), node("d", true, false, "x"), node("e", true, false)},
			writes: []write{
				{node: node("a", true, false)},                           // a heartbeat
				{node: node("a", true, false, "karpenter.sh/disrupted")}, // a taint added
				{node: node("a", true, false, "karpenter.sh/disrupted", "soft:PreferNoSchedule")},
				{node: node("a", true, false, "karpenter.sh/disrupted")}, // only a PreferNoSchedule taint lost
				{node: node("c", false, true)},                           // cordoned, and now not Ready
				{node: node("c", false, false)},                          // uncordoned, but not Ready
				{node: node("d", false, false)},                          // its taint gone, but not Ready
				{node: node("f", false, false)},                          // new, not Ready
				{node: node("g", true, true)},                            // new, cordoned
				{node: node("e", true, false), delete: true},             // gone
			}, blocked: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var objs []runtime.Object
			for _, n := range tt.listed {
				objs = append(objs, n)
			}
			client := fake.NewClientset(objs...)
			watching := make(chan struct{})
			client.PrependWatchReactor("nodes", func(k8stesting.Action) (bool, watch.Interface, error) {
				w, err := client.Tracker().Watch(schema.GroupVersionResource{Version: "v1", Resource: "nodes"}, "")
				close(watching)
				return true, w, err
			})
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			type result struct {
				name string
				err  error
			}
			done := make(chan result, 1)
			go func() {
				name, err := NodeUsable(ctx, client.CoreV1().Nodes())
				done <- result{name, err}
			}()
			<-watching
			for _, w := range tt.writes {
				var err error
				switch _, getErr := client.CoreV1().Nodes().Get(ctx, w.node.Name, metav1.GetOptions{}); {
				case w.delete:
					err = client.CoreV1().Nodes().Delete(ctx, w.node.Name, metav1.DeleteOptions{})
				case getErr == nil:
					_, err = client.CoreV1().Nodes().Update(ctx, w.node, metav1.UpdateOptions{})
				default:
					_, err = client.CoreV1().Nodes().Create(ctx, w.node, metav1.CreateOptions{})
				}
				if err != nil {
					t.Fatal(err)
				}
			}
			if tt.blocked {
				// A last write that wakes it: the writes before were all delivered first, and none woke it.
				if _, err := client.CoreV1().Nodes().Create(ctx, node("last", true, false), metav1.CreateOptions{}); err != nil {
					t.Fatal(err)
				}
				tt.want = "last"
			}
			r := <-done
			if r.err != nil || r.name != tt.want {
				t.Errorf("woken by %q, %v; want %q", r.name, r.err, tt.want)
			}
		})
	}
}

// TestNodeUsableContext: when the context ends (SIGTERM, the end of --fill-for, a Job's end), the wait returns its
// cause.
func TestNodeUsableContext(t *testing.T) {
	client := fake.NewClientset(node("a", true, false))
	stop := errors.New("a Job ended")
	ctx, cancel := context.WithCancelCause(context.Background())
	client.PrependWatchReactor("nodes", func(k8stesting.Action) (bool, watch.Interface, error) {
		w, err := client.Tracker().Watch(schema.GroupVersionResource{Version: "v1", Resource: "nodes"}, "")
		cancel(stop)
		return true, w, err
	})
	if _, err := NodeUsable(ctx, client.CoreV1().Nodes()); !errors.Is(err, stop) {
		t.Errorf("error %v, want the context's cause", err)
	}
}
