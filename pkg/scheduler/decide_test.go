package scheduler

import (
	"context"
	"strconv"
	"testing"
	"time"

	"k8s.io/utils/ptr"

	"github.com/google/go-cmp/cmp"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/jobsched/jobsched/pkg/autoscaler"
	"github.com/jobsched/jobsched/pkg/capacity"
	"github.com/jobsched/jobsched/pkg/capacity/autoscale"
	"github.com/jobsched/jobsched/pkg/config"
	"github.com/jobsched/jobsched/pkg/render"
	"github.com/jobsched/jobsched/pkg/testkit"
)

// decided is what a test compares of a plan: every Job's verdict and every number and key list the pass acts on.
type decided struct {
	Jobs                            map[string]string // name → "state attempt [delete: why] [retry at]"
	Unfinished, Unschedulable       int
	UnboundPods, PodlessPods, Slots int
	Limit, Blocked                  string
	Exclude, Succeeded, Dead, Due   []string
	Retry                           map[string]int // key → the attempt its next Job gets
}

// view is what a test compares of the plan of a configuration without queues: the install's Jobs and room, its one
// queue's keys and pods.
func view(p *Plan) decided {
	q := p.parts[0]
	d := decided{Jobs: map[string]string{}, Retry: map[string]int{}, Unfinished: p.Unfinished, Unschedulable: p.Unschedulable,
		UnboundPods: q.unboundPods, PodlessPods: q.podlessPods, Slots: p.Slots, Limit: p.Limit, Blocked: p.Blocked,
		Exclude: p.exclude, Succeeded: q.succeeded, Dead: q.dead, Due: q.due}
	for _, j := range p.Jobs {
		v := string(j.State) + " " + strconv.Itoa(j.Attempt)
		if j.Delete != "" {
			v += " delete: " + j.Delete
		}
		if j.RetryAt != nil {
			v += " retry in " + j.RetryAt.Sub(now).String()
		}
		d.Jobs[j.Name] = v
	}
	for k, last := range q.retry {
		d.Retry[k] = last.Attempt + 1
	}
	return d
}

// observed is what the pass observes of jobs and pods, at now.
func observed(jobs []*batchv1.Job, pods []*corev1.Pod) *Observation {
	obs := &Observation{Now: now}
	for _, j := range jobs {
		obs.Jobs = append(obs.Jobs, SummarizeJob(j))
	}
	for _, p := range pods {
		if sum, ok := capacity.SummarizePod(p); ok {
			obs.Pods = append(obs.Pods, sum)
		}
	}
	return obs
}

// filled is d with empty maps where it has none, as view makes them.
func (d decided) filled() decided {
	if d.Jobs == nil {
		d.Jobs = map[string]string{}
	}
	if d.Retry == nil {
		d.Retry = map[string]int{}
	}
	return d
}

