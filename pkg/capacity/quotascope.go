package capacity

import (
	"slices"

	corev1 "k8s.io/api/core/v1"
)

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
