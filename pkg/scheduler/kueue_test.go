package scheduler

import (
	"testing"

	"k8s.io/utils/ptr"

	"github.com/google/go-cmp/cmp"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/jobsched/jobsched/pkg/capacity"
	"github.com/jobsched/jobsched/pkg/config"
	"github.com/jobsched/jobsched/pkg/jobmeta"
	"github.com/jobsched/jobsched/pkg/kueue"
)

// kueueMode is testConfig's mutation for limits.capacity: kueue with limits.maxQueued n.
func kueueMode(n int, more ...func(*config.Config)) func(*config.Config) {
	return func(c *config.Config) {
		c.Limits.Capacity, c.Limits.MaxQueued, c.Kueue = config.CapacityKueue, ptr.To(n), &config.Kueue{LocalQueue: "team-a"}
		for _, m := range more {
			m(c)
		}
	}
}

// TestDecideKueue pins each rule of the Kueue mode with a case of its own: a suspended Job is queued (unfinished,
// its key excluded, no attempt spent), maxQueued bounds the slots, jobsched's own fit is off, and an Unschedulable
// pod of an admitted Job still blocks.
func TestDecideKueue(t *testing.T) {
	unsched := makePod(makeJob("r").Obj()).Unschedulable("0/1 nodes are available: 1 Insufficient cpu.").Obj()
	evicted := makeJob("ev").Suspended().Label(jobmeta.LabelAttempt, "1").Obj()
	full := &capacity.Snapshot{} // no node: jobsched's own fit would be 0
	tests := []struct {
		name   string
		mutate func(*config.Config)
		jobs   []*batchv1.Job
		pods   []*corev1.Pod
		cap    *capacity.Snapshot
		want   decided
	}{
		{name: "maxQueued bounds the slots by the Jobs already queued",
			mutate: kueueMode(3), jobs: []*batchv1.Job{makeJob("r").Obj(), makeJob("q").Suspended().Obj()},
			pods: []*corev1.Pod{runningPod("r")},
			want: decided{Jobs: map[string]string{name("r"): "running 1", name("q"): "queued 1"}, Unfinished: 2, Slots: 2,
				Limit: "limits.maxQueued: 1 of 3 queued", Exclude: []string{"q", "r"}}},
		{name: "maxQueued reached blocks",
			mutate: kueueMode(2), jobs: []*batchv1.Job{makeJob("a").Suspended().Obj(), makeJob("b").Suspended().Obj()},
			want: decided{Jobs: map[string]string{name("a"): "queued 1", name("b"): "queued 1"}, Unfinished: 2,
				Limit: "limits.maxQueued: 2 of 2 queued", Blocked: "limits.maxQueued: 2 of 2 queued", Exclude: []string{"a", "b"}}},
		{name: "maxActive binds before maxQueued when it leaves less",
			mutate: kueueMode(5, func(c *config.Config) { c.Limits.MaxActive = ptr.To(3) }), jobs: []*batchv1.Job{makeJob("r").Obj(), makeJob("s").Obj(), makeJob("q").Suspended().Obj()},
			pods: []*corev1.Pod{runningPod("r"), runningPod("s")},
			want: decided{Jobs: map[string]string{name("r"): "running 1", name("s"): "running 1", name("q"): "queued 1"}, Unfinished: 3,
				Limit: "limits.maxActive: 3 of 3 unfinished", Blocked: "limits.maxActive: 3 of 3 unfinished", Exclude: []string{"q", "r", "s"}}},
		{name: "maxQueued defaults to maxPerTick",
			mutate: kueueMode(0, func(c *config.Config) { c.Limits.MaxQueued, c.Limits.MaxPerTick = nil, ptr.To(4) }), jobs: []*batchv1.Job{makeJob("q").Suspended().Obj()},
			want: decided{Jobs: map[string]string{name("q"): "queued 1"}, Unfinished: 1, Slots: 3,
				Limit: "limits.maxQueued: 1 of 4 queued", Exclude: []string{"q"}}},
		{name: "jobsched's own fit is off: Kueue decides what fits",
			mutate: kueueMode(3), cap: full,
			want: decided{Slots: 3, Limit: "limits.maxQueued: 0 of 3 queued"}},
		{name: "an admitted Job's Unschedulable pod still blocks",
			mutate: kueueMode(3), jobs: []*batchv1.Job{makeJob("r").Obj()}, pods: []*corev1.Pod{unsched},
			want: decided{Jobs: map[string]string{name("r"): "unschedulable 1"}, Unfinished: 1, Unschedulable: 1, UnboundPods: 1,
				Limit:   "1 pod(s) Unschedulable (" + name("r") + ": 0/1 nodes are available: 1 Insufficient cpu.)",
				Blocked: "1 pod(s) Unschedulable (" + name("r") + ": 0/1 nodes are available: 1 Insufficient cpu.)", Exclude: []string{"r"}}},
		{name: "an evicted and requeued Job is queued: no failure, no next attempt, its key excluded",
			mutate: kueueMode(3), jobs: []*batchv1.Job{evicted},
			want: decided{Jobs: map[string]string{name("ev"): "queued 1"}, Unfinished: 1, Slots: 2,
				Limit: "limits.maxQueued: 1 of 3 queued", Exclude: []string{"ev"}}},
		{name: "outside the Kueue mode a suspended Job is queued too, makes no pod, and maxQueued binds nothing",
			jobs: []*batchv1.Job{makeJob("q").Suspended().Obj()},
			want: decided{Jobs: map[string]string{name("q"): "queued 1"}, Unfinished: 1, Slots: 9,
				Limit: "limits.maxActive: 1 of 10 unfinished", Exclude: []string{"q"}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg := testConfig(t, tc.mutate)
			obs := observed(tc.jobs, tc.pods)
			obs.Capacity = tc.cap
			p := Decide(cfg, obs) // capacity is fitted when obs holds it: in this mode it must not be
			if diff := cmp.Diff(tc.want.filled(), view(p)); diff != "" {
				t.Errorf("plan (-want +got):\n%s", diff)
			}
			if p.Capacity != nil {
				t.Errorf("capacity was fitted in the Kueue mode: %+v", p.Capacity)
			}
		})
	}
}

