// Package events reports a pass where Kubernetes users look (`kubectl describe job`, `kubectl get events`): it is
// scheduler.Events written as events.k8s.io/v1 Events, reporting controller "jobsched".
//
// What is reported:
//   - Created (Normal), regarding each Job a pass creates: the task key, its queue (config queues:), the attempt
//     and why there was room;
//   - Deleted (Normal), regarding each Job a pass deletes: the task key, its queue, the attempt, its state and why;
//     Cancelled (Normal) instead for a Job deleted because source.cancelQuery returns its key;
//   - Blocked, once per pass that creates nothing for a reason other than an empty backlog: the reason. It is
//     Normal when the pass waits as configured (a limit or a full cluster bound it, in every queue) and Warning
//     otherwise (Pending pods Unschedulable, capacity unknown, reading rows failed, another pass's Lease). It
//     regards the jobsched pod when it runs in a pod (POD_NAME and POD_NAMESPACE from the downward API), else no
//     object: the Event then carries only the namespace (a reference with no kind and name, which the API server
//     accepts).
//
// Reporting never fails a pass: writes the API server refuses (no RBAC permission on events) are dropped and
// summed up in one log line. Created and Deleted Events are rate-limited by a token bucket per process (Burst at
// once, then QPS per second; the rest are dropped and counted in one log line), because each tick is a new process;
// Blocked is at most one per pass and not limited.
//
// # As they happen
//
// Each Event is written as it is recorded, asynchronously, as client-go's k8s.io/client-go/tools/events
// broadcaster writes them: recording puts it in a queue of QueueSize Events (one that finds the queue full is
// dropped and counted), and a few writers create them from there, so that `kubectl get events` shows a pass's
// Events within moments of what they report, also during a `tick --fill-for` run. Close, at the end of the
// process, waits a bounded time for the queue to be written. A process killed (SIGKILL, an eviction, the
// CronJob's activeDeadlineSeconds) loses only the Events in its queue and in flight: at most QueueSize + the
// writers.
//
// # What differs from client-go's events library
//
// k8s.io/client-go/tools/events imports client-go's whole clientset, whose scheme registers every API group when
// the process starts (see kube.Interface): megabytes of every run's memory. This Writer is the library's recorder
// and sink for what jobsched uses; TestLibrary compares the two: the same Event (name, reporting instance
// "jobsched-<host>", event time, regarding and related references, type, reason, action, note), one create per
// Event, a refusal (an API status) not retried, a write that failed in transport retried, up to the library's
// tries. Where it differs, on purpose:
//   - No series. The library merges an Event isomorphic to one it wrote (same type, reason, action, regarding and
//     related) into a series: the second is a PATCH of the first's count, without its own note, and later ones
//     are written only by its 6-minute and 30-minute timers, which a run that lives at most a few minutes never
//     reaches. Here each Event is its own create with its own note (a pass's Blocked reason may differ from the
//     last pass's), so the Role needs create only, not patch.
//   - Bounded. The library keeps each Event in a goroutine of its own until written (unbounded under a slow API
//     server) and waits for none at Shutdown. Here the queue and the writers bound what is held, and Close waits
//     for it up to its deadline.
//   - A transport error is retried a second later, not ten: a run lives minutes, not days.
//   - A note longer than the API server takes (1 KiB) is cut, not refused.
package events

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/rs/zerolog"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record/util"
	"k8s.io/client-go/util/flowcontrol"

	"github.com/jobsched/jobsched/pkg/kube"
	"github.com/jobsched/jobsched/pkg/scheduler"
)

// ReportingController is the reportingController of every Event jobsched writes.
const ReportingController = "jobsched"

// Reasons and actions of the Events.
const (
	ReasonCreated = "Created"
	ReasonDeleted = "Deleted"
	ReasonBlocked = "Blocked"
	// ReasonCancelled is the Deleted Event of a Job cancelled from its row (source.cancelQuery).
	ReasonCancelled = "Cancelled"

	ActionCreate = "Create"
	ActionDelete = "Delete"
	ActionPass   = "Pass"
)

// Defaults of the rate limit of Created and Deleted Events.
const (
	DefaultQPS   = 1
	DefaultBurst = 100
)

