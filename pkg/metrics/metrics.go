// Package metrics pushes what one pass did to a Prometheus Pushgateway, the Prometheus convention for a batch
// process that is gone before anyone could scrape it. It uses client_golang's push package.
//
// Every series is the install's (all its queues'); with config queues:, the jobsched_queue_* series say the same
// per queue (label queue), and the install's stay as they are.
//
// Every pass pushes its group, /metrics/job/<job>/scheduler/<name>/namespace/<namespace>, where job is
// "jobsched" for tick and "jobsched-gc" for gc (so that a gc CronJob never hides a tick that stalls). The push is
// a POST: it replaces the metrics of the names it sends and keeps the others, so
// jobsched_last_success_timestamp_seconds, which only a pass that did not fail sends, keeps the time of the last
// good pass. A value that a pass could not learn is pushed as NaN, so that no stale value stays in the group.
package metrics

import (
	"context"
	"fmt"
	"math"
	neturl "net/url"
	"slices"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/push"

	"github.com/jobsched/jobsched/pkg/backlog"
	"github.com/jobsched/jobsched/pkg/pushurl"
	"github.com/jobsched/jobsched/pkg/scheduler"
)

// Job names of the groups (the Pushgateway's `job` label).
const (
	JobTick = "jobsched"
	JobGC   = "jobsched-gc"
)

// Pass is what one pass pushes.
type Pass struct {
	Job       string // JobTick or JobGC
	Scheduler string
	Namespace string
	Duration  time.Duration
	Summary   scheduler.Summary
	Plan      *scheduler.Plan // nil: the Jobs could not be listed
	// Backlogs are each queue's backlog after the pass (one, of queue "", without queues:), their sum the install's;
	// nil: not counted (gc, or the count failed); tick only.
	Backlogs []backlog.Count
	Failed   bool // the pass returned an error: last success is not pushed
	End      time.Time
	// Queues are the install's queues (config queues:), in the configuration's order; nil without queues:, whose
	// pass pushes no per-queue series. Each queue's series are pushed even when the Jobs could not be listed (NaN).
	Queues []string
}

// Push sends p to the Pushgateway at url. The caller bounds it with ctx.
func Push(ctx context.Context, url string, p Pass) error {
	reg := registry(p)
	// The credentials go as basic auth, not in the URL: the push package's errors quote its URL whole.
	u, err := neturl.Parse(url)
	if err != nil {
		return fmt.Errorf("pushing metrics: %s", pushurl.Validate(url))
	}
	user := u.User
	u.User = nil
	pusher := push.New(u.String(), p.Job)
	if user != nil {
		pw, _ := user.Password()
		pusher = pusher.BasicAuth(user.Username(), pw)
	}
	err = pusher.Grouping("scheduler", p.Scheduler).Grouping("namespace", p.Namespace).Gatherer(reg).AddContext(ctx)
	if err != nil {
		return fmt.Errorf("pushing metrics: %w", err)
	}
	return nil
}

// Series is one metric a tick pushes: its name, its labels (besides the group's) and its help.
type Series struct {
	Name, Help string
	Labels     []string
}

// All are the metrics a tick of an install with queues: pushes, by name: what `jobsched help metrics` lists.
func All() []Series {
	families, err := registry(Pass{Job: JobTick, Queues: []string{"q"}}).Gather()
	if err != nil {
		panic(err) // a registry of gauges set here gathers
	}
	var out []Series
	for _, f := range families {
		s := Series{Name: f.GetName(), Help: f.GetHelp()}
		for _, l := range f.GetMetric()[0].GetLabel() {
			s.Labels = append(s.Labels, l.GetName())
		}
		out = append(out, s)
	}
	return out
}

