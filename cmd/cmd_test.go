package cmd

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	k8stesting "k8s.io/client-go/testing"
	"sigs.k8s.io/yaml"

	"github.com/jobsched/jobsched/pkg/capacity"
	"github.com/jobsched/jobsched/pkg/config"
	"github.com/jobsched/jobsched/pkg/jobmeta"
	"github.com/jobsched/jobsched/pkg/kube"
	"github.com/jobsched/jobsched/pkg/render"
	"github.com/jobsched/jobsched/pkg/report"
	"github.com/jobsched/jobsched/pkg/rows"
	"github.com/jobsched/jobsched/pkg/scheduler"
	"github.com/jobsched/jobsched/pkg/testkit"
)

func runCmd(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code = run(context.Background(), args, &out, &errOut)
	return code, out.String(), testkit.WithErrors(errOut.String())
}

func TestHelpListsSubcommands(t *testing.T) {
	code, out, _ := runCmd(t, "--help")
	if code != 0 {
		t.Fatalf("exit %d", code)
	}
	for _, sub := range []string{"tick", "gc", "status", "dry-run", "version"} {
		if !strings.Contains(out, "\n  "+sub+" ") {
			t.Errorf("--help does not list %s:\n%s", sub, out)
		}
	}
}

func TestExitCodes(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.yaml")
	if err := os.WriteFile(bad, []byte("name: Bad_Name\nlimits:\n  maxActive: -1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	huge := filepath.Join(dir, "huge.yaml")
	abs, err := filepath.Abs("testdata/job.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(huge, []byte("name: r\nsource: {query: q, key: id}\njob: {template: "+abs+"}\n"+
		"limits: {maxActive: 9223372036854775807, maxPerTick: 9223372036854775807, capacity: off}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	collide := filepath.Join(dir, "collide.jsonl")
	if err := os.WriteFile(collide, []byte(`{"id": 1, "Created At": "a", "created_at": "b"}`+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		args []string
		code int
		want string // in stderr
	}{
		{"two columns map to one variable", []string{"dry-run", "--offline", "--rows", collide, "--config", "testdata/jobsched.yaml"}, 2,
			`columns "Created At" and "created_at" both map to TASK_CREATED_AT`},
		{"bad config names the key and file", []string{"tick", "--config", bad}, 2, "limits.maxActive: must not be negative"},
		{"missing config", []string{"status", "--config", filepath.Join(dir, "none.yaml")}, 2, "none.yaml"},
		{"unknown flag", []string{"tick", "--nope"}, 2, "unknown flag: --nope"},
		{"bad output", []string{"dry-run", "-o", "xml", "--offline", "--config", "testdata/jobsched.yaml"}, 2, `-o: "xml"`},
		{"bad log format", []string{"version", "--log-format", "xml"}, 2, "--log-format"},
		{"DSN not set", []string{"dry-run", "--offline", "--config", "testdata/jobsched.yaml"}, 2, "DATABASE_URL is empty or not set"},
		{"unreachable cluster is a run-time failure", []string{"gc", "--config", "testdata/jobsched.yaml", "--kubeconfig", writeKubeconfig(t)}, 1, "listing Jobs"},
		{"version", []string{"version"}, 0, ""},
		{"unknown command is bad usage", []string{"dryrun"}, 2, `unknown command "dryrun" for "jobsched"; did you mean dry-run?`},
		{"bad namespace", []string{"dry-run", "--offline", "-n", "Bad_NS", "--config", "testdata/jobsched.yaml"}, 2, `-n/--namespace: "Bad_NS" is not a valid namespace`},
		{"tick takes no arguments", []string{"tick", "extra"}, 2, `unknown command "extra" for "jobsched tick" (see jobsched tick --help)`},
		{"status takes one key at most", []string{"status", "a", "b"}, 2, "accepts at most 1 arg(s), received 2 (see jobsched status --help)"},
		{"--server with --offline", []string{"dry-run", "--server", "--offline", "--config", "testdata/jobsched.yaml"}, 2,
			"if any flags in the group [server offline] are set none of the others can be; [offline server] were all set"},
		{"keys and --all-dead", []string{"retry", "--all-dead", "k1", "--kubeconfig", writeKubeconfig(t)}, 2, "give the keys of dead tasks, or --all-dead (not both)"},
		{"a bool flag that is no bool", []string{"dry-run", "--offline=maybe"}, 2, `--offline: "maybe" is not true or false, e.g. --offline=true`},
		{"a bad -o of status", []string{"status", "-o", "xml", "--kubeconfig", writeKubeconfig(t)}, 2, `-o: "xml" is not table, json or yaml`},
		{"a negative --fill-for", []string{"tick", "--fill-for", "-1s", "--kubeconfig", writeKubeconfig(t)}, 2, "--fill-for: must not be negative"},
		{"completion of an unknown shell", []string{"completion", "nosuch"}, 2, `completion: "nosuch" is not one of bash, fish, powershell, zsh`},
		{"completion with an extra argument", []string{"completion", "bash", "extra"}, 2, "completion takes one shell"},
		{"help of an unknown command", []string{"help", "nosuch"}, 2, `help: unknown command "nosuch"`},
		{"a QPS that is no number", []string{"gc", "--kube-qps", "abc"}, 2, `--kube-qps: "abc" is not a number, e.g. --kube-qps 20`},
		{"a timeout with an unknown unit", []string{"gc", "--timeout", "5x"}, 2, `--timeout: "5x" is not a duration, e.g. --timeout 90s`},
		{"a negative QPS", []string{"gc", "--kube-qps", "-1", "--config", "testdata/jobsched.yaml"}, 2, "--kube-qps: must not be negative"},
		{"no burst with a QPS", []string{"gc", "--kube-qps", "5", "--kube-burst", "0", "--config", "testdata/jobsched.yaml"}, 2,
			"--kube-burst: must be at least 1 with --kube-qps"},
		{"zero timeout", []string{"gc", "--timeout", "0s", "--config", "testdata/jobsched.yaml"}, 2, "--timeout: must be positive"},
		// Numbers and levels that were accepted and then overflowed, or silenced every error (issue 29).
		{"a QPS that is not a number", []string{"gc", "--kube-qps", "NaN", "--config", "testdata/jobsched.yaml"}, 2,
			"--kube-qps: NaN is not a finite number"},
		{"an infinite QPS", []string{"gc", "--kube-qps", "Inf", "--config", "testdata/jobsched.yaml"}, 2, "--kube-qps: +Inf is not a finite number"},
		{"a lease longer than its field holds", []string{"tick", "--lease-duration", "1000000h", "--config", "testdata/jobsched.yaml"}, 2,
			"--lease-duration: must be whole seconds from 3s to 24h0m0s, not 1000000h0m0s"},
		{"log level disabled", []string{"version", "--log-level", "disabled"}, 2, `--log-level: "disabled" is not one of debug, info, warn, error`},
		{"log level panic", []string{"version", "--log-level", "panic"}, 2, `--log-level: "panic" is not one of`},
		{"log level fatal", []string{"version", "--log-level", "fatal"}, 2, `--log-level: "fatal" is not one of`},
		{"log level by number", []string{"version", "--log-level", "7"}, 2, `--log-level: "7" is not one of`},
		{"limits at the top of int", []string{"dry-run", "--offline", "--rows", "testdata/rows.jsonl", "--timeout", "3s", "--config", huge}, 2,
			"limits.maxActive: must be at most 1000000, not 9223372036854775807"},
	}
	t.Setenv("DATABASE_URL", "")
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			code, _, stderr := runCmd(t, tc.args...)
			if code != tc.code {
				t.Errorf("exit %d, want %d; stderr:\n%s", code, tc.code, stderr)
			}
			if !strings.Contains(stderr, tc.want) {
				t.Errorf("stderr does not mention %q:\n%s", tc.want, stderr)
			}
			if strings.Contains(stderr, "secret-token-value") {
				t.Errorf("stderr shows the token:\n%s", stderr)
			}
		})
	}
}

// writeKubeconfig points at a port where nothing listens.
func writeKubeconfig(t *testing.T) string {
	t.Helper()
	f := filepath.Join(t.TempDir(), "kubeconfig")
	cfg := `apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:1"}}]
users: [{name: u, user: {token: secret-token-value}}]
contexts: [{name: x, context: {cluster: c, user: u}}]
current-context: x
`
	if err := os.WriteFile(f, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	return f
}

// TestDryRunOffline renders the exact Jobs from a config and a rows file, with no database and no cluster.
func TestDryRunOffline(t *testing.T) {
	t.Setenv("S3_BUCKET", "bucket")
	t.Setenv("KUBERNETES_SERVICE_HOST", "10.0.0.1")
	args := []string{"dry-run", "--offline", "--rows", "testdata/rows.jsonl", "--config", "testdata/jobsched.yaml", "-o", "yaml"}
	code, out, stderr := runCmd(t, args...)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if strings.Contains(stderr+out, "secret") {
		t.Error("output mentions a secret")
	}
	_, again, _ := runCmd(t, args...)
	if again != out {
		t.Errorf("a second run printed something else:\n%s", cmp.Diff(out, again))
	}
	var plan struct {
		Creates []struct {
			Key string       `json:"key"`
			Job *batchv1.Job `json:"job"`
		} `json:"creates"`
		Slots int `json:"slots"`
	}
	if err := yaml.Unmarshal([]byte(out), &plan); err != nil {
		t.Fatal(err)
	}
	if plan.Slots != 2 || len(plan.Creates) != 2 {
		t.Fatalf("slots %d and %d creates, want maxPerTick 2 and 2", plan.Slots, len(plan.Creates))
	}
	wantEnv := [][]corev1.EnvVar{
		{{Name: "S3_BUCKET", Value: "bucket"}, {Name: "TASK_ID", Value: "1"}, {Name: "TASK_URL", Value: "https://example.com/1"},
			{Name: "TASK_CREATED_AT", Value: "2026-01-01T00:00:00Z"}, {Name: "TASK_META", Value: `{"a":[1,2]}`},
			{Name: "JOBSCHED_TASK_KEY", Value: "1"}, {Name: "JOBSCHED_SCHEDULER", Value: "reports"}, {Name: "JOBSCHED_ATTEMPT", Value: "1"}},
		{{Name: "S3_BUCKET", Value: "bucket"}, {Name: "TASK_ID", Value: "Ünïcode / key"}, {Name: "TASK_URL", Value: "u2"},
			{Name: "TASK_CREATED_AT", Value: "2026-01-01T00:00:01Z"},
			{Name: "JOBSCHED_TASK_KEY", Value: "Ünïcode / key"}, {Name: "JOBSCHED_SCHEDULER", Value: "reports"}, {Name: "JOBSCHED_ATTEMPT", Value: "1"}},
	}
	for i, c := range plan.Creates {
		j := c.Job
		if j.APIVersion != "batch/v1" || j.Kind != "Job" || j.Name != render.JobName("reports", c.Key) || j.Namespace != "batch" {
			t.Errorf("create %d: %s %s %s/%s", i, j.APIVersion, j.Kind, j.Namespace, j.Name)
		}
		if j.Labels[jobmeta.LabelScheduler] != "reports" || j.Spec.Template.Labels[jobmeta.LabelScheduler] != "reports" ||
			j.Annotations[jobmeta.AnnotationTaskKey] != c.Key || j.Labels[jobmeta.LabelTask] != render.TaskLabel(c.Key) {
			t.Errorf("create %d: labels %v annotations %v", i, j.Labels, j.Annotations)
		}
		if diff := cmp.Diff(wantEnv[i], j.Spec.Template.Spec.Containers[0].Env); diff != "" {
			t.Errorf("create %d env (-want +got):\n%s", i, diff)
		}
	}
}

func TestPrintNodes(t *testing.T) {
	var nodes []capacity.NodeFit
	for i := range 12 {
		nodes = append(nodes, capacity.NodeFit{Name: fmt.Sprintf("n%02d", i), Fits: i, Limit: "cpu"})
	}
	nodes = append(nodes, capacity.NodeFit{Name: "t1", Excluded: "NotReady"}, capacity.NodeFit{Name: "t2", Excluded: "NotReady"},
		capacity.NodeFit{Name: "c", Excluded: "cordoned"})
	var out bytes.Buffer
	printNodes(&out, nodes)
	lines := strings.Split(strings.TrimRight(out.String(), "\n"), "\n")
	want := []string{"  n11:", "  n10:", "  n09:"}
	for i, w := range want {
		if !strings.HasPrefix(lines[i], w) {
			t.Errorf("line %d = %q, want the node with the most room first (%s)", i, lines[i], w)
		}
	}
	for _, w := range []string{"2 more node(s) considered", "excluded:\t1 node(s): cordoned", "excluded:\t2 node(s): NotReady"} {
		if !strings.Contains(out.String(), w) {
			t.Errorf("output lacks %q:\n%s", w, out.String())
		}
	}
	if len(lines) != maxNodeLines+3 {
		t.Errorf("%d lines, want %d:\n%s", len(lines), maxNodeLines+3, out.String())
	}
}

// TestDryRunCommandWritesNothing drives the dry-run command itself against a fake cluster that holds a Job to delete
// and room for rows: the client sees only reads. tick on the same cluster writes, so the check can fail.
func TestDryRunCommandWritesNothing(t *testing.T) {
	old := testkit.MakeJob("old").Name("reports-old").Finished(batchv1.JobComplete, time.Now().Add(-time.Hour)).Obj()
	tests := []struct {
		args      []string
		wantWrite bool
	}{
		{[]string{"dry-run", "--rows", "testdata/rows.jsonl", "-o", "json"}, false},
		{[]string{"dry-run", "--rows", "testdata/rows.jsonl", "-o", "yaml"}, false},
		{[]string{"dry-run", "--rows", "testdata/rows.jsonl"}, false},
		{[]string{"gc"}, true},
	}
	for _, tc := range tests {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			node := testkit.MakeNode("node-0").Allocatable(corev1.ResourcePods, "10").Allocatable(corev1.ResourceCPU, "4").Allocatable(corev1.ResourceMemory, "8Gi").Obj()
			client := testkit.NewFake(old.DeepCopy(), node)
			newKube := func(kube.Options) (kube.Interface, string, error) { return client, "default", nil }
			var out, errOut bytes.Buffer
			args := append(tc.args, "--config", "testdata/jobsched.yaml", "--log-format", "json")
			if code := runWith(context.Background(), args, &out, &errOut, newKube); code != 0 {
				t.Fatalf("exit %d: %s", code, errOut.String())
			}
			var writes []string
			for _, a := range client.Actions() {
				if v := a.GetVerb(); v != "list" && v != "get" && v != "watch" {
					writes = append(writes, v+" "+a.GetResource().Resource)
				}
			}
			if (len(writes) > 0) != tc.wantWrite {
				t.Errorf("writes %v, want writes: %v", writes, tc.wantWrite)
			}
			if tc.wantWrite {
				return
			}
			if s := testkit.PassDone(t, errOut.String()); !s.DryRun || s.WouldCreate != 2 {
				t.Errorf("the pass done line does not say dryRun and wouldCreate 2:\n%s", errOut.String())
			}
		})
	}
}

