package report

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/jobsched/jobsched/pkg/apitext"
	"github.com/jobsched/jobsched/pkg/capacity"
	"github.com/jobsched/jobsched/pkg/jobmeta"
	"github.com/jobsched/jobsched/pkg/kube"
	"github.com/jobsched/jobsched/pkg/render"
	"github.com/jobsched/jobsched/pkg/scheduler"
)

// TaskKind is the kind of the `status KEY` document.
const TaskKind = "Task"

// TaskView is `jobsched status KEY`: one task, its Jobs and their pods, its row as the query returns it now, and
// why it waits.
type TaskView struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Scheduler  string `json:"scheduler"`
	Namespace  string `json:"namespace"`
	// Queue is the task's queue (config queues:): its newest Job's, else the first queue whose query returns the key;
	// absent without queues:.
	Queue string `json:"queue,omitempty"`
	Key   string `json:"key"`
	// State is the newest attempt's state, or "waiting" (selected, no Job yet), "not selected" or "cancelled"
	// (source.cancelQuery returns the key of a task that has no Job, an unfinished one or one in backoff).
	State string `json:"state"`
	Why   string `json:"why"`
	// Attempts are the task's Jobs, oldest first.
	Attempts []TaskAttempt `json:"attempts"`
	// Env is what a Job of the row would get from jobsched now, as the process sees it; nil when the query does not
	// return the row.
	Env []corev1.EnvVar `json:"env"`
}

// TaskAttempt is one of the task's Jobs and its pods.
type TaskAttempt struct {
	JobStatus
	Pods []TaskPod `json:"pods"`
	// Held is what the capacity mode shows of the attempt (capacity.Queuer's JobField), after the fields above;
	// nil for nothing.
	Held *capacity.Field `json:"-"`
}

// MarshalJSON is the attempt's fields, then Held's.
func (a TaskAttempt) MarshalJSON() ([]byte, error) {
	type plain TaskAttempt
	return withFields(plain(a), "", heldFields(a.Held))
}

func heldFields(f *capacity.Field) []capacity.Field {
	if f == nil {
		return nil
	}
	return []capacity.Field{*f}
}

// TaskPod is one pod of an attempt.
type TaskPod struct {
	Name   string `json:"name"`
	Phase  string `json:"phase"`
	Node   string `json:"node,omitempty"`
	Reason string `json:"reason,omitempty"`
}

