package cmd

import (
	"bytes"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/jobsched/jobsched/pkg/scheduler"
)

// evil is a row value that, printed raw, clears the screen and prints a fake line.
const evil = "\x1b[2J\x1b[31mFAKE: all good\x1b[0m\nline2\r\u202eevil"

// TestTextOutputQuotesControlCharacters: no table or text output of a value that came from a row, a pod or the
// database passes a control character through raw; the value stays readable, escaped as Go does.
func TestTextOutputQuotesControlCharacters(t *testing.T) {
	var out bytes.Buffer
	task := &scheduler.TaskView{Key: evil, Scheduler: "reports", Namespace: "batch", State: "waiting", Why: evil,
		Attempts: []scheduler.TaskAttempt{{JobStatus: scheduler.JobStatus{Name: "j", Reason: evil},
			Pods: []scheduler.TaskPod{{Name: "p", Phase: "Failed", Reason: evil}}}},
		Env: []corev1.EnvVar{{Name: "TASK_URL", Value: evil}}}
	if err := printTask(&out, task); err != nil {
		t.Fatal(err)
	}
	st := &scheduler.Status{Scheduler: "reports", Namespace: "batch", Limit: evil, Next: evil,
		Jobs:    []scheduler.JobStatus{{Name: "j", Key: evil, State: scheduler.StateUnschedulable, Reason: evil}},
		Backoff: []scheduler.Task{{Key: evil, Job: "j", Reason: evil}},
		Dead:    []scheduler.Task{{Key: evil, Job: "j", Reason: evil}}}
	if err := printStatus(&out, st); err != nil {
		t.Fatal(err)
	}
	p := &scheduler.Plan{Scheduler: "reports", Namespace: "batch", Limit: evil, Blocked: evil,
		Skipped: []scheduler.Skip{{Key: evil, Reason: evil}}}
	if err := printPlan(&out, "table", p); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []string{"\x1b", "\r", "\u202e", "\nline2"} {
		if strings.Contains(out.String(), bad) {
			t.Errorf("the output holds %q raw:\n%s", bad, out.String())
		}
	}
	if !strings.Contains(out.String(), `\x1b[2J\x1b[31mFAKE: all good\x1b[0m\nline2\r\u202eevil`) {
		t.Errorf("the output does not show the value escaped:\n%s", out.String())
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