// TestQueuedReason: a queued Job's reason is Kueue's when status has read the Workloads, and says what is known
// when it has not (a tick reads none; without RBAC status cannot).
func TestQueuedReason(t *testing.T) {
	q := makeJob("q").Suspended().Obj()
	evicted := &kueue.Workload{Name: "job-q-1", Job: q.UID, Conditions: []kueue.Condition{
		{Type: kueue.CondEvicted, Status: "True", Reason: "Preempted", Message: "Preempted to accommodate a workload due to prioritization", At: now},
		{Type: kueue.CondQuotaReserved, Status: "False", Reason: "Pending", Message: "insufficient unused quota for cpu in flavor default", At: now},
	}}
	tests := []struct {
		name         string
		snap         *kueue.Snapshot
		want, wantWl string
	}{
		{"a tick reads no Workload", nil, "suspended: waiting for Kueue to admit it", ""},
		{"no RBAC", &kueue.Snapshot{Unavailable: "cannot list workloads"}, "suspended (Kueue's Workloads cannot be read)", ""},
		{"no Workload yet", &kueue.Snapshot{}, "no Workload yet: Kueue has not seen the Job (is Kueue running, and does it manage batch/job?)", ""},
		{"evicted", &kueue.Snapshot{Workloads: map[types.UID]*kueue.Workload{q.UID: evicted}},
			"evicted (Preempted: Preempted to accommodate a workload due to prioritization); no quota reserved (Pending: insufficient unused quota for cpu in flavor default)", "job-q-1"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := Decide(testConfig(t, kueueMode(3)), &Observation{Now: now, Jobs: []JobSummary{SummarizeJob(q)}, Details: details(tc.snap)})
			if got := p.Jobs[0]; got.Reason != tc.want || got.Holder != tc.wantWl || got.State != StateQueued {
				t.Errorf("queued Job: state %s, reason %q, workload %q; want queued, %q, %q", got.State, got.Reason, got.Holder, tc.want, tc.wantWl)
			}
		})
	}
}

// details is what the Kueue mode's Inspect returns of snap (nil: nothing read, as in a tick).
func details(snap *kueue.Snapshot) capacity.Details {
	if snap == nil {
		return nil
	}
	return snap
}
