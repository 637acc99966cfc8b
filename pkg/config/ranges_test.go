package config

import (
	"strings"
	"testing"
	"time"
)

// TestRanges: every number of the configuration that reaches arithmetic, an int32 or a database parameter is
// checked against its range at load, the key named, the value shown; the ends of each range load.
func TestRanges(t *testing.T) {
	timeout := func(d string) string {
		return strings.Replace(minimal, "  key: id\n", "  key: id\n  timeout: "+d+"\n", 1)
	}
	queue := func(rest string) string {
		return "name: batch\nqueues:\n- name: a\n  source: {query: q, key: id}\n  job: {template: job.yaml}\n" + rest
	}
	kueue := strings.Replace(kueueMinimal, "capacity: kueue", "capacity: kueue\n  maxQueued: 1000001", 1)
	tests := []struct {
		name, config string
		want         []string // empty: it loads
	}{
		{"limits at the top of int", minimal + "limits: {maxActive: 9223372036854775807, maxPerTick: 9223372036854775807, capacity: off}\n",
			[]string{"limits.maxActive: must be at most 1000000, not 9223372036854775807",
				"limits.maxPerTick: must be at most 1000000, not 9223372036854775807"}},
		{"limits at the top of their range", minimal + "limits: {maxActive: 1000000, maxPerTick: 1000000}\nretry: {maxAttempts: 1000000}\n", nil},
		{"limits.maxQueued", kueue, []string{"limits.maxQueued: must be at most 1000000, not 1000001"}},
		{"retry.maxAttempts", minimal + "retry: {maxAttempts: 1000001}\n", []string{"retry.maxAttempts: must be at most 1000000, not 1000001"}},
		{"a queue's numbers", queue("  weight: 1000001\n  retry: {maxAttempts: 2000000}\n  limits: {maxActive: 1000001, maxPerTick: 1000001, perGroup: {column: t, maxActive: 1000001}}\n"),
			[]string{"queues[0] (a).weight: must be at most 1000000, not 1000001",
				"queues[0] (a).retry.maxAttempts: must be at most 1000000, not 2000000",
				"queues[0] (a).limits.maxActive: must be at most 1000000, not 1000001",
				"queues[0] (a).limits.maxPerTick: must be at most 1000000, not 1000001",
				"queues[0] (a).limits.perGroup.maxActive: must be at most 1000000, not 1000001"}},
		{"a queue's numbers at the top of their range", queue("  weight: 1000000\n  limits: {maxActive: 1000000, perGroup: {column: t, maxActive: 1000000}}\n"), nil},
		// PostgreSQL's statement_timeout is an int of milliseconds: 2147483647ms at most, and 0 would be no timeout.
		{"source.timeout above statement_timeout's range", timeout("600h"),
			[]string{"source.timeout: 600h is longer than 596h31m23.647s, the longest statement_timeout PostgreSQL takes"}},
		{"source.timeout at the top of statement_timeout's range", timeout("2147483647ms"), nil},
		{"source.timeout below a millisecond", timeout("0.5ms"),
			[]string{"source.timeout: 500µs is shorter than 1ms, the shortest statement_timeout PostgreSQL takes"}},
		{"source.timeout of one millisecond", timeout("1ms"), nil},
		{"a queue's own source.timeout", strings.Replace(queue(""), "key: id}", "key: id, timeout: 900h}", 1),
			[]string{"queues[0] (a).source.timeout: 900h is longer than"}},
		{"the top's source.timeout with queues", strings.Replace(queue(""), "queues:", "source: {timeout: 100us}\nqueues:", 1),
			[]string{"source.timeout: 100µs is shorter than 1ms"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			files := map[string]string{"jobsched.yaml": tc.config}
			if len(tc.want) == 0 {
				if _, err := Load(write(t, files), ""); err != nil {
					t.Fatal(err)
				}
				return
			}
			loadFails(t, tc.config, "", tc.want)
		})
	}
}

// TestBackoffAfterSaturates: doubling the backoff stops at maxBackoff, even where twice the backoff is beyond the
// largest duration (it once overflowed to a negative wait: a retry at once).
func TestBackoffAfterSaturates(t *testing.T) {
	file := write(t, map[string]string{"jobsched.yaml": minimal + "retry: {maxAttempts: 100, backoff: 1300000h, maxBackoff: 2500000h}\n"})
	cfg, err := Load(file, "")
	if err != nil {
		t.Fatal(err)
	}
	for n, want := range map[int]time.Duration{1: 1300000 * time.Hour, 2: 2500000 * time.Hour, 99: 2500000 * time.Hour} {
		if got := cfg.BackoffAfter(n); got != want {
			t.Errorf("BackoffAfter(%d) = %v, want %v", n, got, want)
		}
	}
}
