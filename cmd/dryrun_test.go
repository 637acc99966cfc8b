package cmd

import (
	"bytes"
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/jobsched/jobsched/pkg/scheduler"
)

// writes records what each Write call was given.
type writes struct {
	bytes.Buffer
	largest int
}

func (w *writes) Write(p []byte) (int, error) {
	w.largest = max(w.largest, len(p))
	return w.Buffer.Write(p)
}

// TestPrintPlanJSONStreams: `dry-run -o json` prints the document printDoc would, byte for byte, with the Jobs
// written one at a time through a buffer of 4096 bytes (bufio's): the document over thousands of Jobs is never held
// whole (issue 33: printDoc holds it twice, encoded and then indented).
func TestPrintPlanJSONStreams(t *testing.T) {
	at := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	plan := func(n int) *scheduler.Plan {
		p := &scheduler.Plan{Scheduler: "reports", Namespace: "batch", Unfinished: n, Limit: "limits.maxActive: <all> & more", Creates: []scheduler.Create{}}
		if n >= 0 {
			p.Jobs = []scheduler.JobStatus{}
		}
		for i := range n {
			p.Jobs = append(p.Jobs, scheduler.JobStatus{Name: fmt.Sprintf("reports-%d", i), Key: fmt.Sprintf("k<%d>&\"\n\u2028", i),
				Attempt: 1, State: scheduler.StateBackoff, Reason: "BackoffLimitExceeded: ü", StartedAt: &at, FinishedAt: &at, RetryAt: &at})
		}
		return p
	}
	for _, tc := range []struct {
		name string
		jobs int // -1: nil
	}{{"no Jobs listed (nil)", -1}, {"no Job", 0}, {"one Job", 1}, {"2,000 Jobs", 2000}} {
		t.Run(tc.name, func(t *testing.T) {
			p := plan(tc.jobs)
			var whole bytes.Buffer
			if err := printDoc(&whole, "json", p); err != nil {
				t.Fatal(err)
			}
			var got writes
			if err := printPlan(&got, "json", p); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(whole.String(), got.String()); diff != "" {
				t.Errorf("dry-run -o json differs from the whole document (-want +got):\n%s", diff)
			}
			if got.largest > 4096 {
				t.Errorf("the largest write was %d bytes (the document is %d): the document was held whole, not streamed", got.largest, got.Len())
			}
		})
	}
}
