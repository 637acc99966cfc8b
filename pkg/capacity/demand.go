package capacity

import (
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
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
