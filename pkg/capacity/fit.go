package capacity

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// Report says how many more pods of a spec fit now, and why.
type Report struct {
	Fit     int                 `json:"fit"`               // how many more fit; -1 = no limit known
	Binding string              `json:"binding,omitempty"` // the binding constraint in words
	Demand  corev1.ResourceList `json:"demand,omitempty"`  // one pod's Demand
	Nodes   []NodeFit           `json:"nodes,omitempty"`   // every node considered or excluded, sorted by name
	Quota   []QuotaFit          `json:"quota,omitempty"`   // every quota resource that limits the spec
	Warning string              `json:"warning,omitempty"` // e.g. the NodesForbidden fallback
}

// NodeFit is how many more pods of the spec fit on one node.
type NodeFit struct {
	Name     string              `json:"name"`
	Fits     int                 `json:"fits"`               // 0 if excluded
	Excluded string              `json:"excluded,omitempty"` // why not considered; "" if considered
	Limit    string              `json:"limit,omitempty"`    // the resource that binds on this node
	Free     corev1.ResourceList `json:"free,omitempty"`     // free per resource the demand names, plus pods
}

// QuotaFit is how many more Jobs one resource of one ResourceQuota admits.
type QuotaFit struct {
	Name     string `json:"name"`
	Resource string `json:"resource"`
	Fits     int    `json:"fits"`
}

// taintUnschedulable is the taint the scheduler treats spec.unschedulable as (NodeUnschedulable plugin).
var taintUnschedulable = corev1.Taint{Key: corev1.TaintNodeUnschedulable, Effect: corev1.TaintEffectNoSchedule}

// Fit says how many more pods of spec can start now, given snap and our Jobs that already hold a claim on room:
// unbound (Jobs whose pods are not yet bound to a node) and podless (Jobs that have no pod yet).
//
// Nodes considered: Ready, not cordoned (unless the spec tolerates node.kubernetes.io/unschedulable), whose
// NoSchedule/NoExecute taints the spec tolerates, matching spec.nodeName, spec.nodeSelector and the required node
// affinity. Per node, fits = min over the demanded resources of floor((allocatable − requested)/demand), and the
// free pod count. nodeFit = Σ fits − unbound, at least 0.
//
// Quota: each ResourceQuota whose scopes match the spec limits the Jobs to floor((hard − used)/per-Job) for
// cpu, memory, ephemeral-storage (bare or requests.*), requests.<any>, limits.<any> (from limits only: a pod with no
// limit counts 0), pods and count/pods (1; minus podless, which quota has not charged yet) and count/jobs.batch
// (1; charged when the Job was created, so podless is not subtracted).
//
// Fit = min(nodeFit, quota); a side that does not apply is unlimited. snap == nil (mode off) gives Fit -1.
func Fit(spec *corev1.PodSpec, snap *Snapshot, unbound, podless int) Report {
	if snap == nil {
		return Report{Fit: -1, Binding: "capacity off"}
	}
	r := Report{Fit: -1, Demand: Demand(spec)}
	var warnings []string
	if snap.NodesForbidden != nil {
		warnings = append(warnings, snap.NodesForbidden.Error())
	}
	if snap.Mode == ModeNodes {
		r.Fit, r.Binding = fitNodes(spec, r.Demand, snap.Nodes, unbound, &r)
	}
	fit, binding, warn := fitQuotas(spec, r.Demand, snap.Quotas, podless, &r)
	if fit >= 0 && (r.Fit < 0 || fit < r.Fit) {
		r.Fit, r.Binding = fit, binding
	}
	if r.Fit < 0 {
		r.Binding = "no node or quota limit applies"
	}
	r.Warning = strings.Join(append(warnings, warn...), "; ")
	return r
}

