package cmd

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	batchv1 "k8s.io/api/batch/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/jobsched/jobsched/pkg/config"
	"github.com/jobsched/jobsched/pkg/render"
	"github.com/jobsched/jobsched/pkg/report"
	"github.com/jobsched/jobsched/pkg/scheduler"
	"github.com/jobsched/jobsched/pkg/testkit"
)

// TestStatusGoldens pins `status` (the table and -o json|yaml) byte for byte for a scheduler of one queue with a Job
// in each state: it was written by the code of before several queues (issue 20), and a configuration without
// queues: must keep it. -update rewrites testdata/golden-status from the code under test.
func TestStatusGoldens(t *testing.T) {
	st := goldenStatus(t, nil)
	for _, f := range []struct{ format, file string }{{"table", "status.txt"}, {"json", "status.json"}, {"yaml", "status.yaml"}} {
		t.Run(f.format, func(t *testing.T) {
			var out bytes.Buffer
			var err error
			if f.format == "table" {
				err = printStatus(&out, st)
			} else {
				err = printDoc(&out, f.format, st)
			}
			if err != nil {
				t.Fatal(err)
			}
			checkGolden(t, filepath.Join("testdata", "golden-status", f.file), out.Bytes())
		})
	}
}

// goldenStatus is the status of the scheduler "reports" (testkit.Config changed by mutate) over a fake cluster with
// a running Job, one starting whose pod is Unschedulable, a succeeded one (deleted by the next pass), one in backoff
// and a dead one, and rows for each of them and two more.
func goldenStatus(t *testing.T, mutate func(*config.Config)) *report.Status {
	t.Helper()
	cfg := testkit.Config(t, mutate)
	stuck := testkit.Job("stuck", "", 0)
	stuck.Status.Active = 0
	client := fake.NewClientset(
		testkit.Job("run", "", 0), stuck, testkit.PendingPod(stuck, true),
		testkit.Job("ok", batchv1.JobComplete, time.Hour),
		testkit.Attempt("b", 1, batchv1.JobFailed, time.Second, "DeadlineExceeded"),
		testkit.Attempt("d", 3, batchv1.JobFailed, time.Hour, ""))
	s := &scheduler.Scheduler{Config: cfg, Kube: client, Source: &testkit.Source{Rows: testkit.RowsFor("run", "stuck", "b", "d", "w1", "w2")},
		Renderer: render.New(cfg, nil), Now: func() time.Time { return testkit.Now }}
	st, err := report.StatusOf(context.Background(), s)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// checkGolden compares got with the file at path byte for byte, or rewrites the file with -update.
func checkGolden(t *testing.T, path string, got []byte) {
	t.Helper()
	if *updateGoldens {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (go test ./cmd/ -update writes it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs (-want +got):\n%s", path, cmp.Diff(string(want), string(got)))
	}
}
