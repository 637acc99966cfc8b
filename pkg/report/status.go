// Package report holds the read-only reports of a scheduler: `jobsched status` (Status), `jobsched status KEY` (the
// task view).
//
// Each is a versioned document for scripts. They observe and decide as a pass does (scheduler.Observe,
// scheduler.Decide), read rows but never a page of them, and write nothing.
package report

import (
	"context"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/jobsched/jobsched/pkg/backlog"
	"github.com/jobsched/jobsched/pkg/capacity"
	"github.com/jobsched/jobsched/pkg/config"
	"github.com/jobsched/jobsched/pkg/drain"
	"github.com/jobsched/jobsched/pkg/lease"
	"github.com/jobsched/jobsched/pkg/listen"
	"github.com/jobsched/jobsched/pkg/scheduler"
)

// State, JobStatus and QueryFinding are the pass's: a report shows them as the pass decides them.
type (
	State        = scheduler.State
	JobStatus    = scheduler.JobStatus
	QueryFinding = scheduler.QueryFinding
)

// StatusAPIVersion and StatusKind identify the status document.
const (
	StatusAPIVersion = "jobsched.io/v1alpha1"
	StatusKind       = "Status"
)

// Status is the read-only report of `jobsched status`; its JSON and YAML forms are a stable document for scripts.
type Status struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Scheduler  string `json:"scheduler"`
	Namespace  string `json:"namespace"`
	Work
	// Mode is the capacity mode's section (capacity.Inspector's Status): its fields come here in the document,
	// before retry, and its lines in the table.
	Mode  capacity.Section `json:"-"`
	Retry RetryPolicy      `json:"retry"`
	// Query is what the query doctor says about the pass's read (EXPLAIN, never run); nil without a database.
	Query *QueryFinding `json:"query,omitempty"`
	// Backoff are the tasks waiting for their next attempt, Dead those with none left.
	Backoff []Task      `json:"backoff"`
	Dead    []Task      `json:"dead"`
	Jobs    []JobStatus `json:"jobs"`
	Next    string      `json:"next"`
	// Drain is how long the backlog will take at the rate this scheduler's Jobs have been succeeding.
	Drain drain.Estimate `json:"drain"`
	// Lease is the scheduler's Lease as status reads it (nil offline): who creates now, if anyone.
	Lease *lease.Info `json:"lease,omitempty"`
	// Wake is how a fill run wakes (source.notify, source.poll); nil with neither.
	Wake *Wake `json:"wake,omitempty"`
	// Queues are the install's queues (config queues:), in the configuration's order; the fields above are the
	// install's totals. Absent for a configuration without queues:, whose one queue the fields above are.
	Queues []QueueStatus `json:"queues,omitempty"`
}

// Wake is how a fill run (tick --fill-for) wakes: on a notification on Channel, and every Poll; Listening counts
// the runs listening on Channel now, as the database shows them (pg_stat_activity: the listening connection's
// application_name), Since when the oldest of them connected. ListenError says why they could not be counted.
type Wake struct {
	Channel     string     `json:"channel,omitempty"`
	Poll        string     `json:"poll,omitempty"`
	Listening   int        `json:"listening"`
	Since       *time.Time `json:"since,omitempty"`
	ListenError string     `json:"listenError,omitempty"`
}

// listeners is what a source that can count the runs listening implements (rows.Postgres).
type listeners interface {
	Listening(ctx context.Context, appName string) (int, time.Time, error)
}

// wakeOf is the Wake of s's configuration, nil without source.notify and source.poll.
func wakeOf(ctx context.Context, s *scheduler.Scheduler) *Wake {
	src := s.Config.Source
	if !s.Config.Wakes() {
		return nil
	}
	w := &Wake{Channel: src.Notify}
	if src.Poll.Duration > 0 {
		w.Poll = src.Poll.Duration.String()
	}
	if src.Notify == "" {
		return w
	}
	l, ok := s.AllQueues()[0].Source.(listeners)
	if !ok {
		return w // a rows file: no database to ask
	}
	n, since, err := l.Listening(ctx, listen.AppName(s.Config.Namespace, s.Config.Name))
	switch {
	case err != nil:
		w.ListenError = err.Error()
	case n > 0:
		w.Listening, w.Since = n, &since
	}
	return w
}

// String is the Wake line of status's table.
func (w Wake) String(now time.Time) string {
	var parts []string
	if w.Channel != "" {
		switch {
		case w.ListenError != "":
			parts = append(parts, fmt.Sprintf("channel %s: cannot tell who listens: %s", w.Channel, w.ListenError))
		case w.Listening == 0:
			parts = append(parts, fmt.Sprintf("channel %s: no run listening (a notification wakes the next run's passes)", w.Channel))
		default:
			parts = append(parts, fmt.Sprintf("channel %s: %d run(s) listening, since %s ago", w.Channel, w.Listening,
				now.Sub(*w.Since).Truncate(time.Second)))
		}
	}
	if w.Poll != "" {
		parts = append(parts, "poll every "+w.Poll)
	}
	return strings.Join(parts, "; ")
}

