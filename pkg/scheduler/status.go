package scheduler

import (
	"context"
	"fmt"
	"strconv"
)

// BacklogCap is how far status counts the rows waiting for a Job.
const BacklogCap = 10000

// Status is the read-only report of `jobsched status`; its JSON form is a stable document for scripts.
type Status struct {
	*Plan
	// Backlog counts the rows the query selects that have no Job yet, up to BacklogCap ("10000+").
	Backlog string        `json:"backlog"`
	States  map[State]int `json:"states"`
	Next    string        `json:"next"`
}

// Status observes the cluster, decides the pass and counts the backlog; it reads no row and writes nothing.
func (s *Scheduler) Status(ctx context.Context) (*Status, error) {
	obs, err := s.Observe(ctx)
	if err != nil {
		return nil, err
	}
	p := Decide(s.Config, obs)
	st := &Status{Plan: p, States: map[State]int{}}
	for _, state := range []State{StateRunning, StateStarting, StateUnschedulable, StateSucceeded, StateFailed} {
		st.States[state] = p.Count(state)
	}
	n, err := s.Source.Count(ctx, p.exclude, BacklogCap+1)
	if err != nil {
		return nil, err
	}
	st.Backlog = strconv.Itoa(n)
	if n > BacklogCap {
		st.Backlog = strconv.Itoa(BacklogCap) + "+"
	}
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
