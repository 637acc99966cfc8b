package scheduler

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/rs/zerolog"
)

// NotDeadError names the keys `jobsched retry` was given that are not dead tasks of this scheduler.
type NotDeadError struct{ Keys []string }

func (e *NotDeadError) Error() string {
	return fmt.Sprintf("not a dead task of this scheduler: %q (see `jobsched status` for the dead tasks)", strings.Join(e.Keys, `", "`))
}

// ResetDead is `jobsched retry`: it deletes the record (the last failed Job) of each dead task in keys, or of every
// dead task when allDead, so the next pass starts it again at attempt 1 if the query still selects its row. With
// dryRun it only says what it would delete. A key that is not a dead task is a *NotDeadError and nothing is deleted.
// (A task's next attempt after a failure is not this: the pass makes it, see NextAttempt.)
func (s *Scheduler) ResetDead(ctx context.Context, keys []string, allDead, dryRun bool) ([]JobStatus, error) {
	obs, err := s.observe(ctx, false)
	if err != nil {
		return nil, err
	}
	p := Decide(s.Config, obs)
	dead := map[string][]JobStatus{} // a key may be a dead task of several queues
	for _, j := range p.Jobs {
		if j.State == StateDead && j.Delete == "" {
			dead[j.Key] = append(dead[j.Key], j)
		}
	}
	var records []JobStatus
	var notDead []string
	if allDead {
		for _, js := range dead {
			records = append(records, js...)
		}
	}
	for _, k := range keys {
		if js, ok := dead[k]; ok {
			records = append(records, js...)
		} else {
			notDead = append(notDead, k)
		}
	}
	if len(notDead) > 0 {
		return nil, &NotDeadError{Keys: notDead}
	}
	sort.Slice(records, func(i, j int) bool {
		return records[i].Key < records[j].Key || records[i].Key == records[j].Key && records[i].Queue < records[j].Queue
	})
	log := zerolog.Ctx(ctx)
	var errs []error
	for _, j := range records {
		if dryRun {
			log.Info().Str("job", j.Name).Str("task", j.Key).Int("attempt", j.Attempt).Msg("would delete the dead task's record (dry run)")
			continue
		}
		j.Delete = DeleteReset
		if err := s.delete(ctx, j); err != nil {
			errs = append(errs, err)
		}
	}
	return records, errors.Join(errs...)
}
