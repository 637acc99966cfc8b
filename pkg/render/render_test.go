package render

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/jobsched/jobsched/pkg/config"
	"github.com/jobsched/jobsched/pkg/jobmeta"
	"github.com/jobsched/jobsched/pkg/rows"
)

func testConfig() *config.Config {
	return &config.Config{
		Name:      "reports",
		Namespace: "batch",
		File:      "jobsched.yaml",
		Source:    config.Source{DSNEnv: "DATABASE_URL", Key: "id"},
		Job:       config.Job{NamePrefix: "rep"},
		Env:       config.Env{Prefix: "TASK_", Passthrough: []string{"S3_*", "DB_HOST", "KUBERNETES_*", "HOME", "PATH", "DATABASE_URL", "JOBSCHED_*"}},
		Template: &batchv1.Job{
			TypeMeta:   metav1.TypeMeta{APIVersion: "batch/v1", Kind: "Job"},
			ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"team": "data"}},
			Spec: batchv1.JobSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
				RestartPolicy: corev1.RestartPolicyNever,
				Containers: []corev1.Container{
					{Name: "worker", Image: "worker:1", Env: []corev1.EnvVar{{Name: "MODE", Value: "fast"}, {Name: "TASK_URL", Value: "from-template"}}},
					{Name: "sidecar", Image: "sidecar:1"},
				},
			}}},
		},
	}
}

var environ = []string{
	"S3_BUCKET=bucket", "S3_REGION=eu", "DB_HOST=db", "DB_PASSWORD=secret", "KUBERNETES_SERVICE_HOST=10.0.0.1",
	"HOME=/root", "PATH=/bin", "DATABASE_URL=postgres://u:pw@h/db", "JOBSCHED_TASK_KEY=spoof", "HOSTNAME=pod",
}

func TestJob(t *testing.T) {
	row := rows.Row{Key: "42", Columns: []rows.Column{
		{Name: "id", Value: "42"},
		{Name: "url", Value: "https://example.com/a"},
		{Name: "note", Null: true},
		{Name: "Created At", Value: "2024-01-02T03:04:05Z"},
	}}
	rowEnv := []corev1.EnvVar{
		{Name: "DB_HOST", Value: "db"}, {Name: "S3_BUCKET", Value: "bucket"}, {Name: "S3_REGION", Value: "eu"},
		{Name: "TASK_ID", Value: "42"}, {Name: "TASK_URL", Value: "https://example.com/a"},
		{Name: "TASK_CREATED_AT", Value: "2024-01-02T03:04:05Z"},
		{Name: "JOBSCHED_TASK_KEY", Value: "42"}, {Name: "JOBSCHED_SCHEDULER", Value: "reports"}, {Name: "JOBSCHED_ATTEMPT", Value: "1"},
	}
	labels := map[string]string{"team": "data", jobmeta.LabelScheduler: "reports", jobmeta.LabelTask: TaskLabel("42"), jobmeta.LabelAttempt: "1"}
	podLabels := map[string]string{jobmeta.LabelScheduler: "reports", jobmeta.LabelTask: TaskLabel("42"), jobmeta.LabelAttempt: "1"}
	annotations := map[string]string{jobmeta.AnnotationTaskKey: "42"}
	want := &batchv1.Job{
		TypeMeta:   metav1.TypeMeta{APIVersion: "batch/v1", Kind: "Job"},
		ObjectMeta: metav1.ObjectMeta{Name: JobName("rep", "42"), Namespace: "batch", Labels: labels, Annotations: annotations},
		Spec: batchv1.JobSpec{Template: corev1.PodTemplateSpec{
			ObjectMeta: metav1.ObjectMeta{Labels: podLabels, Annotations: annotations},
			Spec: corev1.PodSpec{
				RestartPolicy: corev1.RestartPolicyNever,
				Containers: []corev1.Container{
					{Name: "worker", Image: "worker:1", Env: append([]corev1.EnvVar{{Name: "MODE", Value: "fast"}}, rowEnv...)},
					{Name: "sidecar", Image: "sidecar:1", Env: rowEnv},
				},
			},
		}},
	}
	tests := []struct {
		name      string
		container string
		attempt   int
		want      *batchv1.Job
	}{
		{"all containers", "", 1, want},
		{"one container", "worker", 1, func() *batchv1.Job {
			w := want.DeepCopy()
			w.Spec.Template.Spec.Containers[1].Env = nil
			return w
		}()},
		{"attempt 3", "", 3, func() *batchv1.Job {
			w := want.DeepCopy()
			w.Name = AttemptName("rep", "42", 3)
			w.Labels[jobmeta.LabelAttempt], w.Spec.Template.Labels[jobmeta.LabelAttempt] = "3", "3"
			for i := range w.Spec.Template.Spec.Containers {
				env := w.Spec.Template.Spec.Containers[i].Env
				env[len(env)-1].Value = "3"
			}
			return w
		}()},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg := testConfig()
			cfg.Job.Container = tc.container
			tpl := cfg.Template.DeepCopy()
			got, err := New(cfg, environ).Job(row, tc.attempt)
			if err != nil {
				t.Fatal(err)
			}
			if !equality.Semantic.DeepEqual(got, tc.want) {
				t.Errorf("Job differs (-got +want):\n%s", cmp.Diff(got, tc.want))
			}
			if !equality.Semantic.DeepEqual(cfg.Template, tpl) {
				t.Error("rendering changed the template")
			}
		})
	}
}

