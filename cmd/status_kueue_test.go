package cmd

import (
	"bytes"
	"strings"
	"testing"

	kueuemode "github.com/jobsched/jobsched/pkg/capacity/kueue"
	"github.com/jobsched/jobsched/pkg/kueue"
	"github.com/jobsched/jobsched/pkg/report"
	"github.com/jobsched/jobsched/pkg/scheduler"
)

// TestPrintStatusKueue: the table shows the Kueue line (queued against maxQueued, the LocalQueue's counts, or why
// Kueue's objects could not be read) and each queued Job with Kueue's reason.
func TestPrintStatusKueue(t *testing.T) {
	queued := scheduler.JobStatus{Name: "r-a-1", Key: "a", Attempt: 1, State: scheduler.StateQueued, Reason: "no quota reserved (Pending: insufficient unused quota for cpu in flavor default)"}
	tests := []struct {
		name string
		k    *kueuemode.Status
		want []string
	}{
		{"counts", &kueuemode.Status{MaxQueued: 3, Queued: 1, LocalQueue: &kueue.LocalQueue{Name: "team-a", Found: true, ClusterQueue: "cq", Pending: 1, Admitted: 2}},
			[]string{"0 unschedulable, 1 queued, 0 succeeded", "1 queued (limits.maxQueued 3); LocalQueue team-a (ClusterQueue cq): 1 pending, 0 reserving, 2 admitted",
				"Queued in Kueue", `r-a-1  "a"   no quota reserved (Pending: insufficient unused quota for cpu in flavor default)`}},
		{"no LocalQueue", &kueuemode.Status{MaxQueued: 3, Queued: 1, LocalQueue: &kueue.LocalQueue{Name: "team-a"}},
			[]string{"LocalQueue team-a does not exist: Kueue admits none of the Jobs"}},
		{"no RBAC", &kueuemode.Status{MaxQueued: 3, Queued: 1, Unavailable: "cannot list workloads (grant get and list …)"},
			[]string{"1 queued (limits.maxQueued 3); cannot list workloads (grant get and list …)"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var out bytes.Buffer
			st := &report.Status{Scheduler: "r", Namespace: "batch", Work: report.Work{States: map[scheduler.State]int{scheduler.StateQueued: 1},
				Slots: 2, Limit: "limits.maxQueued: 1 of 3 queued"}, Mode: tc.k.Section(), Jobs: []scheduler.JobStatus{queued}}
			if err := printStatus(&out, st); err != nil {
				t.Fatal(err)
			}
			for _, w := range tc.want {
				if !strings.Contains(out.String(), w) {
					t.Errorf("the table lacks %q:\n%s", w, out.String())
				}
			}
		})
	}
}
