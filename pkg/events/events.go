// Package events reports a pass where Kubernetes users look (`kubectl describe job`, `kubectl get events`): it is
// scheduler.Events written with client-go's events library (k8s.io/client-go/tools/events), which sends
// events.k8s.io/v1 Events as reporting controller "jobsched".
//
// What is reported:
//   - Created (Normal), regarding each Job a pass creates: the task key, its queue (config queues:), the attempt
//     and why there was room;
//   - Deleted (Normal), regarding each Job a pass deletes: the task key, its queue, the attempt, its state and why;
//     Cancelled (Normal) instead for a Job deleted because source.cancelQuery returns its key;
//   - Blocked, once per pass that creates nothing for a reason other than an empty backlog: the reason. It is
//     Normal when a limit or a full cluster bound the pass (limits.*, capacity: …) and Warning otherwise (Pending
//     pods Unschedulable, capacity unknown, reading rows failed). It regards the jobsched pod when it runs in a pod
//     (POD_NAME and POD_NAMESPACE from the downward API), else no object: the Event then carries only the
//     namespace (the events library refuses a nil regarding object, but takes a reference with no kind and name,
//     and the API server accepts it).
//
// Reporting never fails a pass: writes the API server refuses (no RBAC permission on events) are dropped and
// summed up in one log line. Created and Deleted Events are rate-limited by a token bucket per process (Burst at once, then QPS per
// second; the rest are dropped and counted in one log line), because each tick is a new process and the events
// library's own dedup (event series) only merges identical Events within one process; Blocked is at most one per
// pass and not limited.
//
// The Events of a pass are held and written when it ends (Close), after its creates and deletes: they are a report,
// and written during the pass they would compete with its writes for the client's rate limit and the API server.
// Close waits, boundedly, for them to be written before the process exits.
package events

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/go-logr/logr"
	"github.com/go-logr/zerologr"
	"github.com/rs/zerolog"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/tools/reference"
	"k8s.io/client-go/util/flowcontrol"

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

// noteLimit is the API server's limit on an Event's note (bytes).
const noteLimit = 1024

// Options say where the Events go.
type Options struct {
	Namespace string                  // the scheduler's namespace
	Pod       *corev1.ObjectReference // the jobsched pod, regarded by Blocked (related to the others); nil: none
	QPS       float32                 // rate limit of Created and Deleted (0: DefaultQPS)
	Burst     int                     // (0: DefaultBurst)
}

// Recorder is scheduler.Events on the API server.
type Recorder struct {
	opts    Options
	bc      events.EventBroadcaster
	rec     events.EventRecorder
	cancel  context.CancelFunc
	sink    *sink
	limiter flowcontrol.RateLimiter
	log     zerolog.Logger

	mu       sync.Mutex
	held     []heldEvent // recorded during the pass, written by Close
	recorded int         // Events handed to the library
	dropped  int         // by the rate limit
}

// heldEvent is one Event waiting for the end of the pass.
type heldEvent struct {
	regarding, related        runtime.Object
	typ, reason, action, note string
}

var _ scheduler.Events = (*Recorder)(nil)

// New starts a broadcaster that writes to the API server through client. The events library's own errors are
// logged to the zerolog logger of ctx at --log-level debug (see logger). Close it before the process exits.
func New(ctx context.Context, client kubernetes.Interface, o Options) *Recorder {
	if o.QPS == 0 {
		o.QPS = DefaultQPS
	}
	if o.Burst == 0 {
		o.Burst = DefaultBurst
	}
	log := zerolog.Ctx(ctx).With().Str("component", "events").Logger()
	lg := logger(log)
	s := &sink{EventSinkImpl: events.EventSinkImpl{Interface: client.EventsV1()}, ended: make(chan struct{})}
	bc := events.NewBroadcaster(s)
	// The library's goroutines live until Close, not as long as the pass's context: Events recorded at the end of
	// a pass that ran out of time are still written.
	rctx, cancel := context.WithCancel(logr.NewContext(context.WithoutCancel(ctx), lg))
	r := &Recorder{opts: o, bc: bc, cancel: cancel, sink: s, log: log,
		limiter: flowcontrol.NewTokenBucketRateLimiter(o.QPS, o.Burst)}
	if err := bc.StartRecordingToSinkWithContext(rctx); err != nil {
		log.Warn().Err(err).Msg("cannot report Events")
		return r // rec stays nil: nothing is reported
	}
	r.rec = bc.NewRecorder(scheme.Scheme, ReportingController).WithLogger(lg)
	return r
}

