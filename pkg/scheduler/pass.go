package scheduler

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/rs/zerolog"
	"k8s.io/client-go/kubernetes"

	"github.com/jobsched/jobsched/pkg/config"
	"github.com/jobsched/jobsched/pkg/render"
	"github.com/jobsched/jobsched/pkg/rows"
)

// maxReadRounds bounds how often one pass reads again to replace rows that could not get a Job (invalid rows, rows
// whose Job already succeeded): one bad row never blocks the others, and the work stays bounded.
const maxReadRounds = 10

// workers bounds the creates and deletes in flight; the client's QPS/Burst limiter paces them.
const workers = 16

// Scheduler runs passes for one configuration. Kube is nil when the pass is offline (the cluster is taken as empty).
type Scheduler struct {
	Config   *config.Config
	Kube     kubernetes.Interface
	Source   rows.Source
	Renderer *render.Renderer
	Now      func() time.Time
}

// Observe reads the cluster once, or returns an empty observation when offline.
func (s *Scheduler) Observe(ctx context.Context) (*Observation, error) {
	now := s.Now().UTC()
	if s.Kube == nil {
		return &Observation{Now: now}, nil
	}
	return Observe(ctx, s.Kube, s.Config.Namespace, s.Config.Name, s.Config.Limits.Capacity, now)
}

// Plan decides the pass from obs and reads the rows it has room for. It writes nothing. On a source error it still
// returns the plan's deletes (garbage collection does not depend on the database) together with the error.
func (s *Scheduler) Plan(ctx context.Context, obs *Observation) (*Plan, error) {
	p := Decide(s.Config, obs)
	if p.Slots == 0 || s.Source == nil {
		return p, nil
	}
	log := zerolog.Ctx(ctx)
	exclude := append([]string(nil), p.exclude...)
	need := p.Slots
	for round := 0; need > 0; round++ {
		if round == maxReadRounds {
			log.Warn().Int("rounds", round).Msg("stopped reading: too many selected rows could not get a Job")
			break
		}
		got, err := s.Source.Select(ctx, exclude, need)
		if err != nil {
			return p, err
		}
		p.Selected += len(got)
		asked := need
		for _, row := range got {
			exclude = append(exclude, row.Key)
			ok, err := p.admit(s.Renderer, row)
			if err != nil {
				return p, err
			}
			if ok {
				need--
			}
		}
		if len(got) < asked { // the source has no more rows
			break
		}
	}
	for _, sk := range p.Skipped {
		log.Warn().Str("task", sk.Key).Msg(sk.Reason)
	}
	return p, nil
}

// admit renders row into a Create, or records why it is skipped. Only a configuration problem is an error.
func (p *Plan) admit(r *render.Renderer, row rows.Row) (bool, error) {
	if p.succeeded[row.Key] {
		p.Skipped = append(p.Skipped, Skip{Key: row.Key, Reason: "worker bug: the row is still selected although its Job succeeded; no second Job is created"})
		return false, nil
	}
	job, err := r.Job(row)
	var rowErr *render.RowError
	if errors.As(err, &rowErr) {
		p.Skipped = append(p.Skipped, Skip{Key: rowErr.Key, Reason: "no Job: " + rowErr.Reason})
		return false, nil
	}
	if err != nil {
		return false, err
	}
	if other, ok := p.names[job.Name]; ok && other != row.Key {
		p.Skipped = append(p.Skipped, Skip{Key: row.Key, Reason: fmt.Sprintf("name collision: Job %s exists for task %q", job.Name, other)})
		return false, nil
	}
	p.Creates = append(p.Creates, Create{Key: row.Key, Job: job})
	return true, nil
}
