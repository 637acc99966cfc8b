package scheduler

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"time"

	"github.com/jobsched/jobsched/pkg/config"
	"github.com/jobsched/jobsched/pkg/jobmeta"
	"github.com/jobsched/jobsched/pkg/lease"
	"github.com/jobsched/jobsched/pkg/rate"
)

// Rate limits (limits.rate, `jobsched help rate`): at most N creates in any window of length per, for the install,
// a queue, or each group of a queue (limits.perGroup.rate). The pass keeps no state: the windows' history is the
// record on the scheduler's Lease (package rate; written through lease.Held), combined with the creation times of
// the Jobs that still exist. The rules:
//
//   - A scope's creates in the window that ends now are the larger of the record's count and the count of its Jobs
//     created in it (a Job deleted since is in the record only; a create the record lost is in its Job). The pass
//     may create N less that; the rate is a bound on the slots like maxPerTick (Limit says it, with the time of
//     the next create it allows: NextCreate). A group's is a bound on its rows in the read, like perGroup.maxActive.
//   - Reserve, then create, then settle: before its first create the pass writes the record with its creates at the
//     time they must have landed by (now + RateReserve; the creates not started by then wait for the next pass),
//     in a renewal of the Lease it holds; after them the release writes them at the time the last create returned.
//     A pass killed in between leaves the reservation: later than the truth, so the next pass counts them longer,
//     never shorter. The Lease serialises creating passes, so no two passes reserve from one record.
//   - A record that cannot be read (not one this version wrote), one with a time beyond now + RateReserve +
//     RateSkew (no pass writes one), or none on a Lease while the install has Jobs (the Lease was deleted, or
//     limits.rate is new), or one with fewer creates in the install's or a queue's window than the install's Jobs
//     created in it (a lower bound of what was created: emptied by someone who may update the Lease), is taken
//     as full: N creates now in every window with a limit, so no create until per from the pass that saw it; the
//     next release writes that. A queue with perGroup.rate creates nothing meanwhile (groupsClosed).
//   - The record knows nothing from before the Lease's creationTimestamp (set by the API server): a Lease younger
//     than per (a new install's, or one deleted and made again) counts N creates at its creation.
//   - Without the Lease (a Role without its verbs: passes run unserialised) there is no record: the windows are the
//     Jobs' creation times only, and the pass warns.
//   - A group's scope is its value, or a hash of a long one (rate.GroupScope): the record's size does not depend on
//     what a row holds. Groups' windows that do not fit in the record (rate.MaxRecordBytes) are left out, and the
//     pass warns; the record keeps one window in their stead, and the queue creates nothing until it ends, as for
//     a hashed group no Job names (groupsClosed): a group that cannot be recorded gets no create its record may
//     forbid.
//
// The window is counted on the pass's clock, the Jobs' creation times on the API server's: clocks are taken to be
// synchronised (NTP), as Kubernetes' own controllers take them for TTLs and CronJob schedules.

// RateReserve is how long after its reservation a pass may still create: the reservation counts its creates at
// then. A pass's creates run at most that long; those not started by then are left to the next pass.
const RateReserve = 10 * time.Second

// RateSkew is how far apart the clocks of two passes (on two nodes) may be: a record time later than now +
// RateReserve + RateSkew is not one a pass wrote, and the record is taken as lost.
const RateSkew = time.Minute

// RecordKeeper is a Guard that carries the rate record between passes (the Lease: lease.Guard).
type RecordKeeper interface {
	// Record is the record as the guard was taken; ok is false when the guard holds nothing that keeps one.
	Record() (value string, found, ok bool)
	// WriteRecord writes the record now, under the guard.
	WriteRecord(ctx context.Context, value string) error
	// SettleRecord makes value the record the release writes.
	SettleRecord(value string)
	// LeaseCreated is the creationTimestamp of the Lease the guard holds (zero: unknown).
	LeaseCreated() time.Time
}

