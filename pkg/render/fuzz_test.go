package render

import (
	"errors"
	"strings"
	"testing"
	"unicode/utf8"

	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/jobsched/jobsched/pkg/config"
	"github.com/jobsched/jobsched/pkg/jobmeta"
	"github.com/jobsched/jobsched/pkg/rows"
)

// FuzzJob throws random rows (key, two columns with their names and values, the attempt, env.prefix and
// job.namePrefix) at Job. It never panics, and either the row is skipped with a *RowError (or every row would fail:
// a *config.Error), or the Job passes the API server's own checks of what a row puts into it
// (k8s.io/apimachinery's validation): the name is a DNS-1123 label, every label key and value is valid, the
// annotations are valid and within their total size, every env name is a valid variable name (the strict
// IsEnvVarName of clusters without RelaxedEnvironmentVariableValidation); the key annotation holds the exact key,
// and every value the row sets comes out of the kubelet's $(VAR) expansion exactly as it was. The seed corpus
// (testdata/fuzz/FuzzJob) runs with every go test; scripts/fuzz.sh runs it for longer.
func FuzzJob(f *testing.F) {
	f.Add("42", "url", "https://example.com/a", "Created At", "2024-01-02", uint8(1), "TASK_", "rep")
	f.Add("$(DB_PASSWORD)", "note", "$$(X) $( $", "note2", "", uint8(3), "", "reports")
	f.Add("", "id", "", "v", "x", uint8(0), "TASK_", "a")
	f.Add("a\xff", "id", "a\xff", "v", "\xfe", uint8(2), "", "a")
	f.Add("ÄÖÜ--ü__/..", "1st", "v", "ümlaut", "w", uint8(9), "", "p")
	f.Add("k", "", "v", "x", "y", uint8(1), "", "p")
	f.Add(strings.Repeat("k", MaxKeyBytes+1), "id", "v", "x", "y", uint8(1), "T_", strings.Repeat("p", 40))
	f.Add("K\u212a\u0130", "jobsched_task_key", "v", "x", "y", uint8(2), "", "p")
	f.Add(strings.Repeat("€", MaxKeyBytes/3+1), "id", "v", "x", "y", uint8(1), "", "p")
	f.Fuzz(func(t *testing.T, key, col1, val1, col2, val2 string, attempt uint8, envPrefix, namePrefix string) {
		cfg := testConfig()
		cfg.Env = config.Env{Prefix: envPrefix}
		cfg.Job.NamePrefix = namePrefix
		// Only what configuration validation lets through (pkg/config): a DNS-1123 namePrefix of at most 40
		// characters, an env.prefix of A-Z, 0-9 and _.
		if len(namePrefix) > 40 || len(validation.IsDNS1123Label(namePrefix)) > 0 ||
			strings.Trim(envPrefix, "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_") != "" {
			t.Skip()
		}
		row := rows.Row{Key: key, Columns: []rows.Column{{Name: col1, Value: val1}, {Name: col2, Value: val2}}}
		job, err := New(cfg, nil).Job(row, int(attempt))
		if err != nil {
			var rowErr *RowError
			if !errors.As(err, &rowErr) && !config.IsConfigError(err) {
				t.Fatalf("error %v is neither a *RowError nor a *config.Error", err)
			}
			if rowErr != nil && (rowErr.Reason == "" || !utf8.ValidString(rowErr.Key) || len(rowErr.Key) > MaxKeyBytes+8) {
				t.Errorf("row error %+v: want a reason and a printable, bounded key", rowErr)
			}
			return
		}
		for _, msg := range validation.IsDNS1123Label(job.Name) {
			t.Errorf("Job name %q: %s", job.Name, msg)
		}
		for _, labels := range []map[string]string{job.Labels, job.Spec.Template.Labels} {
			for k, v := range labels {
				for _, msg := range validation.IsQualifiedName(k) {
					t.Errorf("label key %q: %s", k, msg)
				}
				for _, msg := range validation.IsValidLabelValue(v) {
					t.Errorf("label %s=%q: %s", k, v, msg)
				}
			}
		}
		for _, annotations := range []map[string]string{job.Annotations, job.Spec.Template.Annotations} {
			for _, e := range apivalidation.ValidateAnnotations(annotations, field.NewPath("metadata", "annotations")) {
				t.Errorf("annotations: %v", e)
			}
			if annotations[jobmeta.AnnotationTaskKey] != key {
				t.Errorf("key annotation %q, want the exact key %q", annotations[jobmeta.AnnotationTaskKey], key)
			}
		}
		want := map[string]string{EnvTaskKey: key}
		for _, c := range row.Columns {
			want[EnvName(envPrefix, c.Name)] = c.Value
		}
		for _, c := range job.Spec.Template.Spec.Containers {
			seen := map[string]bool{}
			for _, e := range c.Env {
				for _, msg := range validation.IsEnvVarName(e.Name) {
					t.Errorf("env name %q: %s", e.Name, msg)
				}
				if seen[e.Name] {
					t.Errorf("env %s set twice in container %s", e.Name, c.Name)
				}
				seen[e.Name] = true
				if v, ok := want[e.Name]; ok {
					if got := kubeletExpand(e.Value); got != v {
						t.Errorf("env %s comes out of the kubelet as %q, want %q", e.Name, got, v)
					}
				}
			}
			for name := range want {
				if !seen[name] {
					t.Errorf("container %s has no %s", c.Name, name)
				}
			}
		}
	})
}

// A column whose variable would not be a valid environment variable name (a digit first, or no name at all) is a
// configuration error: every row has that column, and the API server would reject every Job (found by FuzzJob).
func TestInvalidEnvNameIsConfigError(t *testing.T) {
	tests := []struct {
		name, prefix, column, want string
	}{
		{name: "digit first", column: "1st", want: `column "1st" maps to "1ST"`},
		{name: "empty column name", column: "", want: `column "" maps to ""`},
		{name: "prefix starting with a digit", prefix: "9_", column: "url", want: `column "url" maps to "9_URL"`},
		{name: "a prefix makes it valid", prefix: "T_", column: "1st"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg := testConfig()
			cfg.Env = config.Env{Prefix: tc.prefix}
			_, err := New(cfg, nil).Job(rows.Row{Key: "k", Columns: []rows.Column{{Name: tc.column, Value: "v"}}}, 1)
			if tc.want == "" {
				if err != nil {
					t.Fatalf("err = %v, want none", err)
				}
				return
			}
			if !config.IsConfigError(err) || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "not a valid environment variable name") {
				t.Fatalf("err = %v, want a config error containing %q", err, tc.want)
			}
		})
	}
}

// A key too long for a Job is reported with its first bytes: cut on a character boundary, so that the skip's log
// line stays valid UTF-8 (found by FuzzJob).
func TestLongKeyReportedAsValidUTF8(t *testing.T) {
	for _, key := range []string{strings.Repeat("€", MaxKeyBytes/3+1), strings.Repeat("k", MaxKeyBytes+1), "a" + strings.Repeat("é", MaxKeyBytes)} {
		_, err := New(testConfig(), nil).Job(rows.Row{Key: key}, 1)
		var rowErr *RowError
		if !errors.As(err, &rowErr) || !strings.Contains(rowErr.Reason, "longer than") {
			t.Fatalf("err = %v, want a row error for the long key", err)
		}
		if !utf8.ValidString(rowErr.Key) || !strings.HasPrefix(key, strings.TrimSuffix(rowErr.Key, "…")) {
			t.Errorf("the key is reported as %q: want a valid UTF-8 prefix of the key", rowErr.Key)
		}
	}
}
