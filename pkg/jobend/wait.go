// Package jobend waits until one of the Jobs a selector selects ends.
package jobend

import (
	"context"
	"errors"
	"fmt"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	watchtools "k8s.io/client-go/tools/watch"
)

// ErrExpired says the resourceVersion a wait started from is older than the API server can watch from (410 Gone,
// "too old resource version"): the caller observes afresh instead of waiting.
var ErrExpired = errors.New("the resourceVersion to watch from has expired")

// Watcher is one resource's Watch, e.g. client.BatchV1().Jobs(namespace).
type Watcher interface {
	Watch(context.Context, metav1.ListOptions) (watch.Interface, error)
}

// Wait watches the Jobs that selector selects from resourceVersion rv (that of the list the caller decided
// on, so that nothing which happened since is missed) until one of them ends: it gets its Complete or Failed
// condition, or it is deleted before it finished. Either frees the room the Job held. finished are the UIDs of the
// Jobs that had finished when listed: their later changes (deleted by a pass, relabelled) free nothing. It returns
// the name of the Job that ended.
//
// client-go's RetryWatcher opens a watch the API server closes again from the last resourceVersion seen
// (bookmarks included), at most once a second. When rv is too old to watch from it returns an error that is
// ErrExpired; when ctx ends, its cause.
func Wait(ctx context.Context, jobs Watcher, selector, rv string, finished map[types.UID]bool) (string, error) {
	w, err := watchtools.NewRetryWatcherWithContext(ctx, rv, selected{jobs, selector})
	if err != nil {
		return "", fmt.Errorf("watching Jobs from resourceVersion %q: %w", rv, err)
	}
	ev, err := watchtools.UntilWithoutRetry(ctx, w, func(ev watch.Event) (bool, error) {
		if ev.Type == watch.Error {
			return false, apierrors.FromObject(ev.Object)
		}
		job, ok := ev.Object.(*batchv1.Job)
		if !ok || finished[job.UID] {
			return false, nil // a Job that held no room when listed
		}
		return ev.Type == watch.Deleted || jobFinished(job), nil
	})
	switch {
	case ctx.Err() != nil:
		return "", context.Cause(ctx)
	case apierrors.IsResourceExpired(err) || apierrors.IsGone(err):
		return "", fmt.Errorf("watching Jobs from resourceVersion %s: %w (%w)", rv, ErrExpired, err)
	case err != nil:
		return "", fmt.Errorf("watching Jobs from resourceVersion %s: %w", rv, err)
	}
	return ev.Object.(*batchv1.Job).Name, nil
}

// selected is the watch of the Jobs selector selects, as RetryWatcher calls it. A 410 Gone answered to the WATCH
// request itself comes back as the ERROR event the API server sends in the stream for it, which RetryWatcher
// passes on; it would otherwise retry that request for ever.
type selected struct {
	jobs     Watcher
	selector string
}

func (s selected) WatchWithContext(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
	o.LabelSelector = s.selector
	w, err := s.jobs.Watch(ctx, o)
	var status apierrors.APIStatus
	if (apierrors.IsResourceExpired(err) || apierrors.IsGone(err)) && errors.As(err, &status) {
		ch := make(chan watch.Event, 1)
		ch <- watch.Event{Type: watch.Error, Object: new(status.Status())}
		return watch.NewProxyWatcher(ch), nil
	}
	return w, err
}

func jobFinished(job *batchv1.Job) bool {
	for _, c := range job.Status.Conditions {
		if (c.Type == batchv1.JobComplete || c.Type == batchv1.JobFailed) && c.Status == corev1.ConditionTrue {
			return true
		}
	}
	return false
}
