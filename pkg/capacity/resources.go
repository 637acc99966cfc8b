package capacity

import (
	"cmp"
	"maps"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// only is free restricted to names and pods (what the report shows): free itself when it holds just those. A
// slot's lists are never written once made (minus and plus make new ones), so a report shares them.
func only(free corev1.ResourceList, names []corev1.ResourceName) corev1.ResourceList {
	_, pods := free[corev1.ResourcePods]
	if pods && len(free) == len(names)+1 && !slices.Contains(names, corev1.ResourcePods) &&
		!slices.ContainsFunc(names, func(n corev1.ResourceName) bool { _, ok := free[n]; return !ok }) {
		return free
	}
	out := corev1.ResourceList{corev1.ResourcePods: free[corev1.ResourcePods]}
	for _, n := range names {
		out[n] = free[n] // a resource the node does not have is 0
	}
	return out
}

// fits is how many pods of demand fit in free, and the resource that limits it.
func fits(demand corev1.ResourceList, names []corev1.ResourceName, free corev1.ResourceList) (int, string) {
	k, limit := free.Pods().Value(), string(corev1.ResourcePods)
	for _, name := range names {
		if q, ok := quotient(free[name], demand[name], name); ok && (q < k || q == k && limit == "pods") {
			k, limit = q, string(name)
		}
	}
	return int(max(k, 0)), limit
}

// fitsAfter is how many pods of demand fit in free once a pod of taken is there too: fits(demand, names,
// minus(free, taken)) without making that list (this runs for every pending pod and node).
func fitsAfter(demand corev1.ResourceList, names []corev1.ResourceName, free, taken corev1.ResourceList) int {
	k := free.Pods().Value() - 1
	for _, name := range names {
		f := free[name].DeepCopy()
		if t, ok := taken[name]; ok {
			f.Sub(t)
		}
		if q, ok := quotient(f, demand[name], name); ok && q < k {
			k = q
		}
	}
	return int(max(k, 0))
}

// quotient is floor(free/per) in the resource's unit (millicores for cpu), and false when per is not positive.
func quotient(free, per resource.Quantity, name corev1.ResourceName) (int64, bool) {
	f, p := units(free, name), units(per, name)
	if p <= 0 {
		return 0, false
	}
	return max(f, 0) / p, true
}

// minus returns free − demand − one pod slot, and whether that is nowhere negative (the pod fits).
func minus(free, demand corev1.ResourceList) (corev1.ResourceList, bool) {
	out := free.DeepCopy()
	ok := true
	sub := func(k corev1.ResourceName, v resource.Quantity) {
		q := out[k]
		q.Sub(v)
		out[k] = q
		ok = ok && q.Sign() >= 0
	}
	for k, v := range demand {
		if k != corev1.ResourcePods && !v.IsZero() {
			sub(k, v)
		}
	}
	sub(corev1.ResourcePods, *resource.NewQuantity(1, resource.DecimalSI))
	return out, ok
}

// unitsAfter is minus(free, demand) in the units of names (each at least 0), and whether that pod fits: without
// copying free (this runs for every node).
func unitsAfter(free, demand corev1.ResourceList, names []corev1.ResourceName) ([]int64, bool) {
	left := func(k corev1.ResourceName) resource.Quantity {
		q := free[k].DeepCopy()
		if v := demand[k]; k != corev1.ResourcePods && !v.IsZero() {
			q.Sub(v)
		}
		return q
	}
	ok := free.Pods().Value() >= 1
	for k, v := range demand {
		if k != corev1.ResourcePods && !v.IsZero() {
			q := left(k)
			ok = ok && q.Sign() >= 0
		}
	}
	out := make([]int64, len(names))
	for i, n := range names {
		if n == corev1.ResourcePods {
			out[i] = max(free.Pods().Value()-1, 0)
			continue
		}
		q := left(n)
		out[i] = max(units(q, n), 0)
	}
	return out, ok
}

// fitsIn says whether one pod of demand fits in free (without copying: this runs for every pending pod and node).
func fitsIn(free, demand corev1.ResourceList) bool {
	for k, v := range demand {
		if f := free[k]; k != corev1.ResourcePods && f.Cmp(v) < 0 {
			return false
		}
	}
	return free.Pods().Value() >= 1
}

// plus returns free + demand + one pod slot.
func plus(free, demand corev1.ResourceList) corev1.ResourceList {
	out := free.DeepCopy()
	add(out, demand)
	add(out, corev1.ResourceList{corev1.ResourcePods: *resource.NewQuantity(1, resource.DecimalSI)})
	return out
}

// quantities is a ResourceList in words, sorted: "cpu=50m memory=64Mi".
func quantities(l corev1.ResourceList) string {
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(l)) {
		v := l[k]
		parts = append(parts, string(k)+"="+v.String())
	}
	return strings.Join(parts, " ")
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

// free is what n has left of each of names (sorted, as Placer.counted): allocatable − requested (a resource it
// does not offer has 0 − requested), and the free pod slots.
func free(n *Node, names []corev1.ResourceName) corev1.ResourceList {
	out := make(corev1.ResourceList, len(names)+1)
	out[corev1.ResourcePods] = *resource.NewQuantity(n.Allocatable.Pods().Value()-int64(n.Pods), resource.DecimalSI)
	for _, k := range names {
		if k == corev1.ResourcePods {
			continue
		}
		q := n.Allocatable[k].DeepCopy()
		q.Sub(n.Requested.quantity(k))
		out[k] = q
	}
	return out
}

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

// quantity is the sum of name as a Quantity (0 when no pod requests it).
func (r Requests) quantity(name corev1.ResourceName) resource.Quantity {
	var u int64
	if i, ok := r.find(name); ok {
		u = r[i].Units
	}
	if name == corev1.ResourceCPU {
		return *resource.NewMilliQuantity(u, resource.DecimalSI)
	}
	return *resource.NewQuantity(u, resource.DecimalSI)
}

// find is where name is in r, or would be.
func (r Requests) find(name corev1.ResourceName) (int, bool) {
	return slices.BinarySearchFunc(r, name, func(q Request, k corev1.ResourceName) int { return cmp.Compare(q.Name, k) })
}
