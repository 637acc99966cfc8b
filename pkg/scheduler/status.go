package scheduler

import (
	"context"
	"fmt"
	"time"

	"github.com/jobsched/jobsched/pkg/capacity"
	"github.com/jobsched/jobsched/pkg/config"
)

// BacklogCap is how far status counts the rows waiting for a Job.
const BacklogCap = 10000

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
	// Backlog counts the rows the query selects that have no Job yet, up to BacklogCap; BacklogCapped says there
	// are more.
	Backlog       int              `json:"backlog"`
	BacklogCapped bool             `json:"backlogCapped"`
	States        map[State]int    `json:"states"`
	Unfinished    int              `json:"unfinished"`
	Slots         int              `json:"slots"`
	Limit         string           `json:"limit"`
	Blocked       string           `json:"blocked,omitempty"`
	Capacity      *capacity.Report `json:"capacity,omitempty"`
	Retry         RetryPolicy      `json:"retry"`
	// Query is what the query doctor says about the pass's read (EXPLAIN, never run); nil without a database.
	Query *QueryFinding `json:"query,omitempty"`
	// Backoff are the tasks waiting for their next attempt, Dead those with none left.
	Backoff []Task      `json:"backoff"`
	Dead    []Task      `json:"dead"`
	Jobs    []JobStatus `json:"jobs"`
	Next    string      `json:"next"`
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

// Status observes the cluster, decides the pass and counts the backlog; it reads no row and writes nothing.
func (s *Scheduler) Status(ctx context.Context) (*Status, error) {
	obs, err := s.Observe(ctx)
	if err != nil {
		return nil, err
	}
	p := Decide(s.Config, obs)
	st := &Status{APIVersion: StatusAPIVersion, Kind: StatusKind, Scheduler: p.Scheduler, Namespace: p.Namespace,
		States: map[State]int{}, Unfinished: p.Unfinished, Slots: p.Slots, Limit: p.Limit, Blocked: p.Blocked,
		Capacity: p.Capacity, Retry: retryPolicy(s.Config), Backoff: []Task{}, Dead: []Task{}, Jobs: p.Jobs}
	for _, state := range []State{StateRunning, StateStarting, StateUnschedulable, StateSucceeded, StateBackoff, StateDead} {
		st.States[state] = p.Count(state)
	}
	for _, j := range p.Jobs {
		t := Task{Key: j.Key, Attempt: j.Attempt, Job: j.Name, Reason: j.Reason, Since: j.FinishedAt, RetryAt: j.RetryAt}
		switch {
		case j.Delete != "":
		case j.State == StateBackoff:
			st.Backoff = append(st.Backoff, t)
		case j.State == StateDead:
			t.RetryAt = nil
			st.Dead = append(st.Dead, t)
		}
	}
	n, err := s.Source.Count(ctx, p.exclude, BacklogCap+1)
	if err != nil {
		return nil, err
	}
	st.Backlog, st.BacklogCapped = min(n, BacklogCap), n > BacklogCap
	st.Query = s.explain(ctx, p)
	deletes := len(p.Deletes())
	switch {
	case p.Blocked != "":
		st.Next = fmt.Sprintf("delete %d finished Job(s); create nothing: %s", deletes, p.Blocked)
	case n == 0:
		st.Next = fmt.Sprintf("delete %d finished Job(s); create nothing: no rows waiting", deletes)
	default:
		st.Next = fmt.Sprintf("delete %d finished Job(s); create %d Job(s) (slots %d, bound by %s)", deletes, min(n, p.Slots), p.Slots, p.Limit)
	}
	return st, nil
}