// TestDecide pins each rule of Decide with a case of its own.
func TestDecide(t *testing.T) {
	running := makeJob("r").Obj()
	pod := func() *testkit.PodWrapper { return makePod(running) }
	up := pod().Bound("n1").Phase(corev1.PodRunning).Obj() // running's pod, started on its node
	keyless := makeJob("x").WithoutKey().Obj()
	// unknown is the time of a condition whose lastTransitionTime is zero: the time it finished is unknown.
	var unknown time.Time

	tests := []struct {
		name   string
		mutate func(*config.Config)
		jobs   []*batchv1.Job
		pods   []*corev1.Pod
		want   decided
	}{
		{name: "nothing: maxPerTick bounds the slots",
			want: decided{Slots: 10, Limit: "limits.maxPerTick: 10"}},
		{name: "a running Job holds a slot under maxActive and its key is excluded",
			mutate: func(c *config.Config) { c.Limits.MaxActive = ptr.To(3) }, jobs: []*batchv1.Job{running}, pods: []*corev1.Pod{up},
			want: decided{Jobs: map[string]string{name("r"): "running 1"}, Unfinished: 1, Slots: 2,
				Limit: "limits.maxActive: 1 of 3 unfinished", Exclude: []string{"r"}}},
		{name: "maxActive reached blocks",
			mutate: func(c *config.Config) { c.Limits.MaxActive = ptr.To(1) }, jobs: []*batchv1.Job{running}, pods: []*corev1.Pod{up},
			want: decided{Jobs: map[string]string{name("r"): "running 1"}, Unfinished: 1, Slots: 0,
				Limit: "limits.maxActive: 1 of 1 unfinished", Blocked: "limits.maxActive: 1 of 1 unfinished", Exclude: []string{"r"}}},
		{name: "a Job without pods yet will take room: podless",
			jobs: []*batchv1.Job{makeJob("p").Active(0).Obj()},
			want: decided{Jobs: map[string]string{name("p"): "starting 1"}, Unfinished: 1, PodlessPods: 1, Slots: 9,
				Limit: "limits.maxActive: 1 of 10 unfinished", Exclude: []string{"p"}}},
		{name: "an unbound Pending pod will take room",
			jobs: []*batchv1.Job{running}, pods: []*corev1.Pod{pod().Obj()},
			want: decided{Jobs: map[string]string{name("r"): "starting 1"}, Unfinished: 1, UnboundPods: 1, Slots: 9,
				Limit: "limits.maxActive: 1 of 10 unfinished", Exclude: []string{"r"}}},
		{name: "an Unschedulable pod blocks",
			jobs: []*batchv1.Job{running}, pods: []*corev1.Pod{pod().Unschedulable("no room").Obj()},
			want: decided{Jobs: map[string]string{name("r"): "unschedulable 1"}, Unfinished: 1, Unschedulable: 1, UnboundPods: 1,
				Limit: "1 pod(s) Unschedulable (" + name("r") + ": no room)", Blocked: "1 pod(s) Unschedulable (" + name("r") + ": no room)", Exclude: []string{"r"}}},
		{name: "blockOnUnschedulable false: counted, not blocking",
			mutate: func(c *config.Config) { c.Limits.BlockOnUnschedulable = ptr.To(false) },
			jobs:   []*batchv1.Job{running}, pods: []*corev1.Pod{pod().Unschedulable("no room").Obj()},
			want: decided{Jobs: map[string]string{name("r"): "unschedulable 1"}, Unfinished: 1, Unschedulable: 1, UnboundPods: 1, Slots: 9,
				Limit: "limits.maxActive: 1 of 10 unfinished", Exclude: []string{"r"}}},
		{name: "SchedulingGated is not Unschedulable",
			jobs: []*batchv1.Job{running}, pods: []*corev1.Pod{pod().Gated().Obj()},
			want: decided{Jobs: map[string]string{name("r"): "starting 1"}, Unfinished: 1, UnboundPods: 1, Slots: 9,
				Limit: "limits.maxActive: 1 of 10 unfinished", Exclude: []string{"r"}}},
		{name: "a terminating pod holds nothing and blocks nothing; the pod the Job counts active instead will take room",
			jobs: []*batchv1.Job{running}, pods: []*corev1.Pod{pod().Unschedulable("no room").Deleting(now).Obj()},
			want: decided{Jobs: map[string]string{name("r"): "running 1"}, Unfinished: 1, PodlessPods: 1, Slots: 9,
				Limit: "limits.maxActive: 1 of 10 unfinished", Exclude: []string{"r"}}},
		{name: "a Job without a task key holds a slot, excludes nothing",
			jobs: []*batchv1.Job{keyless}, pods: []*corev1.Pod{makePod(keyless).Bound("n1").Phase(corev1.PodRunning).Obj()},
			want: decided{Jobs: map[string]string{name("x"): "running 1"}, Unfinished: 1, Slots: 9, Limit: "limits.maxActive: 1 of 10 unfinished"}},
		{name: "succeeded past gc.succeededRetention is deleted; its key stays excluded this pass",
			mutate: func(c *config.Config) { c.GC.SucceededRetention = metav1.Duration{Duration: 10 * time.Minute} },
			jobs:   []*batchv1.Job{makeJob("old").Finished(batchv1.JobComplete, ago(11*time.Minute)).Obj(), makeJob("new").Finished(batchv1.JobComplete, ago(9*time.Minute)).Obj()},
			want: decided{Jobs: map[string]string{name("old"): "succeeded 1 delete: " + DeleteRetention, name("new"): "succeeded 1"},
				Slots: 10, Limit: "limits.maxPerTick: 10", Exclude: []string{"new", "old"}, Succeeded: []string{"new", "old"}}},
		{name: "a Job being deleted is not deleted again",
			jobs: []*batchv1.Job{makeJob("old").Finished(batchv1.JobComplete, ago(time.Hour)).Deleting(now).Obj()},
			want: decided{Jobs: map[string]string{name("old"): "succeeded 1"}, Slots: 10, Limit: "limits.maxPerTick: 10",
				Exclude: []string{"old"}, Succeeded: []string{"old"}}},
		{name: "backoff not yet due: kept, excluded",
			jobs: []*batchv1.Job{makeJob("f").Finished(batchv1.JobFailed, ago(30*time.Second)).Obj()},
			want: decided{Jobs: map[string]string{name("f"): "backoff 1 retry in 30s"}, Slots: 10, Limit: "limits.maxPerTick: 10",
				Exclude: []string{"f"}}},
		{name: "backoff due: the row competes for a slot and gets attempt 2; the failed Job is kept until then",
			jobs: []*batchv1.Job{makeJob("f").Finished(batchv1.JobFailed, ago(61*time.Second)).Obj()},
			want: decided{Jobs: map[string]string{name("f"): "backoff 1 retry in -1s"}, Slots: 10, Limit: "limits.maxPerTick: 10",
				Due: []string{"f"}, Retry: map[string]int{"f": 2}}},
		{name: "backoff doubles: attempt 2 waits 2m",
			jobs: []*batchv1.Job{makeJob("f").Attempt(2).Finished(batchv1.JobFailed, ago(90*time.Second)).Obj()},
			want: decided{Jobs: map[string]string{render.AttemptName("reports", "f", 2): "backoff 2 retry in 30s"}, Slots: 10,
				Limit: "limits.maxPerTick: 10", Exclude: []string{"f"}}},
		{name: "backoff is capped at maxBackoff",
			mutate: func(c *config.Config) {
				c.Retry.MaxAttempts = ptr.To(9)
				c.Retry.MaxBackoff = &metav1.Duration{Duration: 5 * time.Minute}
			},
			jobs: []*batchv1.Job{makeJob("f").Attempt(8).Finished(batchv1.JobFailed, ago(6*time.Minute)).Obj()},
			want: decided{Jobs: map[string]string{render.AttemptName("reports", "f", 8): "backoff 8 retry in -1m0s"}, Slots: 10,
				Limit: "limits.maxPerTick: 10", Due: []string{"f"}, Retry: map[string]int{"f": 9}}},
		{name: "the last attempt failed: dead, kept as the record, excluded",
			jobs: []*batchv1.Job{makeJob("f").Attempt(3).Finished(batchv1.JobFailed, ago(2*time.Hour)).Obj()},
			want: decided{Jobs: map[string]string{render.AttemptName("reports", "f", 3): "dead 3"}, Slots: 10,
				Limit: "limits.maxPerTick: 10", Exclude: []string{"f"}, Dead: []string{"f"}}},
		{name: "failed by its podFailurePolicy (FailJob): dead at once",
			jobs: []*batchv1.Job{makeJob("f").Attempt(1).Finished(batchv1.JobFailed, ago(2*time.Hour)).Reason(batchv1.JobReasonPodFailurePolicy).Obj()},
			want: decided{Jobs: map[string]string{name("f"): "dead 1"}, Slots: 10,
				Limit: "limits.maxPerTick: 10", Exclude: []string{"f"}, Dead: []string{"f"}}},
		{name: "failed for another reason with attempts left: backoff",
			jobs: []*batchv1.Job{makeJob("f").Attempt(1).Finished(batchv1.JobFailed, ago(2*time.Hour)).Reason(batchv1.JobReasonDeadlineExceeded).Obj()},
			want: decided{Jobs: map[string]string{name("f"): "backoff 1 retry in -1h59m0s"}, Slots: 10,
				Limit: "limits.maxPerTick: 10", Due: []string{"f"}, Retry: map[string]int{"f": 2}}},
		{name: "retry.deadRetention passed: the record goes",
			mutate: func(c *config.Config) { c.Retry.DeadRetention = metav1.Duration{Duration: time.Hour} },
			jobs:   []*batchv1.Job{makeJob("f").Attempt(3).Finished(batchv1.JobFailed, ago(2*time.Hour)).Obj(), makeJob("g").Attempt(3).Finished(batchv1.JobFailed, ago(30*time.Minute)).Obj()},
			want: decided{Jobs: map[string]string{render.AttemptName("reports", "f", 3): "dead 3 delete: " + DeleteDead,
				render.AttemptName("reports", "g", 3): "dead 3"}, Slots: 10, Limit: "limits.maxPerTick: 10",
				Exclude: []string{"f", "g"}, Dead: []string{"g"}}},
		// A zero lastTransitionTime is an unknown finish time: never past a retention or a backoff (the Job is kept and
		// its task not retried, as the TTL-after-finished controller keeps it); a newer attempt still supersedes it.
		{name: "finished at an unknown time: succeeded, kept past gc.succeededRetention",
			jobs: []*batchv1.Job{makeJob("s").Finished(batchv1.JobComplete, unknown).Obj()},
			want: decided{Jobs: map[string]string{name("s"): "succeeded 1"}, Slots: 10, Limit: "limits.maxPerTick: 10",
				Exclude: []string{"s"}, Succeeded: []string{"s"}}},
		{name: "finished at an unknown time: failed, its backoff never passes",
			jobs: []*batchv1.Job{makeJob("f").Finished(batchv1.JobFailed, unknown).Obj()},
			want: decided{Jobs: map[string]string{name("f"): "backoff 1"}, Slots: 10, Limit: "limits.maxPerTick: 10",
				Exclude: []string{"f"}}},
		{name: "finished at an unknown time: dead, kept past retry.deadRetention",
			mutate: func(c *config.Config) { c.Retry.DeadRetention = metav1.Duration{Duration: time.Second} },
			jobs:   []*batchv1.Job{makeJob("d").Attempt(3).Finished(batchv1.JobFailed, unknown).Obj()},
			want: decided{Jobs: map[string]string{render.AttemptName("reports", "d", 3): "dead 3"}, Slots: 10,
				Limit: "limits.maxPerTick: 10", Exclude: []string{"d"}, Dead: []string{"d"}}},
		{name: "finished at an unknown time: failed without a task key, kept",
			jobs: []*batchv1.Job{makeJob("y").Finished(batchv1.JobFailed, unknown).WithoutKey().Obj()},
			want: decided{Jobs: map[string]string{name("y"): "backoff 1"}, Slots: 10, Limit: "limits.maxPerTick: 10"}},
		{name: "finished at an unknown time: an old attempt is still superseded",
			jobs: []*batchv1.Job{makeJob("f").Attempt(1).Finished(batchv1.JobFailed, unknown).Obj(), makeJob("f").Attempt(2).Finished(batchv1.JobFailed, ago(10*time.Second)).Obj()},
			want: decided{Jobs: map[string]string{render.AttemptName("reports", "f", 1): "superseded 1 delete: " + DeleteSuperseded,
				render.AttemptName("reports", "f", 2): "backoff 2 retry in 1m50s"}, Slots: 10, Limit: "limits.maxPerTick: 10",
				Exclude: []string{"f"}}},
		{name: "an old attempt next to a newer one is deleted",
			jobs: []*batchv1.Job{makeJob("f").Attempt(1).Finished(batchv1.JobFailed, ago(time.Hour)).Obj(), makeJob("f").Attempt(2).Finished(batchv1.JobFailed, ago(10*time.Second)).Obj()},
			want: decided{Jobs: map[string]string{render.AttemptName("reports", "f", 1): "superseded 1 delete: " + DeleteSuperseded,
				render.AttemptName("reports", "f", 2): "backoff 2 retry in 1m50s"}, Slots: 10, Limit: "limits.maxPerTick: 10",
				Exclude: []string{"f"}}},
		{name: "a pass killed between creating attempt 2 and deleting attempt 1: attempt 1 goes, attempt 2 holds the key",
			jobs: []*batchv1.Job{makeJob("f").Attempt(1).Finished(batchv1.JobFailed, ago(time.Hour)).Obj(), makeJob("f").Attempt(2).Active(0).Obj()},
			want: decided{Jobs: map[string]string{render.AttemptName("reports", "f", 1): "superseded 1 delete: " + DeleteSuperseded,
				render.AttemptName("reports", "f", 2): "starting 2"}, Unfinished: 1, PodlessPods: 1, Slots: 9,
				Limit: "limits.maxActive: 1 of 10 unfinished", Exclude: []string{"f"}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg := testConfig(t, tc.mutate)
			if diff := cmp.Diff(tc.want.filled(), view(Decide(cfg, observed(tc.jobs, tc.pods)))); diff != "" {
				t.Errorf("plan (-want +got):\n%s", diff)
			}
		})
	}
}

