package scheduler

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/jobsched/jobsched/pkg/capacity/fixed"
	"github.com/jobsched/jobsched/pkg/config"
	"github.com/jobsched/jobsched/pkg/render"
	"github.com/jobsched/jobsched/pkg/testkit"
)

// TestFixedMode: a capacity mode that lives in one package and is registered by one line of a test file
// (modes_test.go) bounds the passes as a shipped one does: with 2 slots and 6 rows, the first pass creates 2 Jobs, the
// next none while both run, and one more once one of them has finished; there are never more than 2 unfinished.
func TestFixedMode(t *testing.T) {
	cfg := testConfig(t, func(c *config.Config) { c.Limits.Capacity = fixed.Name })
	client := testkit.NewFake()
	src := &source{Rows: rowsFor("a", "b", "c", "d", "e", "f")}
	s := &Scheduler{workers: 1, Config: cfg, Kube: client, Source: src, Renderer: render.New(cfg, nil), Now: func() time.Time { return now }}
	ctx := context.Background()
	jobs := client.Clientset.BatchV1().Jobs(cfg.Namespace)
	unfinished := func() (names []string) {
		l, err := jobs.List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for _, j := range l.Items {
			if len(j.Status.Conditions) == 0 {
				names = append(names, j.Name)
			}
		}
		return names
	}
	pass := func(wantCreated int, wantUnfinished []string) {
		t.Helper()
		res, err := s.Run(ctx, Execute)
		if err != nil {
			t.Fatal(err)
		}
		if res.Summary.Created != wantCreated {
			t.Errorf("created %d (slots %d, %s), want %d", res.Summary.Created, res.Plan.Slots, res.Plan.Limit, wantCreated)
		}
		if diff := cmp.Diff(wantUnfinished, unfinished()); diff != "" {
			t.Errorf("unfinished Jobs (-want +got):\n%s", diff)
		}
	}
	pass(2, []string{name("a"), name("b")})
	pass(0, []string{name("a"), name("b")})
	done, err := jobs.Get(ctx, name("a"), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	done.Status.Conditions = []batchv1.JobCondition{{Type: batchv1.JobComplete, Status: corev1.ConditionTrue, LastTransitionTime: metav1.NewTime(now)}}
	if _, err := jobs.UpdateStatus(ctx, done, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	pass(1, []string{name("b"), name("c")})
}
