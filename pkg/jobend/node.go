package jobend

import (
	"context"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
)

// NodeWatcher is the nodes' List and Watch, e.g. client.CoreV1().Nodes().
type NodeWatcher interface {
	Watcher
	List(context.Context, metav1.ListOptions) (*corev1.NodeList, error)
}

// NodeUsable waits until a node may have become usable for pods: it is Ready and not cordoned, and it is new, or it
// was not Ready, was cordoned or has lost a NoSchedule or NoExecute taint (a node an autoscaler adds carries one
// until it is registered) since the wait began or its last change. It returns the node's name. Room a node has more
// of (allocatable) is not looked at. The nodes are listed when the wait begins, so a node that became usable between
// the caller's own list and that one is not seen: the caller wakes on its next event (a Job's end) instead. A watch
// that ends (the API server closes it, or its resourceVersion expired) is followed by a new list, compared with the
// states seen before, and a new watch.
func NodeUsable(ctx context.Context, nodes NodeWatcher) (string, error) {
	var before map[string]nodeState
	wakes := func(n *corev1.Node) bool {
		prev, seen := before[n.Name]
		now := stateOf(n)
		before[n.Name] = now
		return now.ready && !now.cordoned && (!seen || !prev.ready || prev.cordoned || lostTaint(prev.taints, now.taints))
	}
	for {
		l, err := nodes.List(ctx, metav1.ListOptions{})
		if err != nil {
			return "", cause(ctx, fmt.Errorf("listing nodes: %w", err))
		}
		first := before == nil
		if first {
			before = map[string]nodeState{}
		}
		for i := range l.Items {
			if n := &l.Items[i]; wakes(n) && !first {
				return n.Name, nil
			}
		}
		w, err := nodes.Watch(ctx, metav1.ListOptions{ResourceVersion: l.ResourceVersion})
		if err != nil {
			return "", cause(ctx, fmt.Errorf("watching nodes: %w", err))
		}
		if name, err := nodeWakes(ctx, w, wakes); name != "" || err != nil {
			return name, err
		}
	}
}

// nodeWakes follows w until a node wakes the wait (its name), w ends ("", nil: list again), it fails or ctx ends.
func nodeWakes(ctx context.Context, w watch.Interface, wakes func(*corev1.Node) bool) (string, error) {
	defer w.Stop()
	for {
		select {
		case <-ctx.Done():
			return "", context.Cause(ctx)
		case ev, ok := <-w.ResultChan():
			switch {
			case !ok:
				return "", nil
			case ev.Type == watch.Error:
				if err := apierrors.FromObject(ev.Object); !apierrors.IsResourceExpired(err) && !apierrors.IsGone(err) {
					return "", fmt.Errorf("watching nodes: %w", err)
				}
				return "", nil // too old a resourceVersion: list again
			case ev.Type == watch.Added || ev.Type == watch.Modified:
				if n, ok := ev.Object.(*corev1.Node); ok && wakes(n) {
					return n.Name, nil
				}
			}
		}
	}
}

// cause is err, or the context's cause once it ended.
func cause(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return context.Cause(ctx)
	}
	return err
}

// nodeState is what of a node says whether pods can be placed on it.
type nodeState struct {
	ready, cordoned bool
	taints          []corev1.Taint // NoSchedule and NoExecute only
}

func stateOf(n *corev1.Node) nodeState {
	s := nodeState{cordoned: n.Spec.Unschedulable}
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			s.ready = c.Status == corev1.ConditionTrue
		}
	}
	s.taints = slices.DeleteFunc(slices.Clone(n.Spec.Taints), func(t corev1.Taint) bool { return t.Effect == corev1.TaintEffectPreferNoSchedule })
	return s
}

// lostTaint says a taint of before is not in now.
func lostTaint(before, now []corev1.Taint) bool {
	return slices.ContainsFunc(before, func(t corev1.Taint) bool {
		return !slices.ContainsFunc(now, func(u corev1.Taint) bool { return t.MatchTaint(&u) })
	})
}
