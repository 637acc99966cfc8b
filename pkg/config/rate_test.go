package config

import (
	"fmt"
	"strings"
	"testing"
)

// TestRateRanges: limits.rate at every level is checked at load, each problem naming its key; the ends of its
// ranges load; and the install's and the queues' windows must fit in their half of the Lease's record.
func TestRateRanges(t *testing.T) {
	queue := func(name, limits string) string {
		return fmt.Sprintf("- name: %s\n  source: {query: q, key: id}\n  job: {template: job.yaml}\n  limits: %s\n", name, limits)
	}
	queues := func(qs ...string) string { return "name: batch\nqueues:\n" + strings.Join(qs, "") }
	many := []string{}
	for i := range 11 {
		many = append(many, queue(fmt.Sprintf("q%d", i), "{rate: {creates: 1000000, per: 24h}}"))
	}
	tests := []struct {
		name, config string
		want         []string // empty: it loads
	}{
		{"the ends of the ranges", minimal + "limits: {rate: {creates: 1000000, per: 24h}}\n", nil},
		{"the low ends", queues(queue("a", "{rate: {creates: 1, per: 1s}, perGroup: {column: t, maxActive: 1, rate: {creates: 1, per: 1s}}}")), nil},
		{"out of range at the top", minimal + "limits: {rate: {creates: 1000001, per: 25h}}\n",
			[]string{"limits.rate.creates: must be at most 1000000, not 1000001", "limits.rate.per: 25h is longer than 24h"}},
		{"zero and short", minimal + "limits: {rate: {creates: 0, per: 500ms}}\n",
			[]string{"limits.rate.creates: required: at least 1 (to stop creating, set limits.maxPerTick: 0)",
				"limits.rate.per: 500ms is shorter than 1s"}},
		{"per missing", minimal + "limits: {rate: {creates: 3}}\n", []string{"limits.rate.per: required: the window's length, e.g. 1m"}},
		{"a queue's and a group's", queues(queue("a", "{rate: {creates: -1, per: 1m}, perGroup: {column: t, maxActive: 1, rate: {creates: 2, per: 48h}}}")),
			[]string{"queues[0] (a).limits.rate.creates: must be at least 1, not -1",
				"queues[0] (a).limits.perGroup.rate.per: 48h is longer than 24h"}},
		{"windows that do not fit the record", queues(many...),
			[]string{"queues[5] (q5).limits.rate: the windows of the install's and the queues' limits.rate up to this queue could take"}},
		{"windows that fit the record", queues(many[:5]...), nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if len(tc.want) == 0 {
				if _, err := Load(write(t, map[string]string{"jobsched.yaml": tc.config}), ""); err != nil {
					t.Fatal(err)
				}
				return
			}
			loadFails(t, tc.config, "", tc.want)
		})
	}
}
