package scheduler

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/jobsched/jobsched/pkg/config"
	"github.com/jobsched/jobsched/pkg/render"
	"github.com/jobsched/jobsched/pkg/rows"
)

// numbersConfig is a configuration of two queues with every number a user writes in it: the top's limits, retry
// and source.timeout, the first queue's weight, limits and perGroup.
const numbersConfig = `name: batch
namespace: batch
source: {timeout: %s}
limits: {maxActive: %s, maxPerTick: %s, capacity: off}
retry: {maxAttempts: %s, backoff: %s, maxBackoff: %s, deadRetention: %s}
queues:
- name: a
  weight: %s
  source: {query: q, key: id}
  job: {template: job.yaml}
  limits: {maxActive: %s, maxPerTick: %s, perGroup: {column: t, maxActive: %s}}
- name: b
  source: {query: q, key: id}
  job: {template: job.yaml}
`

// aNumber is what the fuzzer may write as a value: one plain YAML scalar (a number, a duration, a word).
var aNumber = regexp.MustCompile(`^[0-9A-Za-z.+_-]{0,40}$`)

// numberKeys are the keys a problem with those values may name (the queues inherit the top's retry).
var numberKeys = regexp.MustCompile(`(^|\.| )(limits\.(maxActive|maxPerTick|perGroup\.maxActive)|retry\.(maxAttempts|backoff|maxBackoff|deadRetention)|source\.timeout|weight)(: | \()|line \d+`)

// FuzzConfigNumbers writes random values into every number of a configuration: Parse either refuses it, every
// problem naming its key (or line), or every value it yields is inside its stated range (config.MaxCount,
// MinTimeout, MaxTimeout; durations not negative, maxBackoff at least backoff, each backoff within them); and a
// dry-run pass with them ends, creating no more than its slots allow. The seeds are the values issue 29 found
// breaking it.
func FuzzConfigNumbers(f *testing.F) {
	dir := f.TempDir()
	tpl := "apiVersion: batch/v1\nkind: Job\nspec:\n  template:\n    spec:\n      restartPolicy: Never\n      containers: [{name: w, image: w:1}]\n"
	if err := os.WriteFile(filepath.Join(dir, "job.yaml"), []byte(tpl), 0o600); err != nil {
		f.Fatal(err)
	}
	f.Add("", "10", "10", "3", "1m", "1h", "0s", "1", "", "", "2")
	f.Add("30s", "9223372036854775807", "9223372036854775807", "9223372036854775807", "1ns", "2562047h", "", "9223372036854775807", "", "", "9223372036854775807")
	f.Add("2147483647ms", "010", "09", "0x10", "1300000h", "2500000h", "1ns", "1000000", "", "", "+010")
	f.Add("600h", "010", "09", "0x10", "1300000h", "2500000h", "-1s", "0", "0", "0", "0")
	f.Add("0.5ms", "1000000", "1000001", "1000000", "0s", "0s", "1ns", "1000000", "1000000", "1000000", "1000000")
	f.Add("2147483647ms", "-1", "1e3", "ten", "5x", "1m", "1h", "0o10", "0b11", "+010", "-010")
	file := filepath.Join(dir, "jobsched.yaml")
	f.Fuzz(func(t *testing.T, timeout, maxActive, maxPerTick, maxAttempts, backoff, maxBackoff, deadRetention, weight,
		qMaxActive, qMaxPerTick, perGroup string) {
		values := []any{timeout, maxActive, maxPerTick, maxAttempts, backoff, maxBackoff, deadRetention, weight, qMaxActive, qMaxPerTick, perGroup}
		for _, v := range values {
			if !aNumber.MatchString(v.(string)) {
				t.Skip() // not one scalar: the YAML around it is what would be wrong
			}
		}
		cfg, err := config.Parse(file, fmt.Appendf(nil, numbersConfig, values...))
		if err != nil {
			if !config.IsConfigError(err) {
				t.Fatalf("%v is not a configuration error", err)
			}
			for _, problem := range strings.Split(err.Error(), "\n") {
				if !numberKeys.MatchString(strings.TrimPrefix(problem, file+": ")) {
					t.Errorf("problem %q names none of the keys given a number (whole error: %q)", problem, err)
				}
			}
			return
		}
		inRange(t, "limits.maxActive", cfg.MaxActive(), 0)
		inRange(t, "limits.maxPerTick", cfg.MaxPerTick(), 0)
		for i, q := range cfg.Queues {
			qc := cfg.QueueConfig(i)
			inRange(t, q.Name+" weight", *q.Weight, 1)
			inRange(t, q.Name+" limits.maxActive", qc.MaxActive(), 1)
			inRange(t, q.Name+" limits.maxPerTick", qc.MaxPerTick(), 1)
			inRange(t, q.Name+" retry.maxAttempts", qc.MaxAttempts(), 1)
			if g := q.Limits.PerGroup; g != nil {
				inRange(t, q.Name+" limits.perGroup.maxActive", g.MaxActive, 1)
			}
			if d := qc.Source.Timeout.Duration; d < config.MinTimeout || d > config.MaxTimeout {
				t.Errorf("%s source.timeout %v is outside [%v, %v]", q.Name, d, config.MinTimeout, config.MaxTimeout)
			}
			b, mb := qc.Retry.Backoff.Duration, qc.Retry.MaxBackoff.Duration
			if b < 0 || mb < b || qc.Retry.DeadRetention.Duration < 0 || qc.GC.SucceededRetention.Duration < 0 {
				t.Errorf("%s durations out of range: backoff %v, maxBackoff %v, deadRetention %v", q.Name, b, mb, qc.Retry.DeadRetention.Duration)
			}
			for _, n := range []int{1, 2, 62, 63, 64, qc.MaxAttempts()} {
				if d := qc.BackoffAfter(n); d < b || d > mb {
					t.Errorf("%s BackoffAfter(%d) = %v, outside [%v, %v]", q.Name, n, d, b, mb)
				}
			}
		}
		// A dry-run pass with them, offline, over a few rows (a bad one among them), ends.
		s := &Scheduler{Config: cfg, Now: func() time.Time { return now }}
		for i := range cfg.Queues {
			all := append(rowsFor("x", "y"), rows.Row{Key: "bad", Columns: []rows.Column{{Name: "v", Value: "\xff"}}})
			s.Queues = append(s.Queues, Queue{Source: &source{Rows: append(all, rowsFor("z")...)}, Renderer: render.New(cfg.QueueConfig(i), nil)})
		}
		res, err := s.Run(context.Background(), DryRun)
		if err != nil {
			t.Fatalf("the pass failed: %v", err)
		}
		if p := res.Plan; len(p.Creates) > p.Slots || p.Slots > min(cfg.MaxActive(), cfg.MaxPerTick()) || len(p.Creates) > 6 {
			t.Errorf("%d creates in %d slots (limits %d, %d), of 6 good rows", len(p.Creates), p.Slots, cfg.MaxActive(), cfg.MaxPerTick())
		}
	})
}

// inRange fails unless n is in [least, config.MaxCount].
func inRange(t *testing.T, key string, n, least int) {
	t.Helper()
	if n < least || n > config.MaxCount {
		t.Errorf("%s = %d, outside [%d, %d]", key, n, least, config.MaxCount)
	}
}
