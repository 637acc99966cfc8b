package scheduler

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/utils/ptr"

	"github.com/jobsched/jobsched/pkg/config"
	"github.com/jobsched/jobsched/pkg/render"
	"github.com/jobsched/jobsched/pkg/testkit"
)

// TestFollowWait: what wakes a fill run's wait: a Job unfinished at the observation, or created since, that
// finishes or is deleted before it finished; not a Job already finished when observed (deleted by a pass), nor a
// new Job, nor a change that finishes nothing.
func TestFollowWait(t *testing.T) {
	jobs := schema.GroupVersionResource{Group: "batch", Version: "v1", Resource: "jobs"}
	at := func(j *batchv1.Job, rv string) *batchv1.Job { j.ResourceVersion = rv; return j }
	for _, tc := range []struct {
		name    string
		changes func(c *testkit.Fake) error
		want    string // the Job that wakes the wait; "": none (the wait ends with its context)
	}{
		{name: "a finished Job deleted, a new one, one relabelled: nothing ends", changes: func(c *testkit.Fake) error {
			if err := c.Tracker().Delete(jobs, "batch", name("done")); err != nil {
				return err
			}
			if err := c.Tracker().Add(at(makeJob("new").Obj(), "8")); err != nil {
				return err
			}
			return c.Tracker().Update(jobs, at(makeJob("runs").Label("x", "y").Obj(), "9"), "batch")
		}},
		{name: "a running Job completes", want: name("runs"), changes: func(c *testkit.Fake) error {
			return c.Tracker().Update(jobs, at(makeJob("runs").Finished(batchv1.JobComplete, now).Obj(), "8"), "batch")
		}},
		{name: "a running Job is deleted unfinished", want: name("runs"), changes: func(c *testkit.Fake) error {
			return c.Tracker().Delete(jobs, "batch", name("runs"))
		}},
		{name: "a Job created since fails", want: name("new"), changes: func(c *testkit.Fake) error {
			if err := c.Tracker().Add(at(makeJob("new").Obj(), "8")); err != nil {
				return err
			}
			return c.Tracker().Update(jobs, at(makeJob("new").Finished(batchv1.JobFailed, now).Obj(), "9"), "batch")
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := testkit.NewFake(at(makeJob("runs").Obj(), "5"), at(makeJob("done").Finished(batchv1.JobComplete, ago(time.Hour)).Obj(), "6"))
			c.PrependReactor("list", "jobs", func(k8stesting.Action) (bool, runtime.Object, error) {
				obj, err := c.Tracker().List(jobs, batchv1.SchemeGroupVersion.WithKind("Job"), "batch")
				if err == nil {
					obj.(*batchv1.JobList).ResourceVersion = "7" // the fake sets none, and a watch needs one
				}
				return true, obj, err
			})
			watching := make(chan struct{}) // the fake's watch sends only what happens after it starts
			c.PrependWatchReactor("jobs", func(k8stesting.Action) (bool, watch.Interface, error) {
				w, err := c.Tracker().Watch(jobs, "batch")
				close(watching)
				return true, w, err
			})
			s := &Scheduler{Config: testConfig(t, nil), Kube: c, Now: func() time.Time { return now }, Follow: NewFollow()}
			defer s.Follow.Stop()
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			if _, err := s.observe(ctx, false); err != nil {
				t.Fatal(err)
			}
			<-watching
			if err := tc.changes(c); err != nil {
				t.Fatal(err)
			}
			wctx := ctx
			if tc.want == "" {
				// Nothing must wake it: after the changes have been applied, its context ends.
				var cancelWait context.CancelFunc
				wctx, cancelWait = context.WithCancel(ctx)
				go func() {
					_ = s.Follow.changes.Until(ctx, func() bool { return s.Follow.jobs.Reached("9") })
					cancelWait()
				}()
			}
			got, err := s.Follow.Wait(wctx, WakeOn{Nodes: true})
			if got != tc.want || (tc.want != "" && err != nil) || (tc.want == "" && err == nil) {
				t.Errorf("woken by %q (%v), want %q", got, err, tc.want)
			}
		})
	}
}

