package cmd

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/rs/zerolog"
	"github.com/spf13/cobra"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/jobsched/jobsched/pkg/backlog"
	"github.com/jobsched/jobsched/pkg/config"
	"github.com/jobsched/jobsched/pkg/events"
	"github.com/jobsched/jobsched/pkg/jobmeta"
	"github.com/jobsched/jobsched/pkg/lease"
	"github.com/jobsched/jobsched/pkg/listen"
	"github.com/jobsched/jobsched/pkg/metrics"
	"github.com/jobsched/jobsched/pkg/pushurl"
	"github.com/jobsched/jobsched/pkg/rate"
	"github.com/jobsched/jobsched/pkg/scheduler"
	"github.com/jobsched/jobsched/pkg/source"
)

// At the end of a run, the Events still queued (each is written as it happens) get eventsFlush to be written, the
// backlog count and the push of the metrics get reportTimeout each: a pass ends with its report, boundedly, even when the API server or the Pushgateway hang.
const (
	eventsFlush   = 5 * time.Second
	reportTimeout = 10 * time.Second
)

// maxLeaseDuration bounds --lease-duration: a killed pass keeps every other from creating that long (and the Lease's
// leaseDurationSeconds is an int32).
const maxLeaseDuration = 24 * time.Hour

func newTickCmd(g *globalOptions) *cobra.Command {
	var fillFor time.Duration
	cmd := &cobra.Command{
		Use:   "tick",
		Short: "One full pass: delete finished Jobs, then create a Job for each new row there is room for",
		Long: `tick runs one full pass: it deletes finished Jobs, then creates a Job for each new row there is room for.
With --fill-for, while a pass was bound by room (capacity, the quota, limits.maxActive) and rows still wait, it
waits for one of its Jobs to finish (when the capacity nodes or autoscale fit bound it, or a node to turn
Ready) and runs the next pass, until that time has passed, the backlog is empty, a pass is blocked (an
Unschedulable pod) or it is told to stop. With source.notify or source.poll it covers the whole time, waking
on a notification, the poll or a Job's end (jobsched help pass).`,
		Args: cobra.NoArgs,
		PreRunE: func(*cobra.Command, []string) error {
			if fillFor < 0 {
				return fmt.Errorf("--fill-for: must not be negative, not %s", fillFor)
			}
			if d := g.leaseDuration; d < 3*time.Second || d > maxLeaseDuration || d%time.Second != 0 {
				return fmt.Errorf("--lease-duration: must be whole seconds from 3s to %s, not %s", maxLeaseDuration, d)
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, _ []string) error { return g.executeTick(cmd.Context(), fillFor) },
	}
	cmd.Flags().DurationVar(&fillFor, "fill-for", 0, "after a pass bound by room, wait for a Job to finish and refill, for this long (0: one pass)")
	cmd.Flags().DurationVar(&g.leaseDuration, "lease-duration", lease.DefaultDuration,
		"how long a killed pass keeps the others from creating (the scheduler's Lease; renewed every third of it), 3s to 24h")
	return cmd
}

// executeTick is tick: one pass, or with fillFor the passes of a filler, each one whole (its deletes, observation,
// pass done line, Events and metrics push), with one client, database pool and Events recorder for them all.
func (g *globalOptions) executeTick(ctx context.Context, fillFor time.Duration) error {
	if fillFor == 0 {
		return g.executePass(ctx, false)
	}
	ctx, s, closeFn, err := g.openPass(ctx, false)
	if err != nil {
		return err
	}
	defer closeFn()
	cfg := s.Config
	s.Follow = scheduler.NewFollow()
	defer s.Follow.Stop()
	wait := s.Follow.Wait
	var lg *lease.Guard
	if held, ok := s.Guard.(*lease.Guard); ok {
		lg = held
		lg.Keep = true // from pass to pass while Jobs keep ending (keepLease)
		defer lg.Give(ctx)
		wait = keepLease(lg, s.Follow.Wait, g.leaseDuration/3)
	}
	ends := scheduler.PodEndFrees(cfg)
	f := filler{fillFor: fillFor, now: time.Now, cover: cfg.Wakes(), minWake: minWakeGap,
		pass: func(ctx context.Context, refill int, woke string) fillPass {
			lc := zerolog.Ctx(ctx).With().Int("refill", refill)
			if woke != "" {
				lc = lc.Str("woke", woke)
			}
			log := lc.Logger()
			ctx = log.WithContext(ctx)
			start := time.Now()
			res, err := s.Run(ctx, scheduler.Execute)
			gcForListing() // the wait and the next pass hold the followed state: no headroom of the creates' over it
			if url := g.pushgatewayURL(cfg); url != "" {
				pushMetrics(ctx, s, url, scheduler.Execute, res.Plan, res.Summary, err, time.Since(start))
			}
			return fillPassOf(res, err, ends)
		},
		wait: wait,
		idle: idleWait(lg, s.Follow),
	}
	var l *listen.Listener
	if cfg.Source.Notify != "" {
		dsn, err := source.DSN(ctx, cfg)
		if err != nil {
			return err
		}
		l, err = listen.Start(dsn, cfg.Source.Notify, listen.AppName(cfg.Namespace, cfg.Name), fallbackPoll(cfg), *zerolog.Ctx(ctx))
		if err != nil {
			return &config.Error{Err: err}
		}
		defer l.Close()
		f.wake = l.Wake
	}
	f.poll = func() time.Duration { return fillPoll(cfg, l) }
	return f.run(ctx)
}

var errIdle = errors.New("no Job ended for a while: the Lease is given up")

// keepLease is wait for a fill run whose passes keep the Lease (lease.Guard.Keep): a refill then costs no call on
// it. When no Job has ended within idle, the Lease is given up, so that a pass started by hand gets its turn; the
// next pass takes it again.
func keepLease(g *lease.Guard, wait func(context.Context, scheduler.WakeOn) (string, error), idle time.Duration) func(context.Context, scheduler.WakeOn) (string, error) {
	return func(ctx context.Context, on scheduler.WakeOn) (string, error) {
		ictx, cancel := context.WithTimeoutCause(ctx, idle, errIdle)
		name, err := wait(ictx, on)
		cancel()
		if !errors.Is(err, errIdle) {
			return name, err
		}
		g.Give(ctx)
		return wait(ctx, on)
	}
}

// fallbackPoll is the poll while source.notify has no listening connection: source.poll, else defaultFallbackPoll.
func fallbackPoll(cfg *config.Config) time.Duration {
	if p := cfg.Source.Poll.Duration; p > 0 {
		return p
	}
	return defaultFallbackPoll
}

// defaultFallbackPoll is the poll of a run with source.notify and no source.poll while it does not listen (before
// the LISTEN is acknowledged, while the connection is lost, when the server refuses LISTEN): a row waits at most
// that long for its pass, as with the poll for cancels.
const defaultFallbackPoll = cancelPoll

// fillPoll is the filler's poll now: the shortest of source.poll, cancelPoll when a queue has a cancel query, and
// the fallback poll while source.notify does not listen (l nil: no source.notify); 0 when none applies (only a
// Job's end or a notification wakes it).
func fillPoll(cfg *config.Config, l *listen.Listener) time.Duration {
	var poll time.Duration
	shorter := func(d time.Duration) {
		if d > 0 && (poll == 0 || d < poll) {
			poll = d
		}
	}
	shorter(cfg.Source.Poll.Duration)
	for _, q := range cfg.AllQueues() {
		if q.Source.CancelQuery != "" {
			shorter(cancelPoll)
		}
	}
	if l != nil && !l.Listening() {
		shorter(fallbackPoll(cfg))
	}
	return poll
}

// idleWait is the filler's idle: the Lease given up (a pass started by hand never waits for an idle run), then the
// wait for a Job's end. Where the Jobs are not watched (no watch in the Role), only the wait's context (the poll,
// a notification, the time) ends it.
func idleWait(lg *lease.Guard, follow *scheduler.Follow) func(context.Context, scheduler.WakeOn) (string, error) {
	return func(ctx context.Context, on scheduler.WakeOn) (string, error) {
		if lg != nil {
			lg.Give(ctx)
		}
		name, err := follow.Wait(ctx, on)
		if err != nil && ctx.Err() == nil && !errors.Is(err, scheduler.ErrLost) {
			<-ctx.Done()
			return "", context.Cause(ctx)
		}
		return name, err
	}
}

// fillPassOf is what the fill loop needs of a pass's result; podEndFrees is scheduler.PodEndFrees of its
// configuration.
func fillPassOf(res scheduler.Result, err error, podEndFrees bool) fillPass {
	p := fillPass{err: err, limit: res.Limit(), room: res.RoomBound(), nodes: res.CapacityBound(), binds: res.AwaitsBinds(),
		ends: podEndFrees && res.CapacityBound(), rowsWait: res.RowsWait}
	if res.Plan != nil && res.Plan.NextCreate != nil {
		p.next = *res.Plan.NextCreate
	}
	if res.Plan != nil && res.Plan.WaitDue != nil {
		p.waitDue = *res.Plan.WaitDue
	}
	if res.HardBlocked() || (res.Plan == nil && res.Blocked() != "") {
		p.blocked = res.Blocked()
	}
	return p
}

// openPass is the scheduler of a pass that writes: tick's with its source and the Lease's guard, gc's (gcOnly)
// with neither; both report Events (written as they happen) and set the GC policy for their creates. The returned
// context carries the run's logger (scheduler.WithRunLog); the returned func waits, boundedly, for the Events still
// queued and releases the pool.
func (g *globalOptions) openPass(ctx context.Context, gcOnly bool) (context.Context, *scheduler.Scheduler, func(), error) {
	s, closeFn, err := g.newScheduler(ctx, schedulerOptions{source: !gcOnly})
	if err != nil {
		return ctx, nil, nil, err
	}
	ctx = scheduler.WithRunLog(ctx, s.Config)
	s.BeforeCreates = gcForCreates()
	if !gcOnly {
		if err := g.guard(s); err != nil {
			closeFn()
			return ctx, nil, nil, err
		}
	}
	rec := events.New(ctx, s.Kube, events.Options{Namespace: s.Config.Namespace, Pod: events.PodFromEnv(os.Getenv)})
	s.Events = rec
	return ctx, s, func() { rec.Close(eventsFlush); closeFn() }, nil
}

// executePass is tick, and gc when gcOnly: the pass with its writes. gc opens no database and lists only Jobs.
// The pass reports Events on the API server, and pushes its metrics when a Pushgateway is set; neither ever fails it.
func (g *globalOptions) executePass(ctx context.Context, gcOnly bool) error {
	ctx, s, closeFn, err := g.openPass(ctx, gcOnly)
	if err != nil {
		return err
	}
	defer closeFn()
	cfg := s.Config
	action := scheduler.Execute
	if gcOnly {
		action = scheduler.DeleteOnly
	}
	start := time.Now()
	res, err := s.Run(ctx, action)
	if url := g.pushgatewayURL(cfg); url != "" {
		pushMetrics(ctx, s, url, action, res.Plan, res.Summary, err, time.Since(start))
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
func pushMetrics(ctx context.Context, s *scheduler.Scheduler, url string, action scheduler.Action, plan *scheduler.Plan,
	sum scheduler.Summary, passErr error, d time.Duration) {
	log := zerolog.Ctx(scheduler.WithRunLog(ctx, s.Config))
	p := metrics.Pass{Job: metrics.JobTick, Scheduler: s.Config.Name, Namespace: s.Config.Namespace, Duration: d,
		Summary: sum, Plan: plan, Failed: passErr != nil, End: time.Now()}
	for _, q := range s.Config.AllQueues() {
		if !q.Implicit {
			p.Queues = append(p.Queues, q.Name)
		}
	}
	if action == scheduler.DeleteOnly {
		p.Job = metrics.JobGC
	} else if plan != nil && s.AllQueues()[0].Source != nil && ctx.Err() == nil {
		bctx, cancel := context.WithTimeout(ctx, reportTimeout)
		bs, err := backlog.AfterPass(bctx, s, plan)
		cancel()
		if err != nil {
			log.Warn().Err(err).Msg("cannot count the backlog for the metrics")
		} else {
			p.Backlogs = bs
		}
	}
	// Pushed even after SIGTERM: the push is bounded, and it is what says the pass was cut short.
	pctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), reportTimeout)
	defer cancel()
	if err := metrics.Push(pctx, url, p); err != nil {
		log.Warn().Err(err).Msg("metrics not pushed")
		return
	}
	log.Debug().Str("pushgateway", pushurl.Redact(url)).Msg("metrics pushed")
}

// guard makes a tick's passes take the scheduler's Lease (one pass of the scheduler at a time creates), on a client
// without a client-side rate limiter: the renewals must not queue behind the creates.
func (g *globalOptions) guard(s *scheduler.Scheduler) error {
	cfg, leases := s.Config, s.Kube
	if g.kube.QPS > 0 {
		o := g.kube
		o.QPS = 0
		var err error
		if leases, _, err = g.newKube(o); err != nil {
			return &config.Error{Err: err}
		}
	}
	annotation := ""
	if cfg.HasRate() {
		annotation = rate.Annotation // the rate windows' record rides on the Lease
	}
	s.Guard = &lease.Guard{Client: leases.CoordinationV1(), Namespace: cfg.Namespace, Scheduler: cfg.Name,
		Holder: lease.HolderFromEnv(), Duration: g.leaseDuration, Annotation: annotation,
		Confirm: func(ctx context.Context) error { // a read the Role grants: its Jobs
			_, err := s.Kube.BatchV1().Jobs(cfg.Namespace).List(ctx, metav1.ListOptions{LabelSelector: jobmeta.LabelScheduler + "=" + cfg.Name, Limit: 1})
			return err
		}}
	return nil
}
