package config

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

const minimal = `
name: reports
source:
  query: SELECT id FROM tasks
  key: id
job:
  template: job.yaml
`

func write(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	tpl, err := os.ReadFile("testdata/job.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := files["job.yaml"]; !ok {
		files["job.yaml"] = string(tpl)
	}
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return filepath.Join(dir, "jobsched.yaml")
}

func TestLoadDefaults(t *testing.T) {
	file := write(t, map[string]string{"jobsched.yaml": minimal})
	cfg, err := Load(file, "override")
	if err != nil {
		t.Fatal(err)
	}
	cfg.Template, cfg.Queues[0].Template = nil, nil
	want := &Config{
		Name: "reports", Namespace: "override", File: file,
		Source: Source{DSNEnv: "DATABASE_URL", Query: "SELECT id FROM tasks", Key: "id", Timeout: metav1.Duration{Duration: 30 * time.Second}},
		Job:    Job{Template: "job.yaml", NamePrefix: "reports"},
		Limits: Limits{MaxActive: ptr.To(10), MaxPerTick: ptr.To(10), BlockOnUnschedulable: ptr.To(true), ReserveForTick: ptr.To(true), Capacity: "nodes"},
		Retry: Retry{MaxAttempts: ptr.To(3), Backoff: &metav1.Duration{Duration: time.Minute},
			MaxBackoff: &metav1.Duration{Duration: time.Hour}},
		// One implicit queue, named after the install, of the top-level keys.
		Queues: []Queue{{Name: "reports", Weight: ptr.To(1), Implicit: true,
			Source: Source{Query: "SELECT id FROM tasks", Key: "id", Timeout: metav1.Duration{Duration: 30 * time.Second}},
			Job:    Job{Template: "job.yaml", NamePrefix: "reports"}, Env: &Env{},
			Retry: &QueueRetry{MaxAttempts: ptr.To(3), Backoff: &metav1.Duration{Duration: time.Minute},
				MaxBackoff: &metav1.Duration{Duration: time.Hour}, DeadRetention: &metav1.Duration{}},
			GC:     &QueueGC{SucceededRetention: &metav1.Duration{}},
			Limits: QueueLimits{MaxActive: ptr.To(10), MaxPerTick: ptr.To(10)}}},
	}
	if diff := cmp.Diff(want, cfg); diff != "" {
		t.Errorf("config (-want +got):\n%s", diff)
	}
}

