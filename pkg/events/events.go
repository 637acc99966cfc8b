// Package events reports a pass where Kubernetes users look (`kubectl describe job`, `kubectl get events`): it is
// scheduler.Events written as events.k8s.io/v1 Events, reporting controller "jobsched".
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
//     namespace (a reference with no kind and name, which the API server accepts).
//
// Reporting never fails a pass: writes the API server refuses (no RBAC permission on events) are dropped and
// summed up in one log line. Created and Deleted Events are rate-limited by a token bucket per process (Burst at
// once, then QPS per second; the rest are dropped and counted in one log line), because each tick is a new process;
// Blocked is at most one per pass and not limited.
//
// The Events of a pass are held and written when it ends (Close), after its creates and deletes: they are a report,
// and written during the pass they would compete with its writes for the client's rate limit and the API server.
// Close waits, boundedly, for them to be written before the process exits.
//
// # Why not client-go's events library
//
// k8s.io/client-go/tools/events imports client-go's whole clientset, whose scheme registers every API group when
// the process starts (see kube.Interface): megabytes of every run's memory. What jobsched used of it is small and is
// written here: the Event as its recorder makes it (name, reporting instance "jobsched-<host>", event time, the
// regarding and related references), one create per Event, a refusal (an API status) not retried, a write that
// failed in transport retried (after a second) while Close waits. What it is not: the library's series (it merges
// identical Events of one process into one with a count, by a PATCH), which served nothing here: a pass's Events
// differ from one another (each names its Job) and each tick is a new process.
package events

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/rs/zerolog"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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
	opts     Options
	client   kube.EventsV1
	instance string // the reportingInstance: jobsched-<host>
	limiter  flowcontrol.RateLimiter
	log      zerolog.Logger
	retry    time.Duration // the pause before a write that failed in transport is tried again

	mu      sync.Mutex
	held    []*eventsv1.Event // recorded during the pass, written by Close
	dropped int               // by the rate limit
}

var _ scheduler.Events = (*Recorder)(nil)

// New is a Recorder that writes through client; its log lines go to the zerolog logger of ctx. Close it before the
// process exits.
func New(ctx context.Context, client kube.Interface, o Options) *Recorder {
	if o.QPS == 0 {
		o.QPS = DefaultQPS
	}
	if o.Burst == 0 {
		o.Burst = DefaultBurst
	}
	host, _ := os.Hostname()
	return &Recorder{opts: o, client: client.EventsV1(), instance: ReportingController + "-" + host,
		limiter: flowcontrol.NewTokenBucketRateLimiter(o.QPS, o.Burst), retry: time.Second,
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
	// A reference, not the Job: the Event waits for Close, the Job need not.
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

// event holds one Event for Close, made as client-go's events recorder makes it; the related object is the jobsched
// pod, when there is one and it is not the regarding.
func (r *Recorder) event(regarding *corev1.ObjectReference, typ, reason, action, note string) {
	var related *corev1.ObjectReference
	if r.opts.Pod != nil && regarding != r.opts.Pod {
		related = r.opts.Pod
	}
	now := time.Now()
	ns := regarding.Namespace
	if ns == "" {
		ns = metav1.NamespaceDefault
	}
	e := &eventsv1.Event{
		ObjectMeta:          metav1.ObjectMeta{Name: util.GenerateEventName(regarding.Name, now.UnixNano()), Namespace: ns},
		EventTime:           metav1.NewMicroTime(now),
		ReportingController: ReportingController,
		ReportingInstance:   r.instance,
		Action:              action,
		Reason:              reason,
		Regarding:           *regarding,
		Related:             related,
		Note:                truncate(note),
		Type:                typ,
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.held = append(r.held, e)
}

// writers bounds the Events Close writes at once.
const writers = 16

// Close writes the Events held and waits up to timeout for them to be written (or refused). It logs how many were
// refused, how many were not written in time and how many the rate limit dropped.
func (r *Recorder) Close(timeout time.Duration) {
	r.mu.Lock()
	held, dropped := r.held, r.dropped
	r.held = nil
	r.mu.Unlock()
	ctx, stop := context.WithTimeout(context.Background(), timeout)
	defer stop()
	var (
		mu       sync.Mutex
		written  int
		refused  int
		firstErr error
		wg       sync.WaitGroup
	)
	next := make(chan *eventsv1.Event)
	for range min(writers, len(held)) {
		wg.Go(func() {
			for e := range next {
				err := r.write(ctx, e)
				mu.Lock()
				switch {
				case err == nil:
					written++
				case isRefusal(err):
					if refused++; firstErr == nil {
						firstErr = err
					}
				}
				mu.Unlock()
			}
		})
	}
	for _, e := range held {
		next <- e
	}
	close(next)
	wg.Wait()
	if refused > 0 {
		r.log.Warn().Err(firstErr).Int("events", refused).Msg("Events refused by the API server (the first error is shown)")
	}
	if n := len(held) - written - refused; n > 0 {
		r.log.Warn().Int("events", n).Dur("waited", timeout).Msg("Events not written before exit")
	}
	if dropped > 0 {
		r.log.Warn().Int("events", dropped).Msg("Events dropped by the rate limit")
	}
}

// write creates e. A refusal (the API server's answer) is not tried again; a write that failed in transport is, after
// a pause, until ctx ends.
func (r *Recorder) write(ctx context.Context, e *eventsv1.Event) error {
	for {
		_, err := r.client.Events(e.Namespace).Create(ctx, e, metav1.CreateOptions{})
		if err == nil || isRefusal(err) {
			if err != nil {
				r.log.Debug().Err(err).Str("event", e.Name).Msg("Server rejected event (will not retry!)")
			}
			return err
		}
		r.log.Debug().Err(err).Str("event", e.Name).Msg("Unable to write event (may retry after sleeping)")
		select {
		case <-ctx.Done():
			return err
		case <-time.After(r.retry/2 + rand.N(r.retry)): // spread, so that many clients do not retry in step
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
