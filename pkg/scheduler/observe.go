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
	// Capacity is what the nodes and quotas hold (nil when limits.capacity is off, the pass is offline, or it has
	// not been observed yet).
	Capacity *capacity.Snapshot
}

// Observe reads the cluster once (this scheduler's Jobs, its Pending pods, then what capacity needs), or returns an
// empty observation when offline. status uses it; a pass observes step by step (see Run).
func (s *Scheduler) Observe(ctx context.Context) (*Observation, error) {
	obs := &Observation{Now: s.Now().UTC()}
	if s.Kube == nil {
		return obs, nil
	}
	var err error
	if obs.Jobs, err = s.listJobs(ctx); err != nil {
		return nil, err
	}
	if obs.Pods, err = s.listPendingPods(ctx); err != nil {
		return nil, err
	}
	if obs.Capacity, err = s.observeCapacity(ctx); err != nil {
		return nil, err
	}
	return obs, nil
}

func (s *Scheduler) selector() string {
	return labels.SelectorFromSet(labels.Set{render.LabelScheduler: s.Config.Name}).String()
}

// listJobs lists this scheduler's Jobs, page by page.
func (s *Scheduler) listJobs(ctx context.Context) ([]batchv1.Job, error) {
	ns, sel := s.Config.Namespace, s.selector()
	var jobs []batchv1.Job
	err := kube.Paginate(metav1.ListOptions{LabelSelector: sel}, func(opts metav1.ListOptions) (string, error) {
		list, err := s.Kube.BatchV1().Jobs(ns).List(ctx, opts)
		if err != nil {
			return "", fmt.Errorf("listing Jobs in %s with %s: %w", ns, sel, err)
		}
		jobs = append(jobs, list.Items...)
		return list.Continue, nil
	})
	return jobs, err
}

// listPendingPods lists this scheduler's Pending pods, page by page.
func (s *Scheduler) listPendingPods(ctx context.Context) ([]corev1.Pod, error) {
	ns, sel := s.Config.Namespace, s.selector()
	pending := fields.OneTermEqualSelector("status.phase", string(corev1.PodPending)).String()
	var pods []corev1.Pod
	err := kube.Paginate(metav1.ListOptions{LabelSelector: sel, FieldSelector: pending}, func(opts metav1.ListOptions) (string, error) {
		list, err := s.Kube.CoreV1().Pods(ns).List(ctx, opts)
		if err != nil {
			return "", fmt.Errorf("listing Pending pods in %s with %s: %w", ns, sel, err)
		}
		for _, p := range list.Items {
			if p.Status.Phase == corev1.PodPending { // the server filtered already; a fake client does not
				pods = append(pods, p)
			}
		}
		return list.Continue, nil
	})
	return pods, err
}

// observeCapacity reads what limits.capacity needs (nil when it is off or the pass is offline).
func (s *Scheduler) observeCapacity(ctx context.Context) (*capacity.Snapshot, error) {
	if s.Kube == nil || s.Config.Limits.Capacity == config.CapacityOff {
		return nil, nil
	}
	snap, err := capacity.Observe(ctx, s.Kube, s.Config.Namespace, capacity.Options{Mode: capacity.Mode(s.Config.Limits.Capacity), Template: s.Config.Template, Scheduler: s.Config.Name, Self: capacity.SelfPod()})
	if err != nil {
		return nil, fmt.Errorf("observing capacity: %w", err)
	}
	return snap, nil
}
