package cmd

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
	batchv1 "k8s.io/api/batch/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/yaml"

	"github.com/jobsched/jobsched/pkg/kube"
	"github.com/jobsched/jobsched/pkg/kueue"
	"github.com/jobsched/jobsched/pkg/testkit"
)

// -update rewrites the goldens from the code under test. The goldens under testdata/golden pin the outputs of
// configurations without queues: byte for byte, so that adding queues changes nothing for them.
var updateGoldens = flag.Bool("update", false, "rewrite testdata/golden/*/dry-run.* from the code under test")

// TestDryRunGoldens pins `dry-run` byte for byte on single-queue configs of today: the README's minimal config, the
// demo's (with a cluster), one with Kueue and one with env columns, passthrough, a named container and retries. Each
// case is a folder of testdata/golden: jobsched.yaml, job.yaml, rows.jsonl, and cluster.yaml when the pass observes
// a cluster (a v1 List the fake clientset serves; without it the run is --offline). Every output format is pinned:
// -o yaml and -o json (the plan), -o jobs (the Jobs) and the table.
func TestDryRunGoldens(t *testing.T) {
	t.Setenv("GOLDEN_BUCKET", "golden-bucket") // env-retry's env.passthrough copies it
	cases, err := filepath.Glob("testdata/golden/*")
	if err != nil || len(cases) == 0 {
		t.Fatalf("no golden cases: %v", err)
	}
	formats := []struct{ flag, file string }{
		{"yaml", "dry-run.yaml"}, {"json", "dry-run.json"}, {"jobs", "dry-run.jobs.yaml"}, {"table", "dry-run.txt"},
	}
	for _, dir := range cases {
		t.Run(filepath.Base(dir), func(t *testing.T) {
			for _, f := range formats {
				t.Run(f.flag, func(t *testing.T) {
					got := goldenDryRun(t, dir, f.flag)
					path := filepath.Join(dir, f.file)
					if *updateGoldens {
						if err := os.WriteFile(path, got, 0o644); err != nil {
							t.Fatal(err)
						}
						return
					}
					want, err := os.ReadFile(path)
					if err != nil {
						t.Fatalf("%v (run go test ./cmd/ -run TestDryRunGoldens -update to write it)", err)
					}
					if !bytes.Equal(got, want) {
						t.Errorf("dry-run -o %s of %s differs from %s (-want +got):\n%s", f.flag, dir, path, cmp.Diff(string(want), string(got)))
					}
				})
			}
		})
	}
}

// goldenDryRun runs dry-run on one golden case, twice, and fails unless both runs print the same.
func goldenDryRun(t *testing.T, dir, format string) []byte {
	t.Helper()
	args := []string{"dry-run", "--config", filepath.Join(dir, "jobsched.yaml"), "--rows", filepath.Join(dir, "rows.jsonl"),
		"-o", format, "--log-format", "json"}
	objs := goldenCluster(t, dir)
	if objs == nil {
		args = append(args, "--offline")
	}
	var outs [2][]byte
	for i := range outs {
		client := testkit.NewFake(objs...)
		newKube := func(kube.Options) (kube.Interface, string, error) { return client, "default", nil }
		var out, errOut bytes.Buffer
		if code := runWith(context.Background(), args, &out, &errOut, newKube); code != 0 {
			t.Fatalf("exit %d: %s", code, errOut.String())
		}
		outs[i] = out.Bytes()
	}
	if !bytes.Equal(outs[0], outs[1]) {
		t.Fatalf("two runs printed different plans:\n%s", cmp.Diff(string(outs[0]), string(outs[1])))
	}
	return outs[0]
}

// goldenCluster decodes the case's cluster.yaml (a v1 List), or returns nil when it has none.
func goldenCluster(t *testing.T, dir string) []runtime.Object {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(dir, "cluster.yaml"))
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	var list struct {
		Items []json.RawMessage `json:"items"`
	}
	if err := yaml.Unmarshal(data, &list); err != nil {
		t.Fatal(err)
	}
	objs := []runtime.Object{}
	for i, item := range list.Items {
		obj, _, err := scheme.Codecs.UniversalDeserializer().Decode(item, nil, nil)
		if err != nil {
			t.Fatalf("%s: items[%d]: %v", dir, i, err)
		}
		objs = append(objs, obj)
	}
	return objs
}

// TestOfflineDryRunKeepsKueue: `dry-run --offline` of a Kueue config prints the Jobs tick creates: each carries the
// LocalQueue's and its WorkloadPriorityClass's labels, and limits.maxQueued bounds them (an empty cluster holds no
// queued Job, so maxQueued 2 of maxPerTick 3). --offline used to turn capacity off, and with it Kueue.
func TestOfflineDryRunKeepsKueue(t *testing.T) {
	var list batchv1.JobList // -o jobs prints a v1 List
	if err := yaml.Unmarshal(goldenDryRun(t, "testdata/golden/kueue", "jobs"), &list); err != nil {
		t.Fatal(err)
	}
	jobs := list.Items
	want := map[string]string{"train-r1-qlz6truv3rvy": "batch-high", "train-r2-3n372anpsvzc": "batch-low"}
	if len(jobs) != len(want) {
		t.Fatalf("%d Jobs, want %d (limits.maxQueued)", len(jobs), len(want))
	}
	for _, j := range jobs {
		if j.Labels[kueue.QueueLabel] != "team-a" || j.Labels[kueue.PriorityLabel] != want[j.Name] {
			t.Errorf("Job %s: labels %v, want %s: team-a and %s: %s", j.Name, j.Labels, kueue.QueueLabel, kueue.PriorityLabel, want[j.Name])
		}
	}
}
