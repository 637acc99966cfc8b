package cmd

import (
	"bytes"
	"fmt"
	"io"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"sigs.k8s.io/yaml"

	"github.com/jobsched/jobsched/pkg/report"
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

// TestDryRunDocumentVersioned: dry-run -o json|yaml prints a document of kind Plan under the apiVersion of status's
// documents, not the bare plan.
func TestDryRunDocumentVersioned(t *testing.T) {
	for _, format := range []string{"json", "yaml"} {
		code, out, stderr := runCmd(t, "dry-run", "--offline", "--rows", "testdata/rows.jsonl", "--config", "testdata/jobsched.yaml", "-o", format)
		if code != 0 {
			t.Fatalf("-o %s: exit %d: %s", format, code, stderr)
		}
		var doc struct {
			APIVersion string `json:"apiVersion"`
			Kind       string `json:"kind"`
			Scheduler  string `json:"scheduler"`
		}
		if err := yaml.Unmarshal([]byte(out), &doc); err != nil {
			t.Fatalf("-o %s: %v\n%s", format, err, out)
		}
		if doc.APIVersion != report.StatusAPIVersion || doc.Kind != "Plan" || doc.Scheduler != "reports" {
			t.Errorf("-o %s: apiVersion %q, kind %q, scheduler %q; want %s, Plan, reports", format, doc.APIVersion, doc.Kind, doc.Scheduler, report.StatusAPIVersion)
		}
	}
}

// TestPrintStreams: `dry-run -o json|yaml` and `status -o json|yaml` print the document printDoc would, byte for
// byte, with the Jobs written one at a time through a buffer of 4096 bytes (bufio's): the document over thousands of
// Jobs is never held whole (issue 33: printDoc holds it twice as JSON, three times as YAML).
func TestPrintStreams(t *testing.T) {
	at := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	jobs := func(n int) []scheduler.JobStatus {
		if n < 0 {
			return nil
		}
		js := []scheduler.JobStatus{}
		for i := range n {
			key := fmt.Sprintf("k<%d>&\"\n\u2028x\u2029\u0085y\nz", i) // YAML's other line breaks in a block scalar
			if i%2 == 1 {
				key += "\r" // double-quoted
			}
			js = append(js, scheduler.JobStatus{Name: fmt.Sprintf("reports-%d", i), Key: key, Attempt: 1, State: scheduler.StateBackoff,
				Reason: "BackoffLimitExceeded: ü\n\n  - jobs: null\n", StartedAt: &at, FinishedAt: &at, RetryAt: &at})
		}
		return js
	}
	docs := []struct {
		name  string
		doc   func(jobs []scheduler.JobStatus) any
		print func(w io.Writer, format string, doc any) error
	}{
		{"dry-run", func(js []scheduler.JobStatus) any {
			return newPlanDocument(&scheduler.Plan{Scheduler: "reports", Namespace: "batch", Unfinished: len(js), Limit: "limits.maxActive: <all> & more", Creates: []scheduler.Create{}, Jobs: js})
		}, func(w io.Writer, format string, doc any) error { return printPlan(w, format, doc.(*planDocument).Plan) }},
		{"status", func(js []scheduler.JobStatus) any {
			return &report.Status{APIVersion: "jobsched.io/v1", Kind: "Status", Scheduler: "reports", Namespace: "batch", Jobs: js, Next: "now"}
		}, printReport},
	}
	for _, d := range docs {
		for _, format := range []string{"json", "yaml"} {
			for _, tc := range []struct {
				name string
				jobs int // -1: nil
			}{{"no Jobs listed (nil)", -1}, {"no Job", 0}, {"one Job", 1}, {"2,000 Jobs", 2000}} {
				t.Run(d.name+"/"+format+"/"+tc.name, func(t *testing.T) {
					doc := d.doc(jobs(tc.jobs))
					var whole bytes.Buffer
					if err := printDoc(&whole, format, doc); err != nil {
						t.Fatal(err)
					}
					var got writes
					if err := d.print(&got, format, doc); err != nil {
						t.Fatal(err)
					}
					if diff := cmp.Diff(whole.String(), got.String()); diff != "" {
						t.Errorf("%s -o %s differs from the whole document (-want +got):\n%s", d.name, format, diff)
					}
					if got.largest > 4096 {
						t.Errorf("the largest write was %d bytes (the document is %d): the document was held whole, not streamed", got.largest, got.Len())
					}
				})
			}
		}
	}
}
