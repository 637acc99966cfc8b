package scheduler

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/ptr"
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
			got := share(tc.qs, tc.slots, pl, nil).order
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

// TestShareByResources pins the share where sizes differ (weigh.go): a queue's use is its largest share, over
// resources, of what all queues hold and ask this pass; the slot goes to the smallest use / weight, ties to the
// first; what a queue holds counts as what it is given.
func TestShareByResources(t *testing.T) {
	cpu := func(c string) corev1.ResourceList {
		return corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(c)}
	}
	cpuMem := func(c, m string) corev1.ResourceList {
		return corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(c), corev1.ResourceMemory: resource.MustParse(m)}
	}
	times := func(l corev1.ResourceList, n int) []corev1.ResourceList {
		out := make([]corev1.ResourceList, n)
		for i := range out {
			out[i] = l
		}
		return out
	}
	tests := []struct {
		name    string
		weights []int
		holds   []corev1.ResourceList
		asks    [][]corev1.ResourceList
		slots   int
		want    []int
	}{
		{name: "4 CPU against 500m at equal weights: one large to eight small", weights: []int{1, 1},
			holds: []corev1.ResourceList{nil, nil}, asks: [][]corev1.ResourceList{times(cpu("4"), 3), times(cpu("500m"), 20)},
			slots: 11, want: []int{0, 1, 1, 1, 1, 1, 1, 1, 1, 0, 1}},
		{name: "what a queue holds counts: the one holding 4 CPU waits for the other to hold as much", weights: []int{1, 1},
			holds: []corev1.ResourceList{cpu("4"), nil}, asks: [][]corev1.ResourceList{times(cpu("1"), 4), times(cpu("1"), 8)},
			slots: 6, want: []int{1, 1, 1, 1, 0, 1}},
		{name: "weights 2 and 1 by resources", weights: []int{1, 2},
			holds: []corev1.ResourceList{nil, nil}, asks: [][]corev1.ResourceList{times(cpu("2"), 4), times(cpu("2"), 8)},
			slots: 6, want: []int{0, 1, 1, 0, 1, 1}},
		{name: "the dominant resource: memory-heavy Jobs against cpu-heavy ones", weights: []int{1, 1},
			holds: []corev1.ResourceList{nil, nil},
			asks:  [][]corev1.ResourceList{times(cpuMem("1", "8Gi"), 4), times(cpuMem("2", "1Gi"), 4)},
			// totals 12 CPU, 36Gi: one of the first is 8/36 = 0.22 (memory), one of the second 2/12 = 0.17 (cpu)
			slots: 6, want: []int{0, 1, 1, 0, 1, 0}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			qs := make([]shareQueue, len(tc.weights))
			for i, w := range tc.weights {
				qs[i] = shareQueue{Weight: w, Admitted: len(tc.asks[i])}
			}
			got := share(qs, tc.slots, nil, newWeigher(tc.holds, tc.asks)).order
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("order (-want +got):\n%s", diff)
			}
		})
	}
}

// TestWeigherWhereSizesDiffer: the share counts Jobs where every queue's Jobs ask alike, and weighs resources where
// a queue's template asks otherwise, runs more pods per Job, or takes its requests from its rows.
func TestWeigherWhereSizesDiffer(t *testing.T) {
	plan := func(sized bool) *Plan { return &Plan{planState: planState{parts: []*queuePart{{}, {sized: sized}}}} }
	cfg := queuesConfig(t, "maxActive: 10", queue("a", "")+queue("b", ""))
	if plan(false).weigher(cfg) != nil {
		t.Error("two queues of one template: want the count (no weigher)")
	}
	if plan(true).weigher(cfg) == nil {
		t.Error("a queue with job.requestsFrom: want a weigher")
	}
	if (&Plan{planState: planState{parts: []*queuePart{{sized: true}}}}).weigher(cfg) != nil {
		t.Error("one queue: nothing to share, want no weigher")
	}
	for name, change := range map[string]func(j *batchv1.Job){
		"another cpu request": func(j *batchv1.Job) {
			j.Spec.Template.Spec.Containers[0].Resources.Requests = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2")}
		},
		"two pods per Job": func(j *batchv1.Job) { j.Spec.Parallelism, j.Spec.Completions = ptr.To[int32](2), ptr.To[int32](2) },
	} {
		c := queuesConfig(t, "maxActive: 10", queue("a", "")+queue("b", ""))
		for _, q := range c.Queues {
			q.Template.Spec.Template.Spec.Containers[0].Resources.Requests = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}
		}
		if plan(false).weigher(c) != nil {
			t.Fatal("two queues of 1 cpu each: want the count")
		}
		change(c.Queues[1].Template)
		if plan(false).weigher(c) == nil {
			t.Errorf("%s: want a weigher", name)
		}
	}
}

// TestShareHeldPastMaxWait: a queue with job.backfill whose next row does not fit and has waited its maxWait holds
// the room: no queue of its priority or lower gets a slot after it; a higher priority still does; while its rows may
// be passed, the others go on.
func TestShareHeldPastMaxWait(t *testing.T) {
	tests := []struct {
		name     string
		passable []bool
		prio1    int
		want     []int
		holder   int
	}{
		{name: "past maxWait: the queue behind gets nothing", passable: []bool{false, true}, want: nil, holder: 0},
		{name: "a higher priority still goes", passable: []bool{false, true}, prio1: 5, want: []int{1, 1, 1}, holder: 0},
		{name: "passed: the others go on", passable: []bool{true, true}, want: []int{1, 1, 1}, holder: -1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			qs := []shareQueue{{Weight: 1, Admitted: 2, Passable: tc.passable}, {Priority: tc.prio1, Weight: 1, Admitted: 3}}
			res := share(qs, 10, &fakePlacer{room: []int{0, -1}}, nil)
			if diff := cmp.Diff(tc.want, res.order); diff != "" || res.holder != tc.holder {
				t.Errorf("order (-want +got):\n%s; holder %d, want %d", diff, res.holder, tc.holder)
			}
		})
	}
}