// TestDecideWaits: with limits.capacity: autoscale the pass asks the autoscaler about its Unschedulable pods
// (Observation.Waits): one it provides a node for does not block (a signal: it waits for the node, and its room is
// counted by the mode); one it says it cannot provide for blocks as today, its Event in the reason; one it said
// nothing of yet waits for its answer until autoscale.AnswerGrace after it turned Unschedulable (WaitDue says when: the
// fill runs a pass then), and blocks from then on, saying so; without the Events read (Waits nil: another mode, or
// no grant) or a time of its condition, every one blocks at once.
func TestDecideWaits(t *testing.T) {
	running := makeJob("r").Obj()
	pod := makePod(running).Unschedulable("0/0 nodes are available").Obj()
	blocked := func(why string) string {
		return "1 pod(s) Unschedulable (" + name("r") + ": 0/0 nodes are available" + why + ")"
	}
	grace := autoscale.AnswerGrace
	nominated := autoscale.Answers{pod.Name: {Provided: true, Event: "Nominated: Pod should schedule on: nodeclaim/batch-x"}}
	waiting := decided{Jobs: map[string]string{name("r"): "starting 1"}, Unfinished: 1, UnboundPods: 1, Slots: 9,
		Limit: "limits.maxActive: 1 of 10 unfinished", Exclude: []string{"r"}}
	blocks := func(why string) decided {
		return decided{Jobs: map[string]string{name("r"): "unschedulable 1"}, Unfinished: 1, Unschedulable: 1, UnboundPods: 1,
			Limit: blocked(why), Blocked: blocked(why), Exclude: []string{"r"}}
	}
	tests := []struct {
		name    string
		waits   autoscale.Answers
		age     time.Duration // how long the pod has been Unschedulable; -1: its condition has no time
		want    decided
		waiting int
		reason  string
		due     time.Duration // WaitDue − now; 0: nil
	}{
		{"Nominated: waits for its node, does not block", nominated, time.Minute, waiting, 1, "waiting for a new node: Nominated: Pod should schedule on: nodeclaim/batch-x", 0},
		{"Nominated at once: waits for its node, no word due", nominated, 0, waiting, 1, "waiting for a new node: Nominated: Pod should schedule on: nodeclaim/batch-x", 0},
		{"at the NodePool's limits: blocks at once, saying so", autoscale.Answers{pod.Name: {Event: "FailedScheduling: all available instance types exceed limits for nodepool"}}, time.Second,
			blocks(" (FailedScheduling: all available instance types exceed limits for nodepool)"), 0, "0/0 nodes are available (FailedScheduling: all available instance types exceed limits for nodepool)", 0},
		{"no answer yet, just Unschedulable: waits for it", autoscale.Answers{}, 0, waiting, 1,
			"waiting for a new node: the autoscaler has not said yet (it blocks from " + now.Add(grace).Format(time.RFC3339) + ")", grace},
		{"no answer yet, a second before it is due: waits for it", autoscale.Answers{}, grace - time.Second, waiting, 1,
			"waiting for a new node: the autoscaler has not said yet (it blocks from " + now.Add(time.Second).Format(time.RFC3339) + ")", time.Second},
		{"no answer when it is due: blocks, saying so", autoscale.Answers{}, grace,
			blocks(" (the autoscaler said nothing of it within " + grace.String() + ")"), 0, "0/0 nodes are available (the autoscaler said nothing of it within " + grace.String() + ")", 0},
		{"no time on its condition: blocks", autoscale.Answers{}, -1,
			blocks(" (the autoscaler said nothing of it within " + grace.String() + ")"), 0, "0/0 nodes are available (the autoscaler said nothing of it within " + grace.String() + ")", 0},
		{"the Events not read (another mode, or no grant): blocks at once", nil, 0, blocks(""), 0, "0/0 nodes are available", 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg := testConfig(t, func(c *config.Config) { c.Limits.Capacity = config.CapacityAutoscale })
			aged := pod.DeepCopy()
			if tc.age >= 0 {
				aged.Status.Conditions[0].LastTransitionTime = metav1.NewTime(now.Add(-tc.age))
			}
			obs := observed([]*batchv1.Job{running}, []*corev1.Pod{aged})
			if tc.waits != nil { // nil: not read, as in another mode
				obs.Waits = tc.waits
			}
			p := Decide(cfg, obs)
			if diff := cmp.Diff(tc.want.filled(), view(p)); diff != "" {
				t.Errorf("plan (-want +got):\n%s", diff)
			}
			if p.Waiting != tc.waiting || p.Jobs[0].Reason != tc.reason {
				t.Errorf("waiting %d, reason %q; want %d, %q", p.Waiting, p.Jobs[0].Reason, tc.waiting, tc.reason)
			}
			var due time.Duration
			if p.WaitDue != nil {
				due = p.WaitDue.Sub(now)
			}
			if due != tc.due || (p.WaitDue != nil) != (tc.due != 0) {
				t.Errorf("word due in %v (%v), want %v", due, p.WaitDue, tc.due)
			}
		})
	}
}