func fitNodes(spec *corev1.PodSpec, demand corev1.ResourceList, nodes []Node, unbound int, r *Report) (int, string) {
	names := slices.Sorted(maps.Keys(demand))
	total, considered := 0, 0
	limits := map[string]int{} // how many considered nodes each resource binds on
	var last NodeFit
	for i := range nodes {
		n := &nodes[i]
		nf := NodeFit{Name: n.Name, Excluded: excluded(spec, n)}
		if nf.Excluded == "" {
			nf.Fits, nf.Limit, nf.Free = nodeFits(demand, names, n)
			total += nf.Fits
			considered++
			limits[nf.Limit]++
			last = nf
		}
		r.Nodes = append(r.Nodes, nf)
	}
	slices.SortFunc(r.Nodes, func(a, b NodeFit) int { return cmp.Compare(a.Name, b.Name) })
	if considered == 0 {
		return 0, "no Ready, schedulable node matches the template"
	}
	fit := max(total-unbound, 0)
	var s string
	if considered == 1 {
		s = fmt.Sprintf("%s: %d more fit on %s", last.Limit, fit, last.Name)
	} else {
		var by []string
		for _, l := range slices.Sorted(maps.Keys(limits)) {
			by = append(by, fmt.Sprintf("%s on %d", l, limits[l]))
		}
		s = fmt.Sprintf("nodes: %d more fit on %d nodes (limited by %s)", fit, considered, strings.Join(by, ", "))
	}
	if unbound > 0 {
		s += fmt.Sprintf(", after %d unbound", unbound)
	}
	return fit, s
}

// nodeFits is how many pods of demand fit on n, the resource that limits it, and what is free.
func nodeFits(demand corev1.ResourceList, names []corev1.ResourceName, n *Node) (int, string, corev1.ResourceList) {
	pods := n.Allocatable.Pods().Value() - int64(n.Pods)
	free := corev1.ResourceList{corev1.ResourcePods: *resource.NewQuantity(pods, resource.DecimalSI)}
	fits, limit := pods, string(corev1.ResourcePods)
	for _, name := range names {
		f := n.Allocatable[name].DeepCopy() // a resource the node does not have is 0
		f.Sub(n.Requested[name])
		free[name] = f
		if k, ok := quotient(f, demand[name], name); ok && (k < fits || k == fits && limit == "pods") {
			fits, limit = k, string(name)
		}
	}
	return int(max(fits, 0)), limit, free
}

// quotient is floor(free/per) in the resource's unit (millicores for cpu), and false when per is not positive.
func quotient(free, per resource.Quantity, name corev1.ResourceName) (int64, bool) {
	f, p := free.Value(), per.Value()
	if name == corev1.ResourceCPU {
		f, p = free.MilliValue(), per.MilliValue()
	}
	if p <= 0 {
		return 0, false
	}
	return max(f, 0) / p, true
}

// excluded says why the scheduler would not place a pod of spec on n, or "".
func excluded(spec *corev1.PodSpec, n *Node) string {
	switch {
	case spec.NodeName != "" && spec.NodeName != n.Name:
		return "nodeName"
	case !n.Ready:
		return "NotReady"
	case n.Unschedulable && !tolerated(spec.Tolerations, &taintUnschedulable):
		return "cordoned"
	}
	for i := range n.Taints {
		t := &n.Taints[i]
		if t.Effect != corev1.TaintEffectPreferNoSchedule && !tolerated(spec.Tolerations, t) {
			return "taint " + t.ToString() + " not tolerated"
		}
	}
	for k, v := range spec.NodeSelector {
		if l, ok := n.Labels[k]; !ok || l != v {
			return "nodeSelector"
		}
	}
	if a := spec.Affinity; a != nil && a.NodeAffinity != nil && a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution != nil {
		if !slices.ContainsFunc(a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms,
			func(t corev1.NodeSelectorTerm) bool { return termMatches(&t, n) }) {
			return "node affinity"
		}
	}
	return ""
}