// registry holds the metrics of p, each set to its value.
func registry(p Pass) *prometheus.Registry {
	reg := prometheus.NewRegistry()
	gauge := func(name, help string, v float64) {
		g := prometheus.NewGauge(prometheus.GaugeOpts{Name: name, Help: help})
		g.Set(v)
		reg.MustRegister(g)
	}
	s := p.Summary
	gauge("jobsched_pass_duration_seconds", "How long the last pass took.", p.Duration.Seconds())
	gauge("jobsched_pass_failed", "1 when the last pass failed (exit 1 or 2), else 0.", boolean(p.Failed))
	gauge("jobsched_pass_deleted_jobs", "Finished Jobs the last pass deleted.", float64(s.Deleted))
	gauge("jobsched_pass_failed_writes", "Creates and deletes of the last pass that failed.", float64(s.Failed))

	jobs := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "jobsched_jobs",
		Help: "This scheduler's Jobs by state after the last pass (those it deleted not counted); NaN when they could not be listed."}, []string{"state"})
	for _, st := range scheduler.States { // the states status counts, one series each
		v := math.NaN()
		if p.Plan != nil {
			v = float64(p.Plan.Count(st))
		}
		jobs.WithLabelValues(string(st)).Set(v)
	}
	reg.MustRegister(jobs)

	if p.Job != JobGC {
		gauge("jobsched_pass_selected_rows", "Rows the last pass read from the source.", float64(s.Selected))
		gauge("jobsched_pass_created_jobs", "Jobs the last pass created.", float64(s.Created))
		gauge("jobsched_pass_retried_jobs", "Jobs the last pass created for a further attempt of a failed task.", float64(s.Retried))
		gauge("jobsched_pass_skipped_rows", "Rows the last pass read that got no Job (each logged with its reason).", float64(s.Skipped))
		gauge("jobsched_pass_skipped_size_rows", "Of jobsched_pass_skipped_rows, the rows skipped for the requests they ask (job.requestsFrom).", float64(s.SkippedSize))
		gauge("jobsched_pass_blocked", "1 when the last pass created nothing for a reason other than an empty backlog.", boolean(s.Blocked != ""))
		slots, limit, next := math.NaN(), Unknown, math.NaN()
		if p.Plan != nil {
			slots, limit, next = float64(p.Plan.Slots), bound(p.Plan.Bound), unix(p.Plan.NextCreate)
		}
		gauge("jobsched_slots", "How many Jobs the last pass could create (its bound is in jobsched_slots_limit_info).", slots)
		info := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "jobsched_slots_limit_info",
			Help: "Always 1; label limit says what bound the last pass's slots: " + boundsHelp}, []string{"limit"})
		info.WithLabelValues(limit).Set(1)
		reg.MustRegister(info)
		gauge("jobsched_next_create_timestamp_seconds", "When the limits.rate that bound the last pass's slots allows the next create (Unix time); NaN when no rate bound them.", next)
		rows, capped := math.NaN(), math.NaN()
		if p.Backlogs != nil {
			r, c := backlog.Total(p.Backlogs)
			rows, capped = float64(r), boolean(c)
		}
		gauge("jobsched_backlog_rows", fmt.Sprintf("Rows the query selects that have no Job after the last pass, counted up to %d; NaN when not counted.", backlog.Cap), rows)
		gauge("jobsched_backlog_capped", "1 when there are more rows than jobsched_backlog_rows counts.", capped)
		gauge("jobsched_rate_limited_rows", "The backlog a limits.rate held back: jobsched_backlog_rows when a limits.rate bound the last pass's slots, else 0; NaN when not counted.",
			rateLimited(rows, p.Plan != nil && p.Plan.NextCreate != nil))
	}
	if len(p.Queues) > 0 {
		pushQueues(reg, p)
	}
	if !p.Failed {
		gauge("jobsched_last_success_timestamp_seconds", "When the last pass that did not fail ended (Unix time).", float64(p.End.UnixNano())/1e9)
	}
	return reg
}

