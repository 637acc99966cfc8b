package events

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/rs/zerolog"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
	k8stesting "k8s.io/client-go/testing"

	"github.com/jobsched/jobsched/pkg/kube"
	"github.com/jobsched/jobsched/pkg/scheduler"
	"github.com/jobsched/jobsched/pkg/testkit"
)

const ns = "batch"

var pod = &corev1.ObjectReference{APIVersion: "v1", Kind: "Pod", Namespace: ns, Name: "jobsched-29000000-abcde", UID: "pod-uid"}

func createdJob() *batchv1.Job {
	return &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: "reports-k1", Namespace: ns, UID: "job-uid", ResourceVersion: "7"}}
}

// got is the part of an Event the tests compare.
type got struct {
	Type, Reason, Action, Note string
	Regarding                  corev1.ObjectReference
	Related                    *corev1.ObjectReference
}

func TestRecorder(t *testing.T) {
	jobRef := corev1.ObjectReference{APIVersion: "batch/v1", Kind: "Job", Namespace: ns, Name: "reports-k1", UID: "job-uid", ResourceVersion: "7"}
	deleted := scheduler.JobStatus{Name: "reports-k2", Key: "k2", Attempt: 3, State: scheduler.StateDead, Delete: scheduler.DeleteDead, UID: "uid-2"}
	tests := []struct {
		name   string
		pod    *corev1.ObjectReference
		report func(r *Recorder)
		want   []got
	}{
		{
			name: "created, in a pod: regarding the Job, related to the pod",
			pod:  pod,
			report: func(r *Recorder) {
				r.JobCreated(createdJob(), scheduler.Create{Key: "k1", Attempt: 2}, "3 slot(s) this pass, bound by limits.maxPerTick: 3")
			},
			want: []got{{Type: "Normal", Reason: "Created", Action: "Create", Regarding: jobRef, Related: pod,
				Note: `Created Job reports-k1 for task "k1", attempt 2; room: 3 slot(s) this pass, bound by limits.maxPerTick: 3`}},
		},
		{
			name:   "deleted, outside a pod: regarding the Job by name and UID, nothing related",
			report: func(r *Recorder) { r.JobDeleted(deleted) },
			want: []got{{Type: "Normal", Reason: "Deleted", Action: "Delete",
				Regarding: corev1.ObjectReference{APIVersion: "batch/v1", Kind: "Job", Namespace: ns, Name: "reports-k2", UID: "uid-2"},
				Note:      `Deleted Job reports-k2 of task "k2", attempt 3, dead: retry.deadRetention passed`}},
		},
		{
			name: "cancelled: reason Cancelled, regarding the Job by name and UID",
			report: func(r *Recorder) {
				r.JobDeleted(scheduler.JobStatus{Name: "reports-k3", Key: "k3", Attempt: 1, State: scheduler.StateRunning,
					Delete: scheduler.DeleteCancelled, UID: "uid-3"})
			},
			want: []got{{Type: "Normal", Reason: "Cancelled", Action: "Delete",
				Regarding: corev1.ObjectReference{APIVersion: "batch/v1", Kind: "Job", Namespace: ns, Name: "reports-k3", UID: "uid-3"},
				Note:      `Cancelled Job reports-k3 of task "k3", attempt 1, running: cancelled: source.cancelQuery returns its key`}},
		},
		{
			name: "created and deleted, of a queue (config queues:): the notes say the queue",
			report: func(r *Recorder) {
				r.JobCreated(createdJob(), scheduler.Create{Queue: "exports", Key: "k1", Attempt: 1}, "2 slot(s) this pass, bound by limits.maxPerTick: 2")
				d := deleted
				d.Queue = "exports"
				r.JobDeleted(d)
			},
			want: []got{{Type: "Normal", Reason: "Created", Action: "Create", Regarding: jobRef,
				Note: `Created Job reports-k1 for task "k1" (queue exports), attempt 1; room: 2 slot(s) this pass, bound by limits.maxPerTick: 2`},
				{Type: "Normal", Reason: "Deleted", Action: "Delete",
					Regarding: corev1.ObjectReference{APIVersion: "batch/v1", Kind: "Job", Namespace: ns, Name: "reports-k2", UID: "uid-2"},
					Note:      `Deleted Job reports-k2 of task "k2" (queue exports), attempt 3, dead: retry.deadRetention passed`}},
		},
		{
			name:   "blocked by a limit, in a pod: Normal, regarding the pod",
			pod:    pod,
			report: func(r *Recorder) { r.PassBlocked("limits.maxActive: 3 of 3 unfinished", true) },
			want: []got{{Type: "Normal", Reason: "Blocked", Action: "Pass", Regarding: *pod,
				Note: "Created no Job: limits.maxActive: 3 of 3 unfinished"}},
		},
		{
			name: "blocked by Unschedulable pods, outside a pod: Warning, regarding no object",
			report: func(r *Recorder) {
				r.PassBlocked("1 pod(s) Unschedulable (reports-k1: 0/1 nodes are available)", false)
			},
			want: []got{{Type: "Warning", Reason: "Blocked", Action: "Pass", Regarding: corev1.ObjectReference{Namespace: ns},
				Note: "Created no Job: 1 pod(s) Unschedulable (reports-k1: 0/1 nodes are available)"}},
		},
		{
			name: "several queues each full at its maxActive: the pass waits as configured, Normal",
			report: func(r *Recorder) {
				r.PassBlocked("reports: limits.maxActive: 1 of 1 unfinished; exports: limits.maxActive: 2 of 2 unfinished", true)
			},
			want: []got{{Type: "Normal", Reason: "Blocked", Action: "Pass", Regarding: corev1.ObjectReference{Namespace: ns},
				Note: "Created no Job: reports: limits.maxActive: 1 of 1 unfinished; exports: limits.maxActive: 2 of 2 unfinished"}},
		},
		{
			name:   "a note longer than the API server takes is cut",
			report: func(r *Recorder) { r.PassBlocked("capacity unknown: "+strings.Repeat("é", 600), false) },
			want: []got{{Type: "Warning", Reason: "Blocked", Action: "Pass", Regarding: corev1.ObjectReference{Namespace: ns},
				Note: "Created no Job: capacity unknown: " + strings.Repeat("é", (noteLimit-3-len("Created no Job: capacity unknown: "))/2) + "..."}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			client := testkit.NewFake()
			r := New(context.Background(), client, Options{Namespace: ns, Pod: tt.pod})
			tt.report(r)
			r.Close(10 * time.Second)
			if diff := cmp.Diff(tt.want, list(t, client)); diff != "" {
				t.Errorf("Events (-want +got):\n%s", diff)
			}
		})
	}
}

