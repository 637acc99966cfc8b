// Package follow keeps a summary of each object of a collection up to date between the passes of one fill run
// (tick --fill-for): the collection is listed once (kube.EachAt: a streaming list where served) and then watched from
// that list's resourceVersion, each event applied to the summaries. This is client-go's reflector (list, then watch
// from the list's resourceVersion; a 410 Gone or a lost watch lists afresh) with a store of summaries: an informer
// would keep every object whole, and its reflector holds a whole LIST (every page) in memory when it lists again.
// The list and the summaries are the ones a one-shot pass uses, so what a pass decides from a Feed is what it would
// decide from a fresh list taken when the Feed's watch had delivered the same resourceVersion.
package follow

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/go-logr/logr"
	"github.com/rs/zerolog"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/resourceversion"
	"k8s.io/apimachinery/pkg/watch"
	watchtools "k8s.io/client-go/tools/watch"
	"k8s.io/klog/v2"

	"github.com/jobsched/jobsched/pkg/kube"
)

// Feed is one collection followed: Sync lists it the first time (and after its watch was lost), and the summaries
// are kept up to date by the watch in between. O is the object (corev1.Pod), L its list, K an object's key among
// the items (a string, its namespace/name, unless Key says otherwise), T what is kept of one.
type Feed[O any, L any, K comparable, T any] struct {
	Client     any // the clientset: whether it streams lists (kube.EachAt)
	Collection kube.Collection[L]
	Options    metav1.ListOptions // the selectors
	// Summarize is what is kept of an object; false: nothing (the object is left out, as a list would filter it).
	Summarize func(*O) (T, bool)
	// Watch keeps the items up to date after the first list; false: every Sync lists (a one-shot pass).
	Watch bool
	// Changes, when set, is told of every change applied by the watch (not by a list).
	Changes *Changes
	// Changed, when set, is called with each item the watch changes, before and after (had, has: whether there
	// was one), holding the feed.
	Changed func(old T, had bool, new T, has bool)
	// Key is an object's key among the items; nil: its namespace/name (K must then be string).
	Key func(metav1.Object) K

	mu      sync.Mutex
	items   map[K]T         // by Key
	rv      string          // the resourceVersion the watch delivered the items at (the caller's writes may be newer)
	made    map[K]string    // key → the resourceVersion of an object the caller wrote (Made), until the watch reaches it
	gone    map[K]types.UID // key → the UID of an object the caller deleted (Gone), until the watch delivers its end
	live    bool            // the watch runs and has failed in no way that needs a list
	cannot  error           // the watch was refused for good (Forbidden): each Sync lists
	lastErr error           // why the watch ended
	losses  int             // the watches lost so far (ended, or back after failing; not stopped): Losses
	stop    context.CancelFunc
}

// ErrBack is why a feed lists again after its watch came back from failed requests (the API server was away): the
// events it missed arrive after the return, so what the feed holds then is still the state before the outage.
var ErrBack = errors.New("the watch is back after failing: the collection is listed again")

