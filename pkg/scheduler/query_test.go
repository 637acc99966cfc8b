package scheduler

import (
	"reflect"
	"testing"
	"time"

	"k8s.io/utils/ptr"

	"github.com/jobsched/jobsched/pkg/config"
	"github.com/jobsched/jobsched/pkg/querydoctor"
	"github.com/jobsched/jobsched/pkg/render"
	"github.com/jobsched/jobsched/pkg/rows"
	"github.com/jobsched/jobsched/pkg/testkit"
)

// TestQueryFinding checks that a dry run carries the doctor's finding about the pass's first read (its
// excluded keys, its slots as the LIMIT or maxPerTick when it has none), and that a source without a doctor adds none.
func TestQueryFinding(t *testing.T) {
	finding := &querydoctor.Finding{Problems: []querydoctor.Problem{{Kind: "sort", Table: "tasks", EstimatedRows: 200000,
		Message: "every pass sorts all ~200000 rows", Fix: "an index on tasks (created_at)"}}}
	for _, tc := range []struct {
		name        string
		doctor      bool
		maxActive   int
		wantFinding *querydoctor.Finding
		wantLimit   int
	}{
		{name: "with slots: the read's LIMIT", doctor: true, maxActive: 10, wantFinding: finding, wantLimit: 9},
		{name: "no slot: maxPerTick", doctor: true, maxActive: 1, wantFinding: finding, wantLimit: 10},
		{name: "no doctor", doctor: false, maxActive: 10},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := testConfig(t, func(c *config.Config) { c.Limits.MaxActive = ptr.To(tc.maxActive) })
			src := &testkit.DoctorSource{Source: source{Rows: rowsFor("a", "b")}, Finding: finding}
			var s rows.Source = &src.Source
			if tc.doctor {
				s = src
			}
			sched := &Scheduler{workers: 1, Config: cfg, Kube: testkit.NewFake(makeJob("running").Obj()), Source: s,
				Renderer: render.New(cfg, nil), Now: func() time.Time { return now }}
			res, err := sched.Run(t.Context(), DryRun)
			p := res.Plan
			if err != nil {
				t.Fatal(err)
			}
			if p.Query != tc.wantFinding {
				t.Errorf("dry-run Query = %v, want %v", p.Query, tc.wantFinding)
			}
			if tc.doctor && (src.Limit != tc.wantLimit || !reflect.DeepEqual(src.Exclude, []string{"running"})) {
				t.Errorf("Explain(exclude %q, limit %d), want exclude [running], limit %d", src.Exclude, src.Limit, tc.wantLimit)
			}
		})
	}
}
