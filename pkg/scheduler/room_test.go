package scheduler

import (
	"context"
	"testing"
	"time"

	"k8s.io/utils/ptr"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/jobsched/jobsched/pkg/config"
	"github.com/jobsched/jobsched/pkg/render"
)

// TestResultRoom: what tick --fill-for reads of a pass: whether room a finishing Job frees bound it (limits.maxActive;
// capacity alike), whether it was blocked for a reason no Job's end changes, whether rows may still wait.
func TestResultRoom(t *testing.T) {
	running := makeJob("r").Obj()
	tests := []struct {
		name                   string
		maxActive, maxPerTick  int
		objs                   []runtime.Object
		rows                   []string
		room, hard, rowsWait   bool
		wantLimit, wantBlocked string
	}{
		{name: "bound by maxPerTick", maxActive: 10, maxPerTick: 2, rows: []string{"a", "b", "c"},
			rowsWait: true, wantLimit: "limits.maxPerTick: 2"},
		{name: "bound by maxActive, rows wait", maxActive: 3, maxPerTick: 10, objs: []runtime.Object{running}, rows: []string{"a", "b", "c"},
			room: true, rowsWait: true, wantLimit: "limits.maxActive: 1 of 3 unfinished"},
		{name: "no room at all: blocked by maxActive, not hard", maxActive: 1, maxPerTick: 10, objs: []runtime.Object{running}, rows: []string{"a"},
			room: true, rowsWait: true, wantLimit: "limits.maxActive: 1 of 1 unfinished", wantBlocked: "limits.maxActive: 1 of 1 unfinished"},
		{name: "fewer rows than room: the backlog bound it", maxActive: 10, maxPerTick: 10, rows: []string{"a"},
			wantLimit: "limits.maxPerTick: 10"},
		{name: "an Unschedulable pod: hard", maxActive: 10, maxPerTick: 10, objs: []runtime.Object{running, makePod(running).Unschedulable("no room").Obj()}, rows: []string{"a"},
			hard: true, wantLimit: "1 pod(s) Unschedulable (" + render.JobName("reports", "r") + ": no room)", wantBlocked: "1 pod(s) Unschedulable (" + render.JobName("reports", "r") + ": no room)"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg := testConfig(t, func(c *config.Config) {
				c.Limits.MaxActive, c.Limits.MaxPerTick = ptr.To(tc.maxActive), ptr.To(tc.maxPerTick)
			})
			client := fake.NewClientset(tc.objs...)
			s := &Scheduler{workers: 1, Config: cfg, Kube: client, Source: &source{Rows: rowsFor(tc.rows...)}, Renderer: render.New(cfg, nil), Now: func() time.Time { return now }}
			res, err := s.Run(context.Background(), Execute)
			if err != nil {
				t.Fatal(err)
			}
			if res.RoomBound() != tc.room || res.HardBlocked() != tc.hard || res.RowsWait != tc.rowsWait || res.Limit() != tc.wantLimit || res.Blocked() != tc.wantBlocked {
				t.Errorf("room %v, hard %v, rows wait %v, limit %q, blocked %q; want %v, %v, %v, %q, %q", res.RoomBound(), res.HardBlocked(), res.RowsWait,
					res.Limit(), res.Blocked(), tc.room, tc.hard, tc.rowsWait, tc.wantLimit, tc.wantBlocked)
			}
		})
	}
}
