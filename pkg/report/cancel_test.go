package report

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"

	"github.com/jobsched/jobsched/pkg/config"
	"github.com/jobsched/jobsched/pkg/render"
	"github.com/jobsched/jobsched/pkg/scheduler"
	"github.com/jobsched/jobsched/pkg/testkit"
)

// failingCancel is a source whose cancel query cannot be asked (the database went away).
type failingCancel struct{ *source }

func (failingCancel) Cancelled(context.Context, []string) ([]string, error) {
	return nil, errors.New("connection refused")
}

// TestStatusCancelQueryFails: one queue's cancel query failing blocks that queue, as in a tick, and status says so
// on that queue and reports the others; it does not fail whole.
func TestStatusCancelQueryFails(t *testing.T) {
	dir := t.TempDir()
	q := func(name string) string {
		return "- name: " + name + "\n  source: {query: q, key: id, cancelQuery: c}\n  job: {template: job.yaml}\n"
	}
	files := map[string]string{
		"jobsched.yaml": "name: batch\nnamespace: work\nlimits: {capacity: \"off\", maxActive: 10}\nqueues:\n" + q("x") + q("y"),
		"job.yaml": "apiVersion: batch/v1\nkind: Job\nspec:\n  template:\n    spec:\n      restartPolicy: Never\n" +
			"      containers: [{name: worker, image: worker:1}]\n",
	}
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	cfg, err := config.Load(filepath.Join(dir, "jobsched.yaml"), "")
	if err != nil {
		t.Fatal(err)
	}
	var objects []runtime.Object
	for i, key := range []string{"x0", "y0"} { // an unfinished Job in each queue: each cancel query is asked
		j, err := render.New(cfg.QueueConfig(i), nil).Job(rowsFor(key)[0], 1)
		if err != nil {
			t.Fatal(err)
		}
		j.UID = types.UID("uid-" + key)
		objects = append(objects, j)
	}
	s := &scheduler.Scheduler{Config: cfg, Kube: testkit.NewFake(objects...), Now: func() time.Time { return now }}
	s.Queues = []scheduler.Queue{
		{Source: failingCancel{&source{Rows: rowsFor("x1")}}, Renderer: render.New(cfg.QueueConfig(0), nil)},
		{Source: &source{Rows: rowsFor("y1")}, Renderer: render.New(cfg.QueueConfig(1), nil)},
	}
	st, err := StatusOf(context.Background(), s)
	if err != nil {
		t.Fatalf("status failed whole: %v", err)
	}
	if len(st.Queues) != 2 {
		t.Fatalf("%d queues, want 2", len(st.Queues))
	}
	x, y := st.Queues[0], st.Queues[1]
	if x.Slots != 0 || !strings.Contains(x.Blocked, "connection refused") {
		t.Errorf("queue x: slots %d, blocked %q; want 0, blocked by its cancel query's failure", x.Slots, x.Blocked)
	}
	if y.Slots == 0 || y.Blocked != "" || y.Unfinished != 1 {
		t.Errorf("queue y: slots %d, blocked %q, unfinished %d; want room, not blocked, its Job", y.Slots, y.Blocked, y.Unfinished)
	}
}

// TestStatusCancelQueryFailsOneQueue: without queues:, the install is that queue: status reports it blocked, with the
// cause, and its Jobs.
func TestStatusCancelQueryFailsOneQueue(t *testing.T) {
	cfg := testConfig(t, nil)
	cfg.Source.CancelQuery = "c"
	s := &scheduler.Scheduler{Config: cfg, Kube: testkit.NewFake(makeJob("r").Active(1).Obj()),
		Source: failingCancel{&source{Rows: rowsFor("w")}}, Renderer: render.New(cfg, nil), Now: func() time.Time { return now }}
	st, err := StatusOf(context.Background(), s)
	if err != nil {
		t.Fatalf("status failed whole: %v", err)
	}
	if st.Slots != 0 || st.Blocked != "reading rows failed (source.cancelQuery: connection refused)" || st.Unfinished != 1 ||
		!strings.Contains(st.Next, "create nothing: reading rows failed") {
		t.Errorf("slots %d, blocked %q, unfinished %d, next %q; want blocked by the cancel query, its Job counted", st.Slots, st.Blocked, st.Unfinished, st.Next)
	}
}
