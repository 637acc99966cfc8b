package scheduler

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/jobsched/jobsched/pkg/config"
	"github.com/jobsched/jobsched/pkg/render"
	"github.com/jobsched/jobsched/pkg/testkit"
)

// TestWorkerBugSaysWhatComes (issue 58, finding 9): the warning of a row still selected after its Job succeeded says
// what the passes do: no second Job while the succeeded Job is kept; when gc.succeededRetention has passed (0s: at
// once) the Job is deleted now, and the next pass creates a second Job for the row, which the warning says.
func TestWorkerBugSaysWhatComes(t *testing.T) {
	for _, tc := range []struct {
		name      string
		retention time.Duration
		want      []Skip
	}{
		{"kept", time.Hour, []Skip{{Key: "done", Reason: "worker bug: the row is still selected although its Job succeeded; " +
			"no second Job while that Job is kept (gc.succeededRetention: 1h)"}}},
		{"deleted now", 0, []Skip{{Key: "done", Reason: "worker bug: the row is still selected although its Job succeeded; " +
			"that Job is deleted now (gc.succeededRetention: 0s), so the next pass creates a second Job for the row"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := testConfig(t, func(c *config.Config) { c.GC.SucceededRetention = metav1.Duration{Duration: tc.retention} })
			client := testkit.NewFake(makeJob("done").Finished(batchv1.JobComplete, ago(time.Minute)).Obj())
			src := &source{Rows: rowsFor("done")}
			s := &Scheduler{workers: 1, Config: cfg, Kube: client, Source: src, Renderer: render.New(cfg, nil), Now: func() time.Time { return now }}
			res, err := s.Run(context.Background(), DryRun)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, res.Plan.Skipped); diff != "" {
				t.Errorf("skipped (-want +got):\n%s", diff)
			}
		})
	}
}
