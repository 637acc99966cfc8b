package cmd

import (
	"context"
	"os"
	"time"

	"github.com/rs/zerolog"
	"github.com/spf13/cobra"

	"github.com/jobsched/jobsched/pkg/config"
	"github.com/jobsched/jobsched/pkg/events"
	"github.com/jobsched/jobsched/pkg/metrics"
	"github.com/jobsched/jobsched/pkg/report"
	"github.com/jobsched/jobsched/pkg/scheduler"
)

// After a pass, the Events in flight get eventsFlush to be written, the backlog count and the push of the metrics
// get reportTimeout each: a pass ends with its report, boundedly, even when the API server or the Pushgateway hang.
const (
	eventsFlush   = 5 * time.Second
	reportTimeout = 10 * time.Second
)

func newTickCmd(g *globalOptions) *cobra.Command {
	return &cobra.Command{
		Use:   "tick",
		Short: "One full pass: delete finished Jobs, then create a Job for each new row there is room for",
		Args:  noArgs,
		RunE:  func(cmd *cobra.Command, _ []string) error { return g.executePass(cmd.Context(), false) },
	}
}

// executePass is tick, and gc when gcOnly: the pass with its writes. gc opens no database and lists only Jobs.
// The pass reports Events on the API server, and pushes its metrics when a Pushgateway is set; neither ever fails it.
func (g *globalOptions) executePass(ctx context.Context, gcOnly bool) error {
	cfg, err := g.loadConfig()
	if err != nil {
		return err
	}
	s, closeFn, err := g.newScheduler(cfg, schedulerOptions{source: !gcOnly})
	if err != nil {
		return err
	}
	defer closeFn()
	s.BeforeCreates = gcForCreates()
	rec := events.New(ctx, s.Kube, events.Options{Namespace: cfg.Namespace, Pod: events.PodFromEnv(os.Getenv)})
	s.Events = rec
	defer rec.Close(eventsFlush)
	mode := scheduler.Execute
	if gcOnly {
		mode = scheduler.DeleteOnly
	}
	start := time.Now()
	res, err := s.Run(ctx, mode)
	if url := g.pushgatewayURL(cfg); url != "" {
		pushMetrics(ctx, s, url, mode, res.Plan, res.Summary, err, time.Since(start))
	}
	return logged(err)
}

// pushgatewayURL is --pushgateway, else metrics.pushgateway.
func (g *globalOptions) pushgatewayURL(cfg *config.Config) string {
	if g.pushgateway != "" {
		return g.pushgateway
	}
	return cfg.Metrics.Pushgateway
}

// pushMetrics counts the backlog (tick only) and pushes the pass's metrics; a failure of either is logged.
func pushMetrics(ctx context.Context, s *scheduler.Scheduler, url string, mode scheduler.Mode, plan *scheduler.Plan,
	sum scheduler.Summary, passErr error, d time.Duration) {
	log := zerolog.Ctx(ctx).With().Str("scheduler", s.Config.Name).Str("namespace", s.Config.Namespace).Logger()
	p := metrics.Pass{Job: metrics.JobTick, Scheduler: s.Config.Name, Namespace: s.Config.Namespace, Duration: d,
		Summary: sum, Plan: plan, Failed: passErr != nil, End: time.Now()}
	if mode == scheduler.DeleteOnly {
		p.Job = metrics.JobGC
	} else if plan != nil && s.Source != nil && ctx.Err() == nil {
		bctx, cancel := context.WithTimeout(ctx, reportTimeout)
		rows, capped, err := report.Backlog(bctx, s, plan)
		cancel()
		if err != nil {
			log.Warn().Err(err).Msg("cannot count the backlog for the metrics")
		} else {
			p.Backlog = &metrics.Backlog{Rows: rows, Capped: capped}
		}
	}
	// Pushed even after SIGTERM: the push is bounded, and it is what says the pass was cut short.
	pctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), reportTimeout)
	defer cancel()
	if err := metrics.Push(pctx, url, p); err != nil {
		log.Warn().Err(err).Msg("metrics not pushed")
		return
	}
	log.Debug().Str("pushgateway", config.RedactURL(url)).Msg("metrics pushed")
}