// Windows is what a pass knows of its rate windows (Observation.Windows).
type Windows struct {
	Record *rate.Record // as read (nil: none)
	// Lost says why the record is taken as full ("" when it was read, or there is none to read).
	Lost string
	// Unkept says why no record is kept between passes (no Lease held): the windows are the Jobs' only.
	Unkept string
	// LeaseCreated is the creationTimestamp of the Lease that carries the record (zero: unknown): the record knows
	// nothing from before it.
	LeaseCreated time.Time
}

// readWindows is the rate record a pass decides from: the one the guard read as it was taken (k), else, for the
// reports and dry-run, the Lease's as one GET reads it. jobs says the install has Jobs (a missing record is lost).
func (s *Scheduler) readWindows(ctx context.Context, k RecordKeeper, jobs bool) Windows {
	if !s.Config.HasRate() || s.Kube == nil {
		return Windows{}
	}
	var value string
	var found bool
	var created time.Time
	if k != nil {
		var ok bool
		if value, found, ok = k.Record(); !ok {
			return Windows{Unkept: "the pass holds no Lease"}
		}
		created = k.LeaseCreated()
	} else {
		var err error
		value, found, created, err = lease.ReadRecord(ctx, s.Kube.CoordinationV1(), s.Config.Namespace, s.Config.Name, rate.Annotation)
		if err != nil {
			return Windows{Lost: err.Error()}
		}
	}
	if !found {
		if jobs {
			return Windows{Lost: "the Lease has no rate record while the install has Jobs (the Lease was deleted, or limits.rate is new)", LeaseCreated: created}
		}
		return Windows{LeaseCreated: created}
	}
	r, err := rate.DecodeRecord(value)
	if err != nil {
		return Windows{Lost: err.Error(), LeaseCreated: created}
	}
	if last, latest := r.Last(), s.Now().Add(RateReserve+RateSkew); last.After(latest) {
		// No pass writes a time later than its reservation: someone else wrote this one, and trusting it would
		// block for as long as they chose (three days), or count creates that never were.
		return Windows{Lost: fmt.Sprintf("the rate record holds a create at %s, later than any pass reserves (now + %s + %s of clock skew)",
			last.UTC().Format(time.RFC3339), RateReserve, RateSkew), LeaseCreated: created}
	}
	return Windows{Record: r, LeaseCreated: created}
}

// rates are a pass's rate windows, decided once (Decide) from the record and the Jobs: every scope with a limit.
type rates struct {
	now    time.Time
	record *rate.Record // the record as this pass keeps it: read, pruned, full where lost
	jobs   map[string]*rate.Window
	limits map[string]rate.Limit
	// groups are the scopes of each queue's groups with a window (queue index → group value → scope), and
	// groupLimit each queue's limits.perGroup.rate (by queue name), for the groups that have none yet.
	groups     map[int]map[string]string
	groupLimit map[string]rate.Limit
	// closedUntil is, by queue name, until when some of its groups' windows are in the record without their value
	// (hashed, or left out of a full record): its groups are taken as unknown until then (groupsClosed).
	closedUntil map[string]time.Time
	w           Windows
}

