package autoscale

import (
	"context"
	"errors"
	"fmt"
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

// verdict is what event e says of its pod, ok false when it says nothing of the autoscaler.
func verdict(e *corev1.Event) (Wait, bool) {
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

// last is when e was last seen.
func last(e *corev1.Event) time.Time {
	t := e.CreationTimestamp.Time
	for _, c := range []time.Time{e.FirstTimestamp.Time, e.LastTimestamp.Time, e.EventTime.Time} {
		if c.After(t) {
			t = c
		}
	}
	if s := e.Series; s != nil && s.LastObservedTime.After(t) {
		t = s.LastObservedTime.Time
	}
	return t
}

// listWorkers is how many Event LISTs run at once.
const listWorkers = 8

// Waits reads what the autoscaler last said of each of pods (Unschedulable pods in namespace, by name): one LIST of
// Events per pod (one page: a pod has a few Events, the API server merges repeats into a series), field selector involvedObject.kind=Pod and its name (their number is bounded by
// limits.maxPending and what the last pass created), listWorkers at once. A pod the autoscaler said nothing of is
// not in the map. The first error is returned (a Forbidden one too: the caller says what the pass does without).
func Waits(ctx context.Context, c kube.Interface, namespace string, pods []string) (map[string]Wait, error) {
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
			if w, ok := verdict(e); ok && (found[i] == nil || !last(e).Before(at)) {
				found[i], at = &w, last(e)
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