// Work is the install's or one queue's work as status sees it: the backlog, the Jobs by state, and the next pass's
// room.
type Work struct {
	// Backlog counts the rows the query selects that have no Job yet, up to backlog.Cap; BacklogCapped says there
	// are more.
	Backlog       int           `json:"backlog"`
	BacklogCapped bool          `json:"backlogCapped"`
	States        map[State]int `json:"states"`
	Unfinished    int           `json:"unfinished"`
	// Holds is what the unfinished Jobs hold, suspended ones not counted (scheduler.QueuePlan.Holds): per
	// resource, their pods' requests as kube-scheduler counts them, times the pods each Job runs at once.
	Holds corev1.ResourceList `json:"holds,omitempty"`
	// RowRequests is, for a queue with job.requestsFrom, what the next rows' Jobs may ask, known without reading a
	// row (scheduler.RowRequests): a NULL row the template's request (default), any other up to job.maxRequests.
	RowRequests *scheduler.RowRequests `json:"rowRequests,omitempty"`
	// Slots is how many Jobs the next pass may create (a queue's: its room alone, see scheduler.QueuePlan), and
	// Limit what bound it; Blocked says why it may create nothing.
	Slots    int              `json:"slots"`
	Limit    string           `json:"limit"`
	Blocked  string           `json:"blocked,omitempty"`
	Capacity *capacity.Report `json:"capacity,omitempty"`
}

// work is the Work of plan p's Jobs of queue (all queues: ""), with its room; the backlog is added by the caller.
func work(p *scheduler.Plan, queue string, unfinished, slots int, limit, blocked string, c *capacity.Report) Work {
	w := Work{States: map[State]int{}, Unfinished: unfinished, Slots: slots, Limit: limit, Blocked: blocked, Capacity: c}
	for _, state := range scheduler.States {
		w.States[state] = p.CountIn(queue, state)
	}
	return w
}

// RetryPolicy is the configuration's retry section, as status shows it.
type RetryPolicy struct {
	MaxAttempts   int    `json:"maxAttempts"`
	Backoff       string `json:"backoff"`
	MaxBackoff    string `json:"maxBackoff"`
	DeadRetention string `json:"deadRetention"`
}

// Task is one task in backoff or dead: its last attempt.
type Task struct {
	Queue   string     `json:"queue,omitempty"` // its queue (config queues:); absent without queues:
	Key     string     `json:"key"`
	Attempt int        `json:"attempt"`
	Job     string     `json:"job"`
	Reason  string     `json:"reason,omitempty"`
	Since   *time.Time `json:"since,omitempty"`   // when the last attempt failed
	RetryAt *time.Time `json:"retryAt,omitempty"` // backoff: when the next attempt may start
}

func retryPolicy(cfg *config.Config) RetryPolicy {
	return RetryPolicy{MaxAttempts: cfg.MaxAttempts(), Backoff: cfg.Retry.Backoff.Duration.String(),
		MaxBackoff: cfg.Retry.MaxBackoff.Duration.String(), DeadRetention: cfg.Retry.DeadRetention.Duration.String()}
}

// MarshalJSON is the document: the capacity mode's fields (Mode.Fields) before retry.
func (s Status) MarshalJSON() ([]byte, error) {
	type plain Status
	return withFields(plain(s), "retry", s.Mode.Fields)
}

// modeStatus is the capacity mode's section of status, from what the observation read of it and the plan.
func modeStatus(cfg *config.Config, p *scheduler.Plan, obs *scheduler.Observation) capacity.Section {
	i, ok := capacity.ModeOf(cfg.Limits.Capacity).(capacity.Inspector)
	if !ok {
		return capacity.Section{}
	}
	return i.Status(cfg, capacity.Counts{Unfinished: p.Unfinished, Queued: p.Queued(), Waiting: p.Waiting, WaitsNote: p.WaitsNote}, obs.Details)
}

// decide observes the cluster whole and decides as the next pass would, with the pass's own function
// (scheduler.Decision: its cancels asked, capacity fitted, the share of each queue's backlog as its read): a queue
// whose cancel query could not be asked is blocked, as in a tick, and failed says why (by queue index). bs are the
// queues' backlogs, counted when count is set (else nil, and the plan creates nothing).
func decide(ctx context.Context, s *scheduler.Scheduler, count bool) (p *scheduler.Plan, obs *scheduler.Observation, bs []backlog.Count, failed map[int]error, err error) {
	obs, err = s.Observe(ctx)
	if err != nil {
		return nil, nil, nil, nil, err
	}
	c, err := s.Cancel(ctx, obs)
	if err != nil {
		return nil, nil, nil, nil, err
	}
	est := &scheduler.Estimate{}
	if count {
		est.Backlog = countBacklogs(s, &bs)
	}
	p, obs, _, err = scheduler.Decision(ctx, s.Config, obs, c, est)
	if err == nil {
		err = est.Err()
	}
	if err != nil {
		return nil, nil, nil, nil, err
	}
	return p, obs, bs, c.Failed, nil
}