func TestRetryCommand(t *testing.T) {
	dead := testkit.MakeJob("d").Attempt(3).Finished(batchv1.JobFailed, time.Now().Add(-time.Hour)).Obj()
	backoff := testkit.MakeJob("b").Attempt(1).Finished(batchv1.JobFailed, time.Now()).Obj()
	tests := []struct {
		args        []string
		code        int
		wantDeletes []string
		want        string // in stdout+stderr
	}{
		{[]string{"retry", "d"}, 0, []string{dead.Name}, "the next tick starts it again at attempt 1"},
		{[]string{"retry", "--all-dead"}, 0, []string{dead.Name}, dead.Name},
		{[]string{"retry", "--all-dead", "--dry-run"}, 0, nil, "would delete " + dead.Name},
		{[]string{"retry", "d", "b"}, 2, nil, `not a dead task of this scheduler: "b"`},
		{[]string{"retry"}, 2, nil, "give the keys of dead tasks, or --all-dead"},
	}
	for _, tc := range tests {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			client := testkit.NewFake(dead.DeepCopy(), backoff.DeepCopy())
			newKube := func(kube.Options) (kube.Interface, string, error) { return client, "default", nil }
			var out, errOut bytes.Buffer
			code := runWith(context.Background(), append(tc.args, "--config", "testdata/jobsched.yaml"), &out, &errOut, newKube)
			if code != tc.code {
				t.Errorf("exit %d, want %d: %s", code, tc.code, errOut.String())
			}
			var deletes []string
			for _, a := range client.Actions() {
				if d, ok := a.(k8stesting.DeleteAction); ok {
					deletes = append(deletes, d.GetName())
				}
			}
			if diff := cmp.Diff(tc.wantDeletes, deletes); diff != "" {
				t.Errorf("deletes (-want +got):\n%s", diff)
			}
			if !strings.Contains(out.String()+testkit.WithErrors(errOut.String()), tc.want) {
				t.Errorf("output lacks %q:\n%s%s", tc.want, out.String(), errOut.String())
			}
		})
	}
}