// decideRates is the rates of cfg on obs (nil without limits.rate).
func decideRates(cfg *config.Config, obs *Observation) *rates {
	if !cfg.HasRate() {
		return nil
	}
	r := &rates{now: obs.Now, record: &rate.Record{}, jobs: map[string]*rate.Window{}, limits: map[string]rate.Limit{},
		groups: map[int]map[string]string{}, w: obs.Windows}
	qs := cfg.AllQueues()
	if l := cfg.Limits.Rate; l != nil {
		r.limits[rate.ScopeInstall] = l.Limit()
	}
	groupLimit := map[string]rate.Limit{} // queue name → its groups' limit
	r.groupLimit = groupLimit
	for i, q := range qs {
		if l := q.Limits.Rate; l != nil && !q.Implicit {
			r.limits[rate.QueueScope(q.Name)] = l.Limit()
		}
		if g := q.Limits.PerGroup; g != nil && g.Rate != nil {
			groupLimit[q.Name] = g.Rate.Limit()
			r.groups[i] = map[string]string{}
		}
	}
	group := func(i int, value string) string {
		scope := rate.GroupScope(qs[i].Name, value)
		if _, ok := r.groups[i]; ok {
			r.groups[i][value] = scope
			r.limits[scope] = groupLimit[qs[i].Name]
		}
		return scope
	}
	read := obs.Windows.Record.Clone() // pruned below: the observation stays as it was read
	unresolved := map[string]int{}     // the group scopes whose value is not known (a hash, the left-out groups) → queue
	for _, scope := range read.Scopes() {
		if q, value, ok := rate.GroupOf(scope); ok {
			if i := queueNamed(qs, q); i >= 0 && rate.Unresolved(value) {
				unresolved[scope] = i
			} else if i >= 0 {
				group(i, value)
			}
		}
	}
	for _, j := range obs.Jobs {
		if j.Created.IsZero() {
			continue
		}
		i := cfg.QueueIndex(j.Queue)
		scopes := []string{rate.ScopeInstall, rate.QueueScope(qs[i].Name)}
		if j.HasGroup {
			scopes = append(scopes, group(i, j.Group))
		}
		for _, scope := range scopes {
			if l, ok := r.limits[scope]; ok {
				if r.jobs[scope] == nil {
					r.jobs[scope] = rate.NewWindow(l)
				}
				// creationTimestamp is in whole seconds: the create was before the next one.
				r.jobs[scope].Add(j.Created.Add(time.Second), 1)
			}
		}
	}
	// A hashed group a Job names is known by its Jobs' value; the rest (and the groups a full record left out)
	// cannot be named in the read: their queue's groups are unknown until the latest of their windows ends.
	for i := range qs {
		for _, scope := range r.groups[i] {
			delete(unresolved, scope)
		}
	}
	r.closedUntil = map[string]time.Time{}
	for scope, i := range unresolved {
		if l, ok := groupLimit[qs[i].Name]; ok {
			if until := read.Window(scope).Last().Add(l.Per); until.After(obs.Now) && until.After(r.closedUntil[qs[i].Name]) {
				r.closedUntil[qs[i].Name] = until
			}
		}
	}
	if r.w.Lost == "" && r.w.Unkept == "" {
		// A pass records every create before it makes it: a record that holds fewer creates in the install's or a
		// queue's window than the install's Jobs created in it (a lower bound: gc deletes some) was not written by a
		// pass (emptied by hand, say). Record times are the pass's clock, creationTimestamps the API server's: a
		// skew's margin. (A group's window may be left out of a full record: its Jobs bound it, see groupRoom.)
		for _, scope := range slices.Sorted(maps.Keys(r.jobs)) {
			l := r.limits[scope]
			if _, _, isGroup := rate.GroupOf(scope); isGroup {
				continue
			}
			if n := min(r.jobs[scope].Count(obs.Now, l.Per), l.Creates); n > read.Window(scope).Count(obs.Now, l.Per+RateSkew+time.Second) {
				r.w.Lost = fmt.Sprintf("the rate record holds fewer creates in %s's window than its Jobs show (%d): not one a pass wrote", scope, n)
				break
			}
		}
	}
	created := r.w.LeaseCreated
	for scope, l := range r.limits {
		w := read.Window(scope)
		if r.w.Lost != "" {
			w = rate.Full(l, obs.Now)
		}
		if young(created, obs.Now, l.Per) {
			// The record knows nothing from before the Lease was made (a new install, or a Lease deleted and made
			// again): as many creates as the limit allows, at its creation.
			if w == nil {
				w = rate.NewWindow(l)
			}
			w.Merge(rate.Full(l, created))
		}
		if w == nil {
			continue
		}
		w.Prune(obs.Now, l)
		r.record.Set(scope, w)
	}
	return r
}

// young says a Lease created at created (zero: unknown) is younger than per at now.
func young(created, now time.Time, per time.Duration) bool {
	return !created.IsZero() && created.Add(per).After(now)
}