// TestFollowWaitNode: a node that turns usable after the observation wakes the wait, with its name, only when the
// last pass said a node may add room (WakeOn.Nodes: the capacity fit bound it); one of our pods bound to a node only
// when the fit awaited that (WakeOn.Binds); otherwise only a Job's end does.
func TestFollowWaitNode(t *testing.T) {
	listAt := func(c *testkit.Fake, gvr schema.GroupVersionResource, kind schema.GroupVersionKind) {
		c.PrependReactor("list", gvr.Resource, func(a k8stesting.Action) (bool, runtime.Object, error) {
			obj, err := c.Tracker().List(gvr, kind, a.GetNamespace())
			if err != nil {
				return true, nil, err
			}
			l, err := meta.ListAccessor(obj)
			if err == nil {
				l.SetResourceVersion("7") // the fake sets none, and a watch needs one
			}
			return true, obj, err
		})
	}
	nodes := schema.GroupVersionResource{Version: "v1", Resource: "nodes"}
	pods := schema.GroupVersionResource{Version: "v1", Resource: "pods"}
	for _, tc := range []struct {
		on        WakeOn
		bind, end bool   // the change is our pod bound to n1, or (end) our pod on n1 Succeeded (else a node n2 added)
		want      string // "": not woken (the wait ends with its context)
	}{
		{on: WakeOn{Nodes: true}, want: "node/n2"},
		{on: WakeOn{}},
		{on: WakeOn{Binds: true}},
		{on: WakeOn{Binds: true}, bind: true, want: "pod/n1"},
		{on: WakeOn{Nodes: true}, bind: true},
		{on: WakeOn{Ends: true}, end: true, want: "left/n1"},
		{on: WakeOn{Nodes: true, Binds: true}, end: true},
		{on: WakeOn{Ends: true}, bind: true},
	} {
		t.Run(fmt.Sprintf("%+v bind %v end %v", tc.on, tc.bind, tc.end), func(t *testing.T) {
			cfg := testConfig(t, func(c *config.Config) { c.Limits.Capacity = config.CapacityNodes })
			job := makeJob("runs").Obj()
			job.ResourceVersion = "5"
			pod := makePod(job).Obj()
			pod.ResourceVersion = "6"
			if tc.end {
				pod = makePod(job).Bound("n1").Phase(corev1.PodRunning).Obj()
				pod.ResourceVersion = "6"
			}
			c := testkit.NewFake(job, pod, makeNode("n1").Allocatable(corev1.ResourceCPU, "4").Obj())
			listAt(c, schema.GroupVersionResource{Group: "batch", Version: "v1", Resource: "jobs"}, batchv1.SchemeGroupVersion.WithKind("Job"))
			listAt(c, pods, corev1.SchemeGroupVersion.WithKind("Pod"))
			listAt(c, nodes, corev1.SchemeGroupVersion.WithKind("Node"))
			watching := make(chan struct{}, 2) // the fake's watch sends only what happens after it starts
			for _, gvr := range []schema.GroupVersionResource{nodes, pods} {
				c.PrependWatchReactor(gvr.Resource, func(a k8stesting.Action) (bool, watch.Interface, error) {
					w, err := c.Tracker().Watch(gvr, a.GetNamespace())
					watching <- struct{}{}
					return true, w, err
				})
			}
			s := &Scheduler{workers: 1, Config: cfg, Kube: c, Source: &source{Rows: rowsFor("b")}, Renderer: render.New(cfg, nil),
				Now: func() time.Time { return now }, Follow: NewFollow()}
			defer s.Follow.Stop()
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			if _, err := s.Run(ctx, DryRun); err != nil { // a pass: its observation, then capacity's (the nodes)
				t.Fatal(err)
			}
			for range 2 {
				select {
				case <-watching:
				case <-ctx.Done():
					t.Fatal("the nodes and the pods were not watched")
				}
			}
			changed := func() bool { n, _ := s.Follow.capacity.NodesUsable(); return n > 0 }
			switch {
			case tc.end:
				ended := pod.DeepCopy()
				ended.Status.Phase, ended.ResourceVersion = corev1.PodSucceeded, "8"
				if err := c.Tracker().Update(pods, ended, ended.Namespace); err != nil {
					t.Fatal(err)
				}
				changed = func() bool { n, _ := s.Follow.capacity.OursLeft(); return n > 0 }
			case tc.bind:
				bound := pod.DeepCopy()
				bound.Spec.NodeName, bound.ResourceVersion = "n1", "8"
				if err := c.Tracker().Update(pods, bound, bound.Namespace); err != nil {
					t.Fatal(err)
				}
				changed = func() bool { n, _ := s.Follow.capacity.OursBound(); return n > 0 }
			default:
				n2 := makeNode("n2").Allocatable(corev1.ResourceCPU, "4").Obj()
				n2.ResourceVersion = "8"
				if err := c.Tracker().Add(n2); err != nil {
					t.Fatal(err)
				}
			}
			if err := s.Follow.changes.Until(ctx, changed); err != nil {
				t.Fatal(err)
			}
			ended, end := context.WithCancel(ctx)
			end() // the change is in: a wait it does not wake ends at once
			got, err := s.Follow.Wait(ended, tc.on)
			if got != tc.want || (err == nil) != (tc.want != "") {
				t.Errorf("woken by %q (%v), want %q", got, err, tc.want)
			}
		})
	}
}

