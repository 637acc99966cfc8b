package scheduler

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

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

// TestResultCapacityBound: a fill run's wait wakes on a node turning usable only after a pass the capacity fit bound
// (cmd's filler): with limits.maxActive binding below the fit, a new node adds no slot. One node holds two pods of
// the template (1900m on 3900m).
func TestResultCapacityBound(t *testing.T) {
	for _, tc := range []struct {
		name      string
		maxActive int
		queues    bool
		want      bool
		wantLimit string
	}{
		{name: "the fit binds", maxActive: 10, want: true, wantLimit: "capacity: "},
		{name: "maxActive binds below the fit", maxActive: 1, wantLimit: "limits.maxActive: 0 of 1 unfinished"},
		{name: "two queues each bound by the fit, the install's maxActive below their sum", maxActive: 3, queues: true, wantLimit: "limits.maxActive: 0 of 3 unfinished"},
		{name: "two queues, the fit binds", maxActive: 10, queues: true, want: true, wantLimit: "a: capacity: "},
	} {
		t.Run(tc.name, func(t *testing.T) {
			node := makeNode("n1").Allocatable(corev1.ResourceCPU, "3900m").Allocatable(corev1.ResourcePods, "110").Obj()
			limits := fmt.Sprintf("maxActive: %d, maxPerTick: 10, capacity: nodes", tc.maxActive)
			var cfg *config.Config
			s := &Scheduler{workers: 1, Kube: testkit.NewFake(node), Now: func() time.Time { return now }}
			if tc.queues {
				cfg = queuesConfig(t, limits, queue("a", "")+queue("b", ""))
				for i, keys := range [][]string{{"a1", "a2", "a3"}, {"b1", "b2", "b3"}} {
					cfg.QueueConfig(i).Template.Spec.Template.Spec.Containers[0].Resources.Requests = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1900m")}
					s.Queues = append(s.Queues, Queue{Source: &source{Rows: rowsFor(keys...)}, Renderer: render.New(cfg.QueueConfig(i), nil)})
				}
			} else {
				cfg = testConfig(t, func(c *config.Config) {
					c.Limits.MaxActive, c.Limits.MaxPerTick, c.Limits.Capacity = ptr.To(tc.maxActive), ptr.To(10), config.CapacityNodes
					c.Template.Spec.Template.Spec.Containers[0].Resources.Requests = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1900m")}
				})
				s.Source, s.Renderer = &source{Rows: rowsFor("a", "b", "c")}, render.New(cfg, nil)
			}
			s.Config = cfg
			res, err := s.Run(context.Background(), Execute)
			if err != nil {
				t.Fatal(err)
			}
			if res.CapacityBound() != tc.want || !res.RoomBound() || !strings.HasPrefix(res.Limit(), tc.wantLimit) {
				t.Errorf("capacity bound %v, room bound %v, limit %q; want %v, true, %q…", res.CapacityBound(), res.RoomBound(), res.Limit(), tc.want, tc.wantLimit)
			}
		})
	}
}
