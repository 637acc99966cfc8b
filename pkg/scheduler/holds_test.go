package scheduler

import (
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/jobsched/jobsched/pkg/capacity"
	"github.com/jobsched/jobsched/pkg/jobmeta"
)

// TestHolds pins what a queue's unfinished Jobs hold (QueuePlan.Holds, Plan.Holds): per resource, the sum over its
// unfinished Jobs that are not suspended of their pod template's requests as kube-scheduler counts a pod's (an init
// container larger than the rest counts alone), times the pods each runs at once; a finished or suspended Job holds
// nothing, a Job being deleted or whose pod waits still does. With queues:, each queue its own, the install the sum.
func TestHolds(t *testing.T) {
	rl := func(kv ...string) corev1.ResourceList {
		l := corev1.ResourceList{}
		for i := 0; i < len(kv); i += 2 {
			l[corev1.ResourceName(kv[i])] = resource.MustParse(kv[i+1])
		}
		return l
	}
	// initLarger's init container asks 2 cpu, its worker 500m: each pod holds 2.
	initLarger := makeJob("init").Requests(rl("cpu", "500m")).Obj()
	initLarger.Spec.Template.Spec.InitContainers = []corev1.Container{{Name: "prepare", Resources: corev1.ResourceRequirements{Requests: rl("cpu", "2")}}}
	starting := makeJob("starting").Active(0).Requests(rl("cpu", "250m")).Obj()
	jobs := []*batchv1.Job{
		makeJob("one").Requests(rl("cpu", "500m", "memory", "1Gi")).Obj(), // 500m, 1Gi
		makeJob("three").Parallelism(3, 5).Requests(rl("cpu", "1")).Obj(), // 3 pods at once: 3
		starting, // 250m: its pod waits
		makeJob("podless").Active(0).Requests(rl("cpu", "100m")).Obj(),              // 100m: no pod yet
		makeJob("deleting").Deleting(now).Requests(rl("nvidia.com/gpu", "1")).Obj(), // 1 gpu until it is gone
		initLarger, // 2
		makeJob("queued").Suspended().Requests(rl("cpu", "4")).Obj(),
		makeJob("done").Requests(rl("cpu", "8")).Finished(batchv1.JobComplete, ago(0)).Obj(),
		makeJob("failed").Requests(rl("cpu", "16")).Finished(batchv1.JobFailed, ago(0)).Obj(),
	}
	t.Run("no queues:", func(t *testing.T) {
		p := Decide(testConfig(t, nil), observed(jobs, []*corev1.Pod{makePod(starting).Requests(rl("cpu", "250m")).Obj()}))
		if got, want := capacity.Quantities(p.Holds), "cpu=5850m memory=1Gi nvidia.com/gpu=1"; got != want {
			t.Errorf("holds %s, want %s", got, want)
		}
		if p.Queues != nil {
			t.Errorf("queues %v, want none: the top level is the one queue", p.Queues)
		}
	})
	t.Run("queues:", func(t *testing.T) {
		cfg := queuesConfig(t, "maxActive: 100", queue("a", "")+queue("b", "")+queue("idle", ""))
		var qjobs []*batchv1.Job
		for i, j := range jobs {
			j = j.DeepCopy()
			j.Labels[jobmeta.LabelQueue] = []string{"a", "b"}[i%2] // a: one, starting, deleting, queued, failed
			qjobs = append(qjobs, j)
		}
		p := Decide(cfg, observed(qjobs, nil))
		want := []string{"cpu=750m memory=1Gi nvidia.com/gpu=1", "cpu=5100m", ""}
		for i, q := range p.Queues {
			if got := capacity.Quantities(q.Holds); got != want[i] {
				t.Errorf("queue %s holds %q, want %q", q.Name, got, want[i])
			}
		}
		if got := capacity.Quantities(p.Holds); got != "cpu=5850m memory=1Gi nvidia.com/gpu=1" {
			t.Errorf("the install holds %s, want its queues' sum", got)
		}
		if p.Queues[2].Holds != nil {
			t.Errorf("idle holds %v, want nil (omitted)", p.Queues[2].Holds)
		}
	})
}

// TestDemandsShared: the Jobs a pass summarises share one Demand per distinct size, so that keeping every
// unfinished Job's costs a map per size, not per Job.
func TestDemandsShared(t *testing.T) {
	var d demands
	cpu := func(q string) *batchv1.Job {
		return makeJob("j" + q).Requests(corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(q)}).Obj()
	}
	a, b, c := d.summarize(cpu("1")), d.summarize(cpu("1")), d.summarize(cpu("2"))
	same := func(x, y corev1.ResourceList) bool {
		x["probe"] = resource.Quantity{}
		_, ok := y["probe"]
		delete(x, "probe")
		return ok
	}
	if !same(a.Demand, b.Demand) || same(a.Demand, c.Demand) {
		t.Errorf("equal demands share a map: %v; different ones do not: %v", same(a.Demand, b.Demand), !same(a.Demand, c.Demand))
	}
	if got := capacity.Quantities(c.Demand); got != "cpu=2" {
		t.Errorf("the 2-cpu Job's demand %s", got)
	}
	for i := range maxDemands + 1 { // past the bound, it starts afresh: still each Job its own size
		q := resource.NewMilliQuantity(int64(i+1), resource.DecimalSI).String()
		if s := d.summarize(cpu(q)); capacity.Quantities(s.Demand) != "cpu="+q {
			t.Fatalf("job %d: demand %s, want cpu=%s", i, capacity.Quantities(s.Demand), q)
		}
	}
	if len(d.m) > maxDemands {
		t.Errorf("%d demands kept, want at most %d", len(d.m), maxDemands)
	}
}
