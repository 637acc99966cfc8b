package cmd

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/jobsched/jobsched/pkg/capacity"
	kueuemode "github.com/jobsched/jobsched/pkg/capacity/kueue"
	"github.com/jobsched/jobsched/pkg/kueue"
	"github.com/jobsched/jobsched/pkg/lease"
	"github.com/jobsched/jobsched/pkg/report"
	"github.com/jobsched/jobsched/pkg/scheduler"
)

// evil is a row value that, printed raw, clears the screen and prints a fake line.
const evil = "\x1b[2J\x1b[31mFAKE: all good\x1b[0m\nline2\r\u202eevil"

// TestTextOutputQuotesControlCharacters: no table or text output of a value that came from a row, a pod or the
// database passes a control character through raw; the value stays readable, escaped as Go does.
func TestTextOutputQuotesControlCharacters(t *testing.T) {
	var out bytes.Buffer
	task := &report.TaskView{Key: evil, Scheduler: "reports", Namespace: "batch", State: "waiting", Why: evil,
		Attempts: []report.TaskAttempt{{JobStatus: scheduler.JobStatus{Name: "j", Reason: evil},
			Pods: []report.TaskPod{{Name: "p", Phase: "Failed", Reason: evil}}}},
		Env: []corev1.EnvVar{{Name: "TASK_URL", Value: evil}}}
	if err := printTask(&out, task); err != nil {
		t.Fatal(err)
	}
	st := &report.Status{Scheduler: "reports", Namespace: "batch", Work: report.Work{Limit: evil}, Next: evil,
		Jobs: []scheduler.JobStatus{{Name: "j", Key: evil, State: scheduler.StateUnschedulable, Reason: evil},
			{Name: "q", Key: evil, State: scheduler.StateQueued, Reason: evil}},
		Backoff: []report.Task{{Key: evil, Job: "j", Reason: evil}},
		Dead:    []report.Task{{Key: evil, Job: "j", Reason: evil}}, Lease: &lease.Info{Name: "jobsched-reports", Holder: evil}}
	if err := printStatus(&out, st); err != nil {
		t.Fatal(err)
	}
	p := &scheduler.Plan{Scheduler: "reports", Namespace: "batch", Limit: evil, Blocked: evil,
		Skipped: []scheduler.Skip{{Key: evil, Reason: evil}}}
	if err := printPlan(&out, "table", p); err != nil {
		t.Fatal(err)
	}
	assertEscaped(t, out.String())
}

// assertEscaped fails unless out holds evil only escaped.
func assertEscaped(t *testing.T, out string) {
	t.Helper()
	for _, bad := range []string{"\x1b", "\r", "\u202e", "\nline2"} {
		if strings.Contains(out, bad) {
			t.Errorf("the output holds %q raw:\n%s", bad, out)
		}
	}
	if !strings.Contains(out, `\x1b[2J\x1b[31mFAKE: all good\x1b[0m\nline2\r\u202eevil`) {
		t.Errorf("the output does not show the value escaped:\n%s", out)
	}
}

// TestTextOutputEscapesAPIServerValues: every value the API server gives (a Job's, pod's or node's name, a pod's
// phase and node, a resource's name, Kueue's queues) is escaped in a table or text output as row values are: an API
// server, or whoever can write those objects, cannot write to the terminal either (issue 29 point 8).
func TestTextOutputEscapesAPIServerValues(t *testing.T) {
	printers := map[string]func(*bytes.Buffer) error{
		"status KEY": func(out *bytes.Buffer) error {
			return printTask(out, &report.TaskView{Key: "k", Scheduler: "reports", Namespace: "batch", State: "waiting",
				Attempts: []report.TaskAttempt{{JobStatus: scheduler.JobStatus{Name: evil, State: scheduler.StateDead},
					Pods: []report.TaskPod{{Name: evil, Phase: evil, Node: evil}}}}})
		},
		"status": func(out *bytes.Buffer) error {
			free := corev1.ResourceList{corev1.ResourceName(evil): resource.MustParse("1")}
			return printStatus(out, &report.Status{Scheduler: "reports", Namespace: "batch",
				Jobs: []scheduler.JobStatus{{Name: evil, Key: "k", State: scheduler.StateUnschedulable},
					{Name: evil, Key: "k", State: scheduler.StateQueued}},
				Backoff: []report.Task{{Key: "k", Job: evil}}, Dead: []report.Task{{Key: "k", Job: evil}},
				Mode: (&kueuemode.Status{LocalQueue: &kueue.LocalQueue{Name: evil, Found: true, ClusterQueue: evil}}).Section(),
				Work: report.Work{Capacity: &capacity.Report{Nodes: []capacity.NodeFit{{Name: evil, Fits: 1, Free: capacity.FreeOf(free)}},
					Quota: []capacity.QuotaFit{{Name: "q", Resource: evil}}}}})
		},
		"dry-run": func(out *bytes.Buffer) error {
			return printPlan(out, "table", &scheduler.Plan{Scheduler: "reports", Namespace: "batch",
				Jobs: []scheduler.JobStatus{{Name: evil, Key: "k", State: scheduler.StateSucceeded, Delete: scheduler.DeleteRetention}}})
		},
	}
	for name, print := range printers {
		t.Run(name, func(t *testing.T) {
			var out bytes.Buffer
			if err := print(&out); err != nil {
				t.Fatal(err)
			}
			assertEscaped(t, out.String())
		})
	}
}