// TestWrittenAsRecorded: an Event is written as it is recorded, while the pass (a fill run) goes on, not when the
// process ends (Close).
func TestWrittenAsRecorded(t *testing.T) {
	client := testkit.NewFake()
	created := make(chan string, 2)
	client.PrependReactor("create", "events", func(a k8stesting.Action) (bool, runtime.Object, error) {
		created <- a.(k8stesting.CreateAction).GetObject().(*eventsv1.Event).Reason
		return false, nil, nil
	})
	r := New(context.Background(), client, Options{Namespace: ns})
	defer r.Close(10 * time.Second)
	r.JobCreated(createdJob(), scheduler.Create{Key: "k1", Attempt: 1}, "1 slot(s)")
	if got := <-created; got != ReasonCreated {
		t.Errorf("written %s, want Created", got)
	}
	r.PassBlocked("limits.maxActive: 1 of 1 unfinished", true)
	if got := <-created; got != ReasonBlocked {
		t.Errorf("written %s, want Blocked", got)
	}
}

// TestBounded: with an API server that does not answer, the Writer holds at most one Event per writer in flight
// and its queue; the rest are dropped and counted. Close gives up on those held after its timeout, counting them:
// what a process killed then would have lost.
func TestBounded(t *testing.T) {
	client := hanging{entered: make(chan struct{})}
	var logs testkit.Buffer
	const size = 3
	w := NewWriter(zerolog.New(&logs).WithContext(context.Background()), client, size)
	for i := range writers {
		w.Eventf(pod, nil, "Normal", ReasonBlocked, ActionPass, "in flight %d", i)
		<-client.entered // a writer took it and waits for the API server
	}
	for i := range size + 5 {
		w.Eventf(pod, nil, "Normal", ReasonBlocked, ActionPass, "queued or dropped %d", i)
	}
	w.Close(time.Millisecond)
	for _, want := range []string{
		fmt.Sprintf(`"events":%d,"waited":1,"message":"Events not written before exit"`, writers+size),
		`"events":5,"queue":3,"message":"Events dropped: the queue was full"`} {
		if !strings.Contains(logs.String(), want) {
			t.Errorf("no log line with %s:\n%s", want, logs.String())
		}
	}
	select {
	case <-client.entered:
		t.Error("a create started after Close's timeout")
	default:
	}
}