// countBacklogs is the Estimate's Backlog of s's queues, keeping the counts in bs.
func countBacklogs(s *scheduler.Scheduler, bs *[]backlog.Count) func(context.Context, *scheduler.Plan) ([]int, error) {
	return func(ctx context.Context, p *scheduler.Plan) ([]int, error) {
		counts, err := backlog.Counts(ctx, s, p, nil)
		if err != nil {
			return nil, err
		}
		*bs = counts
		rows := make([]int, len(counts))
		for i, b := range counts {
			rows[i] = b.Rows
		}
		return rows, nil
	}
}

// withCause is a queue's Blocked with the error of its cancel query, when that is what blocked it.
func withCause(blocked string, err error) string {
	if err == nil {
		return blocked
	}
	return blocked + " (source.cancelQuery: " + err.Error() + ")"
}

// estimated says what status's next tick cannot know: it reads no row (the pass's own plan is dry-run's).
// It counts the rows a read would skip, and not the deletes of failed attempts retried or whose rows are gone.
const estimated = "estimated from the backlog: status reads no row, dry-run does"

// StatusOf observes the cluster, decides the pass and counts the backlog; it reads no row and writes nothing.
func StatusOf(ctx context.Context, s *scheduler.Scheduler) (*Status, error) {
	p, obs, bs, failed, err := decide(ctx, s, true)
	if err != nil {
		return nil, err
	}
	if len(p.Queues) == 0 {
		p.Blocked = withCause(p.Blocked, failed[0])
	}
	st := &Status{APIVersion: StatusAPIVersion, Kind: StatusKind, Scheduler: p.Scheduler, Namespace: p.Namespace,
		Work: work(p, "", p.Unfinished, p.Slots, p.Limit, p.Blocked, p.Capacity),
		Mode: modeStatus(s.Config, p, obs), Retry: retryPolicy(s.Config), Backoff: []Task{}, Dead: []Task{}, Jobs: p.Jobs}
	st.Holds = p.Holds
	if len(p.Queues) == 0 { // with queues:, each queue's rows are its own: Queues[].RowRequests
		st.RowRequests = scheduler.RowRequestsOf(s.Config.QueueConfig(0))
	}
	for _, j := range p.Jobs {
		t := Task{Queue: j.Queue, Key: j.Key, Attempt: j.Attempt, Job: j.Name, Reason: j.Reason, Since: j.FinishedAt, RetryAt: j.RetryAt}
		switch {
		case j.Delete != "":
		case j.State == scheduler.StateBackoff:
			st.Backoff = append(st.Backoff, t)
		case j.State == scheduler.StateDead:
			t.RetryAt = nil
			st.Dead = append(st.Dead, t)
		}
	}
	st.Backlog, st.BacklogCapped = backlog.Total(bs)
	st.Queues = queueStatuses(ctx, s, p, bs)
	for i, err := range failed {
		if i < len(st.Queues) {
			st.Queues[i].Blocked = withCause(st.Queues[i].Blocked, err)
		}
	}
	n := st.Backlog
	var runs []drain.Run
	for _, j := range p.Jobs {
		if j.State == scheduler.StateSucceeded && j.StartedAt != nil && j.FinishedAt != nil {
			runs = append(runs, drain.Run{Start: *j.StartedAt, End: *j.FinishedAt})
		}
	}
	st.Drain = drain.Of(st.Backlog, st.BacklogCapped, s.Now().UTC(), runs)
	if s.Kube != nil { // read, never taken: status does not wait for a pass
		info := lease.Describe(ctx, s.Kube.CoordinationV1(), s.Config.Namespace, s.Config.Name)
		st.Lease = &info
	}
	st.Wake = wakeOf(ctx, s)
	if len(p.Queues) == 0 { // with queues:, each queue's read is its own: Queues[].Query
		st.Query = s.ExplainQueue(ctx, p, 0)
	}
	cancels := len(p.Cancels())
	deletes := fmt.Sprintf("delete %d finished Job(s)", len(p.Deletes())-cancels)
	if cancels > 0 {
		deletes += fmt.Sprintf(", cancel %d (source.cancelQuery)", cancels)
	}
	switch {
	case p.Blocked != "":
		st.Next = fmt.Sprintf("%s; create nothing: %s", deletes, p.Blocked)
	case n == 0:
		st.Next = fmt.Sprintf("%s; create nothing: no rows waiting", deletes)
	default:
		st.Next = fmt.Sprintf("%s; create up to %d Job(s) (slots %d, bound by %s; %s)", deletes,
			len(p.Creates), p.Slots, p.Limit, estimated)
	}
	return st, nil
}