// TestConsoleLogQuotesControlCharacters: a console log line's message (a skip reason holds row text) has its
// control characters escaped; the fields are quoted by zerolog already.
func TestConsoleLogQuotesControlCharacters(t *testing.T) {
	var errOut bytes.Buffer
	g := &globalOptions{logLevel: "info", logFormat: "console", errOut: &errOut}
	log, err := g.logger()
	if err != nil {
		t.Fatal(err)
	}
	log.Warn().Str("task", evil).Msg(evil)
	if s := errOut.String(); strings.Contains(s, "\x1b[2J") || strings.Contains(s, "\x1b[31mFAKE") ||
		strings.ContainsAny(s, "\r\u202e") || strings.Count(s, "\n") != 1 {
		t.Errorf("the console line holds control characters raw:\n%s", s)
	}
}

// TestErrorPrintedOnce: the final error appears once: in the `pass done` line when the pass ran, else as one line
// of its own; under --log-format json every line of stderr is JSON.
func TestErrorPrintedOnce(t *testing.T) {
	dir := t.TempDir()
	collide := filepath.Join(dir, "collide.jsonl")
	if err := os.WriteFile(collide, []byte(`{"id": 1, "Created At": "a", "created_at": "b"}`+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		args []string
		msg  string
	}{
		{"the pass failed", []string{"dry-run", "--offline", "--rows", collide, "--config", "testdata/jobsched.yaml"}, "both map to TASK_CREATED_AT"},
		{"the config is missing", []string{"status", "--config", filepath.Join(dir, "none.yaml")}, "none.yaml"},
		{"a bad flag value", []string{"dry-run", "-o", "xml"}, "-o:"},
	} {
		for _, format := range []string{"json", "console"} {
			t.Run(tc.name+" "+format, func(t *testing.T) {
				var out, errOut bytes.Buffer
				code := run(context.Background(), append(tc.args, "--log-format", format), &out, &errOut)
				if code != exitUsage {
					t.Errorf("exit %d, want %d", code, exitUsage)
				}
				if n := strings.Count(errOut.String(), tc.msg); n != 1 {
					t.Errorf("the error appears %d times, want once:\n%s", n, errOut.String())
				}
				if format != "json" {
					return
				}
				for _, line := range strings.Split(strings.TrimSuffix(errOut.String(), "\n"), "\n") {
					if !json.Valid([]byte(line)) {
						t.Errorf("a line of stderr is not JSON: %q", line)
					}
				}
			})
		}
	}
}

// TestBlockedPlanSlots: a pass blocked before it could use its slots (the read failed) does not say its slots were
// bound by a limit.
func TestBlockedPlanSlots(t *testing.T) {
	var out bytes.Buffer
	p := &scheduler.Plan{Scheduler: "reports", Namespace: "batch", Limit: "limits.maxPerTick: 10", Blocked: "reading rows failed"}
	if err := printPlan(&out, "table", p); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(out.String(), "bound by limits.maxPerTick") || !strings.Contains(out.String(), "slots 0 (blocked: reading rows failed)") {
		t.Errorf("the plan's first line misstates its slots:\n%s", out.String())
	}
}
