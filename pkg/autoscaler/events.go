package autoscaler

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/util/workqueue"

	"github.com/jobsched/jobsched/pkg/apitext"
	"github.com/jobsched/jobsched/pkg/kube"
)

// Wait is what the autoscaler says of one Unschedulable pod: it provides a node for it (Provided), or it cannot,
// and its Event in words.
type Wait struct {
	Provided bool
	Event    string // "Nominated: Pod should schedule on: nodeclaim/x"
}

// The Events that say an autoscaler provides for a pod, or cannot: Karpenter's Nominated and its FailedScheduling
// at a NodePool's limits or with no instance type large enough; the cluster-autoscaler's TriggeredScaleUp and
// NotTriggerScaleUp. kube-scheduler's own FailedScheduling says nothing of the autoscaler and is not one.
const (
	reasonNominated         = "Nominated"
	reasonFailedScheduling  = "FailedScheduling"
	reasonTriggeredScaleUp  = "TriggeredScaleUp"
	reasonNotTriggerScaleUp = "NotTriggerScaleUp"
)

var karpenterCannot = []string{"exceed limits for nodepool", "no instance type has enough resources"}

// verdict is what event e says of its pod, ok false when it says nothing of the autoscaler: an Event whose writer
// (reportingController, or source.component for the older API) is not one of from (limits.autoscalerEvents: by
// default karpenter and cluster-autoscaler, the names their event recorders write) says nothing, whatever its reason.
// Anyone who may create Events in the namespace may still write one that names such a writer: the README's trust
// model says so.
func verdict(e *corev1.Event, from []string) (Wait, bool) {
	if !slices.Contains(from, e.ReportingController) && !slices.Contains(from, e.Source.Component) {
		return Wait{}, false
	}
	w := Wait{Event: apitext.Quote(e.Reason + ": " + e.Message)}
	switch e.Reason {
	case reasonNominated, reasonTriggeredScaleUp:
		w.Provided = true
		return w, true
	case reasonNotTriggerScaleUp:
		return w, true
	case reasonFailedScheduling:
		for _, s := range karpenterCannot {
			if strings.Contains(e.Message, s) {
				return w, true
			}
		}
	}
	return Wait{}, false
}

// last is when e was last seen: the latest of the times its writer set, but never later than the API server last
// wrote it (its creationTimestamp, or the latest time in its managedFields, which the server stamps on each create
// and update of a series) nor than now. A writer's clock set to 2099 ranks its Event at its last write, not for ever.
func last(e *corev1.Event, now time.Time) time.Time {
	t := e.CreationTimestamp.Time
	for _, c := range []time.Time{e.FirstTimestamp.Time, e.LastTimestamp.Time, e.EventTime.Time} {
		if c.After(t) {
			t = c
		}
	}
	if s := e.Series; s != nil && s.LastObservedTime.After(t) {
		t = s.LastObservedTime.Time
	}
	written := e.CreationTimestamp.Time
	for _, m := range e.ManagedFields {
		if m.Time != nil && m.Time.After(written) {
			written = m.Time.Time
		}
	}
	if written.Before(t) {
		t = written
	}
	if now.Before(t) {
		t = now
	}
	return t
}

// listWorkers is how many Event LISTs run at once.
const listWorkers = 8

// Waits reads what the autoscaler last said of each of pods (Unschedulable pods in namespace, by name): one LIST of
// Events per pod (one page: a pod has a few Events, the API server merges repeats into a series), field selector involvedObject.kind=Pod and its name (their number is bounded by
// limits.maxPending and what the last pass created), listWorkers at once. A pod the autoscaler said nothing of is
// not in the map. Only the Events of the components from count (verdict). The first error is returned (a Forbidden
// one too: the caller says what the pass does without).
func Waits(ctx context.Context, c kube.Interface, namespace string, pods, from []string) (map[string]Wait, error) {
	now := time.Now()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	found := make([]*Wait, len(pods))
	errs := make([]error, len(pods))
	workqueue.ParallelizeUntil(ctx, listWorkers, len(pods), func(i int) {
		sel := fields.Set{"involvedObject.kind": "Pod", "involvedObject.name": pods[i]}.AsSelector().String()
		var at time.Time
		list, err := c.CoreV1().Events(namespace).List(ctx, metav1.ListOptions{FieldSelector: sel})
		if err != nil {
			if ctx.Err() == nil {
				errs[i] = fmt.Errorf("autoscale: list events of pod %s/%s: %w", namespace, pods[i], err)
			}
			cancel()
			return
		}
		for j := range list.Items {
			e := &list.Items[j]
			if e.InvolvedObject.Name != pods[i] || e.InvolvedObject.Kind != "Pod" { // a fake client does not filter
				continue
			}
			if w, ok := verdict(e, from); ok && (found[i] == nil || !last(e, now).Before(at)) {
				found[i], at = &w, last(e, now)
			}
		}
	})
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	out := map[string]Wait{}
	for i, w := range found {
		if w != nil {
			out[pods[i]] = *w
		}
	}
	return out, nil
}
