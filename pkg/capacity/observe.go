package capacity

import (
	"cmp"
	"context"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/jobsched/jobsched/pkg/kube"
)

// Mode is how capacity is observed: limits.capacity in the configuration.
type Mode string

const (
	ModeNodes Mode = "nodes" // free node resources and ResourceQuota headroom
	ModeQuota Mode = "quota" // ResourceQuota headroom only (needs no cluster-wide read)
	ModeOff   Mode = "off"   // no capacity limit
)

// nonTerminal selects the pods that hold node resources; terminal pods have released theirs.
const nonTerminal = "status.phase!=" + string(corev1.PodSucceeded) + ",status.phase!=" + string(corev1.PodFailed)

// Snapshot is the aggregate of what the cluster holds, built while listing so memory does not grow with pods.
type Snapshot struct {
	Mode           Mode                   // what was observed: ModeNodes (Fit uses Nodes), or ModeQuota (asked for, or the fallback)
	Nodes          []Node                 // sorted by name
	Quotas         []corev1.ResourceQuota // in the namespace
	NodesForbidden error                  // set when listing nodes/pods cluster-wide was forbidden (mode fell back to quota)
}

// Node is one node and what the pods bound to it request.
type Node struct {
	Name          string
	Labels        map[string]string
	Taints        []corev1.Taint
	Unschedulable bool // spec.unschedulable (cordoned)
	Ready         bool // NodeReady condition True
	Allocatable   corev1.ResourceList
	Requested     corev1.ResourceList // sum of Demand of every non-terminal pod bound to it (all namespaces)
	Pods          int                 // number of non-terminal pods bound to it
}

// Observe lists what mode needs: for ModeNodes one paginated LIST of nodes and one paginated LIST of pods in all
// namespaces with field selector status.phase!=Succeeded,status.phase!=Failed (server side), aggregating each page
// into Node.Requested/Pods and dropping the page (pods with spec.nodeName == "" are skipped; pods with a
// deletionTimestamp still count: they hold room until gone); for ModeNodes and ModeQuota one LIST of ResourceQuotas
// in namespace. If the node or pod list is Forbidden, Observe does not fail: it sets NodesForbidden and returns the
// quota-only snapshot. Any other error is returned. ModeOff returns nil, nil with no calls.
func Observe(ctx context.Context, c kubernetes.Interface, namespace string, mode Mode) (*Snapshot, error) {
	switch mode {
	case ModeOff:
		return nil, nil
	case ModeNodes, ModeQuota:
	default:
		return nil, fmt.Errorf("capacity: unknown mode %q (want %s, %s or %s)", mode, ModeNodes, ModeQuota, ModeOff)
	}
	snap := &Snapshot{Mode: mode}
	if mode == ModeNodes {
		nodes, err := observeNodes(ctx, c)
		switch {
		case apierrors.IsForbidden(err):
			snap.Mode = ModeQuota
			snap.NodesForbidden = fmt.Errorf("capacity nodes needs list on nodes and pods cluster-wide "+
				"(ClusterRole jobsched-capacity): %w; using quota for this pass", err)
		case err != nil:
			return nil, err
		default:
			snap.Nodes = nodes
		}
	}
	quotas, err := c.CoreV1().ResourceQuotas(namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("capacity: list resourcequotas in namespace %s: %w", namespace, err)
	}
	snap.Quotas = quotas.Items
	return snap, nil
}

func observeNodes(ctx context.Context, c kubernetes.Interface) ([]Node, error) {
	var nodes []Node
	err := kube.Paginate(metav1.ListOptions{}, func(opts metav1.ListOptions) (string, error) {
		list, err := c.CoreV1().Nodes().List(ctx, opts)
		if err != nil {
			return "", fmt.Errorf("capacity: list nodes: %w", err)
		}
		for i := range list.Items {
			nodes = append(nodes, newNode(&list.Items[i]))
		}
		return list.Continue, nil
	})
	if err != nil {
		return nil, err
	}
	slices.SortFunc(nodes, func(a, b Node) int { return cmp.Compare(a.Name, b.Name) })

	index := make(map[string]*Node, len(nodes))
	for i := range nodes {
		index[nodes[i].Name] = &nodes[i]
	}
	err = kube.Paginate(metav1.ListOptions{FieldSelector: nonTerminal}, func(opts metav1.ListOptions) (string, error) {
		list, err := c.CoreV1().Pods(metav1.NamespaceAll).List(ctx, opts)
		if err != nil {
			return "", fmt.Errorf("capacity: list pods in all namespaces: %w", err)
		}
		addPods(index, list.Items)
		return list.Continue, nil
	})
	if err != nil {
		return nil, err
	}
	return nodes, nil
}

func newNode(n *corev1.Node) Node {
	ready := false
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			ready = c.Status == corev1.ConditionTrue
		}
	}
	return Node{
		Name:          n.Name,
		Labels:        n.Labels,
		Taints:        n.Spec.Taints,
		Unschedulable: n.Spec.Unschedulable,
		Ready:         ready,
		Allocatable:   n.Status.Allocatable,
		Requested:     corev1.ResourceList{},
	}
}

// addPods adds one page of pods to the nodes they are bound to. Terminal pods are skipped here too (the server-side
// field selector already drops them; fakes and caches may not), as are pods bound to no node or to a node not listed.
func addPods(index map[string]*Node, pods []corev1.Pod) {
	for i := range pods {
		p := &pods[i]
		n := index[p.Spec.NodeName]
		if n == nil || p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			continue
		}
		n.Pods++
		add(n.Requested, Demand(&p.Spec))
	}
}