func TestLoadErrors(t *testing.T) {
	tests := []struct {
		name   string
		config string
		job    string
		want   []string // every one must appear in the error
	}{
		{"unknown key", minimal + "limits:\n  maxActiv: 3\n  capacity: x\n", "", []string{"unknown key(s): limits.maxActiv", "limits.capacity"}},
		{"missing query, key and template", "name: reports\n", "", []string{"source.query: required", "source.key: required", "job.template: required"}},
		{"negative limits", minimal + "limits:\n  maxActive: -1\n  maxPerTick: -2\n", "", []string{"limits.maxActive: must not be negative", "limits.maxPerTick: must not be negative"}},
		{"name not a DNS-1123 label", strings.Replace(minimal, "name: reports", "name: Reports_1", 1), "", []string{`name: "Reports_1" is not a DNS-1123 label`}},
		{"bad capacity", minimal + "limits:\n  capacity: lots\n", "", []string{`limits.capacity: "lots" is not one of nodes, quota, off`}},
		{"negative retention", minimal + "gc:\n  succeededRetention: -1s\n", "", []string{"gc.succeededRetention: must not be negative"}},
		{"gc.failedRetention was replaced by retry", minimal + "gc:\n  failedRetention: 1h\n", "", []string{"gc.failedRetention: was replaced by retry", "retry: {maxAttempts: 3"}},
		{"reserveForTick not a boolean", minimal + "limits:\n  reserveForTick: sometimes\n", "", []string{"limits.reserveForTick"}},
		{"bad retry", minimal + "retry:\n  maxAttempts: 0\n  backoff: 10m\n  maxBackoff: 1m\n  deadRetention: -1s\n", "",
			[]string{"retry.maxAttempts: must be at least 1", "retry.maxBackoff: 1m is shorter than retry.backoff (10m)", "retry.deadRetention: must not be negative"}},
		{"both dsn sources", minimal + "  dsnEnv: X\n  dsnFile: /f\n", "", nil},
		{"template missing", strings.Replace(minimal, "job.yaml", "nope.yaml", 1), "", []string{"job.template:", "nope.yaml"}},
		{"template not a Job", minimal, "apiVersion: v1\nkind: Pod\n", []string{"must be batch/v1 Job", "at least one container", "restartPolicy"}},
		{"template unknown field", minimal, "apiVersion: batch/v1\nkind: Job\nspec:\n  backofLimit: 1\n", []string{"unknown key(s): spec.backofLimit", "spec.template.spec.containers: at least one container"}},
		{"template with ttl", minimal, "apiVersion: batch/v1\nkind: Job\nspec:\n  ttlSecondsAfterFinished: 5\n  template:\n    spec:\n      restartPolicy: Never\n      containers: [{name: w, image: i}]\n", []string{"spec.ttlSecondsAfterFinished: must be empty"}},
		{"unknown container", minimal + "  container: nope\n", "", []string{`job.container: the template has no container named "nope"`}},
		{"bad env prefix", minimal + "env:\n  prefix: task-\n", "", []string{`env.prefix: "task-" may only hold A-Z, 0-9 and _`}},
		{"passthrough glob that matches nearly everything", minimal + "env:\n  passthrough: [\"?*_*\", \"*_KEY\"]\n", "",
			[]string{`env.passthrough[0]: "?*_*" must begin with a letter or _`, `env.passthrough[1]: "*_KEY" must begin`}},
		{"passthrough not a portable name", minimal + "env:\n  passthrough: [\"SP ACE\", \"A-B*\"]\n", "",
			[]string{`env.passthrough[0]: "SP ACE" is not a portable variable name`, `env.passthrough[1]: "A-B*" is not`}},
		{"env prefix starting with a digit", minimal + "env:\n  prefix: \"1_\"\n", "", []string{`env.prefix: "1_" must begin with a letter or _`}},
		{"completions 0", minimal, "apiVersion: batch/v1\nkind: Job\nspec:\n  completions: 0\n  template:\n    spec:\n      restartPolicy: Never\n      containers: [{name: w, image: i}]\n",
			[]string{"spec.completions: must not be 0"}},
		{"template with ttl names retry", minimal, "apiVersion: batch/v1\nkind: Job\nspec:\n  ttlSecondsAfterFinished: 5\n  template:\n    spec:\n      restartPolicy: Never\n      containers: [{name: w, image: i}]\n",
			[]string{"gc.succeededRetention and retry.deadRetention"}},
		{"unknown key with its line and a suggestion", minimal + "limits:\n  maxActiv: 3\n", "", []string{"limits.maxActiv (line 9; did you mean maxActive?)"}},
		{"tab indentation", "name: reports\nsource:\n\tquery: q\n", "", []string{"line 3: tabs are not allowed for indentation"}},
		{"a second document in the template keeps its other errors", minimal,
			"apiVersion: batch/v1\nkind: Job\nspec:\n  completions: 0\n  template:\n    spec:\n      restartPolicy: Never\n      containers: [{name: w, image: i}]\n---\nkind: Job\n",
			[]string{"a second YAML document", "spec.completions: must not be 0"}},
		{"notify not a channel name", strings.Replace(minimal, "  key: id\n", "  key: id\n  notify: Jobs-new\n", 1), "",
			[]string{`source.notify: "Jobs-new" is not a channel name`}},
		{"notify too long", strings.Replace(minimal, "  key: id\n", "  key: id\n  notify: "+strings.Repeat("a", 64)+"\n", 1), "",
			[]string{`source.notify: "` + strings.Repeat("a", 64) + `" is not a channel name`}},
		{"poll below its bound", strings.Replace(minimal, "  key: id\n", "  key: id\n  poll: 500ms\n", 1), "",
			[]string{"source.poll: 500ms is shorter than 1s"}},
		{"poll negative", strings.Replace(minimal, "  key: id\n", "  key: id\n  poll: -1s\n", 1), "",
			[]string{"source.poll: must not be negative"}},
		{"poll above its bound", strings.Replace(minimal, "  key: id\n", "  key: id\n  poll: 2h\n", 1), "",
			[]string{"source.poll: 2h0m0s is longer than 1h0m0s"}},
		{"long prefix", minimal + "  namePrefix: " + strings.Repeat("a", 41) + "\n", "", []string{"job.namePrefix:", "longer than 40"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			files := map[string]string{"jobsched.yaml": tc.config}
			if tc.job != "" {
				files["job.yaml"] = tc.job
			}
			file := write(t, files)
			if tc.name == "both dsn sources" {
				// source: is not the last block of minimal; build it explicitly
				if err := os.WriteFile(file, []byte("name: r\nsource:\n  query: q\n  key: id\n  dsnEnv: X\n  dsnFile: /f\njob:\n  template: job.yaml\n"), 0o600); err != nil {
					t.Fatal(err)
				}
				tc.want = []string{"source.dsnFile: set only one of source.dsnEnv and source.dsnFile"}
			}
			_, err := Load(file, "")
			if err == nil {
				t.Fatal("no error")
			}
			if !IsConfigError(err) {
				t.Errorf("%v is not a config error", err)
			}
			for _, w := range append(tc.want, file) {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not mention %q", err, w)
				}
			}
		})
	}
}

