package autoscaler

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"

	"github.com/jobsched/jobsched/pkg/apitext"
	"github.com/jobsched/jobsched/pkg/kube"
)

// The Karpenter resources read.
var (
	NodePools  = schema.GroupVersionResource{Group: "karpenter.sh", Version: "v1", Resource: "nodepools"}
	NodeClaims = schema.GroupVersionResource{Group: "karpenter.sh", Version: "v1", Resource: "nodeclaims"}
)

// Read reads the autoscaler once: Karpenter's NodePools and NodeClaims when their API is served (one LIST each),
// else the cluster-autoscaler's status ConfigMap (one GET). An API that is not served, a ConfigMap that does not
// exist and a Forbidden read are not errors: the State says what was found, and Note why nothing was. dyn nil reads
// no Karpenter object. Any other error is returned.
func Read(ctx context.Context, dyn dynamic.Interface, client kube.Interface) (*State, error) {
	var notes []string
	if dyn != nil {
		st, err := readKarpenter(ctx, dyn)
		switch {
		case apierrors.IsNotFound(err):
			notes = append(notes, "no Karpenter (karpenter.sh/v1 nodepools not served)")
		case apierrors.IsForbidden(err):
			notes = append(notes, fmt.Sprintf("cannot read Karpenter's NodePools and NodeClaims (the component manifests/autoscale grants get/list): %v", err))
		case err != nil:
			return nil, err
		default:
			return st, nil
		}
	}
	cm, err := client.CoreV1().ConfigMaps(metav1.NamespaceSystem).Get(ctx, statusConfigMap, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		notes = append(notes, "no cluster-autoscaler (no ConfigMap kube-system/"+statusConfigMap+")")
	case apierrors.IsForbidden(err):
		notes = append(notes, fmt.Sprintf("cannot get ConfigMap kube-system/%s (the component manifests/autoscale grants get): %v", statusConfigMap, err))
	case err != nil:
		return nil, fmt.Errorf("autoscale: get configmap kube-system/%s: %w", statusConfigMap, err)
	default:
		groups, err := ParseStatus(cm.Data[statusConfigMapKey])
		if err != nil {
			notes = append(notes, fmt.Sprintf("ConfigMap kube-system/%s: %v", statusConfigMap, err))
			break
		}
		return &State{Source: ClusterAutoscaler, Pools: groups}, nil
	}
	return &State{Note: strings.Join(notes, "; ")}, nil
}

// nodePool is the part of a karpenter.sh/v1 NodePool read here.
type nodePool struct {
	Metadata metav1.ObjectMeta `json:"metadata"`
	Spec     struct {
		Template struct {
			Metadata struct {
				Labels map[string]string `json:"labels"`
			} `json:"metadata"`
			Spec struct {
				Requirements []corev1.NodeSelectorRequirement `json:"requirements"`
				Taints       []corev1.Taint                   `json:"taints"`
			} `json:"spec"`
		} `json:"template"`
		Limits corev1.ResourceList `json:"limits"`
	} `json:"spec"`
	Status struct {
		Resources  corev1.ResourceList `json:"resources"`
		Conditions []metav1.Condition  `json:"conditions"`
	} `json:"status"`
}

// nodeClaim is the part of a karpenter.sh/v1 NodeClaim read here.
type nodeClaim struct {
	Metadata metav1.ObjectMeta `json:"metadata"`
	Status   struct {
		NodeName    string              `json:"nodeName"`
		ProviderID  string              `json:"providerID"`
		Capacity    corev1.ResourceList `json:"capacity"`
		Allocatable corev1.ResourceList `json:"allocatable"`
		Conditions  []metav1.Condition  `json:"conditions"`
	} `json:"status"`
}

