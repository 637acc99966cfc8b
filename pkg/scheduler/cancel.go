package scheduler

import (
	"context"

	"k8s.io/apimachinery/pkg/types"

	"github.com/jobsched/jobsched/pkg/config"
)

// Cancellation is the cancel step's value: what each queue's source.cancelQuery says of the keys of its unfinished
// Jobs. A queue without a cancel query, or without an unfinished Job, is not asked (its read is not run).
type Cancellation struct {
	// Jobs are the unfinished Jobs (by UID) whose key their queue's cancel query returns: the pass deletes them.
	Jobs map[types.UID]bool
	// Failed holds, by queue index, why a queue's cancel query could not be asked: that queue creates nothing this
	// pass (it cannot tell which of its rows are cancelled).
	Failed map[int]error
}

// Cancel asks each queue's cancel query, in one READ ONLY read per queue bounded by the keys asked, which keys of
// its unfinished Jobs in obs it returns. The error is a configuration error (the cancel query is wrong), which
// stops the pass; a read that fails otherwise is in Failed.
func (s *Scheduler) Cancel(ctx context.Context, obs *Observation) (Cancellation, error) {
	var c Cancellation
	qs := s.AllQueues()
	keys := make([][]string, len(qs))
	uids := make([]map[string][]types.UID, len(qs))
	for i := range obs.Jobs {
		j := &obs.Jobs[i]
		q := jobQueue(s.Config, j)
		if j.Finished != nil || j.Deleting || j.Key == "" || q < 0 || q >= len(qs) || s.Config.QueueConfig(q).Source.CancelQuery == "" {
			continue
		}
		if uids[q] == nil {
			uids[q] = map[string][]types.UID{}
		}
		if len(uids[q][j.Key]) == 0 {
			keys[q] = append(keys[q], j.Key)
		}
		uids[q][j.Key] = append(uids[q][j.Key], j.UID)
	}
	for i, q := range qs {
		if len(keys[i]) == 0 || q.Source == nil {
			continue
		}
		found, err := q.Source.Cancelled(ctx, keys[i])
		if config.IsConfigError(err) {
			return c, err
		}
		if err != nil {
			if c.Failed == nil {
				c.Failed = map[int]error{}
			}
			c.Failed[i] = err
			continue
		}
		for _, k := range found {
			for _, uid := range uids[i][k] {
				if c.Jobs == nil {
					c.Jobs = map[types.UID]bool{}
				}
				c.Jobs[uid] = true
			}
		}
	}
	return c, nil
}
