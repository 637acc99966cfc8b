package capacity

import (
	"context"
	"slices"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/jobsched/jobsched/pkg/follow"
	"github.com/jobsched/jobsched/pkg/kube"
)

// Follow keeps what Observe reads between the passes of a fill run (package follow): the nodes, every non-terminal
// pod in the cluster (what it is bound to and requests: a podRecord, not the pod), and the namespace's
// LimitRanges and ResourceQuotas. The first Observe lists them and watches them from there; the next ones read
// what the watches kept (the RuntimeClasses the templates name are still read each pass, one GET each). Unlike a
// one-shot pass, which lists the pods of the few nodes the templates may use when it can (Options), a Follow
// follows every pod, as kube-scheduler does, and counts those of the same nodes. The zero value is ready; Stop
// ends its watches.
type Follow struct {
	Changes *follow.Changes // told of every change (set by the owner)

	namespace string
	nodes     *follow.Feed[corev1.Node, *corev1.NodeList, Node]
	pods      *follow.Feed[corev1.Pod, *corev1.PodList, podRecord]
	quotas    *follow.Feed[corev1.ResourceQuota, *corev1.ResourceQuotaList, corev1.ResourceQuota]
	limits    *follow.Feed[corev1.LimitRange, *corev1.LimitRangeList, corev1.LimitRange]

	mu         sync.Mutex
	usable     int    // nodes the watch saw turn usable (NodesUsable)
	usableName string // the last of them
}

// NodesUsable counts the nodes the watch saw turn usable for pods since the Follow began, and names the last: a
// node that is Ready and not cordoned, and is new, was not Ready, was cordoned or has lost a NoSchedule or NoExecute
// taint (a node an autoscaler adds carries one until it is registered). Room a node has more of (allocatable) is not
// looked at. A fill run's wait wakes on it as on a Job's end (scheduler.Follow.Wait): the cluster grew.
func (f *Follow) NodesUsable() (int, string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.usable, f.usableName
}

// nodeChanged counts a node the watch changed that turned usable (NodesUsable).
func (f *Follow) nodeChanged(old Node, had bool, n Node, has bool) {
	usable := func(n Node) bool { return n.Ready && !n.Unschedulable }
	if !has || !usable(n) || (had && usable(old) && !lostTaint(old.Taints, n.Taints)) {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.usable, f.usableName = f.usable+1, n.Name
}

// lostTaint says a NoSchedule or NoExecute taint of before is not in now.
func lostTaint(before, now []corev1.Taint) bool {
	return slices.ContainsFunc(before, func(t corev1.Taint) bool {
		return t.Effect != corev1.TaintEffectPreferNoSchedule && !slices.ContainsFunc(now, func(u corev1.Taint) bool { return t.MatchTaint(&u) })
	})
}

// awaitPods bounds how long Observe waits for the pods' watch to get as far as the caller's (Options.PodsAt); past
// it, the pods are listed afresh.
const awaitPods = time.Second

// podsAt makes the pods current, at resourceVersion rv or later: the caller read its own Pending pods at rv from a
// watch of its own, and it counts those unbound while capacity counts them bound, so a binding its watch delivered
// and this one not yet would be counted by neither (and its room given twice). Every change of those pods is one of
// these, at the same resourceVersion: the watch gets there, within milliseconds; should it not within awaitPods (rv
// was a bookmark's, or a list's of the caller's), the pods are listed afresh.
func (f *Follow) podsAt(ctx context.Context, rv string) error {
	if err := f.pods.Sync(ctx); err != nil || rv == "" || f.pods.Reached(rv) {
		return err
	}
	if f.Changes != nil {
		wctx, cancel := context.WithTimeout(ctx, awaitPods)
		defer cancel()
		if f.Changes.Until(wctx, func() bool { return f.pods.Reached(rv) }) == nil {
			return nil
		}
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	f.pods.Stop()
	return f.pods.Sync(ctx)
}

// Stop ends the watches (the next Observe lists afresh).
func (f *Follow) Stop() {
	if f.nodes == nil {
		return
	}
	f.nodes.Stop()
	f.pods.Stop()
	f.quotas.Stop()
	f.limits.Stop()
}

// init makes the feeds (once); watch: they watch after their first list (else each Observe lists).
func (f *Follow) init(c kube.Interface, namespace string, o Options, watch bool) {
	if f.nodes != nil {
		return
	}
	f.namespace = namespace
	f.nodes = &follow.Feed[corev1.Node, *corev1.NodeList, Node]{Client: c, Collection: c.CoreV1().Nodes(), Watch: watch,
		Changes: f.Changes, Summarize: func(n *corev1.Node) (Node, bool) { return newNode(n), true }, Changed: f.nodeChanged}
	agg := &aggregator{namespace: namespace, scheduler: o.Scheduler, shared: &shared{}}
	if !o.NoNextPassRoom {
		agg.self = o.Self
	}
	f.pods = &follow.Feed[corev1.Pod, *corev1.PodList, podRecord]{Client: c, Collection: c.CoreV1().Pods(metav1.NamespaceAll),
		Options: metav1.ListOptions{FieldSelector: nonTerminal}, Watch: watch, Changes: f.Changes, Summarize: agg.record}
	f.quotas = &follow.Feed[corev1.ResourceQuota, *corev1.ResourceQuotaList, corev1.ResourceQuota]{Client: c,
		Collection: c.CoreV1().ResourceQuotas(namespace), Watch: watch, Changes: f.Changes,
		Summarize: func(q *corev1.ResourceQuota) (corev1.ResourceQuota, bool) { // whole: a few per namespace
			c := *q
			c.TypeMeta = metav1.TypeMeta{} // a watch event's object has it, a list's items do not
			return c, true
		}}
	f.limits = &follow.Feed[corev1.LimitRange, *corev1.LimitRangeList, corev1.LimitRange]{Client: c,
		Collection: c.CoreV1().LimitRanges(namespace), Watch: watch, Changes: f.Changes,
		Summarize: func(l *corev1.LimitRange) (corev1.LimitRange, bool) {
			c := *l
			c.TypeMeta = metav1.TypeMeta{}
			return c, true
		}}
}

// synced is a feed's items once Sync has made them current; a one-shot pass (no Follow) lists with list.
func synced[O, L, T any](ctx context.Context, f *follow.Feed[O, L, T], list func() ([]T, error)) ([]T, error) {
	if !f.Watch {
		return list()
	}
	if err := f.Sync(ctx); err != nil {
		return nil, err
	}
	items, _ := f.Sorted()
	return items, nil
}
