package autoscale

import (
	"strings"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/jobsched/jobsched/pkg/capacity"
	"github.com/jobsched/jobsched/pkg/config"
)

// What the growth's tests build, as pkg/capacity's own tests do (they cannot share them: those tests are inside
// that package).

func rl(kv ...string) corev1.ResourceList {
	l := corev1.ResourceList{}
	for i := 0; i < len(kv); i += 2 {
		l[corev1.ResourceName(kv[i])] = resource.MustParse(kv[i+1])
	}
	return l
}

// req is what pods requesting rl(kv...) in sum make of a node's Requested (cpu in millicores).
func req(kv ...string) capacity.Requests {
	var r capacity.Requests
	for i := 0; i < len(kv); i += 2 {
		q := resource.MustParse(kv[i+1])
		u := q.Value()
		if kv[i] == string(corev1.ResourceCPU) {
			u = q.MilliValue()
		}
		r = append(r, capacity.Request{Name: corev1.ResourceName(kv[i]), Units: u})
	}
	return r
}

// node is a Ready node of 4 cpu and 8Gi, changed by mods.
func node(name string, mods ...func(*capacity.Node)) capacity.Node {
	n := capacity.Node{Name: name, Ready: true, Labels: map[string]string{"kubernetes.io/hostname": name},
		Allocatable: rl("cpu", "4", "memory", "8Gi", "pods", "110")}
	for _, m := range mods {
		m(&n)
	}
	return n
}

func nodes(ns ...capacity.Node) *capacity.Snapshot {
	return &capacity.Snapshot{Mode: config.CapacityNodes, Nodes: ns}
}

// sized is a node of cpu allocatable with free of it left, 1000Gi and 110 pods.
func sized(name, cpu, free string) capacity.Node {
	return node(name, func(n *capacity.Node) {
		n.Allocatable = rl("cpu", cpu, "memory", "1000Gi", "pods", "110")
		used := resource.MustParse(cpu)
		used.Sub(resource.MustParse(free))
		n.Requested = capacity.Requests{{Name: corev1.ResourceCPU, Units: used.MilliValue()}}
	})
}

// spec is a pod of one container requesting 1 cpu and 1Gi.
func spec() *corev1.PodSpec {
	return &corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{Requests: rl("cpu", "1", "memory", "1Gi")}}}}
}

// cpus is a pod of one container requesting cpu and 256Mi.
func cpus(cpu string) *corev1.PodSpec {
	s := spec()
	s.Containers[0].Resources.Requests = rl("cpu", cpu, "memory", "256Mi")
	return s
}

// job is a Job template with spec as its pod spec.
func job(spec *corev1.PodSpec) *batchv1.Job {
	return &batchv1.Job{Spec: batchv1.JobSpec{Template: corev1.PodTemplateSpec{Spec: *spec}}}
}

func pending(ns, name string, demand corev1.ResourceList) capacity.Pending {
	return capacity.Pending{Namespace: ns, Name: name, Demand: demand}
}

func withPending(s *capacity.Snapshot, ps ...capacity.Pending) *capacity.Snapshot {
	s.Pending = ps
	return s
}

func quota(name string, hard, used corev1.ResourceList) corev1.ResourceQuota {
	q := corev1.ResourceQuota{}
	q.Name = name
	q.Spec.Hard, q.Status.Hard, q.Status.Used = hard, hard, used
	return q
}

func withQuotas(s *capacity.Snapshot, qs ...corev1.ResourceQuota) *capacity.Snapshot {
	s.Quotas = qs
	return s
}

// places calls Place for each claim named in seq ('A' is claim 0, 'B' claim 1, …) and says T or F for each.
func places(p *capacity.Placer, seq string) string {
	var out strings.Builder
	for _, c := range seq {
		if p.Place(int(c - 'A')) {
			out.WriteByte('T')
		} else {
			out.WriteByte('F')
		}
	}
	return out.String()
}
