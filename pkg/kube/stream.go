package kube

import (
	"context"
	"errors"
	"fmt"

	"github.com/rs/zerolog"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/util/watchlist"
)

// Collection is one resource's typed client (its List and Watch), e.g. client.BatchV1().Jobs(namespace).
type Collection[L any] interface {
	List(context.Context, metav1.ListOptions) (L, error)
	Watch(context.Context, metav1.ListOptions) (watch.Interface, error)
}

// Each calls fn for every object opts select, one at a time, and keeps none of them.
//
// It asks for a streaming list (a WATCH with sendInitialEvents, "watch-list"): the API server sends the objects one
// by one from its watch cache, then a bookmark, so the client decodes one object at a time instead of a page of
// PageSize, and memory does not grow with the collection. When the client cannot stream (a fake clientset) or the
// server refuses it (older than v1.27 or with WatchList off; RBAC without the watch verb), it lists page by page
// instead. An error once the stream has started fails the whole list: no object is passed to fn twice.
//
// client is the clientset (it tells whether it can stream).
func Each[T any, L any](ctx context.Context, client any, c Collection[L], opts metav1.ListOptions, fn func(*T)) error {
	_, err := EachAt(ctx, client, c, opts, fn)
	return err
}

// EachAt is Each that also returns the resourceVersion the objects were read at: the streaming list's last bookmark,
// or the first page's (every later page of a paginated list is served from the same snapshot). A caller can wait
// for, or watch from, exactly that version.
func EachAt[T any, L any](ctx context.Context, client any, c Collection[L], opts metav1.ListOptions, fn func(*T)) (string, error) {
	streamed, rv, err := stream(ctx, client, c, opts, fn)
	if err != nil || streamed {
		return rv, err
	}
	return List(ctx, c.List, opts, fn)
}

// stream runs the streaming list and returns the resourceVersion of its closing bookmark; false with no error means
// "list page by page instead" (nothing was passed to fn).
func stream[T any, L any](ctx context.Context, client any, c Collection[L], opts metav1.ListOptions, fn func(*T)) (bool, string, error) {
	if watchlist.DoesClientNotSupportWatchListSemantics(client) {
		return false, "", nil
	}
	opts, ok, err := watchlist.PrepareWatchListOptionsFromListOptions(opts)
	if err != nil || !ok {
		zerolog.Ctx(ctx).Debug().Err(err).Msg("these options do not stream: listing page by page")
		return false, "", nil
	}
	w, err := c.Watch(ctx, opts)
	if err != nil {
		if ctx.Err() != nil {
			return false, "", context.Cause(ctx)
		}
		zerolog.Ctx(ctx).Debug().Err(err).Msg("no streaming list here: listing page by page")
		return false, "", nil
	}
	defer w.Stop()
	for {
		var ev watch.Event
		var open bool
		select {
		case <-ctx.Done():
			return false, "", context.Cause(ctx)
		case ev, open = <-w.ResultChan():
		}
		switch {
		case !open && ctx.Err() != nil:
			return false, "", context.Cause(ctx)
		case !open:
			return false, "", errors.New("the API server ended the streaming list before its last object")
		case ev.Type == watch.Error:
			return false, "", apierrors.FromObject(ev.Object)
		case ev.Type == watch.Bookmark:
			if m, err := meta.Accessor(ev.Object); err == nil && m.GetAnnotations()[metav1.InitialEventsAnnotationKey] == "true" {
				return true, m.GetResourceVersion(), nil
			}
		case ev.Type == watch.Added:
			obj, ok := any(ev.Object).(*T)
			if !ok {
				return false, "", fmt.Errorf("the streaming list sent a %T", ev.Object)
			}
			fn(obj)
		}
	}
}
