package scheduler

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

// fakePlacer places queue i's Jobs while it has room: room[i] Jobs (-1: without end), and records the calls.
type fakePlacer struct {
	room  []int
	calls []int
}

func (f *fakePlacer) Place(i int) bool {
	f.calls = append(f.calls, i)
	if f.room[i] == 0 {
		return false
	}
	f.room[i]--
	return true
}

// TestShare pins each rule of share: priority first, weights by (unfinished + kept) / weight, a queue whose next Job
// does not fit is out for the pass, ties by config order.
func TestShare(t *testing.T) {
	q := func(prio, weight, unfinished, admitted int) shareQueue {
		return shareQueue{Priority: prio, Weight: weight, Unfinished: unfinished, Admitted: admitted}
	}
	tests := []struct {
		name      string
		qs        []shareQueue
		slots     int
		room      []int // nil: no placer
		want      []int
		wantCalls []int // nil: not checked
	}{
		{"one queue takes what it admitted", []shareQueue{q(0, 1, 0, 3)}, 5, nil, []int{0, 0, 0}, nil},
		{"the slots bound it", []shareQueue{q(0, 1, 0, 3)}, 2, nil, []int{0, 0}, nil},
		{"no slots", []shareQueue{q(0, 1, 0, 3)}, 0, nil, nil, nil},
		{"priority first, whatever the order", []shareQueue{q(0, 1, 0, 3), q(10, 1, 0, 2)}, 4, nil, []int{1, 1, 0, 0}, nil},
		{"higher priority even with more unfinished", []shareQueue{q(0, 1, 0, 3), q(1, 1, 50, 3)}, 3, nil, []int{1, 1, 1}, nil},
		{"a queue with nothing admitted leaves its share", []shareQueue{q(10, 1, 0, 0), q(0, 1, 0, 2)}, 3, nil, []int{1, 1}, nil},
		{"equal weights alternate, ties to the first", []shareQueue{q(0, 1, 0, 3), q(0, 1, 0, 3)}, 4, nil, []int{0, 1, 0, 1}, nil},
		{"weights 3:1", []shareQueue{q(0, 3, 0, 10), q(0, 1, 0, 10)}, 8, nil, []int{0, 1, 0, 0, 0, 1, 0, 0}, nil},
		{"unfinished Jobs count: the queue behind catches up", []shareQueue{q(0, 1, 4, 5), q(0, 1, 0, 5)}, 6, nil, []int{1, 1, 1, 1, 0, 1}, nil},
		{"weights compare by cross-multiplying: 2/3 < 1/1", []shareQueue{q(0, 1, 1, 5), q(0, 3, 2, 5)}, 1, nil, []int{1}, nil},
		{"a queue that does not fit is out, the others go on", []shareQueue{q(10, 1, 0, 5), q(0, 1, 0, 5)}, 4, []int{1, -1},
			[]int{0, 1, 1, 1}, []int{0, 0, 1, 1, 1}},
		{"out for the pass: not asked again", []shareQueue{q(0, 1, 0, 5), q(0, 1, 0, 5)}, 5, []int{0, 2},
			[]int{1, 1}, []int{0, 1, 1, 1}},
		{"nothing fits", []shareQueue{q(0, 1, 0, 5), q(0, 1, 0, 5)}, 5, []int{0, 0}, nil, []int{0, 1}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var pl Placer
			var fp *fakePlacer
			if tc.room != nil {
				fp = &fakePlacer{room: append([]int(nil), tc.room...)}
				pl = fp
			}
			got := share(tc.qs, tc.slots, pl).order
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("order (-want +got):\n%s", diff)
			}
			if tc.wantCalls != nil {
				if diff := cmp.Diff(tc.wantCalls, fp.calls); diff != "" {
					t.Errorf("Place calls (-want +got):\n%s", diff)
				}
			}
		})
	}
}
