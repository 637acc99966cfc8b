package capacity

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
)

// rl builds a ResourceList from name, quantity pairs.
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

func TestDemand(t *testing.T) {
	tests := []struct {
		name string
		spec corev1.PodSpec
		want corev1.ResourceList
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
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Demand(&tt.spec)
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
	if got := limitsDemand(&spec); !equality.Semantic.DeepEqual(got, want) {
		t.Errorf("limitsDemand() = %v, want %v", got, want)
	}
}