// Sync makes the feed's items current: it lists the collection when it has no watch (the first time, or after
// the watch was lost: a 410 Gone, a refused or failed watch), and starts the watch from that list's
// resourceVersion; a live watch costs nothing. ctx bounds the list; the watch lives until Stop.
func (f *Feed[O, L, K, T]) Sync(ctx context.Context) error {
	f.mu.Lock()
	live := f.live
	f.mu.Unlock()
	if live {
		return nil
	}
	f.Stop()
	items := map[K]T{}
	rv, err := kube.EachAt(ctx, f.Client, f.Collection, f.Options, func(o *O) {
		if v, ok := f.Summarize(o); ok {
			items[f.key(o)] = v
		}
	})
	if err != nil {
		return err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.items, f.rv, f.lastErr = items, rv, nil
	f.made, f.gone = map[K]string{}, map[K]types.UID{}
	if !f.Watch || rv == "" || f.cannot != nil { // nothing to watch from (a fake client): list every time
		return nil
	}
	wctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	// RetryWatcher logs each failed attempt at error, about once a second while the API server is away; the watcher
	// says it once, and once more when the watch is back.
	if l := klog.FromContext(wctx); l.GetSink() != nil {
		wctx = klog.NewContext(wctx, l.WithSink(quietSink{l.GetSink()}))
	}
	w, err := watchtools.NewRetryWatcherWithContext(wctx, rv, watcher[L]{c: f.Collection, opts: f.Options,
		what: reflect.TypeFor[O]().Name(), lost: new(atomic.Bool), back: f.back})
	if err != nil {
		cancel()
		return fmt.Errorf("watching from resourceVersion %q: %w", rv, err)
	}
	f.live, f.stop = true, cancel
	go f.follow(wctx, w)
	return nil
}

// Stop ends the watch (a next Sync lists again).
func (f *Feed[O, L, K, T]) Stop() {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.stop != nil {
		f.stop()
		f.stop = nil
	}
	f.live = false
}

// follow applies the watch's events until it ends: the feed's context (Stop), or an ERROR event (410 Gone, a
// refused watch), after which the next Sync lists.
func (f *Feed[O, L, K, T]) follow(ctx context.Context, w *watchtools.RetryWatcher) {
	defer w.Stop()
	for {
		var ev watch.Event
		var open bool
		select {
		case <-ctx.Done():
			return
		case ev, open = <-w.ResultChan():
		}
		if !open || ev.Type == watch.Error {
			err := errors.New("the watch ended")
			if ev.Type == watch.Error {
				err = apierrors.FromObject(ev.Object)
			}
			f.mu.Lock()
			if ctx.Err() == nil {
				f.live, f.lastErr = false, err
				f.losses++
				if apierrors.IsForbidden(err) || apierrors.IsMethodNotSupported(err) {
					f.cannot = err
				}
			}
			f.mu.Unlock()
			f.Changes.notify()
			return
		}
		f.apply(ctx, ev)
	}
}

// apply applies ev, unless the watch it came from was stopped (ctx, checked holding the feed: once Stop has
// returned, no event of that watch is applied, over a list that replaced its items or otherwise).
func (f *Feed[O, L, K, T]) apply(ctx context.Context, ev watch.Event) {
	m, err := meta.Accessor(ev.Object)
	if err != nil {
		return
	}
	f.mu.Lock()
	if ctx.Err() != nil {
		f.mu.Unlock()
		return
	}
	f.rv = m.GetResourceVersion()
	if ev.Type != watch.Bookmark {
		k := f.keyOf(m)
		if o, ok := any(ev.Object).(*O); ok && f.current(k, m, ev.Type) {
			old, had := f.items[k]
			var v T
			has := false
			if ev.Type != watch.Deleted {
				v, has = f.Summarize(o)
			}
			if has {
				f.items[k] = v
			} else {
				delete(f.items, k)
			}
			if f.Changed != nil && (had || has) {
				f.Changed(old, had, v, has)
			}
		}
	}
	f.mu.Unlock()
	f.Changes.notify()
}

// current says the watch's event of key k (object m) is newer than what the caller wrote of k (holding the feed): an
// event of an object the caller deleted is not (its DELETED ends that), nor one older than the object it made.
func (f *Feed[O, L, K, T]) current(k K, m metav1.Object, typ watch.EventType) bool {
	if uid, ok := f.gone[k]; ok && m.GetUID() == uid {
		if typ == watch.Deleted {
			delete(f.gone, k)
		}
		return false
	}
	if rv, ok := f.made[k]; ok {
		if c, err := resourceversion.CompareResourceVersion(m.GetResourceVersion(), rv); err == nil && c < 0 {
			return false
		}
		delete(f.made, k)
	}
	return true
}

// Made applies an object the caller created, as the API server answered it, before the watch delivers it: the next
// read has it, and the watch's events of that key older than it (an object of that name deleted before) are not
// applied over it. Nothing is kept while the feed does not watch (its next Sync lists), nor once the watch is past
// it.
func (f *Feed[O, L, K, T]) Made(o *O) {
	m, err := meta.Accessor(o)
	if err != nil {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	rv := m.GetResourceVersion()
	if c, err := resourceversion.CompareResourceVersion(f.rv, rv); !f.live || err != nil || c >= 0 {
		return // not watching, or the watch delivered it already (and maybe newer): the feed has it
	}
	k := f.keyOf(m)
	if v, ok := f.Summarize(o); ok {
		f.items[k] = v
	}
	f.made[k] = rv
}

// Gone takes out an object the caller deleted (its key and UID), before the watch delivers its end: the
// next read does not have it, and the watch's events of that object are not applied until its DELETED.
func (f *Feed[O, L, K, T]) Gone(k K, uid types.UID) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.live {
		return
	}
	delete(f.items, k)
	delete(f.made, k)
	f.gone[k] = uid
}

// back marks the feed lost when its watch came back after failed requests (ErrBack), unless that watch was stopped
// (ctx): the next Sync lists, and Changes is told, so that a waiter learns it.
func (f *Feed[O, L, K, T]) back(ctx context.Context) {
	f.mu.Lock()
	lost := ctx.Err() == nil && f.live
	if lost {
		f.live, f.lastErr = false, ErrBack
		f.losses++
	}
	f.mu.Unlock()
	if lost {
		f.Changes.notify()
	}
}

// Losses counts the feed's watches lost since it began: each that ended (a 410 Gone, a refused watch) or came back
// after failed requests, not those stopped. A waiter compares it with its value at the last Sync.
func (f *Feed[O, L, K, T]) Losses() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.losses
}

// Lost is why the watch ended since the last Sync (nil while it runs).
func (f *Feed[O, L, K, T]) Lost() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.lastErr
}

