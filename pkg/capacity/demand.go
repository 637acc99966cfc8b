// Package capacity admits Jobs by capacity: it answers how many more pods of a Job template's pod spec can start now
// on the cluster's nodes and within the namespace's ResourceQuotas, so that no pod of ours is left Unschedulable.
//
// It reads the cluster once per pass (Observe) and then decides without I/O (Fit). The arithmetic follows
// kube-scheduler's NodeResourcesFit plugin and the ResourceQuota admission plugin; see Demand and Fit.
package capacity

import (
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// Demand returns what one pod of spec requests, the way kube-scheduler counts it: per resource, the larger of the
// sum of the containers' requests and the largest init container's request (restartable "sidecar" init containers,
// restartPolicy Always, add to the sum like the scheduler does), plus spec.Overhead. A container with a limit and no
// request for a resource counts its limit (that is what API defaulting does). Includes cpu, memory,
// ephemeral-storage and extended resources (e.g. nvidia.com/gpu); not "pods" (that is counted separately).
//
// Pod-level resources (spec.resources, for cpu, memory and hugepages-*) replace the containers' aggregate for those
// resources, with the API server's defaulting: a pod-level limit stands in for a missing pod-level request only
// where no container requests that resource.
func Demand(spec *corev1.PodSpec) corev1.ResourceList {
	return aggregate(spec, requests, true)
}

// limitsDemand is what one pod of spec counts against ResourceQuota's limits.*: limits only (no fallback to
// requests), aggregated like Demand, with the overhead added only to limits that are set.
func limitsDemand(spec *corev1.PodSpec) corev1.ResourceList {
	return aggregate(spec, func(r corev1.ResourceRequirements) corev1.ResourceList { return r.Limits }, false)
}

// requests is a container's effective requests after API defaulting: a limit without a request counts as the request.
func requests(r corev1.ResourceRequirements) corev1.ResourceList {
	if len(r.Limits) == 0 {
		return r.Requests
	}
	out := make(corev1.ResourceList, len(r.Limits)+len(r.Requests))
	for k, v := range r.Limits {
		out[k] = v
	}
	for k, v := range r.Requests {
		out[k] = v
	}
	return out
}

// aggregate follows the sidecar KEP (753) formula used by k8s.io/component-helpers/resource.PodRequests/PodLimits.
func aggregate(spec *corev1.PodSpec, of func(corev1.ResourceRequirements) corev1.ResourceList, isRequests bool) corev1.ResourceList {
	sum := corev1.ResourceList{}
	for i := range spec.Containers {
		add(sum, of(spec.Containers[i].Resources))
	}
	// Init container i uses its own resources plus those of the sidecars started before it; sidecars keep running
	// and so also add to the sum of the regular containers.
	if len(spec.InitContainers) > 0 {
		initMax, sidecars := corev1.ResourceList{}, corev1.ResourceList{}
		for i := range spec.InitContainers {
			c := &spec.InitContainers[i]
			if c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways {
				add(sum, of(c.Resources))
				add(sidecars, of(c.Resources))
				maxInto(initMax, sidecars)
				continue
			}
			use := corev1.ResourceList{}
			add(use, of(c.Resources))
			add(use, sidecars)
			maxInto(initMax, use)
		}
		maxInto(sum, initMax)
	}

	if r := spec.Resources; r != nil {
		for k, v := range r.Limits {
			if _, set := sum[k]; podLevel(k) && (!isRequests || !set) {
				sum[k] = v.DeepCopy()
			}
		}
		if isRequests {
			for k, v := range r.Requests {
				if podLevel(k) {
					sum[k] = v.DeepCopy()
				}
			}
		}
	}

	for k, v := range spec.Overhead {
		if q, ok := sum[k]; isRequests || ok && !q.IsZero() {
			add(sum, corev1.ResourceList{k: v})
		}
	}
	delete(sum, corev1.ResourcePods)
	return sum
}

func podLevel(k corev1.ResourceName) bool {
	return k == corev1.ResourceCPU || k == corev1.ResourceMemory || strings.HasPrefix(string(k), corev1.ResourceHugePagesPrefix)
}

// add adds b to a. A Quantity may share its *inf.Dec with the object it came from, so a value is deep-copied the
// first time it enters a.
func add(a, b corev1.ResourceList) {
	for k, v := range b {
		if q, ok := a[k]; ok {
			q.Add(v)
			a[k] = q
		} else {
			a[k] = v.DeepCopy()
		}
	}
}

// maxInto sets a to the larger of a and b for every resource in b.
func maxInto(a, b corev1.ResourceList) {
	for k, v := range b {
		if q, ok := a[k]; !ok || v.Cmp(q) > 0 {
			a[k] = v.DeepCopy()
		}
	}
}
