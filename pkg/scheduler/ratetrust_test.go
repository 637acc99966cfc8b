package scheduler

import (
	"testing"
	"time"

	"github.com/jobsched/jobsched/pkg/config"
	"github.com/jobsched/jobsched/pkg/rate"
)

// TestRateRecordFailsClosed (issue 58, finding 1): the record is written by whoever may update the Lease, and a
// deleted Lease comes back empty: with limits.rate {creates: 3, per: 1m}, emptying the record or deleting the Lease
// between passes gave 12 creates in 21 s. What the install can check without state of its own holds it: the record
// knows nothing from before the Lease's creationTimestamp (set by the API server), so a Lease younger than per
// counts N creates at its creation; and the install's Jobs created within per are a lower bound of the creates the
// record must hold, so a record with fewer is not one a pass wrote (lost: full for per from now). A queue's groups
// with perGroup.rate fail closed with it: a group whose window is lost gets no create for per.
func TestRateRecordFailsClosed(t *testing.T) {
	cfg := testConfig(t, func(c *config.Config) { c.Limits.Rate = rateOf(3, time.Minute) })
	at := func(d time.Duration) *time.Time { t := now.Add(d); return &t }
	created := func(key string, d time.Duration) JobSummary {
		j := SummarizeJob(makeJob(key).Obj())
		j.Created = now.Add(-d)
		return j
	}
	for _, tc := range []struct {
		name    string
		windows Windows
		jobs    []JobSummary
		slots   int
		next    *time.Time
	}{
		{"a Lease created 20s ago (new, or deleted and made again): full until it is per old",
			Windows{Record: &rate.Record{}, LeaseCreated: now.Add(-20 * time.Second)}, nil, 0, at(40*time.Second + 20*time.Millisecond)},
		{"no record on a Lease created 20s ago, no Job left: full too",
			Windows{LeaseCreated: now.Add(-20 * time.Second)}, nil, 0, at(40*time.Second + 20*time.Millisecond)},
		{"a Lease older than per: its record counts", Windows{Record: &rate.Record{}, LeaseCreated: now.Add(-time.Hour)}, nil, 3, at(time.Minute)},
		{"an emptied record while a Job shows a create 10s ago: lost, full for per from now",
			Windows{Record: &rate.Record{}, LeaseCreated: now.Add(-time.Hour)}, []JobSummary{created("a", 10*time.Second)}, 0, at(time.Minute)},
		{"a record with the Jobs' creates counts",
			Windows{Record: recordOf(t, rate.Limit{Creates: 3, Per: time.Minute}, rate.ScopeInstall, 1, now.Add(-9*time.Second)), LeaseCreated: now.Add(-time.Hour)},
			[]JobSummary{created("a", 10*time.Second)}, 2, at(51 * time.Second)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := Decide(cfg, &Observation{Now: now, Jobs: tc.jobs, Windows: tc.windows})
			if p.Slots != tc.slots || !equalTime(p.NextCreate, tc.next) {
				t.Errorf("slots %d (%s), next %v; want %d, %v", p.Slots, p.Limit, p.NextCreate, tc.slots, tc.next)
			}
		})
	}
	t.Run("a queue's groups fail closed with a lost record", func(t *testing.T) {
		cfg := queuesConfig(t, "maxActive: 20", queue("a", "  limits: {perGroup: {column: tenant, maxActive: 5, rate: {creates: 2, per: 1m}}}\n"))
		for _, w := range []Windows{{Lost: "garbled"}, {Record: &rate.Record{}, LeaseCreated: now.Add(-20 * time.Second)}} {
			p := Decide(cfg, &Observation{Now: now, Windows: w})
			if p.Queues[0].Slots != 0 {
				t.Errorf("%+v: the queue's slots %d (%s), want 0: no group's window is known", w, p.Queues[0].Slots, p.Queues[0].Limit)
			}
		}
	})
}
