package scheduler

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	batchv1 "k8s.io/api/batch/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/utils/ptr"

	"github.com/jobsched/jobsched/pkg/config"
	"github.com/jobsched/jobsched/pkg/jobmeta"
	"github.com/jobsched/jobsched/pkg/render"
	"github.com/jobsched/jobsched/pkg/rows"
	"github.com/jobsched/jobsched/pkg/testkit"
)

// deletesOf are the names of the deletes in actions (compact form), in order.
func deletesOf(acts []string) []string {
	var out []string
	for _, a := range acts {
		if f := strings.Fields(a); len(f) > 2 && f[0] == "delete" && f[1] == "jobs" {
			out = append(out, f[2])
		}
	}
	return out
}

// TestDryRunShowsEveryDelete: the plan a dry run prints holds every delete the tick on the same state makes, each
// marked in jobs[] with its reason, the failed attempt a retry supersedes included (issue 28.1: that delete was the
// executor's own, so dry-run showed none while tick counted it).
func TestDryRunShowsEveryDelete(t *testing.T) {
	cfg := testConfig(t, func(c *config.Config) { c.GC.SucceededRetention.Duration = 10 * time.Minute })
	objects := func() []runtime.Object {
		return []runtime.Object{makeJob("due").Finished(batchv1.JobFailed, ago(time.Hour)).Obj(), makeJob("old-ok").Finished(batchv1.JobComplete, ago(time.Hour)).Obj(),
			makeJob("sup").Attempt(2).Finished(batchv1.JobFailed, ago(time.Minute)).Obj(), makeJob("sup").Finished(batchv1.JobFailed, ago(time.Hour)).Obj()}
	}
	run := func(mode Action) (*Plan, []string) {
		client := testkit.NewFake(objects()...)
		s := &Scheduler{workers: 1, Config: cfg, Kube: client, Source: &source{Rows: rowsFor("due", "new")},
			Renderer: render.New(cfg, nil), Now: func() time.Time { return now }}
		res, err := s.Run(context.Background(), mode)
		if err != nil {
			t.Fatal(err)
		}
		return res.Plan, actions(client)
	}
	plan, _ := run(DryRun)
	var planned []string
	for _, d := range plan.Deletes() {
		planned = append(planned, d.Name+" "+d.Delete)
	}
	want := []string{name("due") + " " + DeleteRetried, name("old-ok") + " " + DeleteRetention, name("sup") + " " + DeleteSuperseded}
	if diff := cmp.Diff(want, planned); diff != "" {
		t.Errorf("dry-run's deletes (-want +got):\n%s", diff)
	}
	if c := plan.Creates[0]; c.Supersedes == nil || c.Supersedes.Delete != DeleteRetried {
		t.Errorf("the retry's supersedes = %+v, want the failed attempt with delete %q", c.Supersedes, DeleteRetried)
	}
	_, acts := run(Execute)
	got := deletesOf(acts)
	slices.Sort(got)
	var names []string
	for _, d := range plan.Deletes() {
		names = append(names, d.Name)
	}
	if diff := cmp.Diff(names, got); diff != "" {
		t.Errorf("tick's deletes differ from dry-run's (-dry-run +tick):\n%s", diff)
	}
	if i, j := slices.Index(acts, "create jobs "+render.AttemptName("reports", "due", 2)), slices.Index(acts, "delete jobs "+name("due")+" Background uid=uid-due"); i < 0 || j < i {
		t.Errorf("actions %v: want the retry's create, then its failed attempt's delete", acts)
	}
}

// alreadyExists is the API server's answer to a create whose name is taken.
func alreadyExists(name string) error {
	return apierrors.NewAlreadyExists(schema.GroupResource{Group: "batch", Resource: "jobs"}, name)
}

// TestCreateCollisionIsSkipped: a create that finds its name taken by a Job of another task, which the pass did not
// list (another owner's), is a skip with its reason in the summary, every pass (issue 28.2: the summary lost it).
func TestCreateCollisionIsSkipped(t *testing.T) {
	cfg := testConfig(t, nil)
	foreign := makeJob("other").Name(name("mine")).Scheduler("someone-else").Obj()
	for pass := range 2 {
		client := testkit.NewFake(foreign)
		s := &Scheduler{workers: 1, Config: cfg, Kube: client, Source: &source{Rows: rowsFor("mine", "next")},
			Renderer: render.New(cfg, nil), Now: func() time.Time { return now }}
		res, err := s.Run(context.Background(), Execute)
		if err != nil {
			t.Fatal(err)
		}
		if want := (Summary{Selected: 2, Created: 1, Skipped: 1}); res.Summary != want {
			t.Errorf("pass %d: summary %+v, want %+v", pass, res.Summary, want)
		}
	}
}