// TestDryRunRowsFile: rows from standard input; a key twice gets one Job and a skip line; a file without the key
// column is exit 2 naming it.
func TestDryRunRowsFile(t *testing.T) {
	tests := []struct {
		name, stdin string
		code        int
		want        []string // in stdout+stderr
		creates     int
	}{
		{"a key twice", `{"id": "a", "url": "1"}` + "\n" + `{"id": "b", "url": "2"}` + "\n" + `{"id": "a", "url": "3"}` + "\n", 0,
			[]string{"skip", `"a"`, "--rows line 3 repeats the key of line 1: no second Job"}, 2},
		{"no key column", `{"url": "1"}` + "\n", 2, []string{`"id"`}, 0},
		{"invalid UTF-8 is skipped with its line", `{"id": "a", "url": "1"}` + "\n" + `{"id": "b", "url": "x` + "\xff" + `y"}` + "\n" +
			`{"id": "c", "url": "3"}` + "\n", 0, []string{"skip", `"b"`, "--rows line 2 is not valid UTF-8 (byte 22): no Job"}, 2},
		{"a lone surrogate is skipped with its line", `{"id": "a", "url": "1"}` + "\n" + `{"id": "b", "url": "\ud800x"}` + "\n", 0,
			[]string{"skip", `"b"`, `--rows line 2 holds \ud800 (byte 21), a lone half of a UTF-16 surrogate pair: no Job`}, 1},
		{"a byte-order mark", "\ufeff" + `{"id": "a", "url": "1"}` + "\n", 0, nil, 1},
		{"a column twice in one object", `{"id": "a", "url": "1", "url": "2"}` + "\n", 2,
			[]string{`--rows standard input:1: column "url" appears twice in the object`}, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var out, errOut bytes.Buffer
			root := newRoot(&out, &errOut, nil)
			root.SetIn(strings.NewReader(tc.stdin))
			code := runRoot(context.Background(), root, []string{"dry-run", "--offline", "--rows", "-", "--config", "testdata/jobsched.yaml", "-o", "table"}, &errOut)
			if code != tc.code {
				t.Fatalf("exit %d, want %d: %s", code, tc.code, errOut.String())
			}
			for _, w := range tc.want {
				if !strings.Contains(out.String()+testkit.WithErrors(errOut.String()), w) {
					t.Errorf("output lacks %q:\n%s%s", w, out.String(), errOut.String())
				}
			}
			if n := strings.Count(out.String(), "\ncreate "); n != tc.creates {
				t.Errorf("%d creates, want %d:\n%s", n, tc.creates, out.String())
			}
		})
	}
}