// TaskViewOf describes one task. It lists this scheduler's Jobs (as a pass does), the task's pods (label jobsched.io/task)
// and reads the task's row (one read); it writes nothing.
func TaskViewOf(ctx context.Context, s *scheduler.Scheduler, key string) (*TaskView, error) {
	p, obs, _, _, err := decide(ctx, s, false)
	if err != nil {
		return nil, err
	}
	v := &TaskView{APIVersion: StatusAPIVersion, Kind: TaskKind, Scheduler: p.Scheduler, Namespace: p.Namespace, Key: key,
		Attempts: []TaskAttempt{}}
	pods, err := taskPods(ctx, s, key)
	if err != nil {
		return nil, err
	}
	var newest *JobStatus
	for _, j := range p.Jobs {
		if j.Key != key {
			continue
		}
		a := TaskAttempt{JobStatus: j, Pods: pods[j.Name]}
		if q, ok := capacity.ModeOf(s.Config.Limits.Capacity).(capacity.Queuer); ok {
			if f, ok := q.JobField(obs.Details, j.UID); ok {
				a.Held = &f
			}
		}
		v.Attempts = append(v.Attempts, a)
		if newest == nil || j.Attempt > newest.Attempt {
			newest = &j
		}
	}
	sort.Slice(v.Attempts, func(i, j int) bool { return v.Attempts[i].Attempt < v.Attempts[j].Attempt })
	selected := false
	qi := 0 // the task's queue: its newest Job's, else the first whose query returns the key
	candidates := []int{0}
	if len(p.Queues) > 0 {
		candidates = nil
		if newest != nil {
			qi = s.Config.QueueIndex(newest.Queue)
			candidates = []int{qi}
		} else {
			for i := range p.Queues {
				candidates = append(candidates, i)
			}
		}
	}
	qs := s.AllQueues()
	noJob := "" // why the row the query returns cannot make a Job (render.RowError)
	for _, i := range candidates {
		if qs[i].Source == nil {
			break
		}
		rows, err := qs[i].Source.Lookup(ctx, []string{key})
		if err != nil {
			return nil, err
		}
		if len(rows) > 0 {
			selected, qi = true, i
			renderer := qs[i].Renderer
			env, err := renderer.Env(rows[0], scheduler.RowAttempt(newest))
			var rowErr *render.RowError
			if errors.As(err, &rowErr) {
				noJob = rowErr.Reason
				break
			}
			if err != nil {
				return nil, err
			}
			for i := range env {
				env[i].Value = strings.ReplaceAll(env[i].Value, "$$", "$") // as the process sees it
			}
			v.Env = env
			break
		}
	}
	room := taskRoom{slots: p.Slots, limit: p.Limit, blocked: p.Blocked, maxAttempts: s.Config.MaxAttempts()}
	if len(p.Queues) > 0 {
		q := p.Queues[qi]
		v.Queue = q.Name
		room = taskRoom{slots: q.Slots, limit: q.Limit, blocked: q.Blocked, maxAttempts: s.Config.QueueConfig(qi).MaxAttempts()}
	}
	v.State, v.Why = taskWhy(room, obs.Now, newest, selected)
	if noJob != "" {
		v.Why += "; its row gets no Job: " + noJob
	}
	if s.Config.QueueConfig(qi).Source.CancelQuery != "" && qs[qi].Source != nil {
		cancelled, err := qs[qi].Source.Cancelled(ctx, []string{key})
		if err != nil {
			return nil, err
		}
		if len(cancelled) > 0 {
			v.State, v.Why = cancelWhy(newest, v.State, v.Why)
		}
	}
	return v, nil
}

// cancelWhy is the state and why of a task whose key source.cancelQuery returns (state and why: as if it did not).
// A succeeded or dead task is not cancelled: it gets no new attempt anyway.
func cancelWhy(newest *JobStatus, state, why string) (string, string) {
	const cancelled = "source.cancelQuery returns its key"
	switch {
	case newest == nil:
		return "cancelled", cancelled + ": it gets no Job while it does"
	case newest.Delete == scheduler.DeleteCancelled:
		return "cancelled", fmt.Sprintf("%s: the next tick deletes attempt %d (Job %s, %s) and its pods; no new attempt while it does",
			cancelled, newest.Attempt, newest.Name, newest.State)
	case newest.State == scheduler.StateBackoff:
		return "cancelled", fmt.Sprintf("%s: attempt %d failed; no new attempt while it does", cancelled, newest.Attempt)
	}
	return state, why + "; " + cancelled + " (a finished task is not cancelled)"
}

// taskRoom is what the task's queue has this pass: its slots, what bound them or why it is blocked, its attempts.
type taskRoom struct {
	slots          int
	limit, blocked string
	maxAttempts    int
}