// TestDecideWaitingHoldsTheRoom: a pod in the autoscaler's grace counts against limits.maxPending whatever kept it
// off the nodes (here a node with room for it: a taken hostPort, an affinity): with maxPending 1 that one pod holds
// the template's room, on the nodes too.
func TestDecideWaitingHoldsTheRoom(t *testing.T) {
	running := makeJob("r").Obj()
	pod := makePod(running).Unschedulable("0/1 nodes are available: 1 node(s) didn't have free ports for the requested pod ports.").Obj()
	pod.Status.Conditions[0].LastTransitionTime = metav1.NewTime(now)
	for _, tc := range []struct {
		name       string
		maxPending int
		slots      int
	}{
		{"maxPending 1: the waiting pod holds it", 1, 0},
		{"maxPending 5: room for 4 more waiting, and the node's", 5, 9},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := testConfig(t, func(c *config.Config) {
				c.Limits.Capacity, c.Limits.MaxPending = config.CapacityAutoscale, &tc.maxPending
			})
			obs := observed([]*batchv1.Job{running}, []*corev1.Pod{pod})
			obs.Waits = autoscale.Answers{}
			obs.Capacity = &capacity.Snapshot{Mode: config.CapacityNodes, MaxPending: tc.maxPending,
				Nodes: []capacity.Node{{Name: "n1", Ready: true, Allocatable: corev1.ResourceList{
					corev1.ResourceCPU: resource.MustParse("64"), corev1.ResourceMemory: resource.MustParse("256Gi"), corev1.ResourcePods: resource.MustParse("110")}}},
				Autoscale: &autoscaler.State{Source: autoscaler.Karpenter, Pools: []autoscaler.Pool{{Kind: autoscaler.KindNodePool, Name: "batch"}}}}
			p := Decide(cfg, obs) // capacity fitted: obs holds it
			if p.Waiting != 1 || p.Slots != tc.slots {
				t.Errorf("waiting %d, slots %d (%s); want 1, %d", p.Waiting, p.Slots, p.Limit, tc.slots)
			}
		})
	}
}