func TestJobEnvColumns(t *testing.T) {
	cfg := testConfig()
	cfg.Env = config.Env{Columns: []string{"url"}}
	got, err := New(cfg, nil).Job(rows.Row{Key: "k", Columns: []rows.Column{{Name: "id", Value: "k"}, {Name: "url", Value: "u"}}}, 1)
	if err != nil {
		t.Fatal(err)
	}
	want := []corev1.EnvVar{{Name: "MODE", Value: "fast"}, {Name: "TASK_URL", Value: "from-template"}, {Name: "URL", Value: "u"},
		{Name: EnvTaskKey, Value: "k"}, {Name: EnvScheduler, Value: "reports"}, {Name: EnvAttempt, Value: "1"}}
	if env := got.Spec.Template.Spec.Containers[0].Env; !equality.Semantic.DeepEqual(env, want) {
		t.Errorf("env = %v, want %v", env, want)
	}
}

func TestJobErrors(t *testing.T) {
	tests := []struct {
		name       string
		columns    []string
		row        rows.Row
		wantConfig string // a *config.Error containing this
		wantRow    string // a *RowError containing this
		noPrefix   bool   // env.prefix ""
	}{
		{name: "two columns map to one name",
			row:        rows.Row{Key: "1", Columns: []rows.Column{{Name: "created at", Value: "a"}, {Name: "Created_At", Value: "b"}}},
			wantConfig: `columns "created at" and "Created_At" both map to TASK_CREATED_AT`},
		{name: "a column maps to JOBSCHED_TASK_KEY",
			row:        rows.Row{Key: "1", Columns: []rows.Column{{Name: "jobsched_task_key", Value: "a"}}},
			noPrefix:   true,
			wantConfig: `column "jobsched_task_key" maps to JOBSCHED_TASK_KEY, which jobsched sets itself`},
		{name: "env.columns names a missing column", columns: []string{"nope"},
			row:        rows.Row{Key: "1", Columns: []rows.Column{{Name: "id", Value: "1"}}},
			wantConfig: `env.columns: the query returns no column "nope"`},
		{name: "empty key", row: rows.Row{Key: "", Columns: []rows.Column{{Name: "id", Value: ""}}}, wantRow: "the key is empty"},
		{name: "bad UTF-8 value", row: rows.Row{Key: "1", Columns: []rows.Column{{Name: "v", Value: "a\xffb"}}}, wantRow: "TASK_V is not valid UTF-8"},
		{name: "NUL in a value", row: rows.Row{Key: "1", Columns: []rows.Column{{Name: "v", Value: "a\x00b"}}}, wantRow: "TASK_V holds a NUL byte"},
		{name: "NUL first in a value", row: rows.Row{Key: "1", Columns: []rows.Column{{Name: "v", Value: "\x00b"}}}, wantRow: "TASK_V holds a NUL byte"},
		{name: "two columns of one name, no prefix", noPrefix: true,
			row:        rows.Row{Key: "1", Columns: []rows.Column{{Name: "X", Value: "a"}, {Name: "X", Value: "b"}}},
			wantConfig: `columns "X" and "X" both map to X`},
		{name: "bad UTF-8 key", row: rows.Row{Key: "a\xff", Columns: []rows.Column{{Name: "id", Value: "a\xff"}}}, wantRow: "key is not valid UTF-8"},
		{name: "key too long", row: rows.Row{Key: strings.Repeat("k", MaxKeyBytes+1)}, wantRow: "key is longer than"},
		{name: "Job too large", row: rows.Row{Key: "1", Columns: func() (cols []rows.Column) {
			for i := range 10 {
				cols = append(cols, rows.Column{Name: fmt.Sprintf("blob%d", i), Value: strings.Repeat("x", 120<<10)})
			}
			return cols
		}()}, wantRow: "etcd takes at most"},
		{name: "row too large: its key only", row: rows.Row{Key: "1", Oversize: 20 << 20},
			wantRow: "the row is 20971520 bytes as text; PostgreSQL sends at most 1048576 a row"},
		{name: "row too large, with env.columns", columns: []string{"id"}, row: rows.Row{Key: "1", Oversize: 20 << 20},
			wantRow: "the row is 20971520 bytes"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg := testConfig()
			if tc.noPrefix {
				cfg.Env.Prefix = ""
			}
			cfg.Env.Columns = tc.columns
			_, err := New(cfg, nil).Job(tc.row, 1)
			var rowErr *RowError
			switch {
			case tc.wantConfig != "":
				if !config.IsConfigError(err) || !strings.Contains(err.Error(), tc.wantConfig) {
					t.Errorf("err = %v, want a config error containing %q", err, tc.wantConfig)
				}
			case !errors.As(err, &rowErr) || !strings.Contains(rowErr.Reason, tc.wantRow):
				t.Errorf("err = %v, want a row error containing %q", err, tc.wantRow)
			}
		})
	}
}