// groupsClosed says, for queue i with limits.perGroup.rate, that no group's window is known (the record is lost,
// or the Lease younger than the groups' per), with the limit's text and when its groups may create again: the
// queue creates nothing until then, as a group whose window it cannot read would get a create its record may
// forbid.
func (r *rates) groupsClosed(cfg *config.Config, i int) (string, time.Time, bool) {
	if r == nil || r.w.Unkept != "" {
		return "", time.Time{}, false
	}
	q := cfg.AllQueues()[i]
	l, ok := r.groupLimit[q.Name]
	if !ok {
		return "", time.Time{}, false
	}
	until := r.closedUntil[q.Name]
	if r.w.Lost != "" && r.now.Add(l.Per).After(until) {
		until = r.now.Add(l.Per)
	}
	if young(r.w.LeaseCreated, r.now, l.Per) && r.w.LeaseCreated.Add(l.Per).After(until) {
		until = r.w.LeaseCreated.Add(l.Per)
	}
	if until.IsZero() {
		return "", time.Time{}, false
	}
	return fmt.Sprintf("limits.perGroup.rate: %s, next create at %s (not every group's window is known: the rate record "+
		"is lost or full, or the Lease new)",
		l, clock(until, r.now)), until, true
}

func queueNamed(qs []config.Queue, name string) int {
	for i, q := range qs {
		if q.Name == name {
			return i
		}
	}
	return -1
}

// allowed is how many creates scope's limit allows now (math.MaxInt without one).
func (r *rates) allowed(scope string) int {
	if r == nil {
		return math.MaxInt
	}
	l, ok := r.limits[scope]
	if !ok {
		return math.MaxInt
	}
	return min(r.record.Window(scope).Allowed(r.now, l), r.jobs[scope].Allowed(r.now, l))
}

// nextAfter is when scope's limit allows one create more than n creates made now.
func (r *rates) nextAfter(scope string, n int) time.Time {
	l := r.limits[scope]
	next := r.now
	for _, w := range []*rate.Window{r.record.Window(scope), r.jobs[scope]} {
		c := rate.NewWindow(l)
		c.Merge(w)
		c.Add(r.now, n)
		if t := c.Next(r.now, l); t.After(next) {
			next = t
		}
	}
	return next
}

// bound is what scope's limit leaves of slots: the slots, the limit's text and the next create it allows, and
// whether it bound them.
func (r *rates) bound(scope string, slots int) (int, string, time.Time, bool) {
	if r == nil {
		return slots, "", time.Time{}, false
	}
	a := r.allowed(scope)
	if a >= slots {
		return slots, "", time.Time{}, false
	}
	next := r.nextAfter(scope, a)
	shown := next.Truncate(time.Second)
	if shown.Before(next) {
		shown = shown.Add(time.Second) // not before it
	}
	return a, fmt.Sprintf("limits.rate: %s, next create at %s", r.limits[scope], clock(shown, r.now)), next, true
}

// clock is t in UTC as the time of day when it is now's day, else with its date.
func clock(t, now time.Time) string {
	if y, m, d := t.UTC().Date(); now.UTC().Year() == y && now.UTC().Month() == m && now.UTC().Day() == d {
		return t.UTC().Format("15:04:05")
	}
	return t.UTC().Format("2006-01-02 15:04:05")
}

// groupRoom is, for queue i's groups with a window, what their rate leaves: the read's Held counts
// perGroup.maxActive − that as held, so that it returns at most that many rows of the group.
func (r *rates) groupRoom(i int) map[string]int {
	if r == nil || len(r.groups[i]) == 0 {
		return nil
	}
	out := map[string]int{}
	for value, scope := range r.groups[i] {
		out[value] = r.allowed(scope)
	}
	return out
}

// rateHeld is the Held of a read of a group with limits.perGroup.rate, whose source returns at most g.PassMax() − Held
// rows of a group (see config.PerGroup.PassMax): each group gets min(maxActive − its unfinished Jobs, what its rate
// allows), a group neither has (no Job, no window) PassMax.
func rateHeld(g *config.PerGroup, unfinished, room map[string]int) map[string]int {
	out := map[string]int{}
	for grp, u := range unfinished {
		out[grp] = g.PassMax() - min(g.MaxActive-u, g.Rate.Creates)
	}
	for grp, a := range room {
		out[grp] = g.PassMax() - min(g.MaxActive-unfinished[grp], a)
	}
	return out
}

