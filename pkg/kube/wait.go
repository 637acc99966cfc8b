package kube

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
)

// ErrExpired says the resourceVersion a wait started from is older than the API server can watch from (410 Gone,
// "too old resource version"): the caller observes afresh instead of waiting.
var ErrExpired = errors.New("the resourceVersion to watch from has expired")

// Watcher is one resource's Watch, e.g. client.BatchV1().Jobs(namespace).
type Watcher interface {
	Watch(context.Context, metav1.ListOptions) (watch.Interface, error)
}

// rewatchAfter is the least time between two watches when the API server keeps closing them at once: a wait never
// turns into a loop of requests.
const rewatchAfter = time.Second

// WaitJobEnd watches the Jobs that selector selects from resourceVersion rv (that of the list the caller decided
// on, so that nothing which happened since is missed) until one of them ends: it gets its Complete or Failed
// condition, or it is deleted before it finished. Either frees the room the Job held. finished are the UIDs of the
// Jobs that had finished when listed: their later changes (deleted by a pass, relabelled) free nothing. It returns
// the name of the Job that ended.
//
// A watch the API server closes is opened again from the last resourceVersion seen (bookmarks included). When rv
// is too old to watch from it returns an error that is ErrExpired; when ctx ends, its cause.
func WaitJobEnd(ctx context.Context, jobs Watcher, selector, rv string, finished map[types.UID]bool) (string, error) {
	for {
		opened := time.Now()
		w, err := jobs.Watch(ctx, metav1.ListOptions{LabelSelector: selector, ResourceVersion: rv, AllowWatchBookmarks: true})
		if err != nil {
			return "", watchError(ctx, rv, err)
		}
		name, last, err := untilEnd(ctx, w, finished)
		w.Stop()
		if err != nil || name != "" {
			return name, err
		}
		if last != "" {
			rv = last
		}
		if wait := rewatchAfter - time.Since(opened); wait > 0 {
			t := time.NewTimer(wait)
			select {
			case <-ctx.Done():
				t.Stop()
				return "", context.Cause(ctx)
			case <-t.C:
			}
		}
	}
}

// untilEnd reads w until a Job ends (its name), the watch closes ("" and the last resourceVersion seen, to watch on
// from) or fails.
func untilEnd(ctx context.Context, w watch.Interface, finished map[types.UID]bool) (name, rv string, err error) {
	for {
		var ev watch.Event
		var open bool
		select {
		case <-ctx.Done():
			return "", rv, context.Cause(ctx)
		case ev, open = <-w.ResultChan():
		}
		if !open {
			if ctx.Err() != nil {
				return "", rv, context.Cause(ctx)
			}
			return "", rv, nil
		}
		if ev.Type == watch.Error {
			return "", rv, watchError(ctx, rv, apierrors.FromObject(ev.Object))
		}
		if m, err := meta.Accessor(ev.Object); err == nil && m.GetResourceVersion() != "" {
			rv = m.GetResourceVersion()
		}
		job, ok := ev.Object.(*batchv1.Job)
		if !ok || finished[job.UID] {
			continue // a bookmark, or a Job that held no room when listed
		}
		switch ev.Type {
		case watch.Deleted:
			return job.Name, rv, nil
		case watch.Added, watch.Modified:
			if jobFinished(job) {
				return job.Name, rv, nil
			}
		}
	}
}

func jobFinished(job *batchv1.Job) bool {
	for _, c := range job.Status.Conditions {
		if (c.Type == batchv1.JobComplete || c.Type == batchv1.JobFailed) && c.Status == corev1.ConditionTrue {
			return true
		}
	}
	return false
}

// watchError names an expired resourceVersion as ErrExpired and ctx's end as its cause.
func watchError(ctx context.Context, rv string, err error) error {
	if ctx.Err() != nil {
		return context.Cause(ctx)
	}
	var status apierrors.APIStatus
	if apierrors.IsResourceExpired(err) || apierrors.IsGone(err) ||
		(errors.As(err, &status) && status.Status().Code == http.StatusGone) {
		return fmt.Errorf("watching Jobs from resourceVersion %s: %w (%w)", rv, ErrExpired, err)
	}
	return fmt.Errorf("watching Jobs from resourceVersion %s: %w", rv, err)
}