// Sorted is the summaries of a feed by namespace/name (the order of a list), and the resourceVersion they are at.
func Sorted[O, L, T any](f *Feed[O, L, string, T]) ([]T, string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	keys := make([]string, 0, len(f.items))
	for k := range f.items {
		keys = append(keys, k)
	}
	if len(keys) == 0 {
		return nil, f.rv // as a list's items
	}
	slices.Sort(keys)
	out := make([]T, len(keys))
	for i, k := range keys {
		out[i] = f.items[k]
	}
	return out, f.rv
}

// Range calls each with every key and summary, in no order, then done (when not nil), holding the feed: no change
// is applied meanwhile (neither may call the feed).
func (f *Feed[O, L, K, T]) Range(each func(K, T), done func()) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for k, v := range f.items {
		each(k, v)
	}
	if done != nil {
		done()
	}
}

// Reached says the feed's items are at rv or later (false when the versions do not compare: the caller lists).
func (f *Feed[O, L, K, T]) Reached(rv string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	c, err := resourceversion.CompareResourceVersion(f.rv, rv)
	return err == nil && c >= 0
}

// Get is the item at key, if any.
func (f *Feed[O, L, K, T]) Get(key K) (T, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	v, ok := f.items[key]
	return v, ok
}

// Watching says the feed's watch runs: its items follow the collection without a list.
func (f *Feed[O, L, K, T]) Watching() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.live
}

// key is o's key (keyOf).
func (f *Feed[O, L, K, T]) key(o *O) K {
	m, err := meta.Accessor(o)
	if err != nil {
		var none K
		return none
	}
	return f.keyOf(m)
}

// keyOf is m's key: Key's, or its namespace/name.
func (f *Feed[O, L, K, T]) keyOf(m metav1.Object) K {
	if f.Key != nil {
		return f.Key(m)
	}
	var k any = m.GetName()
	if ns := m.GetNamespace(); ns != "" {
		k = ns + "/" + m.GetName()
	}
	return k.(K)
}

// watcher is the collection's watch as RetryWatcher opens it, with the feed's selectors. A 410 Gone answered to
// the WATCH request itself comes back as the ERROR event the API server sends in the stream for it: RetryWatcher
// would otherwise retry that request for ever.
//
// A watch request that fails otherwise (the API server is away) is logged once, at warn, with the feed's kind and
// selectors, and its return once, at info, with the logger of the context (the run's fields), and told to back;
// RetryWatcher's own line for each attempt is dropped (quietSink).
type watcher[L any] struct {
	c    kube.Collection[L]
	opts metav1.ListOptions
	what string       // the kind followed: Pod, Job
	lost *atomic.Bool // a watch request failed, and none has succeeded since
	back func(context.Context)
}

func (w watcher[L]) WatchWithContext(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
	o.LabelSelector, o.FieldSelector = w.opts.LabelSelector, w.opts.FieldSelector
	wi, err := w.c.Watch(ctx, o)
	var status apierrors.APIStatus
	if (apierrors.IsResourceExpired(err) || apierrors.IsGone(err)) && errors.As(err, &status) {
		ch := make(chan watch.Event, 1)
		ch <- watch.Event{Type: watch.Error, Object: new(status.Status())}
		return watch.NewProxyWatcher(ch), nil
	}
	log := zerolog.Ctx(ctx).With().Str("watch", w.what).Str("labelSelector", w.opts.LabelSelector).
		Str("fieldSelector", w.opts.FieldSelector).Logger()
	switch {
	case err != nil && ctx.Err() == nil && !w.lost.Swap(true):
		log.Warn().Err(err).Msg("lost a watch: retrying every second until it is back (said once)")
	case err == nil && w.lost.Swap(false):
		log.Info().Msg("the watch is back")
		if w.back != nil {
			w.back(ctx)
		}
	}
	return wi, err
}

// quietSink is RetryWatcher's log without its "Watch failed" lines (watcher says it once).
type quietSink struct{ logr.LogSink }

func (s quietSink) Error(err error, msg string, kv ...any) {
	if !strings.HasPrefix(msg, "Watch failed") {
		s.LogSink.Error(err, msg, kv...)
	}
}

func (s quietSink) Info(level int, msg string, kv ...any) {
	if !strings.HasPrefix(msg, "Watch failed") {
		s.LogSink.Info(level, msg, kv...)
	}
}

// Changes tells waiters that some feed changed: Wait returns a channel closed at the next change.
type Changes struct {
	mu sync.Mutex
	ch chan struct{}
}

// Wait is a channel closed when a feed next changes (an event applied, a watch lost).
func (c *Changes) Wait() <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.ch == nil {
		c.ch = make(chan struct{})
	}
	return c.ch
}

func (c *Changes) notify() {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.ch != nil {
		close(c.ch)
		c.ch = nil
	}
}

// Until waits until cond holds, testing it at each change; it returns context.Cause when ctx ends first.
func (c *Changes) Until(ctx context.Context, cond func() bool) error {
	for {
		ch := c.Wait()
		if cond() {
			return nil
		}
		select {
		case <-ctx.Done():
			return context.Cause(ctx)
		case <-ch:
		}
	}
}
