// Package capacity admits Jobs by capacity: it answers how many more Jobs of a template can start now on the
// cluster's nodes and within the namespace's ResourceQuotas, so that no pod of ours is left Unschedulable.
//
// It reads the cluster once per pass (Observe) and then decides without I/O (Fit). A pod's requests, node affinity
// and taint tolerations are counted by the helpers kube-scheduler itself uses (k8s.io/component-helpers); this
// package keeps only jobsched's own logic: what the API server adds to the template at admission (LimitRange
// defaults, RuntimeClass overhead), summing per node, the quota headroom, the room kept for the next tick, and the
// report.
package capacity

import (
	"maps"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	nodev1 "k8s.io/api/node/v1"
	resourcehelper "k8s.io/component-helpers/resource"
)

// PodsPerJob is how many pods one Job of tpl runs at once: min(parallelism, completions), parallelism defaulting
// to 1 and completions unset meaning parallelism; at least 1.
func PodsPerJob(tpl *batchv1.Job) int {
	n := 1
	if p := tpl.Spec.Parallelism; p != nil {
		n = int(*p)
	}
	if c := tpl.Spec.Completions; c != nil && int(*c) < n {
		n = int(*c)
	}
	return max(n, 1)
}

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

// Demand is what one pod takes on a node, as kube-scheduler counts it (resource.PodRequests: containers, init
// containers and restartable sidecars, pod-level resources, overhead). For a pod bound to a node, status counts
// too: an in-place resize takes the larger of spec and what the kubelet allocated. "pods" is not included (the pod
// slot is counted apart).
func Demand(pod *corev1.Pod) corev1.ResourceList {
	d := resourcehelper.PodRequests(pod, resourcehelper.PodResourcesOptions{
		UseStatusResources: pod.Spec.NodeName != "",
		InPlacePodLevelResourcesVerticalScalingEnabled: pod.Spec.NodeName != "",
	})
	delete(d, corev1.ResourcePods)
	return d
}

// limitsDemand is what one pod counts against ResourceQuota's limits.*: its limits, with overhead added to the
// limits that are set (resource.PodLimits).
func limitsDemand(pod *corev1.Pod) corev1.ResourceList {
	return resourcehelper.PodLimits(pod, resourcehelper.PodResourcesOptions{})
}
