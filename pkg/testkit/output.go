package testkit

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
)

// Summary is the pass's closing log line, `pass done`, as --log-format json writes it: the fields the tests read.
type Summary struct {
	Level          string `json:"level"`
	Error          string `json:"error"`
	Refill         int    `json:"refill"` // tick --fill-for: 0 for the first pass, then 1, 2, …
	Selected       int    `json:"selected"`
	Created        int    `json:"created"`
	AlreadyPresent int    `json:"alreadyPresent"`
	Skipped        int    `json:"skipped"`
	SkippedSize    int    `json:"skippedSize"` // of Skipped, rows skipped for their size (job.requestsFrom)
	ReadAhead      int    `json:"readAhead"`
	Passed         int    `json:"passed"` // of ReadAhead, rows smaller ones behind passed (job.backfill)
	Blocked        string `json:"blocked"`
	Deleted        int    `json:"deleted"`
	Failed         int    `json:"failed"`
	Cancelled      int    `json:"cancelled"`
	NotCreated     int    `json:"notCreated"`
	DryRun         bool   `json:"dryRun"`
	WouldCreate    int    `json:"wouldCreate"`
	Lease          string `json:"lease"`
	LeaseWait      int64  `json:"leaseWait"` // ms
	Duration       int64  `json:"duration"`  // ms
	Woke           string `json:"woke"`      // tick --fill-for: what started a refill (notify, poll, jobEnd, …)
}

// passDone is how the line is told from the others.
const passDone = `"message":"pass done"`

// PassDones are the `pass done` lines of output (a process's stderr, or a file with its stdout and stderr), in
// order; an error is a `pass done` line that is not JSON.
func PassDones(output string) ([]Summary, error) {
	var out []Summary
	for _, line := range strings.Split(output, "\n") {
		if !strings.Contains(line, passDone) {
			continue
		}
		var s Summary
		if err := json.Unmarshal([]byte(line), &s); err != nil {
			return out, fmt.Errorf("a pass done line that is not JSON: %w: %q", err, line)
		}
		out = append(out, s)
	}
	return out, nil
}

// PassDone is the first `pass done` line of output; the test fails when there is none or it is not JSON.
func PassDone(t testing.TB, output string) Summary {
	t.Helper()
	all, err := PassDones(output)
	if err != nil {
		t.Fatal(err)
	}
	if len(all) == 0 {
		t.Fatalf("no pass done line in:\n%s", output)
	}
	return all[0]
}

// WithErrors is stderr with the error of each error-level JSON log line (a failed pass's `pass done`, or the
// command's own error, printed once) appended as it reads, unescaped ("Error: ..."), so that a test can look for a
// message with quotes in it whichever the log format.
func WithErrors(stderr string) string {
	out := stderr
	for _, line := range strings.Split(stderr, "\n") {
		var l struct{ Level, Error string }
		if json.Unmarshal([]byte(line), &l) == nil && l.Level == "error" && l.Error != "" {
			out += "\nError: " + l.Error
		}
	}
	return out
}

// Buffer is an io.Writer that a test may read while a process or a goroutine still writes it.
type Buffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *Buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *Buffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