// hanging is an events.k8s.io API server that never answers a create: it says when one comes in, and returns
// when the caller's context ends.
type hanging struct {
	entered chan struct{}
}

func (h hanging) RESTClient() rest.Interface { return nil }
func (h hanging) Events(string) kube.Events  { return hangingEvents{hanging: h} }

type hangingEvents struct {
	hanging
	kube.Events // the rest, never called
}

func (h hangingEvents) Create(ctx context.Context, _ *eventsv1.Event, _ metav1.CreateOptions) (*eventsv1.Event, error) {
	select {
	case h.entered <- struct{}{}:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	<-ctx.Done()
	return nil, ctx.Err()
}

// TestRateLimit: past the burst, Created and Deleted Events are dropped and counted; Blocked always goes out.
func TestRateLimit(t *testing.T) {
	client := testkit.NewFake()
	var logs testkit.Buffer
	ctx := zerolog.New(&logs).WithContext(context.Background())
	r := New(ctx, client, Options{Namespace: ns, QPS: 0.001, Burst: 2})
	for i := range 5 {
		j := createdJob()
		j.Name += string(rune('a' + i))
		r.JobCreated(j, scheduler.Create{Key: "k", Attempt: 1}, "room")
	}
	r.PassBlocked("limits.maxActive: 1 of 1 unfinished", true)
	r.Close(10 * time.Second)
	reasons := map[string]int{}
	for _, e := range list(t, client) {
		reasons[e.Reason]++
	}
	if want := map[string]int{"Created": 2, "Blocked": 1}; !cmp.Equal(want, reasons) {
		t.Errorf("Events by reason %v, want %v", reasons, want)
	}
	if !strings.Contains(logs.String(), `"events":3,"message":"Events dropped by the rate limit"`) {
		t.Errorf("no log line counting the 3 dropped Events:\n%s", logs.String())
	}
}

// TestForbidden: an API server that refuses Events (no RBAC permission) costs one log line at --log-level info,
// and Close does not wait for Events that will never be written.
func TestForbidden(t *testing.T) {
	client := testkit.NewFake()
	client.PrependReactor("create", "events", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewForbidden(schema.GroupResource{Group: "events.k8s.io", Resource: "events"}, "", nil)
	})
	var logs testkit.Buffer
	ctx := zerolog.New(&logs).Level(zerolog.InfoLevel).WithContext(context.Background())
	r := New(ctx, client, Options{Namespace: ns})
	r.JobCreated(createdJob(), scheduler.Create{Key: "k1", Attempt: 1}, "room")
	r.PassBlocked("limits.maxActive: 1 of 1 unfinished", true)
	r.Close(time.Hour) // returns once both writes were refused
	if !strings.Contains(logs.String(), `"level":"warn","component":"events","error":"events.events.k8s.io is forbidden`) ||
		!strings.Contains(logs.String(), `"events":2,"message":"Events refused by the API server`) ||
		strings.Count(logs.String(), "\n") != 1 {
		t.Errorf("the refusals are not logged in one warning, alone:\n%s", logs.String())
	}
	if strings.Contains(logs.String(), "not written before exit") {
		t.Errorf("refused Events were waited for:\n%s", logs.String())
	}
}