// TestPodsNotSeenYet pins that the pods a Job counts in status.active but the pass did not see (its Jobs and its
// pods are read apart; a fill run's two watches deliver in no common order) take room as a podless Job's do, at the
// Job's own size: on a node of 4 cpu with one Job of 2 running, one more Job of 2 fits, not two. A pod seen on its
// node is counted there once, even before its Job's status counts it; one seen unbound, once as unbound.
func TestPodsNotSeenYet(t *testing.T) {
	two := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2")}
	r := makeJob("r").Requests(two).Obj()
	for _, tc := range []struct {
		name  string
		job   *batchv1.Job // r when nil
		pods  []runtime.Object
		sized bool
	}{
		{name: "its pod not seen"},
		{name: "its pod not seen, sized", sized: true},
		{name: "its pod seen on the node", pods: []runtime.Object{makePod(r).Requests(two).Bound("n1").Phase(corev1.PodRunning).Obj()}},
		{name: "its pod seen unbound", pods: []runtime.Object{makePod(r).Requests(two).Obj()}},
		{name: "its pod seen, the Job's status.active not yet", job: makeJob("r").Requests(two).Active(0).Obj(),
			pods: []runtime.Object{makePod(r).Requests(two).Bound("n1").Phase(corev1.PodRunning).Obj()}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := testConfig(t, func(c *config.Config) {
				c.Limits.Capacity = config.CapacityNodes
				c.Template.Spec.Template.Spec.Containers[0].Resources.Requests = two
			})
			rs := rowsFor("a", "b")
			if tc.sized {
				cfg = sizedConfig(t, config.CapacityNodes, "4")
				rs = sizedRows("a", "2", "b", "2")
			}
			job := r
			if tc.job != nil {
				job = tc.job
			}
			objs := append([]runtime.Object{fourCPU(config.CapacityNodes), job}, tc.pods...)
			s := &Scheduler{workers: 1, Config: cfg, Kube: testkit.NewFake(objs...), Source: &source{Rows: rs},
				Renderer: render.New(cfg, nil), Now: func() time.Time { return now }}
			res, err := s.Run(context.Background(), Execute)
			if err != nil {
				t.Fatal(err)
			}
			if n := len(res.Plan.Creates); n != 1 {
				t.Errorf("%d creates (limit %q), want 1: r's pod takes 2 of the node's 4 cpu", n, res.Limit())
			}
		})
	}
}