// QueueSize is how many Events wait to be written at most, as client-go's broadcaster queues at most 1000.
const QueueSize = 1000

// writers are the Writer's goroutines: Events are written at most this many at once.
const writers = 4

// maxTries is how many times an Event that fails in transport is written at most, as client-go's broadcaster does.
const maxTries = 12

// noteLimit is the API server's limit on an Event's note (bytes).
const noteLimit = 1024

// Options say where the Events go.
type Options struct {
	Namespace string                  // the scheduler's namespace
	Pod       *corev1.ObjectReference // the jobsched pod, regarded by Blocked (related to the others); nil: none
	QPS       float32                 // rate limit of Created and Deleted (0: DefaultQPS)
	Burst     int                     // (0: DefaultBurst)
}

// eventRecorder records one Event: client-go's events.EventRecorder, which the Writer implements for the
// references jobsched reports on (and TestLibrary puts in its place).
type eventRecorder interface {
	Eventf(regarding runtime.Object, related runtime.Object, eventtype, reason, action, note string, args ...any)
}

// Recorder is scheduler.Events on the API server: which Events a pass reports, made by its Writer.
type Recorder struct {
	opts    Options
	rec     eventRecorder
	writer  *Writer // nil when rec is not one (TestLibrary)
	limiter flowcontrol.RateLimiter
	log     zerolog.Logger

	mu      sync.Mutex
	dropped int // by the rate limit
}

var _ scheduler.Events = (*Recorder)(nil)

// New is a Recorder whose Writer writes through client as Events are recorded; its log lines go to the zerolog
// logger of ctx. Close it before the process exits.
func New(ctx context.Context, client kube.Interface, o Options) *Recorder {
	w := NewWriter(ctx, client.EventsV1(), QueueSize)
	r := newRecorder(ctx, w, o)
	r.writer = w
	return r
}

func newRecorder(ctx context.Context, rec eventRecorder, o Options) *Recorder {
	if o.QPS == 0 {
		o.QPS = DefaultQPS
	}
	if o.Burst == 0 {
		o.Burst = DefaultBurst
	}
	return &Recorder{opts: o, rec: rec, limiter: flowcontrol.NewTokenBucketRateLimiter(o.QPS, o.Burst),
		log: zerolog.Ctx(ctx).With().Str("component", "events").Logger()}
}

// PodFromEnv is the jobsched pod when it runs in one: POD_NAME and POD_NAMESPACE (and POD_UID, if set) from the
// downward API. It is nil otherwise.
func PodFromEnv(getenv func(string) string) *corev1.ObjectReference {
	name, ns := getenv("POD_NAME"), getenv("POD_NAMESPACE")
	if name == "" || ns == "" {
		return nil
	}
	return &corev1.ObjectReference{APIVersion: "v1", Kind: "Pod", Namespace: ns, Name: name, UID: types.UID(getenv("POD_UID"))}
}

// JobCreated implements scheduler.Events.
func (r *Recorder) JobCreated(job *batchv1.Job, c scheduler.Create, room string) {
	if !r.allow() {
		return
	}
	ref := &corev1.ObjectReference{APIVersion: "batch/v1", Kind: "Job", Namespace: job.Namespace, Name: job.Name, UID: job.UID,
		ResourceVersion: job.ResourceVersion}
	r.event(ref, corev1.EventTypeNormal, ReasonCreated, ActionCreate,
		fmt.Sprintf("Created Job %s for task %q%s, attempt %d; room: %s", job.Name, c.Key, ofQueue(c.Queue), c.Attempt, room))
}

// JobDeleted implements scheduler.Events. The Job is referred to by name and UID: it is gone or going.
func (r *Recorder) JobDeleted(j scheduler.JobStatus) {
	if !r.allow() {
		return
	}
	ref := &corev1.ObjectReference{APIVersion: "batch/v1", Kind: "Job", Namespace: r.opts.Namespace, Name: j.Name, UID: j.UID}
	task := "no task key"
	if j.Key != "" {
		task = fmt.Sprintf("task %q", j.Key)
	}
	task += ofQueue(j.Queue)
	reason, verb := ReasonDeleted, "Deleted"
	if j.Delete == scheduler.DeleteCancelled {
		reason, verb = ReasonCancelled, "Cancelled"
	}
	r.event(ref, corev1.EventTypeNormal, reason, ActionDelete,
		fmt.Sprintf("%s Job %s of %s, attempt %d, %s: %s", verb, j.Name, task, j.Attempt, j.State, j.Delete))
}

