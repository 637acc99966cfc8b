package cmd

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestDryRunQueues: with queues:, dry-run prints the install's line and a section per queue, each Job of the JSON
// plan names its queue, and --rows takes a file per queue.
func TestDryRunQueues(t *testing.T) {
	rowsFlag := "reports=testdata/queues/reports.jsonl,exports=testdata/queues/exports.jsonl"
	base := []string{"dry-run", "--offline", "--config", "testdata/queues/jobsched.yaml", "--rows", rowsFlag}
	code, out, stderr := runCmd(t, append(base, "-o", "table")...)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	for _, want := range []string{
		"Scheduler batch in namespace default: 0 unfinished, slots 4 (bound by limits.maxPerTick: 4)\n\nQueue reports (priority 10, weight 1): 0 unfinished, slots 2 (bound by limits.maxPerTick: 2), 2 to create\n",
		"\nQueue exports (priority 0, weight 3): 0 unfinished, slots 4 (bound by limits.maxPerTick: 4), 2 to create\n",
		`"r1"`, `"r3"`, `"e1"`, `"e2"`,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("table output lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, `"r2"`) || strings.Contains(out, `"e3"`) {
		t.Errorf("table output has r2 (its tenant at the cap) or e3 (past the install's 4 slots):\n%s", out)
	}
	code, out, stderr = runCmd(t, append(base, "-o", "json")...)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var plan struct {
		Creates []struct {
			Queue, Key string
			Job        struct {
				Metadata struct{ Labels, Annotations map[string]string }
			}
		}
		Queues []struct {
			Name        string
			Creates     int
			GroupsAtCap []string
		}
	}
	if err := json.Unmarshal([]byte(out), &plan); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, c := range plan.Creates {
		got = append(got, c.Queue+"/"+c.Key+" "+c.Job.Metadata.Labels["jobsched.io/queue"]+" "+c.Job.Metadata.Annotations["jobsched.io/group"])
	}
	// reports first (priority), then exports; the groups are on reports' Jobs only.
	if diff := cmp.Diff([]string{"reports/r1 reports acme", "reports/r3 reports beta", "exports/e1 exports ", "exports/e2 exports "}, got); diff != "" {
		t.Errorf("creates (-want +got):\n%s", diff)
	}
	if len(plan.Queues) != 2 || plan.Queues[0].Name != "reports" || plan.Queues[0].Creates != 2 ||
		!cmp.Equal(plan.Queues[0].GroupsAtCap, []string{"acme", "beta"}) || plan.Queues[1].Creates != 2 {
		t.Errorf("queues = %+v", plan.Queues)
	}
	// The namespace found after the config is read (offline: default; else the kubeconfig context's) reaches every
	// queue's Jobs: a queue's view of the config is taken once it is known.
	code, out, stderr = runCmd(t, append(base, "-o", "jobs")...)
	if code != 0 || strings.Count(out, "namespace: default") != 4 {
		t.Errorf("exit %d, %d Jobs in namespace default, want 4:\n%s%s", code, strings.Count(out, "namespace: default"), out, stderr)
	}
	code, _, stderr = runCmd(t, "dry-run", "--offline", "--config", "testdata/queues/jobsched.yaml", "--rows", "testdata/queues/reports.jsonl")
	if code != 2 || !strings.Contains(stderr, "--rows: with queues: give QUEUE=FILE") {
		t.Errorf("--rows FILE with queues: exit %d, %s; want exit 2 saying QUEUE=FILE", code, stderr)
	}
}