// The kubelet expands $(VAR) in env[].value with the variables defined before it, and turns $$ into $: every value
// jobsched writes must come out of the kubelet exactly as it went in.
func TestEnvValuesAreEscaped(t *testing.T) {
	tests := []struct{ in, want string }{
		{"$(DB_PASSWORD)", "$$(DB_PASSWORD)"},
		{"https://x/?t=$(S3_TOKEN)", "https://x/?t=$$(S3_TOKEN)"},
		{"$$", "$$$$"},
		{"$", "$$"},
		{"$(", "$$("},
		{"plain", "plain"},
	}
	for _, tc := range tests {
		t.Run(tc.in, func(t *testing.T) {
			cfg := testConfig()
			cfg.Name = "reports"
			cfg.Env.Passthrough = []string{"S3_TOKEN"}
			got, err := New(cfg, []string{"S3_TOKEN=" + tc.in}).Job(rows.Row{Key: tc.in, Columns: []rows.Column{{Name: "url", Value: tc.in}}}, 1)
			if err != nil {
				t.Fatal(err)
			}
			env := map[string]string{}
			for _, e := range got.Spec.Template.Spec.Containers[1].Env {
				env[e.Name] = e.Value
			}
			for _, name := range []string{"TASK_URL", "S3_TOKEN", EnvTaskKey} {
				if env[name] != tc.want {
					t.Errorf("%s = %q, want %q", name, env[name], tc.want)
				}
				if kubeletExpand(env[name]) != tc.in {
					t.Errorf("%s comes out of the kubelet as %q, want %q", name, kubeletExpand(env[name]), tc.in)
				}
			}
			if got.Annotations[jobmeta.AnnotationTaskKey] != tc.in {
				t.Errorf("the key annotation is %q, want the raw key %q (annotations are not expanded)", got.Annotations[jobmeta.AnnotationTaskKey], tc.in)
			}
		})
	}
}

