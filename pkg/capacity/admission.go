package capacity

import (
	"maps"

	corev1 "k8s.io/api/core/v1"
	nodev1 "k8s.io/api/node/v1"
	resourcehelper "k8s.io/component-helpers/resource"
)

// Admitted is the pod the API server makes of spec in a namespace with limitRanges, with runtimeClass (the one
// spec.runtimeClassName names, or nil): the requests defaulting of the API (a container's limit stands in for its
// missing request; a pod-level limit for a missing pod-level request where no container requests the resource), the
// LimitRanger's container defaults (defaultRequest, else default, for each resource a container leaves unset; it
// sets missing limits from default too) and the RuntimeClass admission (its overhead, nodeSelector and tolerations). min/max are the API server's to
// check. spec is not changed.
func Admitted(spec *corev1.PodSpec, limitRanges []corev1.LimitRange, runtimeClass *nodev1.RuntimeClass) *corev1.Pod {
	pod := &corev1.Pod{Spec: *spec.DeepCopy()}
	s := &pod.Spec
	for _, cs := range [][]corev1.Container{s.InitContainers, s.Containers} {
		for i := range cs {
			r := &cs[i].Resources
			r.Requests = withMissing(r.Requests, r.Limits) // API defaulting, before admission
			for j := range limitRanges {                   // the LimitRanger, one LimitRange after the other
				defReq, defLim := containerDefaults(&limitRanges[j])
				r.Limits = withMissing(r.Limits, defLim)
				r.Requests = withMissing(r.Requests, defReq)
			}
		}
	}
	if r := s.Resources; r != nil && len(r.Limits) > 0 {
		containers := resourcehelper.AggregateContainerRequests(pod, resourcehelper.PodResourcesOptions{})
		for k, v := range r.Limits {
			_, set := r.Requests[k]
			if _, asked := containers[k]; !set && !asked && resourcehelper.IsSupportedPodLevelResource(k) {
				if r.Requests == nil {
					r.Requests = corev1.ResourceList{}
				}
				r.Requests[k] = v.DeepCopy()
			}
		}
	}
	if rc := runtimeClass; rc != nil {
		if rc.Overhead != nil && s.Overhead == nil {
			s.Overhead = rc.Overhead.PodFixed.DeepCopy()
		}
		if sch := rc.Scheduling; sch != nil {
			if len(sch.NodeSelector) > 0 {
				sel := make(map[string]string, len(s.NodeSelector)+len(sch.NodeSelector))
				maps.Copy(sel, sch.NodeSelector)
				maps.Copy(sel, s.NodeSelector) // a conflicting key is rejected by the API server
				s.NodeSelector = sel
			}
			s.Tolerations = append(s.Tolerations, sch.Tolerations...)
		}
	}
	return pod
}

// containerDefaults is what the Container items of a LimitRange give a container that sets none: requests
// (defaultRequest, else default: the API server fills defaultRequest from default when a LimitRange is stored) and
// limits (default).
func containerDefaults(lr *corev1.LimitRange) (requests, limits corev1.ResourceList) {
	requests, limits = corev1.ResourceList{}, corev1.ResourceList{}
	for _, item := range lr.Spec.Limits {
		if item.Type != corev1.LimitTypeContainer {
			continue
		}
		for k, v := range item.Default {
			limits[k] = v
			if _, ok := item.DefaultRequest[k]; !ok {
				requests[k] = v
			}
		}
		for k, v := range item.DefaultRequest {
			requests[k] = v
		}
	}
	return requests, limits
}

// withMissing returns have plus every resource of defaults that have lacks (a new list when something is added).
func withMissing(have, defaults corev1.ResourceList) corev1.ResourceList {
	var out corev1.ResourceList
	for k, v := range defaults {
		if _, ok := have[k]; ok {
			continue
		}
		if out == nil {
			out = make(corev1.ResourceList, len(have)+len(defaults))
			for hk, hv := range have {
				out[hk] = hv
			}
		}
		out[k] = v.DeepCopy()
	}
	if out == nil {
		return have
	}
	return out
}