// PassBlocked implements scheduler.Events: Normal when the pass waits as configured, else Warning. It is not
// rate-limited: a pass reports it at most once.
func (r *Recorder) PassBlocked(reason string, waits bool) {
	typ := corev1.EventTypeWarning
	if waits {
		typ = corev1.EventTypeNormal
	}
	regarding := r.opts.Pod
	if regarding == nil {
		regarding = &corev1.ObjectReference{Namespace: r.opts.Namespace} // no object: see the package comment
	}
	r.event(regarding, typ, ReasonBlocked, ActionPass, "Created no Job: "+reason)
}

// ofQueue names a Job's queue in a note: " (queue NAME)" for a queue of config queues:, nothing for the one queue
// of a configuration without them (its notes stay as they were).
func ofQueue(queue string) string {
	if queue == "" {
		return ""
	}
	return " (queue " + queue + ")"
}

func (r *Recorder) allow() bool {
	if r.limiter.TryAccept() {
		return true
	}
	r.mu.Lock()
	r.dropped++
	r.mu.Unlock()
	return false
}

// event records one Event; the related object is the jobsched pod, when there is one and it is not the regarding.
func (r *Recorder) event(regarding *corev1.ObjectReference, typ, reason, action, note string) {
	var related runtime.Object // a nil interface, not a nil reference, when there is none
	if r.opts.Pod != nil && regarding != r.opts.Pod {
		related = r.opts.Pod
	}
	r.rec.Eventf(regarding, related, typ, reason, action, "%s", note)
}

// Close waits up to timeout for the Events recorded to be written (or refused), and logs how many the rate limit
// dropped (and, through the Writer, how many were refused, dropped or not written in time).
func (r *Recorder) Close(timeout time.Duration) {
	if r.writer != nil {
		r.writer.Close(timeout)
	}
	r.mu.Lock()
	dropped := r.dropped
	r.mu.Unlock()
	if dropped > 0 {
		r.log.Warn().Int("events", dropped).Msg("Events dropped by the rate limit")
	}
}

// Writer writes Events to the API server as they are recorded: Eventf makes the Event as client-go's events
// recorder makes it and queues it (dropping it when the queue is full), and the writers create it from there (see
// the package comment).
type Writer struct {
	client   kube.EventsV1
	instance string // the reportingInstance: jobsched-<host>
	log      zerolog.Logger
	retry    time.Duration // the pause before a write that failed in transport is tried again

	queue  chan *eventsv1.Event
	ctx    context.Context // the writes': ended when Close's deadline passes
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu       sync.Mutex
	closed   bool
	queued   int // Events put in the queue
	full     int // Events dropped: the queue was full, or Close had been called
	written  int
	refused  int
	firstErr error // the first refusal
}

var _ eventRecorder = (*Writer)(nil)

// NewWriter is a Writer of at most size queued Events, writing through client until Close; its log lines go to
// the zerolog logger of ctx (whose end does not stop the writes: Close does).
func NewWriter(ctx context.Context, client kube.EventsV1, size int) *Writer {
	host, _ := os.Hostname()
	wctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	w := &Writer{client: client, instance: ReportingController + "-" + host, retry: time.Second,
		log: zerolog.Ctx(ctx).With().Str("component", "events").Logger(), queue: make(chan *eventsv1.Event, size),
		ctx: wctx, cancel: cancel}
	for range writers {
		w.wg.Go(w.run)
	}
	return w
}

