package capacity

import (
	"cmp"
	"encoding/json"
	"maps"
	"math"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// space is the resources a Placer counts, sorted, pods not among them (Placer.counted: those some pod of the pass
// demands). Amounts over it have one entry more, the pod slots, last.
type space []corev1.ResourceName

// Amounts are a node's free room, or one pod's demand, over a space: in units, as kube-scheduler's NodeInfo counts
// (millicores for cpu, else the value), the pod slots last, of which a pod takes one. Amounts are never written once
// made (Minus and plus make new ones), so that slots, new nodes and reports share them.
type Amounts []int64

// name is the resource of entry i of amounts.
func (sp space) name(i int) corev1.ResourceName {
	if i == len(sp) {
		return corev1.ResourcePods
	}
	return sp[i]
}

// index is where name is in amounts over sp, -1 when sp does not count it.
func (sp space) index(name corev1.ResourceName) int {
	if name == corev1.ResourcePods {
		return len(sp)
	}
	if i, ok := slices.BinarySearch(sp, name); ok {
		return i
	}
	return -1
}

// need is one pod of demand.
func (sp space) need(demand corev1.ResourceList) Amounts {
	out := make(Amounts, len(sp)+1)
	for i, r := range sp {
		out[i] = units(demand[r], r)
	}
	out[len(sp)] = 1
	return out
}

// empty is a node of allocatable with nothing on it.
func (sp space) empty(allocatable corev1.ResourceList) Amounts {
	out := make(Amounts, len(sp)+1)
	for i, r := range sp {
		out[i] = units(allocatable[r], r)
	}
	out[len(sp)] = allocatable.Pods().Value()
	return out
}

// free is what n has left: allocatable − requested (a resource it does not offer has 0 − requested), and the free
// pod slots.
func (sp space) free(n *Node) Amounts {
	out := sp.empty(n.Allocatable)
	for i, r := range sp {
		out[i] -= n.Requested.units(r)
	}
	out[len(sp)] -= int64(n.Pods)
	return out
}

// Fits is how many pods of need fit in free, and the entry that limits it (the pod slots' only when no resource
// limits as much).
func Fits(need, free Amounts) (int, int) {
	last := len(free) - 1
	k, limit := free[last], last
	for i := range last {
		if need[i] <= 0 {
			continue
		}
		if q := max(free[i], 0) / need[i]; q < k || q == k && limit == last {
			k, limit = q, i
		}
	}
	return int(max(k, 0)), limit
}

// fitsAfter is how many pods of need fit in free once a pod of taken is there too: Fits(need, Minus(free, taken))
// without making that room (this runs for every pending pod and node).
func fitsAfter(need, free, taken Amounts) int {
	k := int64(math.MaxInt64)
	for i := range free {
		if need[i] > 0 {
			k = min(k, max(free[i]-taken[i], 0)/need[i])
		}
	}
	return int(k)
}

// FitsIn says whether one pod of need fits in free: in each resource it asks for (as kube-scheduler's NodeResourcesFit,
// a resource overcommitted but not asked for does not count) and a pod slot.
func FitsIn(free, need Amounts) bool {
	for i, f := range free {
		if need[i] > 0 && f < need[i] {
			return false
		}
	}
	return true
}

// Minus returns free − need, and whether the pod fits (FitsIn).
func Minus(free, need Amounts) (Amounts, bool) {
	out := make(Amounts, len(free))
	for i := range free {
		out[i] = free[i] - need[i]
	}
	return out, FitsIn(free, need)
}

// plus returns free + need.
func plus(free, need Amounts) Amounts {
	out := make(Amounts, len(free))
	for i := range free {
		out[i] = free[i] + need[i]
	}
	return out
}

// Quotient is floor(free/per) in the resource's unit (millicores for cpu), and false when per is not positive.
func Quotient(free, per resource.Quantity, name corev1.ResourceName) (int64, bool) {
	f, p := units(free, name), units(per, name)
	if p <= 0 {
		return 0, false
	}
	return max(f, 0) / p, true
}

// maxUnits bounds an amount: far beyond any cluster, and a few of them still add up within int64.
const maxUnits = 1 << 60

// units is q in the unit quotas and fits count name in: millicores for cpu, else the integer value, saturated at
// ±maxUnits (Quantity.MilliValue of 1e30 overflows to 0, which would read a NodePool's huge limit as none left).
func units(q resource.Quantity, name corev1.ResourceName) int64 {
	scale := resource.Scale(0)
	if name == corev1.ResourceCPU {
		scale = resource.Milli
	}
	switch bound := resource.NewScaledQuantity(maxUnits, scale); {
	case q.Cmp(*bound) >= 0:
		return maxUnits
	case q.Cmp(*resource.NewScaledQuantity(-maxUnits, scale)) <= 0:
		return -maxUnits
	}
	return q.ScaledValue(scale)
}

// quantity is u units of name as a Quantity, in the format its values are usually written in (bytes in powers of 2).
func quantity(u int64, name corev1.ResourceName) resource.Quantity {
	switch {
	case name == corev1.ResourceCPU:
		return *resource.NewMilliQuantity(u, resource.DecimalSI)
	case name == corev1.ResourceMemory || name == corev1.ResourceEphemeralStorage ||
		strings.HasPrefix(string(name), corev1.ResourceHugePagesPrefix):
		return *resource.NewQuantity(u, resource.BinarySI)
	}
	return *resource.NewQuantity(u, resource.DecimalSI)
}

// Quantities is a ResourceList in words, sorted by name: "cpu=50m memory=64Mi" (a size's key, and how logs and reports
// show requests).
func Quantities(l corev1.ResourceList) string {
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(l)) {
		v := l[k]
		parts = append(parts, string(k)+"="+v.String())
	}
	return strings.Join(parts, " ")
}

