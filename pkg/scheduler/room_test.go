package scheduler

import (
	"context"
	"testing"
	"time"

	"k8s.io/utils/ptr"

	"k8s.io/apimachinery/pkg/runtime"

	"github.com/jobsched/jobsched/pkg/config"
	"github.com/jobsched/jobsched/pkg/render"
	"github.com/jobsched/jobsched/pkg/testkit"
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
			client := testkit.NewFake(tc.objs...)
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

// TestResultRowsWaitAfterTheShare: with queues, rows a queue read for slots the share then gave to the others (read
// ahead) still wait, even though each read returned fewer rows than it asked for: tick --fill-for must go on, not end
// with "the backlog is empty" (the fill bench's five queues stopped after one pass with half their rows waiting).
func TestResultRowsWaitAfterTheShare(t *testing.T) {
	cfg := queuesConfig(t, "maxActive: 4, maxPerTick: 8", queue("a", "")+queue("b", ""))
	s := &Scheduler{workers: 1, Config: cfg, Kube: testkit.NewFake(), Now: func() time.Time { return now }}
	for i, keys := range [][]string{{"a1", "a2", "a3"}, {"b1", "b2", "b3"}} {
		s.Queues = append(s.Queues, Queue{Source: &source{Rows: rowsFor(keys...)}, Renderer: render.New(cfg.QueueConfig(i), nil)})
	}
	res, err := s.Run(context.Background(), Execute)
	if err != nil {
		t.Fatal(err)
	}
	if res.Summary.Created != 4 || res.Summary.ReadAhead != 2 || !res.RowsWait {
		t.Errorf("created %d, read ahead %d, rows wait %v; want 4, 2, true", res.Summary.Created, res.Summary.ReadAhead, res.RowsWait)
	}
}
