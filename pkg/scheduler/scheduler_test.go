package scheduler

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/jobsched/jobsched/pkg/config"
	"github.com/jobsched/jobsched/pkg/render"
	"github.com/jobsched/jobsched/pkg/rows"
)

var now = time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)

func testConfig(t *testing.T, mutate func(*config.Config)) *config.Config {
	t.Helper()
	cfg := &config.Config{
		Name: "reports", Namespace: "batch", File: "jobsched.yaml",
		Source: config.Source{Key: "id", Query: "q"},
		Job:    config.Job{NamePrefix: "reports"},
		Limits: config.Limits{MaxActive: ptr(10), MaxPerTick: ptr(10), BlockOnUnschedulable: ptr(true), Capacity: config.CapacityOff},
		GC:     config.GC{SucceededRetention: metav1.Duration{}, FailedRetention: &metav1.Duration{Duration: time.Hour}},
		Template: &batchv1.Job{
			TypeMeta: metav1.TypeMeta{APIVersion: "batch/v1", Kind: "Job"},
			Spec: batchv1.JobSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
				RestartPolicy: corev1.RestartPolicyNever,
				Containers:    []corev1.Container{{Name: "worker", Image: "worker:1"}},
			}}},
		},
	}
	if mutate != nil {
		mutate(cfg)
	}
	return cfg
}

func ptr[T any](v T) *T { return &v }

// job is one of the scheduler's Jobs for key; cond is "", "Complete" or "Failed", finished ago.
func job(key string, cond batchv1.JobConditionType, ago time.Duration) *batchv1.Job {
	j := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{
		Name: render.JobName("reports", key), Namespace: "batch", UID: types.UID("uid-" + key),
		Labels:      map[string]string{render.LabelScheduler: "reports"},
		Annotations: map[string]string{render.AnnotationTaskKey: key},
	}}
	if cond == "" {
		j.Status.Active = 1
		return j
	}
	j.Status.Conditions = []batchv1.JobCondition{{Type: cond, Status: corev1.ConditionTrue, Reason: "BackoffLimitExceeded",
		Message: "Job has reached the specified backoff limit", LastTransitionTime: metav1.NewTime(now.Add(-ago))}}
	return j
}

func pendingPod(owner *batchv1.Job, unschedulable bool) *corev1.Pod {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: owner.Name + "-abcde", Namespace: "batch",
			Labels:          map[string]string{render.LabelScheduler: "reports"},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "batch/v1", Kind: "Job", Name: owner.Name, UID: owner.UID, Controller: ptr(true)}}},
		Status: corev1.PodStatus{Phase: corev1.PodPending},
	}
	if unschedulable {
		p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse,
			Reason: corev1.PodReasonUnschedulable, Message: "0/1 nodes are available: 1 Insufficient cpu."}}
	} else {
		p.Spec.NodeName = "node-0"
	}
	return p
}

// source is an in-memory rows.Source that records what it was asked.
type source struct {
	rows  []rows.Row
	calls [][]string // the exclude list of each Select
}

func (s *source) Select(_ context.Context, exclude []string, limit int) ([]rows.Row, error) {
	s.calls = append(s.calls, append([]string(nil), exclude...))
	var out []rows.Row
	for _, r := range s.rows {
		if len(out) < limit && !slices.Contains(exclude, r.Key) {
			out = append(out, r)
		}
	}
	return out, nil
}

func (s *source) Count(ctx context.Context, exclude []string, max int) (int, error) {
	got, err := s.Select(ctx, exclude, max)
	return len(got), err
}

func rowsFor(keys ...string) []rows.Row {
	var out []rows.Row
	for _, k := range keys {
		out = append(out, rows.Row{Key: k, Columns: []rows.Column{{Name: "id", Value: k}}})
	}
	return out
}

// action is a compact form of a client action: "list jobs", "create jobs reports-x-…", "delete jobs …".
func action(a k8stesting.Action) string {
	s := a.GetVerb() + " " + a.GetResource().Resource
	switch a := a.(type) {
	case k8stesting.CreateAction:
		s += " " + a.GetObject().(*batchv1.Job).Name
	case k8stesting.DeleteAction:
		s += " " + a.GetName()
		if pp := a.GetDeleteOptions().PropagationPolicy; pp != nil {
			s += " " + string(*pp)
		}
		if pc := a.GetDeleteOptions().Preconditions; pc != nil && pc.UID != nil {
			s += " uid=" + string(*pc.UID)
		}
	case k8stesting.GetAction:
		s += " " + a.GetName()
	}
	return s
}

func name(key string) string { return render.JobName("reports", key) }