// TestEveryRowCountedOnce is issue 29.10's invariant, over random plans and create outcomes: every row the pass
// selected is in exactly one count of pass done, and every delete it tried in deleted or failed.
func TestEveryRowCountedOnce(t *testing.T) {
	for seed := range uint64(300) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			r := rand.New(rand.NewPCG(seed, 29))
			twoQueues := r.IntN(2) == 0
			var cfg *config.Config
			if twoQueues {
				cfg = queuesConfig(t, fmt.Sprintf("maxPerTick: %d, maxActive: 20", 1+r.IntN(6)),
					queue("x", fmt.Sprintf("  limits: {maxPerTick: %d}\n", 1+r.IntN(5)))+queue("y", "  priority: 1\n"),
					"gc: {succeededRetention: 1h}\n")
			} else {
				cfg = testConfig(t, func(c *config.Config) {
					c.Limits.MaxPerTick = ptr.To(1 + r.IntN(8))
					c.GC.SucceededRetention.Duration = time.Hour
				})
			}
			qs := cfg.AllQueues()
			var objects []runtime.Object
			sources := make([]*source, len(qs))
			queues := make([]Queue, len(qs))
			for i := range qs {
				qcfg := cfg.QueueConfig(i)
				var rs []rows.Row
				for k := range r.IntN(8) {
					key := fmt.Sprintf("q%d-%d", i, k)
					switch r.IntN(6) {
					case 0: // cannot make a Job
						rs = append(rs, rows.Row{Key: key, Columns: []rows.Column{{Name: "v", Value: "\xff"}}})
						continue
					case 1: // succeeded and still selected: a worker bug
						objects = append(objects, jobOf(t, qcfg, key, 1, batchv1.JobComplete, time.Minute))
					case 2: // failed, due for its next attempt
						objects = append(objects, jobOf(t, qcfg, key, 1, batchv1.JobFailed, 2*time.Hour))
					}
					rs = append(rs, rowsFor(key)...)
				}
				sources[i] = &source{Rows: rs}
				queues[i] = Queue{Source: sources[i], Renderer: render.New(qcfg, nil)}
			}
			client := testkit.NewFake(objects...)
			outcome := map[string]int{} // by Job name, decided on the first create
			client.PrependReactor("create", "jobs", func(a k8stesting.Action) (bool, runtime.Object, error) {
				j := a.(k8stesting.CreateAction).GetObject().(*batchv1.Job).DeepCopy()
				o, ok := outcome[j.Name]
				if !ok {
					o = r.IntN(4)
					outcome[j.Name] = o
				}
				switch o {
				case 1: // another pass made it
					_ = client.Tracker().Add(j)
					return true, nil, alreadyExists(j.Name)
				case 2: // a Job of another task has the name
					j.Annotations[jobmeta.AnnotationTaskKey] = "someone-else"
					_ = client.Tracker().Add(j)
					return true, nil, alreadyExists(j.Name)
				case 3:
					return true, nil, apierrors.NewInternalError(errors.New("etcd down"))
				}
				return false, nil, nil
			})
			deletes := 0
			client.PrependReactor("delete", "jobs", func(k8stesting.Action) (bool, runtime.Object, error) {
				deletes++
				if r.IntN(3) == 0 {
					return true, nil, apierrors.NewInternalError(errors.New("etcd down"))
				}
				return false, nil, nil
			})
			s := &Scheduler{workers: 1, Config: cfg, Kube: client, Queues: queues, Now: func() time.Time { return now }}
			res, _ := s.Run(context.Background(), Execute)
			sum := res.Summary
			failedDeletes := deletes - sum.Deleted
			rowsCounted := sum.Created + sum.AlreadyPresent + sum.Skipped + (sum.Failed - failedDeletes) + sum.NotCreated + sum.ReadAhead
			if sum.Selected != rowsCounted || failedDeletes < 0 || failedDeletes > sum.Failed {
				t.Errorf("%d rows selected, %d counted; %d deletes tried, %d deleted; summary %+v", sum.Selected, rowsCounted,
					deletes, sum.Deleted, sum)
			}
		})
	}
}