// Eventf queues an Event, as client-go's events.EventRecorder records one. regarding and related (nil: none) are
// object references, the only objects jobsched reports on.
func (w *Writer) Eventf(regarding runtime.Object, related runtime.Object, eventtype, reason, action, note string, args ...any) {
	ref, ok := regarding.(*corev1.ObjectReference)
	if !ok || !util.ValidateEventType(eventtype) {
		w.log.Error().Str("type", eventtype).Msgf("not an Event jobsched writes (regarding a %T): dropped", regarding)
		return
	}
	var rel *corev1.ObjectReference
	if related != nil {
		rel, _ = related.(*corev1.ObjectReference)
	}
	now := time.Now()
	ns := ref.Namespace
	if ns == "" {
		ns = metav1.NamespaceDefault
	}
	e := &eventsv1.Event{
		ObjectMeta:          metav1.ObjectMeta{Name: util.GenerateEventName(ref.Name, now.UnixNano()), Namespace: ns},
		EventTime:           metav1.NewMicroTime(now),
		ReportingController: ReportingController,
		ReportingInstance:   w.instance,
		Action:              action,
		Reason:              reason,
		Regarding:           *ref,
		Related:             rel,
		Note:                truncate(fmt.Sprintf(note, args...)),
		Type:                eventtype,
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		w.full++
		return
	}
	select {
	case w.queue <- e:
		w.queued++
	default:
		w.full++
	}
}

// run is one writer: it writes the queued Events until Close closes the queue.
func (w *Writer) run() {
	for e := range w.queue {
		err := w.write(e)
		w.mu.Lock()
		switch {
		case err == nil:
			w.written++
		case isRefusal(err):
			if w.refused++; w.firstErr == nil {
				w.firstErr = err
			}
		}
		w.mu.Unlock()
	}
}

// Close takes no more Events and waits up to timeout for those queued to be written (or refused); then it ends the
// writes. It logs how many were refused, how many were not written in time and how many a full queue dropped.
func (w *Writer) Close(timeout time.Duration) {
	w.mu.Lock()
	if !w.closed {
		w.closed = true
		close(w.queue)
	}
	w.mu.Unlock()
	done := make(chan struct{})
	go func() { w.wg.Wait(); close(done) }()
	timer := time.NewTimer(timeout)
	select {
	case <-done:
		timer.Stop()
	case <-timer.C:
		w.cancel() // the writes in flight fail, and those still queued are not tried
		<-done
	}
	w.cancel()
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.refused > 0 {
		w.log.Warn().Err(w.firstErr).Int("events", w.refused).Msg("Events refused by the API server (the first error is shown)")
	}
	if n := w.queued - w.written - w.refused; n > 0 {
		w.log.Warn().Int("events", n).Dur("waited", timeout).Msg("Events not written before exit")
	}
	if w.full > 0 {
		w.log.Warn().Int("events", w.full).Int("queue", cap(w.queue)).Msg("Events dropped: the queue was full")
	}
}

// write creates e. A refusal (the API server's answer) is not tried again; a write that failed in transport is,
// after a pause, up to maxTries times, until Close ends the writes.
func (w *Writer) write(e *eventsv1.Event) error {
	for try := 1; ; try++ {
		if err := w.ctx.Err(); err != nil {
			return err // Close's timeout passed: no write starts
		}
		_, err := w.client.Events(e.Namespace).Create(w.ctx, e, metav1.CreateOptions{})
		if err == nil || isRefusal(err) {
			if err != nil {
				w.log.Debug().Err(err).Str("event", e.Name).Msg("Server rejected event (will not retry!)")
			}
			return err
		}
		if try == maxTries {
			w.log.Debug().Err(err).Str("event", e.Name).Msg("Unable to write event (retry limit exceeded!)")
			return err
		}
		w.log.Debug().Err(err).Str("event", e.Name).Msg("Unable to write event (may retry after sleeping)")
		select {
		case <-w.ctx.Done():
			return err
		case <-time.After(w.retry/2 + rand.N(w.retry)): // spread, so that many clients do not retry in step
		}
	}
}

// isRefusal says err is the API server's answer, which the same write would get again.
func isRefusal(err error) bool {
	var status apierrors.APIStatus
	return errors.As(err, &status)
}

func truncate(s string) string {
	if len(s) <= noteLimit {
		return s
	}
	s = s[:noteLimit-3]
	for len(s) > 0 && !utf8.ValidString(s) {
		s = s[:len(s)-1] // never cut a character in two
	}
	return s + "..."
}