// TestRefusalLogs: each refusal is logged at --log-level debug, and not at info, where Close sums them up.
func TestRefusalLogs(t *testing.T) {
	for level, want := range map[zerolog.Level]int{zerolog.DebugLevel: 2, zerolog.InfoLevel: 0} {
		client := testkit.NewFake()
		client.PrependReactor("create", "events", func(k8stesting.Action) (bool, runtime.Object, error) {
			return true, nil, apierrors.NewForbidden(schema.GroupResource{Group: "events.k8s.io", Resource: "events"}, "", errors.New("no"))
		})
		var logs testkit.Buffer
		r := New(zerolog.New(&logs).Level(level).WithContext(context.Background()), client, Options{Namespace: ns})
		r.JobCreated(createdJob(), scheduler.Create{Key: "k1", Attempt: 1}, "room")
		r.PassBlocked("limits.maxActive: 1 of 1 unfinished", true)
		r.Close(time.Hour)
		if got := strings.Count(logs.String(), `"message":"Server rejected event (will not retry!)"`); got != want {
			t.Errorf("at %s: %d refusal line(s), want %d:\n%s", level, got, want, logs.String())
		}
	}
}

// TestTransportErrorRetried: a write that failed in transport is tried again while Close waits; one refused is not.
func TestTransportErrorRetried(t *testing.T) {
	client := testkit.NewFake()
	var creates atomic.Int32
	client.PrependReactor("create", "events", func(k8stesting.Action) (bool, runtime.Object, error) {
		if creates.Add(1) == 1 {
			return true, nil, errors.New("connection reset by peer")
		}
		return false, nil, nil
	})
	var logs testkit.Buffer
	r := New(zerolog.New(&logs).Level(zerolog.InfoLevel).WithContext(context.Background()), client, Options{Namespace: ns})
	r.writer.retry = time.Millisecond
	r.PassBlocked("limits.maxActive: 1 of 1 unfinished", true)
	r.Close(time.Hour)
	if n := len(list(t, client)); n != 1 || creates.Load() != 2 {
		t.Errorf("%d Event(s) after %d create(s), want 1 after 2", n, creates.Load())
	}
	if logs.String() != "" {
		t.Errorf("logs of a write that succeeded on its second try:\n%s", logs.String())
	}
}

func TestPodFromEnv(t *testing.T) {
	tests := []struct {
		name string
		env  map[string]string
		want *corev1.ObjectReference
	}{
		{"in a pod", map[string]string{"POD_NAME": pod.Name, "POD_NAMESPACE": ns, "POD_UID": "pod-uid"}, pod},
		{"no uid", map[string]string{"POD_NAME": "p", "POD_NAMESPACE": ns},
			&corev1.ObjectReference{APIVersion: "v1", Kind: "Pod", Namespace: ns, Name: "p"}},
		{"no namespace", map[string]string{"POD_NAME": "p"}, nil},
		{"outside a pod", nil, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, PodFromEnv(func(k string) string { return tt.env[k] })); diff != "" {
				t.Errorf("PodFromEnv (-want +got):\n%s", diff)
			}
		})
	}
}

// list returns the Events the fake API server holds in ns, every one by jobsched, sorted by note.
func list(t *testing.T, client *testkit.Fake) []got {
	t.Helper()
	l, err := client.EventsV1().Events(ns).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var out []got
	for _, e := range l.Items {
		if e.ReportingController != ReportingController || !strings.HasPrefix(e.ReportingInstance, "jobsched-") {
			t.Errorf("Event %s reported by %s/%s, want jobsched/jobsched-<host>", e.Name, e.ReportingController, e.ReportingInstance)
		}
		out = append(out, gotOf(&e))
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Note < out[j].Note })
	return out
}

func gotOf(e *eventsv1.Event) got {
	return got{Type: e.Type, Reason: e.Reason, Action: e.Action, Note: e.Note, Regarding: e.Regarding, Related: e.Related}
}