// jobOf is attempt n of key's Job in queue cfg (a config.QueueConfig), finished with cond ago.
func jobOf(t *testing.T, cfg *config.Config, key string, n int, cond batchv1.JobConditionType, d time.Duration) *batchv1.Job {
	t.Helper()
	j, err := render.New(cfg, nil).Job(rowsFor(key)[0], n)
	if err != nil {
		t.Fatal(err)
	}
	fin := makeJob(key).Finished(cond, ago(d))
	j.UID, j.Status = fin.UID, fin.Status
	return j
}

// TestNameTakenByAnotherQueue: a row whose Job name is taken by a Job of another queue (the same key there; say
// made before job.namePrefix changed) gets no Job and is a skip with its reason, every pass, not "already present"
// (issue 29.9: the second queue's row never got a Job, silently).
func TestNameTakenByAnotherQueue(t *testing.T) {
	cfg := queuesConfig(t, "maxPerTick: 5, maxActive: 10", queue("x", "")+queue("y", ""))
	taken := queueJob(t, cfg, 1, "k") // the name queue y gives key k's Job, made by queue x
	taken.Labels[jobmeta.LabelQueue] = "x"
	for pass := range 2 {
		client := testkit.NewFake(taken.DeepCopy())
		s := &Scheduler{workers: 1, Config: cfg, Kube: client, Now: func() time.Time { return now },
			Queues: []Queue{{Source: &source{}, Renderer: render.New(cfg.QueueConfig(0), nil)},
				{Source: &source{Rows: rowsFor("k")}, Renderer: render.New(cfg.QueueConfig(1), nil)}}}
		res, err := s.Run(context.Background(), Execute)
		if err != nil {
			t.Fatal(err)
		}
		want := []Skip{{Queue: "y", Key: "k", Reason: `name collision: Job ` + taken.Name + ` exists for task "k" of queue x`}}
		if diff := cmp.Diff(want, res.Plan.Skipped); diff != "" {
			t.Errorf("pass %d: skips (-want +got):\n%s", pass, diff)
		}
		if sum := res.Summary; sum.Skipped != 1 || sum.Created+sum.AlreadyPresent != 0 {
			t.Errorf("pass %d: summary %+v, want the row skipped", pass, sum)
		}
	}
}

// TestWouldCreateIsThePass: what status says the next pass creates (Decision with the backlogs as its reads: Estimate)
// is what that pass creates when every waiting row can get a Job: the same share, not a second formula (issue 28.5).
func TestWouldCreateIsThePass(t *testing.T) {
	for seed := range uint64(100) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			r := rand.New(rand.NewPCG(seed, 28))
			cfg := queuesConfig(t, fmt.Sprintf("maxPerTick: %d, maxActive: %d", 1+r.IntN(8), 3+r.IntN(8)),
				queue("x", fmt.Sprintf("  priority: %d\n  limits: {maxPerTick: %d}\n", r.IntN(2), 1+r.IntN(5)))+
					queue("y", fmt.Sprintf("  weight: %d\n", 1+r.IntN(3))))
			var objects []runtime.Object
			queues := make([]Queue, 2)
			backlogs := make([]int, 2)
			for i := range queues {
				for k := range r.IntN(3) {
					objects = append(objects, queueJob(t, cfg, i, fmt.Sprintf("run-%d-%d", i, k)))
				}
				backlogs[i] = r.IntN(8)
				var keys []string
				for k := range backlogs[i] {
					keys = append(keys, fmt.Sprintf("q%d-%d", i, k))
				}
				queues[i] = Queue{Source: &source{Rows: rowsFor(keys...)}, Renderer: render.New(cfg.QueueConfig(i), nil)}
			}
			s := &Scheduler{workers: 1, Config: cfg, Kube: testkit.NewFake(objects...), Queues: queues, Now: func() time.Time { return now }}
			obs, err := s.Observe(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			est := &Estimate{Backlog: func(context.Context, *Plan) ([]int, error) { return backlogs, nil }}
			p, _, _, err := Decision(context.Background(), cfg, obs, Cancellation{}, est)
			if err != nil {
				t.Fatal(err)
			}
			want := len(p.Creates)
			res, err := s.Run(context.Background(), DryRun)
			if err != nil {
				t.Fatal(err)
			}
			if got := len(res.Plan.Creates); got != want {
				t.Errorf("status says the next pass creates %d, the pass creates %d (backlogs %v)", want, got, backlogs)
			}
		})
	}
}
