package capacity

import (
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	nodev1 "k8s.io/api/node/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
)

// rl builds a ResourceList from name, quantity pairs.
// fr is a report's free room of a node: rl(kv...), in the units the Placer counts.
func fr(kv ...string) Free { return FreeOf(rl(kv...)) }

// req is what pods requesting rl(kv...) in sum make of a node's Requested.
func req(kv ...string) Requests {
	var r Requests
	r.add(rl(kv...))
	return r
}

func rl(kv ...string) corev1.ResourceList {
	l := corev1.ResourceList{}
	for i := 0; i < len(kv); i += 2 {
		l[corev1.ResourceName(kv[i])] = resource.MustParse(kv[i+1])
	}
	return l
}

func ctr(req, lim corev1.ResourceList) corev1.Container {
	return corev1.Container{Name: "c", Resources: corev1.ResourceRequirements{Requests: req, Limits: lim}}
}

func sidecar(req corev1.ResourceList) corev1.Container {
	always := corev1.ContainerRestartPolicyAlways
	c := ctr(req, nil)
	c.RestartPolicy = &always
	return c
}

// TestDemand is what one pod of a template takes once admitted: the helper's arithmetic over the API server's
// defaults (LimitRange, RuntimeClass).
func TestDemand(t *testing.T) {
	tests := []struct {
		name         string
		spec         corev1.PodSpec
		limitRanges  []corev1.LimitRange
		runtimeClass *nodev1.RuntimeClass
		want         corev1.ResourceList
	}{
		{
			name: "empty spec",
			spec: corev1.PodSpec{},
			want: corev1.ResourceList{},
		},
		{
			name: "containers sum",
			spec: corev1.PodSpec{Containers: []corev1.Container{
				ctr(rl("cpu", "250m", "memory", "64Mi"), nil),
				ctr(rl("cpu", "750m", "ephemeral-storage", "1Gi"), nil),
			}},
			want: rl("cpu", "1", "memory", "64Mi", "ephemeral-storage", "1Gi"),
		},
		{
			name: "init container larger than the sum",
			spec: corev1.PodSpec{
				InitContainers: []corev1.Container{ctr(rl("cpu", "2", "memory", "10Mi"), nil)},
				Containers: []corev1.Container{
					ctr(rl("cpu", "500m", "memory", "100Mi"), nil),
					ctr(rl("cpu", "500m", "memory", "100Mi"), nil),
				},
			},
			want: rl("cpu", "2", "memory", "200Mi"),
		},
		{
			name: "sidecar init container adds to the sum and to later init containers",
			spec: corev1.PodSpec{
				InitContainers: []corev1.Container{
					sidecar(rl("cpu", "100m", "memory", "50Mi")),
					ctr(rl("cpu", "1", "memory", "10Mi"), nil), // runs beside the sidecar: 1100m
				},
				Containers: []corev1.Container{ctr(rl("cpu", "500m", "memory", "100Mi"), nil)},
			},
			want: rl("cpu", "1100m", "memory", "150Mi"),
		},
		{
			name: "init container before the sidecar does not run beside it",
			spec: corev1.PodSpec{
				InitContainers: []corev1.Container{
					ctr(rl("cpu", "1"), nil),
					sidecar(rl("cpu", "300m")),
				},
				Containers: []corev1.Container{ctr(rl("cpu", "200m"), nil)},
			},
			want: rl("cpu", "1"),
		},
		{
			name: "overhead",
			spec: corev1.PodSpec{
				Containers: []corev1.Container{ctr(rl("cpu", "1", "memory", "1Gi"), nil)},
				Overhead:   rl("cpu", "250m", "memory", "120Mi"),
			},
			want: rl("cpu", "1250m", "memory", "1144Mi"),
		},
		{
			name: "limits-only container counts its limit",
			spec: corev1.PodSpec{Containers: []corev1.Container{
				ctr(nil, rl("cpu", "2", "memory", "1Gi")),
				ctr(rl("cpu", "100m"), rl("cpu", "1", "memory", "512Mi")),
			}},
			want: rl("cpu", "2100m", "memory", "1536Mi"),
		},
		{
			name: "extended resource",
			spec: corev1.PodSpec{Containers: []corev1.Container{
				ctr(nil, rl("nvidia.com/gpu", "1")),
				ctr(rl("nvidia.com/gpu", "2", "cpu", "1"), rl("nvidia.com/gpu", "2")),
			}},
			want: rl("nvidia.com/gpu", "3", "cpu", "1"),
		},
		{
			name: "pods is not a demand",
			spec: corev1.PodSpec{Containers: []corev1.Container{ctr(rl("pods", "1", "cpu", "1"), nil)}},
			want: rl("cpu", "1"),
		},
		{
			name: "pod-level requests replace cpu and memory; a pod-level limit stands in where no container asks",
			spec: corev1.PodSpec{
				Resources: &corev1.ResourceRequirements{
					Requests: rl("cpu", "3"),
					Limits:   rl("cpu", "4", "memory", "2Gi"),
				},
				Containers: []corev1.Container{ctr(rl("cpu", "1", "ephemeral-storage", "1Gi"), nil)},
			},
			want: rl("cpu", "3", "memory", "2Gi", "ephemeral-storage", "1Gi"),
		},
		{
			name:        "LimitRange defaultRequest for a container without requests",
			spec:        corev1.PodSpec{Containers: []corev1.Container{ctr(nil, nil), ctr(rl("cpu", "500m"), nil)}},
			limitRanges: []corev1.LimitRange{limitRange("defaults", rl("cpu", "1", "memory", "256Mi"), rl("cpu", "2", "memory", "512Mi"))},
			want:        rl("cpu", "1500m", "memory", "512Mi"), // 1 + 500m; the second container keeps its request
		},
		{
			name:        "LimitRange default stands in for a missing defaultRequest",
			spec:        corev1.PodSpec{Containers: []corev1.Container{ctr(nil, nil)}},
			limitRanges: []corev1.LimitRange{limitRange("defaults", nil, rl("cpu", "1"))},
			want:        rl("cpu", "1"),
		},
		{
			name:        "a container's own limit comes before the LimitRange's default",
			spec:        corev1.PodSpec{Containers: []corev1.Container{ctr(nil, rl("cpu", "3"))}},
			limitRanges: []corev1.LimitRange{limitRange("defaults", rl("cpu", "1"), rl("cpu", "2"))},
			want:        rl("cpu", "3"),
		},
		{
			name: "the first LimitRange's default wins",
			spec: corev1.PodSpec{Containers: []corev1.Container{ctr(nil, nil)}},
			limitRanges: []corev1.LimitRange{limitRange("a", rl("cpu", "1"), nil),
				limitRange("b", rl("cpu", "2", "memory", "1Gi"), nil)},
			want: rl("cpu", "1", "memory", "1Gi"),
		},
		{
			name: "LimitRange defaults init containers and sidecars too",
			spec: corev1.PodSpec{
				InitContainers: []corev1.Container{sidecar(nil)},
				Containers:     []corev1.Container{ctr(nil, nil)},
			},
			limitRanges: []corev1.LimitRange{limitRange("defaults", rl("cpu", "1"), nil)},
			want:        rl("cpu", "2"),
		},
		{
			name:         "RuntimeClass overhead",
			spec:         corev1.PodSpec{Containers: []corev1.Container{ctr(rl("cpu", "1"), nil)}},
			runtimeClass: runtimeClass(rl("cpu", "250m", "memory", "160Mi")),
			want:         rl("cpu", "1250m", "memory", "160Mi"),
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Demand(Admitted(&tt.spec, tt.limitRanges, tt.runtimeClass))
			if !equality.Semantic.DeepEqual(got, tt.want) {
				t.Errorf("Demand() = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestLimitsDemand(t *testing.T) {
	spec := corev1.PodSpec{
		InitContainers: []corev1.Container{ctr(nil, rl("cpu", "3"))},
		Containers: []corev1.Container{
			ctr(rl("cpu", "1", "memory", "1Gi"), rl("cpu", "2")), // memory request only: no memory limit
			ctr(nil, rl("cpu", "500m")),
		},
		Overhead: rl("cpu", "100m", "memory", "10Mi"), // added to set limits only
	}
	want := rl("cpu", "3100m")
	if got := limitsDemand(&corev1.Pod{Spec: spec}); !equality.Semantic.DeepEqual(got, want) {
		t.Errorf("limitsDemand() = %v, want %v", got, want)
	}
}

// TestDemandResized: a bound pod counts the larger of its spec and what the kubelet allocated or runs with (in-place
// resize), as kube-scheduler does; a pod not bound yet counts its spec only.
func TestDemandResized(t *testing.T) {
	pod := func(node string, spec, allocated, actual corev1.ResourceList) *corev1.Pod {
		p := &corev1.Pod{Spec: corev1.PodSpec{NodeName: node, Containers: []corev1.Container{ctr(spec, nil)}}}
		p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "c", AllocatedResources: allocated}}
		if actual != nil {
			p.Status.ContainerStatuses[0].Resources = &corev1.ResourceRequirements{Requests: actual}
		}
		return p
	}
	podLevel := func(node string, spec, actual corev1.ResourceList) *corev1.Pod {
		p := &corev1.Pod{Spec: corev1.PodSpec{NodeName: node, Resources: &corev1.ResourceRequirements{Requests: spec},
			Containers: []corev1.Container{{Name: "c"}}}}
		p.Status.Resources = &corev1.ResourceRequirements{Requests: actual}
		return p
	}
	tests := []struct {
		name string
		pod  *corev1.Pod
		want corev1.ResourceList
	}{
		{name: "grown in spec, not yet allocated: spec", pod: pod("n1", rl("cpu", "2"), rl("cpu", "1"), rl("cpu", "1")), want: rl("cpu", "2")},
		{name: "shrunk in spec, still running large: status", pod: pod("n1", rl("cpu", "1"), rl("cpu", "1"), rl("cpu", "3")), want: rl("cpu", "3")},
		{name: "allocated larger than spec: allocated", pod: pod("n1", rl("cpu", "1"), rl("cpu", "2"), nil), want: rl("cpu", "2")},
		{name: "unbound: spec only", pod: pod("", rl("cpu", "1"), rl("cpu", "2"), rl("cpu", "3")), want: rl("cpu", "1")},
		{name: "pod-level requests shrunk in spec, still running large: status", pod: podLevel("n1", rl("cpu", "1"), rl("cpu", "3")), want: rl("cpu", "3")},
		{name: "pod-level requests, unbound: spec only", pod: podLevel("", rl("cpu", "1"), rl("cpu", "3")), want: rl("cpu", "1")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Demand(tt.pod); !equality.Semantic.DeepEqual(got, tt.want) {
				t.Errorf("Demand() = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestPodsPerJob(t *testing.T) {
	i32 := func(v int32) *int32 { return &v }
	tests := []struct {
		name                   string
		parallelism, completes *int32
		want                   int
	}{
		{name: "defaults", want: 1},
		{name: "parallelism", parallelism: i32(4), want: 4},
		{name: "fewer completions than parallelism", parallelism: i32(4), completes: i32(2), want: 2},
		{name: "more completions than parallelism", parallelism: i32(2), completes: i32(5), want: 2},
		{name: "parallelism 0 is still one", parallelism: i32(0), want: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			job := &batchv1.Job{Spec: batchv1.JobSpec{Parallelism: tt.parallelism, Completions: tt.completes}}
			if got := PodsPerJob(job); got != tt.want {
				t.Errorf("PodsPerJob() = %d, want %d", got, tt.want)
			}
		})
	}
}
