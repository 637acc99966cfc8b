package report

import (
	"testing"
	"time"

	"github.com/jobsched/jobsched/pkg/querydoctor"
	"github.com/jobsched/jobsched/pkg/render"
	"github.com/jobsched/jobsched/pkg/rows"
	"github.com/jobsched/jobsched/pkg/scheduler"
	"github.com/jobsched/jobsched/pkg/testkit"
)

// TestStatusQueryFinding checks that status carries the doctor's finding about the pass's first read, and that a
// source without a doctor adds none. What the doctor is asked (the read's excluded keys and LIMIT) is the pass's
// rule, pinned by pkg/scheduler's TestQueryFinding.
func TestStatusQueryFinding(t *testing.T) {
	finding := &querydoctor.Finding{Problems: []querydoctor.Problem{{Kind: "sort", Table: "tasks", EstimatedRows: 200000,
		Message: "every pass sorts all ~200000 rows", Fix: "an index on tasks (created_at)"}}}
	for _, doctor := range []bool{true, false} {
		cfg := testConfig(t, nil)
		src := &testkit.DoctorSource{Source: source{Rows: rowsFor("a", "b")}, Finding: finding}
		var s rows.Source = &src.Source
		want := (*querydoctor.Finding)(nil)
		if doctor {
			s, want = src, finding
		}
		sched := &scheduler.Scheduler{Config: cfg, Kube: testkit.NewFake(makeJob("running").Obj()), Source: s,
			Renderer: render.New(cfg, nil), Now: func() time.Time { return now }}
		st, err := StatusOf(t.Context(), sched)
		if err != nil {
			t.Fatal(err)
		}
		if st.Query != want {
			t.Errorf("doctor %v: status Query = %v, want %v", doctor, st.Query, want)
		}
	}
}
