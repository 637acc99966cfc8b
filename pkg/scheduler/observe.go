package scheduler

import (
	"context"
	"fmt"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/kubernetes"

	"github.com/jobsched/jobsched/pkg/capacity"
	"github.com/jobsched/jobsched/pkg/config"
	"github.com/jobsched/jobsched/pkg/kube"
	"github.com/jobsched/jobsched/pkg/render"
)

// Observation is everything a pass knows about the cluster: read once, at the start.
type Observation struct {
	Now  time.Time
	Jobs []batchv1.Job // this scheduler's Jobs (label selector)
	Pods []corev1.Pod  // this scheduler's Pending pods (label and field selector)
	// Capacity is what the nodes and quotas hold (nil when limits.capacity is off or the pass is offline).
	Capacity *capacity.Snapshot
}

// Observe lists this scheduler's Jobs once and its Pending pods once, then what capacity needs.
func Observe(ctx context.Context, c kubernetes.Interface, namespace, name string, mode config.Capacity, now time.Time) (*Observation, error) {
	sel := labels.SelectorFromSet(labels.Set{render.LabelScheduler: name}).String()
	obs := &Observation{Now: now}
	err := kube.Paginate(metav1.ListOptions{LabelSelector: sel}, func(opts metav1.ListOptions) (string, error) {
		list, err := c.BatchV1().Jobs(namespace).List(ctx, opts)
		if err != nil {
			return "", fmt.Errorf("listing Jobs in %s with %s: %w", namespace, sel, err)
		}
		obs.Jobs = append(obs.Jobs, list.Items...)
		return list.Continue, nil
	})
	if err != nil {
		return nil, err
	}
	pending := fields.OneTermEqualSelector("status.phase", string(corev1.PodPending)).String()
	err = kube.Paginate(metav1.ListOptions{LabelSelector: sel, FieldSelector: pending}, func(opts metav1.ListOptions) (string, error) {
		list, err := c.CoreV1().Pods(namespace).List(ctx, opts)
		if err != nil {
			return "", fmt.Errorf("listing Pending pods in %s with %s: %w", namespace, sel, err)
		}
		for _, p := range list.Items {
			if p.Status.Phase == corev1.PodPending { // the server filtered already; a fake client does not
				obs.Pods = append(obs.Pods, p)
			}
		}
		return list.Continue, nil
	})
	if err != nil {
		return nil, err
	}
	snap, err := capacity.Observe(ctx, c, namespace, capacity.Mode(mode))
	if err != nil {
		return nil, fmt.Errorf("observing capacity: %w", err)
	}
	obs.Capacity = snap
	return obs, nil
}
