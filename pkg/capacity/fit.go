package capacity

import (
	"strings"

	"github.com/go-logr/logr"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"
)

// taintUnschedulable is the taint the scheduler treats spec.unschedulable as (NodeUnschedulable plugin).
var taintUnschedulable = corev1.Taint{Key: corev1.TaintNodeUnschedulable, Effect: corev1.TaintEffectNoSchedule}

// doNotSchedule selects the taints the TaintToleration filter checks.
func doNotSchedule(t *corev1.Taint) bool {
	return t.Effect == corev1.TaintEffectNoSchedule || t.Effect == corev1.TaintEffectNoExecute
}

// comparisonOperators is kube-scheduler's TaintTolerationComparisonOperators feature gate (alpha, off in 1.37):
// while it is off, Lt/Gt tolerations tolerate nothing.
const comparisonOperators = false

// Fit says how many more Jobs of tpl can start now, given snap and our pods that already hold a claim on room:
// unbound (our pods not bound to a node yet) and podless (the pods our pod-less Jobs will still make). It is the
// Placer's report for that one template before any placement: NewPlacer(snap, one Claim).Report(0).
//
// The template is first made what the API server admits (Admitted: LimitRange defaults, RuntimeClass overhead and
// scheduling) and its demand counted as kube-scheduler does (Demand).
//
// Nodes considered: Ready, not cordoned (unless the pod tolerates node.kubernetes.io/unschedulable), whose
// NoSchedule/NoExecute taints it tolerates and whose labels match its nodeSelector and required node affinity
// (component-helpers' taint and nodeaffinity helpers), and spec.nodeName. Per node, free = allocatable − the
// requests of its pods (and one pod slot each); others' unbound pods that could land there are taken out first
// (see Snapshot.Pending); fits = min over the demanded resources of floor(free/demand), and the free pod slots.
// The sum, minus unbound + podless, is capped so that the next tick can start wherever kube-scheduler puts our pods
// (see tick.go: at most Σ (c'+1) − 1 pods over the nodes the tick may use, c' being the pods that fit beside it, no
// cap when a node keeps room for it anyway); in Jobs, divided by PodsPerJob.
//
// Quota: each ResourceQuota whose scopes match the pod limits the Jobs to floor((hard − used)/per-pod), minus
// podless (quota charges a pod when it is created), divided by PodsPerJob, for cpu, memory, ephemeral-storage (bare
// or requests.*), requests.<any>, limits.<any> (from limits only) and pods/count/pods; count/jobs.batch is counted in
// Jobs (charged when the Job was created, so podless is not subtracted).
//
// Fit = min(nodes, quota); a side that does not apply is unlimited. snap == nil (mode off) gives Fit -1.
func Fit(tpl *batchv1.Job, snap *Snapshot, unbound, podless int) Report {
	return NewPlacer(snap, []Claim{{Template: tpl, Unbound: unbound, Podless: podless}}).Report(0)
}

// placement is what decides which nodes a pod may use: nodeName, tolerations, nodeSelector and required affinity.
type placement struct {
	spec     *corev1.PodSpec
	selector nodeaffinity.RequiredNodeAffinity // nodeSelector only
	affinity nodeaffinity.RequiredNodeAffinity // required node affinity only
}

func newPlacement(spec *corev1.PodSpec) placement {
	return placement{spec: spec,
		selector: nodeaffinity.NewRequiredNodeAffinity(spec.NodeSelector, nil),
		affinity: nodeaffinity.NewRequiredNodeAffinity(nil, spec.Affinity)}
}

// excluded says why kube-scheduler would not place the pod on n, or "".
func (p placement) excluded(n *Node) string {
	obj := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n.Name, Labels: n.Labels}}
	log := logr.Discard()
	switch {
	case p.spec.NodeName != "" && p.spec.NodeName != n.Name:
		return "nodeName"
	case !n.Ready:
		return "NotReady"
	case n.Unschedulable && !corev1helpers.TolerationsTolerateTaint(log, p.spec.Tolerations, &taintUnschedulable, comparisonOperators):
		return "cordoned"
	}
	if t, ok := corev1helpers.FindMatchingUntoleratedTaint(log, n.Taints, p.spec.Tolerations, doNotSchedule, comparisonOperators); ok {
		return "taint " + t.ToString() + " not tolerated"
	}
	if ok, _ := p.selector.Match(obj); !ok {
		return "nodeSelector"
	}
	if ok, _ := p.affinity.Match(obj); !ok {
		return "node affinity"
	}
	return ""
}

// perPod is what one pod (or, for count/jobs.batch, one Job) of ours adds to quota resource key, the resource it is
// measured in, and whether it is charged per pod, once the pod exists. A key that pods and Jobs do not use gives a
// zero quantity.
func perPod(key corev1.ResourceName, demand, limits corev1.ResourceList) (resource.Quantity, corev1.ResourceName, bool) {
	one := *resource.NewQuantity(1, resource.DecimalSI)
	switch s := string(key); {
	case key == corev1.ResourcePods || s == "count/pods":
		return one, key, true
	case s == "count/jobs.batch":
		return one, key, false
	case key == corev1.ResourceCPU || key == corev1.ResourceMemory || key == corev1.ResourceEphemeralStorage:
		return demand[key], key, true
	case strings.HasPrefix(s, "requests."):
		name := corev1.ResourceName(strings.TrimPrefix(s, "requests."))
		return demand[name], name, true
	case strings.HasPrefix(s, "limits."):
		name := corev1.ResourceName(strings.TrimPrefix(s, "limits."))
		return limits[name], name, true
	}
	return resource.Quantity{}, key, false
}