// TestCapacityOff: YAML 1.1 reads a bare `off` as false; it must still mean "off".
// TestWrongTypeReportedOnce: a value of the wrong type is one problem, not also "required"; every line of the
// error names the file.
func TestWrongTypeReportedOnce(t *testing.T) {
	file := write(t, map[string]string{"jobsched.yaml": "name: reports\nsource:\n  query: q\n  key: [12]\njob:\n  template: job.yaml\nlimits:\n  maxActive: -1\n"})
	_, err := Load(file, "")
	if err == nil {
		t.Fatal("no error")
	}
	if strings.Contains(err.Error(), "source.key: required") || !strings.Contains(err.Error(), "source.key:") {
		t.Errorf("error %q: want source.key's type problem once, not also required", err)
	}
	for _, line := range strings.Split(err.Error(), "\n") {
		if !strings.HasPrefix(line, file+": ") {
			t.Errorf("a line of the error does not name the file: %q", line)
		}
	}
}

func TestCapacityOff(t *testing.T) {
	for _, v := range []string{"off", `"off"`} {
		file := write(t, map[string]string{"jobsched.yaml": minimal + "limits:\n  capacity: " + v + "\n"})
		cfg, err := Load(file, "")
		if err != nil {
			t.Fatal(err)
		}
		if cfg.Limits.Capacity != CapacityOff {
			t.Errorf("capacity: %s is %q, want off", v, cfg.Limits.Capacity)
		}
	}
}

// TestPushgateway: metrics.pushgateway is empty or the base URL of an http(s) Pushgateway.
func TestPushgateway(t *testing.T) {
	tests := []struct {
		name, url string
		wantErr   string // "" = valid
	}{
		{"unset", "", ""},
		{"http", "http://pushgateway.monitoring:9091", ""},
		{"https with a path", "https://metrics.example.com/pushgateway/", ""},
		{"no scheme", "pushgateway:9091", "is not an http or https URL"},
		{"other scheme", "ftp://pushgateway:9091", "is not an http or https URL"},
		{"no host", "http:///metrics", "has no host"},
		{"query", "http://pushgateway:9091/?x=1", "has a query or fragment"},
		{"not a URL", "http://[::1", "is not a URL"},
		{"a port out of range", "http://pushgateway:99999", `"http://pushgateway:99999" has port 99999, not a port number (1-65535)`},
		{"port 0", "http://pushgateway:0", "not a port number (1-65535)"},
		{"a token in the query is not shown", "http://pushgateway:9091/?token=sekrit", `"http://pushgateway:9091/?xxxxx" has a query or fragment`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			file := write(t, map[string]string{"jobsched.yaml": minimal + "metrics:\n  pushgateway: " + strconv.Quote(tt.url) + "\n"})
			cfg, err := Load(file, "")
			if tt.wantErr == "" {
				if err != nil {
					t.Fatal(err)
				}
				if cfg.Metrics.Pushgateway != tt.url {
					t.Errorf("metrics.pushgateway = %q, want %q", cfg.Metrics.Pushgateway, tt.url)
				}
				return
			}
			if err == nil || !IsConfigError(err) || !strings.Contains(err.Error(), "metrics.pushgateway: ") || !strings.Contains(err.Error(), tt.wantErr) ||
				strings.Contains(err.Error(), "sekrit") {
				t.Errorf("error %v, want a config error on metrics.pushgateway: …%s", err, tt.wantErr)
			}
		})
	}
}