// with is the record with creates added at at: cs are the creates (made says which count; nil: all).
func (r *rates) with(cfg *config.Config, cs []Create, made []bool, at time.Time) *rate.Record {
	rec := r.record.Clone()
	qs := cfg.AllQueues()
	add := func(scope string) {
		l, ok := r.limits[scope]
		if q, _, isGroup := rate.GroupOf(scope); isGroup && !ok {
			l, ok = r.groupLimit[q] // a group's first create
		}
		if !ok {
			return
		}
		w := rec.Window(scope)
		if w == nil {
			w = rate.NewWindow(l)
		}
		w.Add(at, 1)
		rec.Set(scope, w)
	}
	for k, c := range cs {
		if made != nil && !made[k] {
			continue
		}
		i := cfg.QueueIndex(c.Queue)
		add(rate.ScopeInstall)
		add(rate.QueueScope(qs[i].Name))
		if g, ok := c.Job.Annotations[jobmeta.AnnotationGroup]; ok {
			add(rate.GroupScope(qs[i].Name, g))
		}
	}
	return rec
}

// errRateReserve ends the creates of a pass whose reservation could not be written, or whose reserved time passed.
var errRateReserve = errors.New("the rate record could not be written on the Lease: no create without it")

// reserve is the execute step before the creates, with limits.rate: it writes the record with p's creates at
// now + RateReserve and returns the context the creates run under (it ends then). A failed write starts no create:
// refused says so (each create's Outcome is then OutcomeReservationRefused).
func (x *execution) reserve(p *Plan) (_ context.Context, refused bool) {
	r := p.rates
	if r == nil || x.keeper == nil || len(p.Creates) == 0 || r.w.Unkept != "" {
		return x.held, false
	}
	at := x.s.Now().Add(RateReserve)
	value, ok := x.encode(r.with(x.s.Config, p.Creates, nil, at))
	if ok {
		if err := x.keeper.WriteRecord(x.held, value); err != nil {
			x.log.Error().Err(err).Msg("the rate record was not written: this pass creates nothing")
			ok = false
		}
	}
	if !ok {
		ctx, cancel := context.WithCancelCause(x.held)
		cancel(errRateReserve)
		return ctx, true
	}
	ctx, cancel := context.WithTimeoutCause(x.held, RateReserve, fmt.Errorf("the creates reserved in the rate record ran out of their %s", RateReserve))
	x.cancelCreates = cancel
	return ctx, false
}

// settle is the execute step after the creates: the record with the creates that were started, at the time the
// last returned, for the release to write. A pass that creates nothing still settles the record it pruned (or took
// as full).
func (x *execution) settle(p *Plan) {
	r := p.rates
	if r == nil || x.keeper == nil || r.w.Unkept != "" {
		return
	}
	made := make([]bool, len(x.created))
	for i, o := range x.created {
		made[i] = o.started // a create that failed may still have been made: counted
	}
	if value, ok := x.encode(r.with(x.s.Config, p.Creates, made, x.s.Now())); ok {
		x.keeper.SettleRecord(value)
	}
}

// encode is the record's text, within rate.MaxRecordBytes; the groups left out are warned.
func (x *execution) encode(rec *rate.Record) (string, bool) {
	value, dropped, err := rec.Encode(rate.MaxRecordBytes)
	if err != nil {
		x.log.Error().Err(err).Msg("the rate record does not fit on the Lease")
		return "", false
	}
	if len(dropped) > 0 {
		x.log.Warn().Int("groups", len(dropped)).Msg("limits.perGroup.rate: the windows of these groups do not fit in the Lease's record: their queue creates nothing until the last of them ends")
	}
	return value, true
}

// warnRates says once per pass what the windows could not be read from.
func (x *execution) warnRates(p *Plan) {
	if p == nil || p.rates == nil {
		return
	}
	switch w := p.rates.w; {
	case w.Lost != "":
		x.log.Warn().Str("why", w.Lost).Msg("limits.rate: the rate record is lost: every window is taken as full until its per has passed")
	case w.Unkept != "" && x.action == Execute:
		x.log.Warn().Str("why", w.Unkept).Msg("limits.rate: no rate record is kept (no Lease): the windows are the creation times of the Jobs that still exist")
	}
}

// timeOrNil is t, nil when zero.
func timeOrNil(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	return &t
}