// taskWhy says in words where the task stands and what it waits for.
func taskWhy(p taskRoom, now time.Time, newest *JobStatus, selected bool) (string, string) {
	if newest == nil {
		switch {
		case !selected:
			return "not selected", "the query does not return this key (done, closed, or never there), and it has no Job"
		case p.blocked != "":
			return "waiting", "its row waits for a Job; the next tick creates nothing: " + p.blocked
		default:
			return "waiting", fmt.Sprintf("its row waits for a Job: the next tick has %d slot(s) (bound by %s) for the first rows in query order", p.slots, p.limit)
		}
	}
	j := *newest
	at := func(t *time.Time) string { return t.UTC().Format(time.RFC3339) }
	switch j.State {
	case scheduler.StateRunning, scheduler.StateStarting:
		return string(j.State), fmt.Sprintf("attempt %d (Job %s) is %s", j.Attempt, j.Name, j.State)
	case scheduler.StateUnschedulable:
		return string(j.State), fmt.Sprintf("attempt %d (Job %s) waits for room: %s", j.Attempt, j.Name, j.Reason)
	case scheduler.StateQueued:
		return string(j.State), fmt.Sprintf("attempt %d (Job %s) is queued: %s", j.Attempt, j.Name, j.Reason)
	case scheduler.StateSucceeded:
		if selected {
			return string(j.State), fmt.Sprintf("attempt %d succeeded, but the query still selects the row: the worker did not close it (a worker bug)", j.Attempt)
		}
		return string(j.State), fmt.Sprintf("attempt %d succeeded at %s", j.Attempt, at(j.FinishedAt))
	case scheduler.StateBackoff:
		if j.RetryAt == nil { // see scheduler's decideQueue
			return string(j.State), fmt.Sprintf("attempt %d of %d failed (%s) at an unknown time (its condition has no lastTransitionTime): it is not retried while its Job %s exists", j.Attempt, p.maxAttempts, j.Reason, j.Name)
		}
		if j.RetryAt.After(now) {
			return string(j.State), fmt.Sprintf("attempt %d of %d failed (%s); the next attempt may start at %s", j.Attempt, p.maxAttempts, j.Reason, at(j.RetryAt))
		}
		if !selected {
			return string(j.State), fmt.Sprintf("attempt %d failed, and the query no longer selects the row: the next pass deletes its Job", j.Attempt)
		}
		return string(j.State), fmt.Sprintf("attempt %d failed (%s); its backoff has passed: attempt %d is created when it gets a slot", j.Attempt, j.Reason, scheduler.NextAttempt(&j))
	case scheduler.StateDead:
		return string(j.State), fmt.Sprintf("no attempt left (%d of %d; last: %s) since %s; `jobsched retry %q` starts it again at attempt 1", j.Attempt, p.maxAttempts, j.Reason, at(j.FinishedAt), j.Key)
	}
	return string(j.State), ""
}

// taskPods lists the task's pods (every phase), by Job name.
func taskPods(ctx context.Context, s *scheduler.Scheduler, key string) (map[string][]TaskPod, error) {
	out := map[string][]TaskPod{}
	if s.Kube == nil {
		return out, nil
	}
	sel := labels.SelectorFromSet(labels.Set{jobmeta.LabelScheduler: s.Config.Name, jobmeta.LabelTask: render.TaskLabel(key)}).String()
	_, err := kube.List(ctx, s.Kube.CoreV1().Pods(s.Config.Namespace).List, metav1.ListOptions{LabelSelector: sel}, func(pod *corev1.Pod) {
		if pod.Annotations[jobmeta.AnnotationTaskKey] != key {
			return // another key with the same label (a hash collision)
		}
		job := ""
		if owner := metav1.GetControllerOf(pod); owner != nil {
			job = owner.Name
		}
		out[job] = append(out[job], TaskPod{Name: pod.Name, Phase: string(pod.Status.Phase), Node: pod.Spec.NodeName, Reason: podReason(pod)})
	})
	if err != nil {
		return nil, fmt.Errorf("listing the pods of task %q: %w", key, err)
	}
	return out, nil
}

// podReason is why a pod is where it is: the scheduler's word while it waits, else a container's.
func podReason(pod *corev1.Pod) string {
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse {
			return apitext.Quote(strings.TrimSpace(c.Reason + ": " + c.Message))
		}
	}
	for _, cs := range pod.Status.ContainerStatuses {
		switch {
		case cs.State.Waiting != nil:
			return apitext.Quote(strings.TrimSpace(cs.State.Waiting.Reason + ": " + cs.State.Waiting.Message))
		case cs.State.Terminated != nil && cs.State.Terminated.ExitCode != 0:
			return apitext.Quote(fmt.Sprintf("%s (exit %d) %s", cs.State.Terminated.Reason, cs.State.Terminated.ExitCode, cs.State.Terminated.Message))
		}
	}
	return pod.Status.Reason
}