// kubeletExpand is the kubelet's expansion of an env value where every variable is defined as "SECRET": $$ → $,
// $(NAME) → its value, anything else as is.
func kubeletExpand(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '$' || i+1 == len(s) {
			b.WriteByte(s[i])
			continue
		}
		switch s[i+1] {
		case '$':
			b.WriteByte('$')
			i++
		case '(':
			if end := strings.IndexByte(s[i+2:], ')'); end >= 0 {
				b.WriteString("SECRET")
				i += 2 + end
				continue
			}
			b.WriteByte('$')
		default:
			b.WriteByte('$')
		}
	}
	return b.String()
}

func TestPassthroughNeverCopiesCredentials(t *testing.T) {
	environ := []string{"DATABASE_URL=postgres://u:pw@h/db", "PGPASSWORD=pw", "PGHOST=h", "PGUSER=u", "PGSERVICEFILE=/s",
		"MY_DSN=postgres://u:pw@h/db", "S3_BUCKET=b"}
	tests := []struct {
		name   string
		source config.Source
		want   []string
	}{
		{"dsnEnv: DATABASE_URL, the default, is never copied either", config.Source{DSNEnv: "MY_DSN"}, []string{"S3_BUCKET"}},
		{"dsnFile blocks DATABASE_URL too", config.Source{DSNFile: "/etc/dsn"}, []string{"MY_DSN", "S3_BUCKET"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg := testConfig()
			cfg.Source = tc.source
			cfg.Env.Passthrough = []string{"PG*", "DATABASE_URL", "MY_DSN", "S3_*"}
			var got []string
			for _, e := range New(cfg, environ).passthrough {
				got = append(got, e.Name)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("passed through (-want +got):\n%s", diff)
			}
		})
	}
}

// TestPassthroughBlockListIgnoresCase: the credentials' variables are never copied under another letter case (lib/pq
// reads only the upper-case ones, but a Job's process may read any), and a variable whose name is not a portable
// name (letters, digits, _, not starting with a digit) is never copied.
func TestPassthroughBlockListIgnoresCase(t *testing.T) {
	environ := []string{"pgpassword=pw", "Pgpassword=pw", "database_url=postgres://u:pw@h/db", "my_dsn=postgres://u:pw@h/db",
		"kubernetes_token=t", "Jobsched_x=1", "home=/root", "SP ACE=x", "S-3=x", "SVC_ok=1", "s3_bucket=b", "dbhost=h"}
	cfg := testConfig()
	cfg.Source = config.Source{DSNEnv: "MY_DSN"}
	cfg.Env.Passthrough = []string{"p*", "P*", "d*", "m*", "k*", "J*", "h*", "S*", "s*"}
	var got []string
	for _, e := range New(cfg, environ).passthrough {
		got = append(got, e.Name)
	}
	if diff := cmp.Diff([]string{"SVC_ok", "dbhost", "s3_bucket"}, got); diff != "" {
		t.Errorf("passed through (-want +got):\n%s", diff)
	}
}

// TestPassthroughValueNotUTF8: a passthrough variable whose value is not valid UTF-8 would make every row's Job
// invalid: it is a configuration error (exit 2) naming the variable, not a skip of every row.
func TestPassthroughValueNotUTF8(t *testing.T) {
	cfg := testConfig()
	cfg.Env.Passthrough = []string{"S3_*"}
	_, err := New(cfg, []string{"S3_BUCKET=b\xffc"}).Job(rows.Row{Key: "1", Columns: []rows.Column{{Name: "id", Value: "1"}}}, 1)
	if !config.IsConfigError(err) || !strings.Contains(err.Error(), "S3_BUCKET") || !strings.Contains(err.Error(), "UTF-8") {
		t.Errorf("Job: %v; want a configuration error naming S3_BUCKET", err)
	}
}

func TestEnvValueOverArgLimitIsSkipped(t *testing.T) {
	cfg := testConfig()
	_, err := New(cfg, nil).Job(rows.Row{Key: "1", Columns: []rows.Column{{Name: "blob", Value: strings.Repeat("x", 128<<10)}}}, 1)
	var rowErr *RowError
	if !errors.As(err, &rowErr) || !strings.Contains(rowErr.Reason, "TASK_BLOB") || !strings.Contains(rowErr.Reason, "128 KiB") {
		t.Fatalf("err = %v, want a row error naming TASK_BLOB and the 128 KiB limit", err)
	}
	if _, err := New(cfg, nil).Job(rows.Row{Key: "1", Columns: []rows.Column{{Name: "blob", Value: strings.Repeat("x", 100<<10)}}}, 1); err != nil {
		t.Fatalf("a 100 KiB value: %v", err)
	}
}