// pushQueues adds the per-queue series, label queue, beside the install's (which stay as they are, for the
// dashboards and alerts of every install): Jobs by state, and for a tick the slots and what bound them, the rows
// read, the Jobs the queue got in the share of the slots, whether it was blocked, its groups at their cap and its
// backlog.
func pushQueues(reg *prometheus.Registry, p Pass) {
	vec := func(name, help string, labels ...string) *prometheus.GaugeVec {
		v := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: name, Help: help}, append([]string{"queue"}, labels...))
		reg.MustRegister(v)
		return v
	}
	planned := map[string]scheduler.QueuePlan{}
	if p.Plan != nil {
		for _, q := range p.Plan.Queues {
			planned[q.Name] = q
		}
	}
	jobs := vec("jobsched_queue_jobs", "The queue's Jobs by state after the last pass (as jobsched_jobs); NaN when they could not be listed.", "state")
	for _, name := range p.Queues {
		_, ok := planned[name]
		for _, st := range scheduler.States {
			v := math.NaN()
			if ok {
				v = float64(p.Plan.CountIn(name, st))
			}
			jobs.WithLabelValues(name, string(st)).Set(v)
		}
	}
	if p.Job == JobGC {
		return
	}
	slots := vec("jobsched_queue_slots", "How many Jobs the queue could create in the last pass, alone (its limits, its fit, the install's room); its bound is in jobsched_queue_slots_limit_info.")
	info := vec("jobsched_queue_slots_limit_info", "Always 1; label limit says what bound the queue's slots in the last pass, as jobsched_slots_limit_info's.", "limit")
	next := vec("jobsched_queue_next_create_timestamp_seconds", "When the limits.rate that bound the queue's slots in the last pass allows its next create (Unix time); NaN when no rate bound them.")
	selected := vec("jobsched_queue_selected_rows", "Rows the last pass read for the queue.")
	share := vec("jobsched_queue_planned_jobs", "Jobs the last pass planned for the queue: its share of the install's slots (jobsched_pass_created_jobs counts those created).")
	blocked := vec("jobsched_queue_blocked", "1 when the queue could create nothing in the last pass (its slots were 0).")
	rows := vec("jobsched_queue_backlog_rows", fmt.Sprintf("Rows the queue's query selects that have no Job after the last pass, counted up to %d; NaN when not counted.", backlog.Cap))
	capped := vec("jobsched_queue_backlog_capped", "1 when the queue has more rows than jobsched_queue_backlog_rows counts.")
	atCap := vec("jobsched_queue_groups_at_cap", "Groups of the queue (limits.perGroup) at their cap of unfinished Jobs after the last pass; 0 without a perGroup.")
	limited := vec("jobsched_queue_rate_limited_rows", "The queue's backlog a limits.rate held back: jobsched_queue_backlog_rows when a limits.rate bound the queue's slots in the last pass, else 0; NaN when not counted.")
	for _, name := range p.Queues {
		nan := math.NaN()
		q, ok := planned[name]
		limit := Unknown
		if ok {
			slots.WithLabelValues(name).Set(float64(q.Slots))
			selected.WithLabelValues(name).Set(float64(q.Selected))
			share.WithLabelValues(name).Set(float64(q.Creates))
			blocked.WithLabelValues(name).Set(boolean(q.Blocked != ""))
			atCap.WithLabelValues(name).Set(float64(len(q.GroupsAtCap)))
			limit = bound(q.Bound)
			next.WithLabelValues(name).Set(unix(q.NextCreate))
		} else {
			for _, v := range []*prometheus.GaugeVec{slots, selected, share, blocked, atCap, next} {
				v.WithLabelValues(name).Set(nan)
			}
		}
		info.WithLabelValues(name, limit).Set(1)
		if i := slices.IndexFunc(p.Backlogs, func(b backlog.Count) bool { return b.Queue == name }); i >= 0 {
			rows.WithLabelValues(name).Set(float64(p.Backlogs[i].Rows))
			capped.WithLabelValues(name).Set(boolean(p.Backlogs[i].Capped))
			limited.WithLabelValues(name).Set(rateLimited(float64(p.Backlogs[i].Rows), ok && q.NextCreate != nil))
		} else {
			rows.WithLabelValues(name).Set(nan)
			capped.WithLabelValues(name).Set(nan)
			limited.WithLabelValues(name).Set(nan)
		}
	}
}

// Unknown is the label limit when the Jobs could not be listed: nothing bound the slots, none were counted.
const Unknown = "unknown"

// boundsHelp lists the values of the label limit, in the help of jobsched_slots_limit_info.
var boundsHelp = func() string {
	var names []string
	for _, b := range scheduler.Bounds {
		names = append(names, string(b))
	}
	return strings.Join(names, ", ") + ", or " + Unknown + " (the Jobs could not be listed). The limit in words, with its counts, is in the pass's log line and in status."
}()

// bound is the label value of b: one of scheduler.Bounds, never a count, a time or words.
func bound(b scheduler.Bound) string {
	if b == "" {
		return Unknown
	}
	return string(b)
}

// unix is t in Unix seconds, NaN when nil.
func unix(t *time.Time) float64 {
	if t == nil {
		return math.NaN()
	}
	return float64(t.UnixNano()) / 1e9
}

// rateLimited is the backlog rows when a limits.rate bound the slots, else 0 (NaN rows stay NaN: not counted).
func rateLimited(rows float64, bound bool) float64 {
	if bound || math.IsNaN(rows) {
		return rows
	}
	return 0
}

func boolean(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
