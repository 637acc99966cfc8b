package capacity

import (
	"encoding/json"
	"fmt"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// TestAmounts: a pod fits in a node's room in each resource it asks for and a pod slot, as kube-scheduler's
// NodeResourcesFit counts (a resource overcommitted but not asked for does not count); fits counts such pods and
// names the resource that limits them, the pod slots only when nothing else limits as much; fitsAfter is fits after
// one more pod without making that room; Minus and plus never write what they are given.
func TestAmounts(t *testing.T) {
	sp := space{"cpu", "example.com/gpu", "memory"}
	tests := []struct {
		name      string
		free, pod corev1.ResourceList // free's pods are its slots
		fits      int
		limit     corev1.ResourceName
		fitsIn    bool
		afterSame int // fitsAfter(pod, free, pod)
		left      string
	}{
		{"fits", rl("cpu", "2", "memory", "4Gi", "pods", "3"), rl("cpu", "500m", "memory", "1Gi"), 3, "pods", true, 2, "[1500 0 3221225472 2]"},
		{"cpu short", rl("cpu", "400m", "memory", "4Gi", "pods", "3"), rl("cpu", "500m", "memory", "1Gi"), 0, "cpu", false, 0, "[-100 0 3221225472 2]"},
		{"exactly full", rl("cpu", "500m", "memory", "1Gi", "pods", "1"), rl("cpu", "500m", "memory", "1Gi"), 1, "cpu", true, 0, "[0 0 0 0]"},
		{"no pod slot left", rl("cpu", "2", "memory", "4Gi", "pods", "0"), rl("cpu", "500m"), 0, "pods", false, 0, "[1500 0 4294967296 -1]"},
		{"a resource the node lacks", rl("cpu", "2", "pods", "3"), rl("cpu", "1", "example.com/gpu", "1"), 0, "example.com/gpu", false, 0, "[1000 -1 0 2]"},
		{"overcommitted, but not asked for", rl("cpu", "2", "memory", "-1Gi", "pods", "3"), rl("cpu", "1", "memory", "0"), 2, "cpu", true, 1, "[1000 0 -1073741824 2]"},
		{"pods in the demand count once", rl("cpu", "2", "pods", "1"), rl("cpu", "1", "pods", "5"), 1, "pods", true, 0, "[1000 0 0 0]"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			free, need := sp.empty(tt.free), sp.need(tt.pod)
			before := slices.Clone(free)
			if k, at := Fits(need, free); k != tt.fits || sp.name(at) != tt.limit {
				t.Errorf("fits = %d limited by %s, want %d by %s", k, sp.name(at), tt.fits, tt.limit)
			}
			if got := FitsIn(free, need); got != tt.fitsIn {
				t.Errorf("fitsIn = %v, want %v", got, tt.fitsIn)
			}
			if got := fitsAfter(need, free, need); got != tt.afterSame {
				t.Errorf("fitsAfter = %d, want %d", got, tt.afterSame)
			}
			left, ok := Minus(free, need)
			if fmt.Sprint(left) != tt.left || ok != tt.fitsIn {
				t.Errorf("minus = %v, %v; want %s, %v", left, ok, tt.left, tt.fitsIn)
			}
			if k, _ := Fits(need, left); ok && k != tt.afterSame {
				t.Errorf("fits after minus = %d, want fitsAfter's %d", k, tt.afterSame)
			}
			if back := plus(left, need); !slices.Equal(back, free) || !slices.Equal(free, before) {
				t.Errorf("plus(minus(free)) = %v, free now %v, want %v", back, free, before)
			}
		})
	}
}

// TestFree: a node's free room reads and writes as the ResourceList it stands for, in the format its values are
// usually written in, and a node not considered writes nothing.
func TestFree(t *testing.T) {
	f := fr("cpu", "3500m", "memory", "7680Mi", "pods", "108", "example.com/gpu", "2", "ephemeral-storage", "-1Gi", "hugepages-2Mi", "4Mi")
	got, err := json.Marshal(NodeFit{Name: "n1", Free: f})
	want := `{"name":"n1","fits":0,"free":{"cpu":"3500m","ephemeral-storage":"-1Gi","example.com/gpu":"2","hugepages-2Mi":"4Mi","memory":"7680Mi","pods":"108"}}`
	if err != nil || string(got) != want {
		t.Errorf("json = %s, %v; want %s", got, err, want)
	}
	if got, _ := json.Marshal(NodeFit{Name: "n2", Excluded: "cordoned"}); string(got) != `{"name":"n2","fits":0,"excluded":"cordoned"}` {
		t.Errorf("json of an excluded node = %s, want no free", got)
	}
	if got := Quantities(f.List()); got != "cpu=3500m ephemeral-storage=-1Gi example.com/gpu=2 hugepages-2Mi=4Mi memory=7680Mi pods=108" {
		t.Errorf("List = %s", got)
	}
}

// TestRequests: a node's sums stay sorted by name whatever order the pods' demands come in, in the units
// kube-scheduler counts (millicores for cpu, a part of a byte rounded up), 0 for a resource no pod requests.
func TestRequests(t *testing.T) {
	var r Requests
	r.add(rl("memory", "1Gi", "cpu", "100m"))
	r.add(rl("example.com/gpu", "1", "cpu", "250m", "memory", "1500m"))
	want := Requests{{"cpu", 350}, {"example.com/gpu", 1}, {"memory", 1<<30 + 2}}
	if !slices.Equal(r, want) {
		t.Errorf("Requests = %v, want %v", r, want)
	}
	for name, u := range map[corev1.ResourceName]int64{"cpu": 350, "memory": 1<<30 + 2, "example.com/gpu": 1, "ephemeral-storage": 0} {
		if got := r.units(name); got != u {
			t.Errorf("units(%s) = %d, want %d", name, got, u)
		}
	}
}

// TestUnitsSaturate (issue 58, finding 9): a quantity beyond what int64 holds in its unit (a NodePool's limits.cpu:
// 1e30, in millicores) counts as a bound no cluster reaches, not as 0 (Quantity.MilliValue's overflow): the pool's
// limit then binds nothing, and maxPending binds.
func TestUnitsSaturate(t *testing.T) {
	for _, tc := range []struct {
		q    string
		name corev1.ResourceName
		want int64
	}{
		{"1e30", "cpu", maxUnits},
		{"-1e30", "cpu", -maxUnits},
		{"1e30", "memory", maxUnits},
		{"9223372036854775807", "cpu", maxUnits},
		{"1500m", "cpu", 1500},
		{"2Gi", "memory", 2 << 30},
	} {
		if got := units(resource.MustParse(tc.q), tc.name); got != tc.want {
			t.Errorf("units(%s %s) = %d, want %d", tc.q, tc.name, got, tc.want)
		}
	}
}