// TestDryRunJobsList: -o jobs prints just the planned Jobs as a v1 List, each a complete batch/v1 Job.
func TestDryRunJobsList(t *testing.T) {
	code, out, stderr := runCmd(t, "dry-run", "--offline", "--rows", "testdata/rows.jsonl", "--config", "testdata/jobsched.yaml", "-o", "jobs")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var list struct {
		APIVersion string        `json:"apiVersion"`
		Kind       string        `json:"kind"`
		Items      []batchv1.Job `json:"items"`
	}
	if err := yaml.UnmarshalStrict([]byte(out), &list); err != nil {
		t.Fatalf("%v:\n%s", err, out)
	}
	if list.APIVersion != "v1" || list.Kind != "List" || len(list.Items) != 2 {
		t.Fatalf("%s %s with %d items, want a v1 List of 2 Jobs:\n%s", list.APIVersion, list.Kind, len(list.Items), out)
	}
	for _, j := range list.Items {
		if j.APIVersion != "batch/v1" || j.Kind != "Job" || j.Name == "" || j.Namespace != "batch" {
			t.Errorf("item %s %s %s/%s is not a complete Job", j.APIVersion, j.Kind, j.Namespace, j.Name)
		}
	}
}

// TestStatusWatch: -w reports again every interval until interrupted, and then exits cleanly.
func TestStatusWatch(t *testing.T) {
	cfg, err := config.Load("testdata/jobsched.yaml", "")
	if err != nil {
		t.Fatal(err)
	}
	src, err := rows.ReadFile("testdata/rows.jsonl", "id")
	if err != nil {
		t.Fatal(err)
	}
	cfg.Limits.Capacity = config.CapacityOff
	s := &scheduler.Scheduler{Config: cfg, Kube: testkit.NewFake(), Source: src, Renderer: render.New(cfg, nil), Now: time.Now}
	for _, format := range []string{"table", "yaml"} {
		t.Run(format, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 250*time.Millisecond)
			defer cancel()
			var out bytes.Buffer
			o := &statusOptions{output: format, watch: true, interval: 50 * time.Millisecond}
			if err := o.run(ctx, &out, func(ctx context.Context) (any, error) { return report.StatusOf(ctx, s) }); err != nil {
				t.Fatalf("watch ended with %v", err)
			}
			sep := "\n--- "
			if format == "yaml" {
				sep = "---\n"
			}
			if n := strings.Count(out.String(), sep); n < 2 {
				t.Errorf("%d redraws in 250ms at a 50ms interval, want several:\n%s", n, out.String())
			}
			if n := strings.Count(out.String(), "Backlog:") + strings.Count(out.String(), "backlog:"); n < 3 {
				t.Errorf("%d reports, want at least 3", n)
			}
		})
	}
}
