package render

import (
	"fmt"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/validation"
)

func TestJobName(t *testing.T) {
	long := strings.Repeat("very-long-key-", 20)
	tests := []struct {
		name, prefix, key, want string
	}{
		{"number", "reports", "42", "reports-42-" + hash("42")},
		{"upper case and punctuation", "reports", "Order #17/B", "reports-order-17-b-" + hash("Order #17/B")},
		{"only punctuation", "reports", "///", "reports-" + hash("///")},
		{"unicode", "reports", "日本語", "reports-" + hash("日本語")},
		{"long key is cut", "reports", long, "reports-very-long-key-very-long-key-very-long-key-" + hash(long)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := JobName(tc.prefix, tc.key)
			if got != tc.want {
				t.Errorf("JobName(%q, %q) = %q, want %q", tc.prefix, tc.key, got, tc.want)
			}
			if got != JobName(tc.prefix, tc.key) {
				t.Errorf("JobName is not deterministic for %q", tc.key)
			}
		})
	}
}

// TestNamesDistinctAndValid checks 100,000 distinct keys (5,000 with -short), including keys that differ only in
// case or punctuation, long keys and unicode keys: every name and label is valid and no two keys share one.
func TestNamesDistinctAndValid(t *testing.T) {
	const prefix = "a-forty-character-prefix-for-the-test-xy" // the longest prefix config allows
	n := 20000
	if testing.Short() {
		n = 1000
	}
	var keys []string
	for i := range n {
		keys = append(keys,
			fmt.Sprintf("task-%d", i),
			fmt.Sprintf("TASK-%d", i),
			fmt.Sprintf("task_%d", i),
			fmt.Sprintf("%s%d", strings.Repeat("ü", 40), i),
			fmt.Sprintf("%s/%d", strings.Repeat("x", 200), i),
		)
	}
	names := make(map[string]string, len(keys))
	labels := make(map[string]string, len(keys))
	for _, key := range keys {
		name := JobName(prefix, key)
		if len(name) > 63 {
			t.Fatalf("JobName(%q) = %q is %d characters", key, name, len(name))
		}
		if msgs := validation.IsDNS1123Label(name); len(msgs) > 0 {
			t.Fatalf("JobName(%q) = %q is not a DNS-1123 label: %v", key, name, msgs)
		}
		if other, dup := names[name]; dup {
			t.Fatalf("keys %q and %q share the name %q", other, key, name)
		}
		names[name] = key
		label := TaskLabel(key)
		if msgs := validation.IsValidLabelValue(label); len(msgs) > 0 {
			t.Fatalf("TaskLabel(%q) = %q is not a label value: %v", key, label, msgs)
		}
		if other, dup := labels[label]; dup {
			t.Fatalf("keys %q and %q share the label %q", other, key, label)
		}
		labels[label] = key
	}
	if len(names) != 5*n {
		t.Fatalf("checked %d keys, want %d", len(names), 5*n)
	}
}

func TestEnvName(t *testing.T) {
	tests := []struct{ prefix, column, want string }{
		{"", "url", "URL"},
		{"TASK_", "url", "TASK_URL"},
		{"", "Created At", "CREATED_AT"},
		{"", "ümlaut", "_MLAUT"},
		{"", "1st", "1ST"},
		{"TASK_", "a.b-c", "TASK_A_B_C"},
		{"", "日本", "__"},
		{"", "az09_@[/:`{", "AZ09_______"}, // each end of each kept range, and the characters just outside them
	}
	for _, tc := range tests {
		if got := EnvName(tc.prefix, tc.column); got != tc.want {
			t.Errorf("EnvName(%q, %q) = %q, want %q", tc.prefix, tc.column, got, tc.want)
		}
	}
}

func TestAttemptName(t *testing.T) {
	tests := []struct {
		prefix, key string
		attempt     int
		want        string
	}{
		{"rep", "42", 0, JobName("rep", "42")},
		{"rep", "42", 1, JobName("rep", "42")},
		{"rep", "42", 2, JobName("rep", "42") + "-a2"},
		{"rep", "42", 10, JobName("rep", "42") + "-a10"},
	}
	for _, tc := range tests {
		if got := AttemptName(tc.prefix, tc.key, tc.attempt); got != tc.want {
			t.Errorf("AttemptName(%q, %q, %d) = %q, want %q", tc.prefix, tc.key, tc.attempt, got, tc.want)
		}
	}
	long := strings.Repeat("k", 200)
	seen := map[string]string{}
	for _, key := range []string{long, long + "x", "a", "a-a2", "b"} {
		for n := 1; n <= 12; n++ {
			name := AttemptName(strings.Repeat("p", 40), key, n)
			if msgs := validation.IsDNS1123Label(name); len(msgs) > 0 {
				t.Errorf("AttemptName(…, %q, %d) = %q: %v", key, n, name, msgs)
			}
			id := fmt.Sprintf("%q/%d", key, n)
			if other, dup := seen[name]; dup {
				t.Errorf("%s and %s share the name %s", id, other, name)
			}
			seen[name] = id
		}
	}
}

// TestReadable pins each end of the kept ranges [a-z] and [0-9] and the characters just outside them.
func TestReadable(t *testing.T) {
	tests := []struct{ key, want string }{
		{"`az{", "az"},
		{"/09:", "09"},
		{"AZ", "az"},
		{"a`z", "a-z"},
		{"0/9", "0-9"},
	}
	for _, tc := range tests {
		if got := readable(tc.key, 63); got != tc.want {
			t.Errorf("readable(%q) = %q, want %q", tc.key, got, tc.want)
		}
	}
}

// TestPortableName: letters, digits and _ at every bound of their ranges; a digit only after the first character.
func TestPortableName(t *testing.T) {
	for name, want := range map[string]bool{
		"A": true, "Z": true, "a": true, "z": true, "_": true, "A0": true, "A9": true, "_0": true,
		"": false, "0A": false, "9": false, "@": false, "[": false, "`": false, "{": false, "A/": false, "A:": false,
	} {
		if got := portableName(name); got != want {
			t.Errorf("portableName(%q) = %v, want %v", name, got, want)
		}
	}
}