func readKarpenter(ctx context.Context, dyn dynamic.Interface) (*State, error) {
	pools, err := dyn.Resource(NodePools).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("autoscale: list nodepools: %w", err)
	}
	claims, err := dyn.Resource(NodeClaims).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("autoscale: list nodeclaims: %w", err)
	}
	st := &State{Source: Karpenter}
	index := map[string]int{}
	for i := range pools.Items {
		np, unreadable := readNodePool(&pools.Items[i])
		p := Pool{Kind: KindNodePool, Name: np.Metadata.Name, Limits: np.Spec.Limits, Used: np.Status.Resources,
			Labels: np.Spec.Template.Metadata.Labels, Requirements: np.Spec.Template.Spec.Requirements, Taints: np.Spec.Template.Spec.Taints}
		if c := meta(np.Status.Conditions, "Ready"); c != nil && c.Status == metav1.ConditionFalse {
			p.Unavailable = apitext.Quote(strings.TrimSpace("not Ready: " + c.Reason + " " + c.Message))
		}
		if np.Metadata.DeletionTimestamp != nil {
			p.Unavailable = "being deleted"
		}
		if unreadable != "" {
			p.Unavailable = "cannot read it: " + unreadable
		}
		index[p.Name] = len(st.Pools)
		st.Pools = append(st.Pools, p)
	}
	shapeAt := make([]metav1.Time, len(st.Pools))
	for i := range claims.Items {
		u := &claims.Items[i]
		k, ok := index[u.GetLabels()[nodePoolLabel]]
		if !ok {
			continue
		}
		p := &st.Pools[k]
		var nc nodeClaim
		if err := from(u, &nc); err != nil { // its pool adds nothing: what it holds is not known
			why := "cannot read NodeClaim " + u.GetName() + ": " + unreadableParts(u, "status.capacity", "status.allocatable", "status.conditions", "metadata")
			p.Unavailable = strings.TrimPrefix(p.Unavailable+"; "+why, "; ")
			continue
		}
		if len(nc.Status.Capacity) > 0 && len(nc.Status.Allocatable) > 0 && (p.Shape == nil || !nc.Metadata.CreationTimestamp.Before(&shapeAt[k])) {
			p.Shape, shapeAt[k] = &Shape{Capacity: nc.Status.Capacity, Allocatable: nc.Status.Allocatable, From: nc.Metadata.Name}, nc.Metadata.CreationTimestamp
		}
		if nc.Metadata.DeletionTimestamp == nil {
			p.Claimed = claimed(p.Claimed, nc.Status.Capacity, nc.Status.Allocatable)
		} else if nc.Status.ProviderID != "" {
			p.Disrupted = append(p.Disrupted, nc.Status.ProviderID)
		}
		if !Launching(nc.Metadata.DeletionTimestamp != nil, nc.Status.Conditions, len(nc.Status.Allocatable) > 0) {
			continue
		}
		if p.Launching == nil {
			p.Launching = map[string]Launch{}
		}
		p.Launching[nc.Metadata.Name] = Launch{ProviderID: nc.Status.ProviderID, Allocatable: nc.Status.Allocatable}
	}
	slices.SortFunc(st.Pools, func(a, b Pool) int { return cmp.Compare(a.Name, b.Name) })
	return st, nil
}

// claimed is sum with one more NodeClaim of capacity and allocatable: per resource the larger of the two, and 1
// node, as Karpenter counts a NodeClaim against its NodePool's limits (one not launched yet has neither: only its
// node). Karpenter counts a launching NodeClaim's status.capacity, and its node's capacity once it is initialized:
// KWOK's NodeClaims report their pods' requests as capacity (cpu=1900m pods=1 for a node of 4 cpu), so the capacity
// alone undercounts a Ready node by the rest of it, one node's room too many at the limit while status.resources
// lags. The larger of capacity and allocatable is what new nodes are charged too (growPool.shaped).
func claimed(sum, capacity, allocatable corev1.ResourceList) corev1.ResourceList {
	if sum == nil {
		sum = corev1.ResourceList{}
	}
	names := slices.Collect(maps.Keys(capacity))
	for r := range allocatable {
		if _, ok := capacity[r]; !ok {
			names = append(names, r)
		}
	}
	for _, r := range names {
		q := capacity[r]
		if a, ok := allocatable[r]; ok && a.Cmp(q) > 0 {
			q = a
		}
		s := sum[r]
		s.Add(q)
		sum[r] = s
	}
	n := sum[nodesResource]
	n.Add(*resource.NewQuantity(1, resource.DecimalSI))
	sum[nodesResource] = n
	return sum
}

