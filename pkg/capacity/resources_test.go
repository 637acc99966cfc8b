package capacity

import (
	"reflect"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// TestUnitsAfter: unitsAfter is what minus gives, in units (none below 0), without the copy: whether one pod of
// demand fits, and what is left of each resource named, the pods among them.
func TestUnitsAfter(t *testing.T) {
	names := []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory, corev1.ResourcePods, "example.com/gpu"}
	dec := resource.MustParse("3.5") // a Quantity held as an inf.Dec: its value is shared by its copies
	dec.AsDec()
	tests := []struct {
		name         string
		free, demand corev1.ResourceList
	}{
		{"fits", rl("cpu", "2", "memory", "4Gi", "pods", "3"), rl("cpu", "500m", "memory", "1Gi")},
		{"cpu short", rl("cpu", "400m", "memory", "4Gi", "pods", "3"), rl("cpu", "500m", "memory", "1Gi")},
		{"exactly full", rl("cpu", "500m", "memory", "1Gi", "pods", "1"), rl("cpu", "500m", "memory", "1Gi")},
		{"no pod left", rl("cpu", "2", "memory", "4Gi", "pods", "0"), rl("cpu", "500m")},
		{"a resource the node lacks", rl("cpu", "2", "pods", "3"), rl("cpu", "1", "example.com/gpu", "1")},
		{"overcommitted, but not asked for", rl("cpu", "2", "memory", "-1Gi", "pods", "3"), rl("cpu", "1", "memory", "0")},
		{"pods in the demand count once", rl("cpu", "2", "pods", "1"), rl("cpu", "1", "pods", "5")},
		{"an inf.Dec quantity", corev1.ResourceList{corev1.ResourceCPU: dec, corev1.ResourcePods: resource.MustParse("2")}, rl("cpu", "1")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := tt.free.DeepCopy()
			got, ok := unitsAfter(tt.free, tt.demand, names)
			after, wantOK := minus(tt.free, tt.demand)
			want := make([]int64, len(names))
			for i, n := range names {
				want[i] = max(units(after[n], n), 0)
			}
			if ok != wantOK || !slices.Equal(got, want) {
				t.Errorf("unitsAfter = %v, %v; want minus's %v, %v", got, ok, want, wantOK)
			}
			for k, v := range before {
				if q := tt.free[k]; q.Cmp(v) != 0 {
					t.Errorf("free %s changed from %s to %s", k, v.String(), q.String())
				}
			}
		})
	}
}

// TestOnly: a report shows a node's free list restricted to the demand's resources and pods, a missing one as 0; a
// list that holds just those is shown as it is (a slot's lists are not written once made), any other is copied.
func TestOnly(t *testing.T) {
	names := []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory}
	tests := []struct {
		name       string
		free, want corev1.ResourceList
		shared     bool
	}{
		{name: "just those", free: rl("cpu", "1", "memory", "1Gi", "pods", "3"), want: rl("cpu", "1", "memory", "1Gi", "pods", "3"), shared: true},
		{name: "one more", free: rl("cpu", "1", "memory", "1Gi", "pods", "3", "example.com/gpu", "1"), want: rl("cpu", "1", "memory", "1Gi", "pods", "3")},
		{name: "one missing", free: rl("cpu", "1", "pods", "3", "example.com/gpu", "1"), want: rl("cpu", "1", "memory", "0", "pods", "3")},
		{name: "no pods", free: rl("cpu", "1", "memory", "1Gi", "example.com/gpu", "1"), want: rl("cpu", "1", "memory", "1Gi", "pods", "0")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := only(tt.free, names)
			if quantities(got) != quantities(tt.want) {
				t.Errorf("only() = %s, want %s", quantities(got), quantities(tt.want))
			}
			if shared := reflect.ValueOf(got).UnsafePointer() == reflect.ValueOf(tt.free).UnsafePointer(); shared != tt.shared {
				t.Errorf("only() shares the list: %v, want %v", shared, tt.shared)
			}
		})
	}
}

// TestRequests: a node's sums stay sorted by name whatever order the pods' demands come in, in the units
// kube-scheduler counts (millicores for cpu, a part of a byte rounded up), and read back as Quantities, 0 for a
// resource no pod requests.
func TestRequests(t *testing.T) {
	var r Requests
	r.add(rl("memory", "1Gi", "cpu", "100m"))
	r.add(rl("example.com/gpu", "1", "cpu", "250m", "memory", "1500m"))
	want := Requests{{"cpu", 350}, {"example.com/gpu", 1}, {"memory", 1<<30 + 2}}
	if !slices.Equal(r, want) {
		t.Errorf("Requests = %v, want %v", r, want)
	}
	for name, q := range map[corev1.ResourceName]string{"cpu": "350m", "memory": "1073741826", "example.com/gpu": "1", "ephemeral-storage": "0"} {
		if got := r.quantity(name); got.String() != q {
			t.Errorf("quantity(%s) = %s, want %s", name, got.String(), q)
		}
	}
}
