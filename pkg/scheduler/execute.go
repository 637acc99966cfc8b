package scheduler

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/rs/zerolog"
	batchv1 "k8s.io/api/batch/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/jobsched/jobsched/pkg/render"
)

// Summary is what a pass did; every pass logs it as one line.
type Summary struct {
	Selected       int    `json:"selected"`
	Created        int    `json:"created"`
	AlreadyPresent int    `json:"alreadyPresent"`
	Skipped        int    `json:"skipped"`
	Blocked        string `json:"blocked,omitempty"`
	Deleted        int    `json:"deleted"`
	Failed         int    `json:"failed"`
}

// Log writes the summary line.
func (s Summary) Log(log *zerolog.Logger, start time.Time) {
	ev := log.Info()
	if s.Failed > 0 {
		ev = log.Error()
	}
	ev.Int("selected", s.Selected).Int("created", s.Created).Int("alreadyPresent", s.AlreadyPresent).
		Int("skipped", s.Skipped).Str("blocked", s.Blocked).Int("deleted", s.Deleted).Int("failed", s.Failed).
		Dur("duration", time.Since(start)).Msg("pass done")
}

// Execute carries out p: first the deletes (so a retried task's name is free), then the creates, each concurrently
// within the client's rate limit. A failure of one does not stop the others; all failures are returned joined.
// With serverDryRun the creates go to the API server with dryRun=All (it validates them, nothing is stored) and
// nothing is deleted.
func (s *Scheduler) Execute(ctx context.Context, p *Plan, serverDryRun bool) (Summary, error) {
	sum := Summary{Selected: p.Selected, Skipped: len(p.Skipped), Blocked: p.Blocked}
	var mu sync.Mutex
	var errs []error
	fail := func(err error) {
		mu.Lock()
		defer mu.Unlock()
		sum.Failed++
		errs = append(errs, err)
	}
	count := func(n *int) {
		mu.Lock()
		defer mu.Unlock()
		*n++
	}
	if !serverDryRun {
		deletes := p.Deletes()
		parallel(len(deletes), func(i int) {
			if err := s.delete(ctx, deletes[i]); err != nil {
				fail(err)
			} else {
				count(&sum.Deleted)
			}
		})
	}
	parallel(len(p.Creates), func(i int) {
		switch res, err := s.create(ctx, p.Creates[i], serverDryRun); {
		case err != nil:
			fail(err)
		case res == created:
			count(&sum.Created)
		case res == present:
			count(&sum.AlreadyPresent)
		default:
			count(&sum.Skipped)
		}
	})
	return sum, errors.Join(errs...)
}

func parallel(n int, fn func(i int)) {
	var wg sync.WaitGroup
	sem := make(chan struct{}, workers)
	for i := range n {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			fn(i)
		}()
	}
	wg.Wait()
}

// delete removes a finished Job and, through the garbage collector, its pods. The UID precondition makes sure a
// Job created again under the same name by a concurrent pass is never deleted by this one.
func (s *Scheduler) delete(ctx context.Context, j JobStatus) error {
	log := zerolog.Ctx(ctx).With().Str("job", j.Name).Str("task", j.Key).Logger()
	policy := metav1.DeletePropagationBackground
	err := s.Kube.BatchV1().Jobs(s.Config.Namespace).Delete(ctx, j.Name, metav1.DeleteOptions{
		PropagationPolicy: &policy,
		Preconditions:     &metav1.Preconditions{UID: &j.UID},
	})
	switch {
	case err == nil:
		log.Info().Str("state", string(j.State)).Msg("deleted finished Job")
	case apierrors.IsNotFound(err) || apierrors.IsConflict(err):
		log.Debug().Msg("finished Job already deleted by someone else")
	default:
		log.Error().Err(err).Msg("deleting finished Job")
		return fmt.Errorf("deleting Job %s (task %q): %w", j.Name, j.Key, err)
	}
	return nil
}

type createResult int

const (
	created createResult = iota
	present
	collision
)

// create creates one Job. AlreadyExists means another pass (or an earlier try) created it: the Job is already present,
// unless it belongs to another task or scheduler, which is a name collision (logged and skipped).
func (s *Scheduler) create(ctx context.Context, c Create, serverDryRun bool) (createResult, error) {
	log := zerolog.Ctx(ctx).With().Str("job", c.Job.Name).Str("task", c.Key).Logger()
	jobs := s.Kube.BatchV1().Jobs(s.Config.Namespace)
	opts := metav1.CreateOptions{FieldManager: "jobsched"}
	if serverDryRun {
		opts.DryRun = []string{metav1.DryRunAll}
	}
	_, err := jobs.Create(ctx, c.Job, opts)
	if err == nil {
		log.Info().Bool("serverDryRun", serverDryRun).Msg("created Job")
		return created, nil
	}
	if !apierrors.IsAlreadyExists(err) {
		log.Error().Err(err).Msg("creating Job")
		return 0, fmt.Errorf("creating Job %s (task %q): %w", c.Job.Name, c.Key, err)
	}
	existing, err := jobs.Get(ctx, c.Job.Name, metav1.GetOptions{})
	if err != nil {
		return 0, fmt.Errorf("creating Job %s (task %q): it exists, and reading it failed: %w", c.Job.Name, c.Key, err)
	}
	if !ours(existing, s.Config.Name, c.Key) {
		log.Error().Str("existingTask", existing.Annotations[render.AnnotationTaskKey]).
			Msg("name collision: a Job of this name exists for another task or owner; skipped")
		return collision, nil
	}
	log.Debug().Msg("Job already present")
	return present, nil
}

func ours(job *batchv1.Job, scheduler, key string) bool {
	return job.Labels[render.LabelScheduler] == scheduler && job.Annotations[render.AnnotationTaskKey] == key
}
