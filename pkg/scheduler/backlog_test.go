package scheduler

import (
	"context"
	"fmt"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/jobsched/jobsched/pkg/config"
	"github.com/jobsched/jobsched/pkg/render"
)

// TestBacklog: after a tick, the backlog is the rows selected that have no Job: neither those with a Job kept by
// the pass nor those it created; a task due for a retry is still backlog until its next attempt exists.
func TestBacklog(t *testing.T) {
	many := make([]string, BacklogCap+5)
	for i := range many {
		many[i] = fmt.Sprintf("r%05d", i)
	}
	tests := []struct {
		name       string
		jobs       []runtime.Object
		rows       []string
		maxPerTick int
		wantRows   int
		wantCapped bool
	}{
		{"running and created excluded", []runtime.Object{job("run", "", 0)}, []string{"run", "a", "b", "c", "d"}, 2, 2, false},
		{"backoff not due excluded, due counted until created", []runtime.Object{job("wait", batchv1.JobFailed, time.Second), job("due", batchv1.JobFailed, time.Hour)},
			[]string{"wait", "due", "a"}, 0, 2, false},
		{"nothing left", nil, []string{"a", "b"}, 10, 0, false},
		{"capped", nil, many, 1, BacklogCap, true},
		{"exactly the cap is not capped", nil, many[:BacklogCap+1], 1, BacklogCap, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := testConfig(t, func(c *config.Config) { c.Limits.MaxPerTick = ptr(tt.maxPerTick) })
			s := &Scheduler{Config: cfg, Kube: fake.NewClientset(tt.jobs...), Source: &source{rows: rowsFor(tt.rows...)},
				Renderer: render.New(cfg, nil), Now: func() time.Time { return now }}
			p, _, err := s.Run(context.Background(), Tick)
			if err != nil {
				t.Fatal(err)
			}
			rows, capped, err := s.Backlog(context.Background(), p)
			if err != nil {
				t.Fatal(err)
			}
			if rows != tt.wantRows || capped != tt.wantCapped {
				t.Errorf("Backlog = %d, capped %v; want %d, capped %v", rows, capped, tt.wantRows, tt.wantCapped)
			}
		})
	}
}
