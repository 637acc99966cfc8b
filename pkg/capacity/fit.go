package capacity

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/go-logr/logr"
	"github.com/jobsched/jobsched/pkg/config"
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
// unbound (our pods not bound to a node yet) and podless (the pods our pod-less Jobs will still make).
//
// The template is first made what the API server admits (Admitted: LimitRange defaults, RuntimeClass overhead and
// scheduling) and its demand counted as kube-scheduler does (Demand).
//
// Nodes considered: Ready, not cordoned (unless the pod tolerates node.kubernetes.io/unschedulable), whose
// NoSchedule/NoExecute taints it tolerates and whose labels match its nodeSelector and required node affinity
// (component-helpers' taint and nodeaffinity helpers), and spec.nodeName. Per node, free = allocatable − the
// requests of its pods (and one pod slot each); others' unbound pods that could land there are taken out first
// (see Snapshot.Pending); fits = min over the demanded resources of floor(free/demand), and the free pod slots.
// The sum is capped so that the next tick can start (see nextPassCap), minus unbound + podless; in Jobs, divided by
// PodsPerJob.
//
// Quota: each ResourceQuota whose scopes match the pod limits the Jobs to floor((hard − used)/per-pod), minus
// podless (quota charges a pod when it is created), divided by PodsPerJob, for cpu, memory, ephemeral-storage (bare
// or requests.*), requests.<any>, limits.<any> (from limits only) and pods/count/pods; count/jobs.batch is counted in
// Jobs (charged when the Job was created, so podless is not subtracted).
//
// Fit = min(nodes, quota); a side that does not apply is unlimited. snap == nil (mode off) gives Fit -1.
func Fit(tpl *batchv1.Job, snap *Snapshot, unbound, podless int) Report {
	if snap == nil {
		return Report{Fit: -1, Binding: "capacity off"}
	}
	pod := Admitted(&tpl.Spec.Template.Spec, snap.LimitRanges, snap.RuntimeClass)
	perJob := PodsPerJob(tpl)
	r := Report{Fit: -1, Demand: Demand(pod), Listed: snap.Listed}
	if perJob > 1 {
		r.PodsPerJob = perJob
	}
	warnings := slices.Clone(snap.Warnings)
	if snap.Mode == config.CapacityNodes {
		r.Fit, r.Binding = fitNodes(pod, r.Demand, snap, unbound+podless, perJob, &r)
	}
	fit, binding, warn := fitQuotas(pod, r.Demand, snap.Quotas, podless, perJob, &r)
	if fit >= 0 && (r.Fit < 0 || fit < r.Fit) {
		r.Fit, r.Binding = fit, binding
	}
	if r.Fit < 0 {
		r.Binding = "no node or quota limit applies"
	}
	r.Warning = strings.Join(append(warnings, warn...), "; ")
	return r
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

// room is one considered node while Fit works on it.
type room struct {
	node *Node
	free corev1.ResourceList // allocatable − requested, and the free pod slots
	fits int
	lim  string
}

func fitNodes(pod *corev1.Pod, demand corev1.ResourceList, snap *Snapshot, claimed, perJob int, r *Report) (int, string) {
	names := slices.Sorted(maps.Keys(demand))
	ours := newPlacement(&pod.Spec)
	var rooms []*room
	for i := range snap.Nodes {
		n := &snap.Nodes[i]
		nf := NodeFit{Name: n.Name, Excluded: ours.excluded(n)}
		if nf.Excluded == "" {
			rooms = append(rooms, &room{node: n, free: free(n)})
		}
		r.Nodes = append(r.Nodes, nf)
	}
	slices.SortFunc(r.Nodes, func(a, b NodeFit) int { return cmp.Compare(a.Name, b.Name) })
	if len(rooms) == 0 {
		return 0, "no Ready, schedulable node matches the template"
	}
	r.Pending = takePending(snap.Pending, rooms, demand, names)
	total := 0
	limits := map[string]int{} // how many considered nodes each resource binds on
	for _, rm := range rooms {
		rm.fits, rm.lim = fits(demand, names, rm.free)
		total += rm.fits
		limits[rm.lim]++
		i, _ := slices.BinarySearchFunc(r.Nodes, rm.node.Name, func(nf NodeFit, name string) int { return cmp.Compare(nf.Name, name) })
		r.Nodes[i].Fits, r.Nodes[i].Limit, r.Nodes[i].Free = rm.fits, rm.lim, only(rm.free, names)
	}
	capped, tick := nextPassCap(snap.NextPassPod, rooms, demand, names)
	r.Tick = tick
	pods := total
	if capped >= 0 && capped < total {
		pods = capped
	}
	fit := max(pods-claimed, 0) / perJob
	var s string
	switch {
	case capped >= 0 && capped < total:
		s = fmt.Sprintf("tick: %d more pod(s) fit on %d node(s) with room kept for the next tick", max(pods-claimed, 0), len(rooms))
	case len(rooms) == 1:
		s = fmt.Sprintf("%s: %d more fit on %s", rooms[0].lim, max(pods-claimed, 0), rooms[0].node.Name)
	default:
		var by []string
		for _, l := range slices.Sorted(maps.Keys(limits)) {
			by = append(by, fmt.Sprintf("%s on %d", l, limits[l]))
		}
		s = fmt.Sprintf("nodes: %d more fit on %d nodes (limited by %s)", max(pods-claimed, 0), len(rooms), strings.Join(by, ", "))
	}
	if claimed > 0 {
		s += fmt.Sprintf(", after %d unbound", claimed)
	}
	if perJob > 1 {
		s += fmt.Sprintf(" (%d Job(s) of %d pods)", fit, perJob)
	}
	return fit, s
}

// free is what n has left: allocatable − requested per resource, and the free pod slots.
func free(n *Node) corev1.ResourceList {
	out := corev1.ResourceList{corev1.ResourcePods: *resource.NewQuantity(n.Allocatable.Pods().Value()-int64(n.Pods), resource.DecimalSI)}
	for k, v := range n.Allocatable {
		if k == corev1.ResourcePods {
			continue
		}
		q := v.DeepCopy()
		q.Sub(n.Requested[k])
		out[k] = q
	}
	for k, v := range n.Requested {
		if _, ok := n.Allocatable[k]; !ok { // requested on a node that does not offer it (e.g. a removed device)
			q := v.DeepCopy()
			q.Neg()
			out[k] = q
		}
	}
	return out
}

// takePending takes from rooms the room of others' unbound pods that could land there. Each goes, in order, to the
// node among those it may use and fits on where it costs our pods the most (kube-scheduler may pick any of them; the
// worst one is assumed); a pod that fits on none of them is not counted (it cannot take our room now).
func takePending(pending []Pending, rooms []*room, demand corev1.ResourceList, names []corev1.ResourceName) []PendingFit {
	var out []PendingFit
	for i := range pending {
		p := &pending[i]
		where := newPlacement(&p.Spec)
		var best *room
		var bestFree corev1.ResourceList
		bestCost := -1
		for _, rm := range rooms {
			if !fitsIn(rm.free, p.Demand) || where.excluded(rm.node) != "" {
				continue
			}
			after, _ := minus(rm.free, p.Demand)
			before, _ := fits(demand, names, rm.free)
			now, _ := fits(demand, names, after)
			if before-now > bestCost {
				best, bestFree, bestCost = rm, after, before-now
			}
		}
		if best != nil {
			best.free = bestFree
			out = append(out, PendingFit{Pod: p.Namespace + "/" + p.Name, Node: best.node.Name, Costs: bestCost})
		}
	}
	return out
}

// nextPassCap is the most pods of demand (ours, new and claimed) that may be placed on rooms so that, wherever
// kube-scheduler puts them, one node the next tick's pod may use still has room for it; -1 when there is no cap.
// tick is the pod this pass runs in: the next one has its spec, and its own room (counted as taken, since our pods
// may be placed while it still runs) is free again once it ends.
//
// Let T be the considered nodes the next tick may use; on each, m the most of our pods it can hold (with this pass's
// pod gone) and c' those that fit beside the next tick. If a node of T has c' = m, the tick fits there whatever we
// do. Otherwise kube-scheduler can leave no room for it only by putting at least c'+1 of our pods on every node of
// T, so any number up to Σ_T (c'+1) − 1 is safe, and one more is not. When T is empty the tick runs on nodes we do
// not use: no cap.
func nextPassCap(tick *corev1.Pod, rooms []*room, demand corev1.ResourceList, names []corev1.ResourceName) (int, string) {
	if tick == nil {
		return -1, ""
	}
	next := &corev1.Pod{Spec: *tick.Spec.DeepCopy()}
	next.Spec.NodeName = ""
	where := newPlacement(&next.Spec)
	td := Demand(next)
	sum, usable := 0, 0
	for _, rm := range rooms {
		if where.excluded(rm.node) != "" {
			continue
		}
		usable++
		most := rm.free
		if rm.node.Name == tick.Spec.NodeName {
			most = plus(rm.free, td)
		}
		m, _ := fits(demand, names, most)
		after, ok := minus(most, td)
		if !ok {
			continue // the tick does not fit here even with nothing more of ours: c' = −1
		}
		beside, _ := fits(demand, names, after)
		if beside >= m {
			return -1, fmt.Sprintf("the next tick (%s) fits on %s beside our pods", quantities(td), rm.node.Name)
		}
		sum += beside + 1
	}
	if usable == 0 {
		return -1, "the next tick runs on none of the template's nodes: no room kept"
	}
	return max(sum-1, 0), fmt.Sprintf("room kept for the next tick (%s) on one of %d node(s)", quantities(td), usable)
}

// fitQuotas is the quota headroom in Jobs (-1 when no quota limits it), its binding constraint, and warnings about
// quotas the API server would reject the pods under.
func fitQuotas(pod *corev1.Pod, demand corev1.ResourceList, quotas []corev1.ResourceQuota, podless, perJob int, r *Report) (int, string, []string) {
	limits := limitsDemand(pod)
	fit, binding := -1, ""
	var warnings []string
	for i := range quotas {
		q := &quotas[i]
		if !quotaApplies(&pod.Spec, q) {
			continue
		}
		for _, key := range slices.Sorted(maps.Keys(q.Spec.Hard)) {
			per, name, podCharged := perPod(key, demand, limits)
			if per.Sign() <= 0 {
				if name == corev1.ResourceCPU || name == corev1.ResourceMemory {
					warnings = append(warnings, fmt.Sprintf("quota %s constrains %s but the template sets none and no "+
						"LimitRange gives a default: the API server rejects its pods", q.Name, key))
				}
				continue
			}
			left := q.Spec.Hard[key].DeepCopy()
			left.Sub(q.Status.Used[key])
			k, _ := quotient(left, per, name)
			if podCharged {
				k = (k - int64(podless)) / int64(perJob)
			}
			qf := QuotaFit{Name: q.Name, Resource: string(key), Fits: int(max(k, 0))}
			r.Quota = append(r.Quota, qf)
			if fit < 0 || qf.Fits < fit {
				fit, binding = qf.Fits, fmt.Sprintf("quota %s/%s: %d more", q.Name, key, qf.Fits)
			}
		}
	}
	return fit, binding, warnings
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