// TestFollowWaitWatchBack: a watch that comes back after its requests failed (the API server was away) wakes the
// wait with ErrLost, though no Job ended: what the watch missed arrives after its return, so the next pass observes
// afresh rather than decide from Pending pods as they were before the outage and then wait for a Job's end. Here the
// Jobs' watch runs throughout and the Pending pods' watch is refused twice.
func TestFollowWaitWatchBack(t *testing.T) {
	jobs := schema.GroupVersionResource{Group: "batch", Version: "v1", Resource: "jobs"}
	pods := schema.GroupVersionResource{Version: "v1", Resource: "pods"}
	job := makeJob("runs").Obj()
	job.ResourceVersion = "5"
	c := testkit.NewFake(job)
	for _, r := range []struct {
		gvr  schema.GroupVersionResource
		kind schema.GroupVersionKind
	}{{jobs, batchv1.SchemeGroupVersion.WithKind("Job")}, {pods, corev1.SchemeGroupVersion.WithKind("Pod")}} {
		c.PrependReactor("list", r.gvr.Resource, func(a k8stesting.Action) (bool, runtime.Object, error) {
			obj, err := c.Tracker().List(r.gvr, r.kind, a.GetNamespace())
			if err != nil {
				return true, nil, err
			}
			l, err := meta.ListAccessor(obj)
			if err == nil {
				l.SetResourceVersion("7") // the fake sets none, and a watch needs one
			}
			return true, obj, err
		})
	}
	attempts, back := 0, make(chan struct{})
	c.PrependWatchReactor("pods", func(a k8stesting.Action) (bool, watch.Interface, error) {
		if attempts++; attempts <= 2 {
			return true, nil, errors.New("dial tcp 127.0.0.1:6443: connect: connection refused")
		}
		w, err := c.Tracker().Watch(pods, a.GetNamespace())
		if attempts == 3 {
			close(back)
		}
		return true, w, err
	})
	s := &Scheduler{Config: testConfig(t, nil), Kube: c, Now: func() time.Time { return now }, Follow: NewFollow()}
	defer s.Follow.Stop()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if _, err := s.observe(ctx, true); err != nil {
		t.Fatal(err)
	}
	select {
	case <-back:
	case <-ctx.Done():
		t.Fatal("the pods' watch did not come back")
	}
	if got, err := s.Follow.Wait(ctx, WakeOn{}); !errors.Is(err, ErrLost) {
		t.Errorf("woken by %q (%v), want ErrLost", got, err)
	}
	if _, err := s.observe(ctx, true); err != nil { // observes afresh: lists the pods again, and watches
		t.Fatal(err)
	}
	ended, end := context.WithCancel(ctx)
	end()
	if got, err := s.Follow.Wait(ended, WakeOn{}); errors.Is(err, ErrLost) {
		t.Errorf("after the next observation, woken by %q (%v) again: want the return woken once", got, err)
	}
}

// TestPodEndFrees: a pod's end frees its room for good only when no Job of any queue may make another pod after it.
func TestPodEndFrees(t *testing.T) {
	for _, tc := range []struct {
		name string
		set  func(*batchv1.JobSpec)
		want bool
	}{
		{"one pod, backoffLimit 0", func(*batchv1.JobSpec) {}, true},
		{"parallelism and completions 1", func(s *batchv1.JobSpec) { s.Parallelism, s.Completions = ptr.To[int32](1), ptr.To[int32](1) }, true},
		{"backoffLimit unset (6)", func(s *batchv1.JobSpec) { s.BackoffLimit = nil }, false},
		{"backoffLimit 1", func(s *batchv1.JobSpec) { s.BackoffLimit = ptr.To[int32](1) }, false},
		{"parallelism 2", func(s *batchv1.JobSpec) { s.Parallelism = ptr.To[int32](2) }, false},
		{"completions 3", func(s *batchv1.JobSpec) { s.Completions = ptr.To[int32](3) }, false},
		{"backoffLimitPerIndex", func(s *batchv1.JobSpec) { s.BackoffLimitPerIndex = ptr.To[int32](0) }, false},
		{"podFailurePolicy", func(s *batchv1.JobSpec) { s.PodFailurePolicy = &batchv1.PodFailurePolicy{} }, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := testConfig(t, func(c *config.Config) {
				c.Template.Spec.BackoffLimit = ptr.To[int32](0)
				tc.set(&c.Template.Spec)
			})
			if got := PodEndFrees(cfg); got != tc.want {
				t.Errorf("PodEndFrees %v, want %v", got, tc.want)
			}
		})
	}
	cfg := queuesConfig(t, "maxActive: 2", queue("x", "")+queue("y", ""))
	for i := range cfg.Queues {
		cfg.Queues[i].Template.Spec.BackoffLimit = ptr.To[int32](0)
	}
	cfg.Queues[1].Template.Spec.Parallelism = ptr.To[int32](2)
	if PodEndFrees(cfg) {
		t.Error("PodEndFrees with a queue of parallel Jobs: true, want false")
	}
}
