package scheduler

import (
	"errors"
	"fmt"

	"github.com/jobsched/jobsched/pkg/render"
	"github.com/jobsched/jobsched/pkg/rows"
)

// admit renders row into a Create, or says why it is skipped; it changes nothing. Only a configuration problem is an
// error. A row due for a retry gets the next attempt of its task and supersedes the failed one.
func (p *Plan) admit(r *render.Renderer, row rows.Row) (Create, *Skip, error) {
	last := p.retry[row.Key]
	attempt := NextAttempt(last)
	job, err := r.Job(row, attempt)
	var rowErr *render.RowError
	if errors.As(err, &rowErr) {
		return Create{}, &Skip{Key: rowErr.Key, Reason: "no Job: " + rowErr.Reason}, nil
	}
	if err != nil {
		return Create{}, nil, err
	}
	if other, ok := p.job(job.Name); ok && other.Key != row.Key {
		return Create{}, &Skip{Key: row.Key, Reason: fmt.Sprintf("name collision: Job %s exists for task %q", job.Name, other.Key)}, nil
	}
	return Create{Key: row.Key, Attempt: attempt, Job: job, Supersedes: last}, nil, nil
}
