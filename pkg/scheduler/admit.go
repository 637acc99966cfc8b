package scheduler

import (
	"errors"
	"fmt"

	"github.com/jobsched/jobsched/pkg/render"
	"github.com/jobsched/jobsched/pkg/rows"
)

// admit renders row of queue i into a Create, or says why it is skipped; it changes nothing. Only a configuration
// problem is an error. A row due for a retry gets the next attempt of its task and supersedes the failed one. A row
// whose Job name is taken by a Job of another task or queue is skipped, every pass, with the Job it collides with.
func (p *Plan) admit(i int, r *render.Renderer, row rows.Row) (Create, *Skip, error) {
	part := p.parts[i]
	if row.Cancelled {
		return Create{}, &Skip{Key: row.Key, Reason: SkipCancelled}, nil
	}
	last := part.retry[row.Key]
	attempt := NextAttempt(last)
	job, err := r.Job(row, attempt)
	var rowErr *render.RowError
	if errors.As(err, &rowErr) {
		return Create{}, &Skip{Key: rowErr.Key, Reason: "no Job: " + rowErr.Reason, Size: rowErr.Size}, nil
	}
	if err != nil {
		return Create{}, nil, err
	}
	if other, ok := p.job(job.Name); ok && (other.Key != row.Key || other.Queue != part.queueName) {
		return Create{}, &Skip{Key: row.Key, Reason: collisionReason(job.Name, other.Key, other.Queue)}, nil
	}
	c := Create{Queue: part.queueName, Key: row.Key, Attempt: attempt, Job: job, Supersedes: last, Requests: r.Requests(job)}
	if part.backfill != nil {
		c.waitingSince = waitingSince(row, part.backfill.Since)
	}
	return c, nil, nil
}

// collisionReason is the reason a row is skipped when its Job's name is taken by a Job of task key (of queue, when the
// install has queues).
func collisionReason(job, key, queue string) string {
	of := ""
	if queue != "" {
		of = " of queue " + queue
	}
	return fmt.Sprintf("name collision: Job %s exists for task %q%s", job, key, of)
}