// TestPodsEndedInAFill pins that in a fill run a pod an earlier pass saw, gone since (it ended; its Job's status
// still counts it active for a moment), takes no room, while one no pass saw still does: on a node of 4 cpu, with
// Job r of 2 cpu whose pod is gone, a pass that saw it plans 2 Jobs of 2 cpu (also once r's status says 0 active,
// before its Complete condition), one that never did plans 1.
func TestPodsEndedInAFill(t *testing.T) {
	two := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2")}
	cfg := testConfig(t, func(c *config.Config) {
		c.Limits.Capacity = config.CapacityNodes
		c.Template.Spec.Template.Spec.Containers[0].Resources.Requests = two
	})
	r := makeJob("r").Requests(two).Obj()
	pod := makePod(r).Requests(two).Bound("n1").Phase(corev1.PodRunning).Obj()
	client := testkit.NewFake(fourCPU(config.CapacityNodes), r, pod)
	pass := func(f *Follow) int {
		t.Helper()
		s := &Scheduler{workers: 1, Config: cfg, Kube: client, Source: &source{Rows: rowsFor("a", "b")},
			Renderer: render.New(cfg, nil), Now: func() time.Time { return now }, Follow: f}
		res, err := s.Run(context.Background(), DryRun)
		if err != nil {
			t.Fatal(err)
		}
		return len(res.Plan.Creates)
	}
	saw := NewFollow()
	defer saw.Stop()
	if n := pass(saw); n != 1 {
		t.Fatalf("with r's pod on the node: %d creates, want 1", n)
	}
	if err := client.Tracker().Delete(corev1.SchemeGroupVersion.WithResource("pods"), pod.Namespace, pod.Name); err != nil {
		t.Fatal(err)
	}
	saw.Stop() // the fake's watches do not deliver the delete, as the API server's would: the next pass lists
	if n := pass(saw); n != 2 {
		t.Errorf("r's pod seen, then ended: %d creates, want 2 (it holds no room)", n)
	}
	if n := pass(saw); n != 2 {
		t.Errorf("the pass after: %d creates, want 2 (r's status still counts it)", n)
	}
	done := makeJob("r").Requests(two).Active(0).Obj() // its status follows, its condition not yet
	if err := client.Tracker().Update(batchv1.SchemeGroupVersion.WithResource("jobs"), done, done.Namespace); err != nil {
		t.Fatal(err)
	}
	saw.Stop()
	if n := pass(saw); n != 2 {
		t.Errorf("r active 0, its pod ended: %d creates, want 2 (no pod of it is to come)", n)
	}
	fresh := NewFollow()
	defer fresh.Stop()
	if n := pass(fresh); n != 1 {
		t.Errorf("r's pod never seen: %d creates, want 1 (it may be on its way)", n)
	}
}