// termMatches: expressions and fields ANDed; an empty term matches no node.
func termMatches(t *corev1.NodeSelectorTerm, n *Node) bool {
	if len(t.MatchExpressions) == 0 && len(t.MatchFields) == 0 {
		return false
	}
	for _, r := range t.MatchExpressions {
		v, ok := n.Labels[r.Key]
		if !requirementMatches(r, v, ok) {
			return false
		}
	}
	for _, r := range t.MatchFields {
		if r.Key != "metadata.name" || !requirementMatches(r, n.Name, true) {
			return false
		}
	}
	return true
}

func requirementMatches(r corev1.NodeSelectorRequirement, v string, ok bool) bool {
	switch r.Operator {
	case corev1.NodeSelectorOpIn:
		return ok && slices.Contains(r.Values, v)
	case corev1.NodeSelectorOpNotIn:
		return !ok || !slices.Contains(r.Values, v)
	case corev1.NodeSelectorOpExists:
		return ok
	case corev1.NodeSelectorOpDoesNotExist:
		return !ok
	case corev1.NodeSelectorOpGt, corev1.NodeSelectorOpLt:
		if !ok || len(r.Values) != 1 {
			return false
		}
		have, err1 := strconv.ParseInt(v, 10, 64)
		want, err2 := strconv.ParseInt(r.Values[0], 10, 64)
		if err1 != nil || err2 != nil {
			return false
		}
		return r.Operator == corev1.NodeSelectorOpGt && have > want || r.Operator == corev1.NodeSelectorOpLt && have < want
	}
	return false
}

func tolerated(tolerations []corev1.Toleration, taint *corev1.Taint) bool {
	return slices.ContainsFunc(tolerations, func(t corev1.Toleration) bool { return tolerates(&t, taint) })
}

// tolerates is corev1.Toleration.ToleratesTaint: an empty effect matches every effect, an empty key with Exists
// matches every taint, Equal (or no operator) compares values, Lt/Gt compare integer values.
func tolerates(t *corev1.Toleration, taint *corev1.Taint) bool {
	if t.Effect != "" && t.Effect != taint.Effect || t.Key != "" && t.Key != taint.Key {
		return false
	}
	switch t.Operator {
	case "", corev1.TolerationOpEqual:
		return t.Value == taint.Value
	case corev1.TolerationOpExists:
		return true
	case corev1.TolerationOpLt, corev1.TolerationOpGt:
		tv, err1 := strconv.ParseInt(t.Value, 10, 64)
		nv, err2 := strconv.ParseInt(taint.Value, 10, 64)
		return err1 == nil && err2 == nil &&
			(t.Operator == corev1.TolerationOpLt && nv < tv || t.Operator == corev1.TolerationOpGt && nv > tv)
	}
	return false
}

