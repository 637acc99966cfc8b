package config

import (
	"strings"
	"testing"
)

// TestMessagesInTheUsersWords (issue 58, finding 9): each message quotes what the file says, and says nothing the
// file does not: no suggestion for a key that shares nothing with it, no "not 0" for a key that is not written, a
// duration as the user writes it, a duration too long to hold said so, a tag shown as written, a NUL byte named, and
// a template's problems under the template's file with its line numbers.
func TestMessagesInTheUsersWords(t *testing.T) {
	tests := []struct {
		name, config, job string
		want, notWant     []string
	}{
		{"no suggestion for a key that shares nothing", minimal + "a0: 1\n", "",
			[]string{"unknown key(s): a0 (line 8)"}, []string{"did you mean"}},
		{"a suggestion for a typo still", minimal + "limits:\n  maxActiv: 3\n", "",
			[]string{"limits.maxActiv (line 9; did you mean maxActive?)"}, nil},
		{"a count not written is required", minimal + "limits: {rate: {per: 1m}}\n", "",
			[]string{"limits.rate.creates: required: at least 1"}, []string{"not 0"}},
		{"a group's cap not written is required", "name: batch\nqueues:\n- name: a\n  source: {query: q, key: id}\n  job: {template: job.yaml}\n" +
			"  limits: {perGroup: {column: t}}\n", "",
			[]string{"queues[0] (a).limits.perGroup.maxActive: required: at least 1"}, []string{"not 0"}},
		{"a duration as written", minimal + "limits: {rate: {creates: 3, per: 25h}}\n", "",
			[]string{"limits.rate.per: 25h is longer than 24h"}, []string{"25h0m0s", "24h0m0s"}},
		{"a duration too long to hold", minimal + "gc: {succeededRetention: 9999999999h}\n", "",
			[]string{`gc.succeededRetention: "9999999999h" is longer than the longest duration`}, []string{"is not a duration"}},
		{"a tag shown as written", minimal + "limits:\n  maxActive: !!str 10\n", "",
			[]string{`limits.maxActive: !!str 10 is not an integer (line 9)`}, nil},
		{"a NUL byte in the query", strings.Replace(minimal, "FROM tasks", "FROM tasks\\0", 1), "",
			nil, nil},
		{"a template's problems under its own file", minimal, strings.Replace(tpl(""), "image: worker:1\n",
			"image: worker:1\n        bogus: 1\n        resources: {requests: {cpu: 2 cores}}\n", 1),
			[]string{"job.yaml: unknown key(s): spec.template.spec.containers[0].bogus (line 10)",
				"job.yaml: spec.template.spec.containers[0].resources.requests.cpu: \"2 cores\" is not a quantity (e.g. 500m, 2Gi) (line 11)"},
			[]string{"jobsched.yaml: spec."}},
	}
	tests[7].config = strings.Replace(minimal, "query: SELECT id FROM tasks", "query: \"SELECT id FROM tasks\\0\"", 1)
	tests[7].want = []string{"source.query: holds a NUL byte (byte 21)"}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := loadFails(t, tc.config, tc.job, tc.want)
			for _, w := range tc.notWant {
				if strings.Contains(err.Error(), w) {
					t.Errorf("the error says %q:\n%v", w, err)
				}
			}
		})
	}
}