// logger is the events library's logr.Logger: its lines (an Event the API server refused, or could not be reached
// for) are written to log only at --log-level debug; at the other levels Close sums them up, in one line each.
func logger(log zerolog.Logger) logr.Logger {
	if log.GetLevel() > zerolog.DebugLevel {
		log = log.Level(zerolog.Disabled)
	}
	return zerologr.New(&log)
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
	// A reference, not the Job: the Event waits for Close, the Job need not.
	ref, err := reference.GetReference(scheme.Scheme, job)
	if err != nil {
		r.log.Debug().Err(err).Str("job", job.Name).Msg("no Event for this Job")
		return
	}
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

// PassBlocked implements scheduler.Events. It is not rate-limited: a pass reports it at most once.
func (r *Recorder) PassBlocked(reason string) {
	typ := corev1.EventTypeWarning
	if strings.HasPrefix(reason, "limits.") || strings.HasPrefix(reason, "capacity: ") {
		typ = corev1.EventTypeNormal // a limit, or a full cluster: the pass waits as configured
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

// event holds one Event for Close; the related object is the jobsched pod, when there is one and it is not the
// regarding.
func (r *Recorder) event(regarding runtime.Object, typ, reason, action, note string) {
	if r.rec == nil {
		return
	}
	var related runtime.Object // a nil *ObjectReference in it would not be nil
	if r.opts.Pod != nil && regarding != runtime.Object(r.opts.Pod) {
		related = r.opts.Pod
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.held = append(r.held, heldEvent{regarding, related, typ, reason, action, truncate(note)})
}

// Close writes the Events held and waits up to timeout for them to be written (or refused), then stops the
// broadcaster. It logs how many were not written and how many the rate limit dropped.
func (r *Recorder) Close(timeout time.Duration) {
	r.mu.Lock()
	held := r.held
	r.held = nil
	r.recorded += len(held)
	recorded, dropped := r.recorded, r.dropped
	r.mu.Unlock()
	for _, e := range held {
		r.rec.Eventf(e.regarding, e.related, e.typ, e.reason, e.action, "%s", e.note)
	}
	wctx, stop := context.WithTimeout(context.Background(), timeout)
	r.sink.wait(wctx, recorded)
	stop()
	r.cancel()
	r.bc.Shutdown()
	r.sink.mu.Lock()
	refused, firstErr, done := r.sink.refused, r.sink.firstErr, r.sink.done
	r.sink.mu.Unlock()
	if refused > 0 {
		r.log.Warn().Err(firstErr).Int("events", refused).Msg("Events refused by the API server (the first error is shown)")
	}
	if n := int64(recorded - done); n > 0 {
		r.log.Warn().Int64("events", n).Dur("waited", timeout).Msg("Events not written before exit")
	}
	if dropped > 0 {
		r.log.Warn().Int("events", dropped).Msg("Events dropped by the rate limit")
	}
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

// sink counts the writes that ended: written, or refused by the API server (no retry follows either), and keeps
// the first refusal for Close to log. A write that failed in transport is retried by the library and not counted
// until it ends.
type sink struct {
	events.EventSinkImpl

	mu       sync.Mutex
	done     int           // writes that ended
	ended    chan struct{} // closed (and replaced) when a write ends
	refused  int
	firstErr error
}

func (s *sink) count(err error) {
	_, refused := err.(apierrors.APIStatus)
	if err != nil && !refused {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if refused {
		if s.refused++; s.firstErr == nil {
			s.firstErr = err
		}
	}
	s.done++
	close(s.ended)
	s.ended = make(chan struct{})
}

// wait returns once n writes have ended, or when ctx ends.
func (s *sink) wait(ctx context.Context, n int) {
	for {
		s.mu.Lock()
		done, ended := s.done, s.ended
		s.mu.Unlock()
		if done >= n {
			return
		}
		select {
		case <-ended:
		case <-ctx.Done():
			return
		}
	}
}

func (s *sink) Create(ctx context.Context, e *eventsv1.Event) (*eventsv1.Event, error) {
	out, err := s.EventSinkImpl.Create(ctx, e)
	s.count(err)
	return out, err
}

func (s *sink) Patch(ctx context.Context, e *eventsv1.Event, data []byte) (*eventsv1.Event, error) {
	out, err := s.EventSinkImpl.Patch(ctx, e, data)
	if !apierrors.IsNotFound(err) { // on NotFound the library creates the Event instead
		s.count(err)
	}
	return out, err
}