// Free is a node's free room per resource a template demands and its pod slots, as a report shows it: written as a
// ResourceList ({"cpu": "3500m", "memory": "7Gi", "pods": "109"}). Its names are shared by every node of a report,
// so that a report of 5,000 nodes holds a few numbers per node, not a map.
type Free struct {
	Names []corev1.ResourceName // sorted
	Units []int64               // per name, in units (millicores for cpu, else the value)
}

// FreeOf is l as a report shows it.
func FreeOf(l corev1.ResourceList) Free {
	f := Free{Names: slices.Sorted(maps.Keys(l))}
	for _, n := range f.Names {
		f.Units = append(f.Units, units(l[n], n))
	}
	return f
}

// List is f as a ResourceList.
func (f Free) List() corev1.ResourceList {
	if f.Names == nil {
		return nil
	}
	out := make(corev1.ResourceList, len(f.Names))
	for i, n := range f.Names {
		out[n] = quantity(f.Units[i], n)
	}
	return out
}

// IsZero says f holds nothing (a node not considered), for omitempty.
func (f Free) IsZero() bool { return f.Names == nil }

// MarshalJSON writes f as its List.
func (f Free) MarshalJSON() ([]byte, error) { return json.Marshal(f.List()) }

// Requests is what some pods request in sum, per resource, sorted by name, in units (millicores for cpu, else the
// value rounded up: what kube-scheduler's NodeInfo counts in). A short list, not a ResourceList: a snapshot holds
// one per node, and a Go map of even two entries takes some 700 bytes.
type Requests []Request

// Request is one resource of Requests.
type Request struct {
	Name  corev1.ResourceName
	Units int64
}

// add adds one pod's demand.
func (r *Requests) add(demand corev1.ResourceList) {
	for k, v := range demand {
		i, ok := r.find(k)
		if !ok {
			*r = slices.Insert(*r, i, Request{Name: k})
		}
		(*r)[i].Units += units(v, k)
	}
}

// units is the sum of name (0 when no pod requests it).
func (r Requests) units(name corev1.ResourceName) int64 {
	if i, ok := r.find(name); ok {
		return r[i].Units
	}
	return 0
}

// find is where name is in r, or would be.
func (r Requests) find(name corev1.ResourceName) (int, bool) {
	return slices.BinarySearchFunc(r, name, func(q Request, k corev1.ResourceName) int { return cmp.Compare(q.Name, k) })
}