// TestLimitsAtTheirBoundaries: a key of exactly MaxKeyBytes and a variable of exactly MaxEnvBytes (with its name, "="
// and NUL) make a Job; one byte more does not.
func TestLimitsAtTheirBoundaries(t *testing.T) {
	cfg := testConfig()
	cfg.Env = config.Env{Columns: []string{"blob"}}
	r := New(cfg, nil)
	const name = "BLOB" // env.columns without a prefix
	fits := MaxEnvBytes - len(name) - 2
	tests := []struct {
		name    string
		row     rows.Row
		wantErr string
	}{
		{"key of MaxKeyBytes", rows.Row{Key: strings.Repeat("k", MaxKeyBytes), Columns: []rows.Column{{Name: "blob", Value: "v"}}}, ""},
		{"key of MaxKeyBytes+1", rows.Row{Key: strings.Repeat("k", MaxKeyBytes+1), Columns: []rows.Column{{Name: "blob", Value: "v"}}}, "key is longer"},
		{"variable of MaxEnvBytes", rows.Row{Key: "1", Columns: []rows.Column{{Name: "blob", Value: strings.Repeat("x", fits)}}}, ""},
		{"variable of MaxEnvBytes+1", rows.Row{Key: "1", Columns: []rows.Column{{Name: "blob", Value: strings.Repeat("x", fits+1)}}}, "128 KiB"},
		{"$ counts once, as the process sees it", rows.Row{Key: "1", Columns: []rows.Column{{Name: "blob", Value: strings.Repeat("$", fits)}}}, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := r.Job(tc.row, 1)
			if (err == nil) != (tc.wantErr == "") || err != nil && !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("err = %v, want %q", err, tc.wantErr)
			}
		})
	}
}

// TestEnvColumnsFirstColumn: env.columns may name the row's first column.
func TestEnvColumnsFirstColumn(t *testing.T) {
	cfg := testConfig()
	cfg.Env = config.Env{Columns: []string{"id"}}
	job, err := New(cfg, nil).Job(rows.Row{Key: "k", Columns: []rows.Column{{Name: "id", Value: "k"}, {Name: "url", Value: "u"}}}, 1)
	if err != nil {
		t.Fatal(err)
	}
	if env := job.Spec.Template.Spec.Containers[1].Env; len(env) != 4 || env[0] != (corev1.EnvVar{Name: "ID", Value: "k"}) {
		t.Errorf("env = %v, want ID first", env)
	}
}

// TestJobOfMaxJobBytes: a Job of exactly MaxJobBytes (as etcd stores it) is made; one byte more is not.
func TestJobOfMaxJobBytes(t *testing.T) {
	row := rows.Row{Key: "1", Columns: []rows.Column{{Name: "id", Value: "1"}}}
	job := func(pad int) (*batchv1.Job, error) {
		cfg := testConfig()
		cfg.Template.Annotations = map[string]string{"pad": strings.Repeat("x", pad)}
		return New(cfg, nil).Job(row, 1)
	}
	const pad = 1000 << 10 // the annotation's length stays in one varint size around here
	small, err := job(pad)
	if err != nil {
		t.Fatal(err)
	}
	fits := pad + MaxJobBytes - small.Size()
	got, err := job(fits)
	if err != nil || got.Size() != MaxJobBytes {
		t.Fatalf("a Job of %d bytes: %v, want it made at MaxJobBytes %d", got.Size(), err, MaxJobBytes)
	}
	var rowErr *RowError
	if _, err := job(fits + 1); !errors.As(err, &rowErr) || !strings.Contains(rowErr.Reason, fmt.Sprintf("the Job would be %d bytes", MaxJobBytes+1)) {
		t.Errorf("a Job of MaxJobBytes+1: %v, want a row error", err)
	}
}