// fitQuotas is the quota headroom for Jobs of spec (-1 when no quota limits it), its binding constraint, and
// warnings about quotas the API server would reject the pods under.
func fitQuotas(spec *corev1.PodSpec, demand corev1.ResourceList, quotas []corev1.ResourceQuota, podless int, r *Report) (int, string, []string) {
	limits := limitsDemand(spec)
	fit, binding := -1, ""
	var warnings []string
	for i := range quotas {
		q := &quotas[i]
		if !quotaApplies(spec, q) {
			continue
		}
		for _, key := range slices.Sorted(maps.Keys(q.Spec.Hard)) {
			per, name, podCharged := perJob(key, demand, limits)
			if per.Sign() <= 0 {
				if name == corev1.ResourceCPU || name == corev1.ResourceMemory {
					warnings = append(warnings, fmt.Sprintf("quota %s constrains %s but the template sets none: "+
						"the API server rejects its pods unless a LimitRange sets a default", q.Name, key))
				}
				continue
			}
			left := q.Spec.Hard[key].DeepCopy()
			left.Sub(q.Status.Used[key])
			k, _ := quotient(left, per, name)
			if podCharged {
				k -= int64(podless)
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

// perJob is what one Job of ours adds to quota resource key, the resource it is measured in, and whether it is
// charged only once the Job's pod exists. A key that pods and Jobs do not use gives a zero quantity.
func perJob(key corev1.ResourceName, demand, limits corev1.ResourceList) (resource.Quantity, corev1.ResourceName, bool) {
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

// quotaApplies says whether q charges pods of spec: every scope and scope selector expression must match, as in
// the ResourceQuota admission plugin's pod evaluator.
func quotaApplies(spec *corev1.PodSpec, q *corev1.ResourceQuota) bool {
	var reqs []corev1.ScopedResourceSelectorRequirement
	for _, s := range q.Spec.Scopes {
		reqs = append(reqs, corev1.ScopedResourceSelectorRequirement{ScopeName: s, Operator: corev1.ScopeSelectorOpExists})
	}
	if q.Spec.ScopeSelector != nil {
		reqs = append(reqs, q.Spec.ScopeSelector.MatchExpressions...)
	}
	for _, r := range reqs {
		if !scopeMatches(spec, r) {
			return false
		}
	}
	return true
}

func scopeMatches(spec *corev1.PodSpec, r corev1.ScopedResourceSelectorRequirement) bool {
	terminating := spec.ActiveDeadlineSeconds != nil && *spec.ActiveDeadlineSeconds >= 0
	pc := spec.PriorityClassName
	switch r.ScopeName {
	case corev1.ResourceQuotaScopeTerminating:
		return terminating
	case corev1.ResourceQuotaScopeNotTerminating:
		return !terminating
	case corev1.ResourceQuotaScopeBestEffort:
		return bestEffort(spec)
	case corev1.ResourceQuotaScopeNotBestEffort:
		return !bestEffort(spec)
	case corev1.ResourceQuotaScopeCrossNamespacePodAffinity:
		return crossNamespaceAffinity(spec.Affinity)
	case corev1.ResourceQuotaScopePriorityClass:
		switch r.Operator {
		case corev1.ScopeSelectorOpExists:
			return pc != ""
		case corev1.ScopeSelectorOpDoesNotExist:
			return pc == ""
		case corev1.ScopeSelectorOpIn:
			return pc != "" && slices.Contains(r.Values, pc)
		case corev1.ScopeSelectorOpNotIn:
			return pc == "" || !slices.Contains(r.Values, pc)
		}
	}
	return false // scopes of other kinds (e.g. VolumeAttributesClass) do not charge pods
}

// bestEffort is QoS class BestEffort: no cpu or memory request or limit anywhere in the pod.
func bestEffort(spec *corev1.PodSpec) bool {
	set := func(rs ...corev1.ResourceList) bool {
		for _, l := range rs {
			if l.Cpu().Sign() > 0 || l.Memory().Sign() > 0 {
				return true
			}
		}
		return false
	}
	for _, cs := range [][]corev1.Container{spec.InitContainers, spec.Containers} {
		for i := range cs {
			if set(cs[i].Resources.Requests, cs[i].Resources.Limits) {
				return false
			}
		}
	}
	return spec.Resources == nil || !set(spec.Resources.Requests, spec.Resources.Limits)
}

func crossNamespaceAffinity(a *corev1.Affinity) bool {
	if a == nil {
		return false
	}
	var terms []corev1.PodAffinityTerm
	if p := a.PodAffinity; p != nil {
		terms = append(terms, p.RequiredDuringSchedulingIgnoredDuringExecution...)
		for _, w := range p.PreferredDuringSchedulingIgnoredDuringExecution {
			terms = append(terms, w.PodAffinityTerm)
		}
	}
	if p := a.PodAntiAffinity; p != nil {
		terms = append(terms, p.RequiredDuringSchedulingIgnoredDuringExecution...)
		for _, w := range p.PreferredDuringSchedulingIgnoredDuringExecution {
			terms = append(terms, w.PodAffinityTerm)
		}
	}
	return slices.ContainsFunc(terms, func(t corev1.PodAffinityTerm) bool {
		return len(t.Namespaces) > 0 || t.NamespaceSelector != nil
	})
}