func TestPass(t *testing.T) {
	tests := []struct {
		name        string
		mutate      func(*config.Config)
		objects     []runtime.Object
		rows        []string
		reactor     k8stesting.ReactionFunc // on create jobs
		wantActions []string
		wantExclude []string // of the first Select; nil = no Select
		wantSum     Summary
		wantBlocked string
	}{
		{
			name:        "maxActive 3 with 2 unfinished creates exactly one",
			mutate:      func(c *config.Config) { c.Limits.MaxActive = ptr(3) },
			objects:     []runtime.Object{job("a", "", 0), job("b", "", 0)},
			rows:        []string{"c", "d", "e"},
			wantActions: []string{"list jobs", "list pods", "create jobs " + name("c")},
			wantExclude: []string{"a", "b"},
			wantSum:     Summary{Selected: 1, Created: 1},
		},
		{
			name:        "an Unschedulable pod blocks every create",
			objects:     []runtime.Object{job("a", "", 0), pendingPod(job("a", "", 0), true)},
			rows:        []string{"c"},
			wantActions: []string{"list jobs", "list pods"},
			wantSum:     Summary{Blocked: "1 pod(s) Unschedulable (" + name("a") + ": 0/1 nodes are available: 1 Insufficient cpu.)"},
			wantBlocked: "Unschedulable",
		},
		{
			name:        "a pod that is scheduled but starting does not block, and counts as active",
			mutate:      func(c *config.Config) { c.Limits.MaxActive = ptr(2) },
			objects:     []runtime.Object{job("a", "", 0), pendingPod(job("a", "", 0), false)},
			rows:        []string{"c", "d"},
			wantActions: []string{"list jobs", "list pods", "create jobs " + name("c")},
			wantExclude: []string{"a"},
			wantSum:     Summary{Selected: 1, Created: 1},
		},
		{
			name:        "blockOnUnschedulable false lets the pass create",
			mutate:      func(c *config.Config) { c.Limits.BlockOnUnschedulable = ptr(false) },
			objects:     []runtime.Object{job("a", "", 0), pendingPod(job("a", "", 0), true)},
			rows:        []string{"c"},
			wantActions: []string{"list jobs", "list pods", "create jobs " + name("c")},
			wantExclude: []string{"a"},
			wantSum:     Summary{Selected: 1, Created: 1},
		},
		{
			name: "finished Jobs past retention are deleted first, with their pods, and only those",
			mutate: func(c *config.Config) {
				c.GC.SucceededRetention = metav1.Duration{Duration: 10 * time.Minute}
			},
			objects: []runtime.Object{
				job("old-ok", batchv1.JobComplete, 11*time.Minute), job("new-ok", batchv1.JobComplete, time.Minute),
				job("old-bad", batchv1.JobFailed, 2*time.Hour), job("new-bad", batchv1.JobFailed, time.Minute),
			},
			rows: []string{"old-bad", "x"},
			wantActions: []string{"list jobs", "list pods",
				"delete jobs " + name("old-bad") + " Background uid=uid-old-bad",
				"delete jobs " + name("old-ok") + " Background uid=uid-old-ok",
				"create jobs " + name("old-bad"), "create jobs " + name("x")},
			wantExclude: []string{"new-bad"}, // a failed Job kept: its row is not retried meanwhile
			wantSum:     Summary{Selected: 2, Created: 2, Deleted: 2},
		},
		{
			name:        "a row still selected after its Job succeeded gets no second Job",
			mutate:      func(c *config.Config) { c.GC.SucceededRetention = metav1.Duration{Duration: time.Hour} },
			objects:     []runtime.Object{job("done", batchv1.JobComplete, time.Minute)},
			rows:        []string{"done", "next"},
			wantActions: []string{"list jobs", "list pods", "create jobs " + name("next")},
			wantExclude: nil,
			wantSum:     Summary{Selected: 2, Created: 1, Skipped: 1},
		},
		{
			name:    "AlreadyExists from a concurrent pass is already present",
			rows:    []string{"c"},
			objects: []runtime.Object{},
			reactor: func(k8stesting.Action) (bool, runtime.Object, error) {
				return true, nil, apierrors.NewAlreadyExists(schema.GroupResource{Group: "batch", Resource: "jobs"}, name("c"))
			},
			wantActions: []string{"list jobs", "list pods", "create jobs " + name("c"), "get jobs " + name("c")},
			wantExclude: []string{},
			wantSum:     Summary{Selected: 1, AlreadyPresent: 1},
		},
		{
			name:        "maxPerTick bounds the creates",
			mutate:      func(c *config.Config) { c.Limits.MaxPerTick = ptr(2) },
			rows:        []string{"a", "b", "c"},
			wantActions: []string{"list jobs", "list pods", "create jobs " + name("a"), "create jobs " + name("b")},
			wantExclude: []string{},
			wantSum:     Summary{Selected: 2, Created: 2},
		},
		{
			name:        "a row that cannot make a Job is skipped and another row is read in its place",
			mutate:      func(c *config.Config) { c.Limits.MaxPerTick = ptr(1) },
			rows:        []string{"", "b", "c"},
			wantActions: []string{"list jobs", "list pods", "create jobs " + name("b")},
			wantExclude: []string{},
			wantSum:     Summary{Selected: 2, Created: 1, Skipped: 1},
		},
		{
			name:   "capacity nodes: one more LIST each of nodes, pods cluster-wide and quotas; what fits bounds the creates",
			mutate: func(c *config.Config) { c.Limits.Capacity = config.CapacityNodes },
			objects: []runtime.Object{&corev1.Node{
				ObjectMeta: metav1.ObjectMeta{Name: "node-0"},
				Status: corev1.NodeStatus{
					Allocatable: corev1.ResourceList{corev1.ResourcePods: resource.MustParse("1")},
					Conditions:  []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}},
				},
			}},
			rows:        []string{"a", "b"},
			wantActions: []string{"list jobs", "list pods", "list nodes", "list pods", "list resourcequotas", "create jobs " + name("a")},
			wantExclude: []string{},
			wantSum:     Summary{Selected: 1, Created: 1},
		},
		{
			name:        "no slots, no read",
			mutate:      func(c *config.Config) { c.Limits.MaxActive = ptr(1) },
			objects:     []runtime.Object{job("a", "", 0)},
			rows:        []string{"b"},
			wantActions: []string{"list jobs", "list pods"},
			wantSum:     Summary{Blocked: "limits.maxActive: 1 of 1 unfinished"},
			wantBlocked: "maxActive",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg := testConfig(t, tc.mutate)
			client := fake.NewClientset(tc.objects...)
			if tc.reactor != nil {
				existing := job("c", "", 0)
				client = fake.NewClientset(existing)
				client.PrependReactor("list", "jobs", func(k8stesting.Action) (bool, runtime.Object, error) {
					return true, &batchv1.JobList{}, nil // listed before the other pass created it
				})
				client.PrependReactor("create", "jobs", tc.reactor)
			}
			src := &source{rows: rowsFor(tc.rows...)}
			s := &Scheduler{Config: cfg, Kube: client, Source: src, Renderer: render.New(cfg, nil), Now: func() time.Time { return now }}
			ctx := context.Background()
			obs, err := s.Observe(ctx)
			if err != nil {
				t.Fatal(err)
			}
			plan, err := s.Plan(ctx, obs)
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(plan.Blocked, tc.wantBlocked) || (tc.wantBlocked == "") != (plan.Blocked == "") {
				t.Errorf("Blocked = %q, want it to mention %q", plan.Blocked, tc.wantBlocked)
			}
			sum, err := s.Execute(ctx, plan, false)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, a := range client.Actions() {
				got = append(got, action(a))
			}
			// the lists come first, in order; creates and deletes run concurrently: compare those sorted
			lists := 0
			for lists < len(got) && strings.HasPrefix(got[lists], "list ") {
				lists++
			}
			slices.Sort(got[lists:])
			want := slices.Clone(tc.wantActions)
			slices.Sort(want[min(lists, len(want)):])
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("actions (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantSum, sum); diff != "" {
				t.Errorf("summary (-want +got):\n%s", diff)
			}
			var firstExclude []string
			if len(src.calls) > 0 {
				firstExclude = src.calls[0]
				slices.Sort(firstExclude)
			}
			if tc.wantExclude == nil && len(src.calls) > 0 && len(firstExclude) > 0 {
				t.Errorf("Select excluded %v, want nothing", firstExclude)
			}
			if tc.wantExclude != nil && !slices.Equal(tc.wantExclude, firstExclude) {
				t.Errorf("Select excluded %v, want %v", firstExclude, tc.wantExclude)
			}
		})
	}
}

// TestDryRunWritesNothing: planning is the whole pass without its writes.
func TestDryRunWritesNothing(t *testing.T) {
	cfg := testConfig(t, nil)
	client := fake.NewClientset(job("old", batchv1.JobFailed, 3*time.Hour), job("run", "", 0))
	s := &Scheduler{Config: cfg, Kube: client, Source: &source{rows: rowsFor("a", "b")}, Renderer: render.New(cfg, nil), Now: func() time.Time { return now }}
	obs, err := s.Observe(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	plan, err := s.Plan(context.Background(), obs)
	if err != nil {
		t.Fatal(err)
	}
	if len(plan.Creates) != 2 || len(plan.Deletes()) != 1 {
		t.Fatalf("plan has %d creates and %d deletes, want 2 and 1", len(plan.Creates), len(plan.Deletes()))
	}
	for _, a := range client.Actions() {
		if a.GetVerb() != "list" {
			t.Errorf("dry run made a %s", action(a))
		}
	}
}