// Launching says whether a NodeClaim is room that is coming: launched (its allocatable known, so counted in its
// NodePool's status.resources) and not yet registered (no node of it counted on the cluster's nodes), not being
// deleted.
func Launching(deleting bool, conds []metav1.Condition, allocatable bool) bool {
	registered := meta(conds, "Registered")
	return !deleting && allocatable && (registered == nil || registered.Status != metav1.ConditionTrue)
}

func meta(conds []metav1.Condition, t string) *metav1.Condition {
	for i := range conds {
		if conds[i].Type == t {
			return &conds[i]
		}
	}
	return nil
}

// readNodePool is NodePool u as read; one that cannot be read whole is read part by part (metadata, the template,
// the limits, the status), each part that cannot be read left empty, and unreadable says which and why: the pool then
// adds nothing, and the pass still runs (a template that cannot use it is kept off it by its taints and labels).
func readNodePool(u *unstructured.Unstructured) (np nodePool, unreadable string) {
	if from(u, &np) == nil {
		return np, ""
	}
	np = nodePool{}
	np.Metadata = part[metav1.ObjectMeta](u, "metadata")
	np.Metadata.Name = u.GetName()
	np.Spec.Template.Metadata.Labels = part[map[string]string](u, "spec", "template", "metadata", "labels")
	np.Spec.Template.Spec.Requirements = part[[]corev1.NodeSelectorRequirement](u, "spec", "template", "spec", "requirements")
	np.Spec.Template.Spec.Taints = part[[]corev1.Taint](u, "spec", "template", "spec", "taints")
	np.Status.Conditions = part[[]metav1.Condition](u, "status", "conditions")
	return np, unreadableParts(u, "spec.limits", "status.resources", "status.conditions", "spec.template.metadata.labels",
		"spec.template.spec.requirements", "spec.template.spec.taints", "metadata")
}

// part is the field at path of u decoded as a T; its zero value when it is missing or cannot be read.
func part[T any](u *unstructured.Unstructured, path ...string) T {
	var w struct {
		V T `json:"v"`
	}
	v, found, _ := unstructured.NestedFieldNoCopy(u.Object, path...)
	if !found || runtime.DefaultUnstructuredConverter.FromUnstructured(map[string]any{"v": v}, &w) != nil {
		var zero T
		return zero
	}
	return w.V
}

// unreadableParts says which of the fields (dotted paths) of u cannot be decoded into their Go types, and why.
func unreadableParts(u *unstructured.Unstructured, fields ...string) string {
	kinds := map[string]func(any) error{
		"spec.limits":        decodes[corev1.ResourceList],
		"status.resources":   decodes[corev1.ResourceList],
		"status.capacity":    decodes[corev1.ResourceList],
		"status.allocatable": decodes[corev1.ResourceList],
		"status.conditions":  decodes[[]metav1.Condition],
		"metadata":           decodes[metav1.ObjectMeta],

		"spec.template.metadata.labels":   decodes[map[string]string],
		"spec.template.spec.requirements": decodes[[]corev1.NodeSelectorRequirement],
		"spec.template.spec.taints":       decodes[[]corev1.Taint],
	}
	var why []string
	for _, f := range fields {
		v, found, _ := unstructured.NestedFieldNoCopy(u.Object, strings.Split(f, ".")...)
		if !found {
			continue
		}
		if err := kinds[f](v); err != nil {
			why = append(why, f+": "+err.Error())
		}
	}
	if len(why) == 0 {
		return "its fields do not decode"
	}
	return strings.Join(why, "; ")
}

// decodes says whether v (a field of an unstructured object) decodes as a T.
func decodes[T any](v any) error {
	var w struct {
		V T `json:"v"`
	}
	return runtime.DefaultUnstructuredConverter.FromUnstructured(map[string]any{"v": v}, &w)
}

func from(u *unstructured.Unstructured, into any) error {
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, into); err != nil {
		return fmt.Errorf("autoscale: %s %s: %w", u.GetKind(), u.GetName(), err)
	}
	return nil
}
