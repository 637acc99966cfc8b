package scheduler

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/rs/zerolog"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/utils/ptr"

	"github.com/jobsched/jobsched/pkg/config"
	"github.com/jobsched/jobsched/pkg/jobmeta"
	"github.com/jobsched/jobsched/pkg/querydoctor"
	"github.com/jobsched/jobsched/pkg/render"
	"github.com/jobsched/jobsched/pkg/rows"
	"github.com/jobsched/jobsched/pkg/testkit"
)

const queueTemplate = `apiVersion: batch/v1
kind: Job
spec:
  template:
    spec:
      restartPolicy: Never
      containers: [{name: worker, image: worker:1}]
`

// queuesConfig is install "batch" in "work" with capacity off (unless limits sets it), limits and queues as given
// (YAML), and more top-level keys (YAML lines), read by Parse.
func queuesConfig(t *testing.T, limits, queues string, top ...string) *config.Config {
	t.Helper()
	dir := t.TempDir()
	file := filepath.Join(dir, "jobsched.yaml")
	if !strings.Contains(limits, "capacity:") {
		limits = "capacity: off, " + limits
	}
	body := "name: batch\nnamespace: work\nlimits: {" + limits + "}\n" + strings.Join(top, "") + "queues:\n" + queues
	for name, data := range map[string]string{file: body, filepath.Join(dir, "job.yaml"): queueTemplate} {
		if err := os.WriteFile(name, []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	cfg, err := config.Load(file, "")
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// queue is a queues: entry named name reading table's rows, with more keys (YAML, each line indented by two).
func queue(name, more string) string {
	return "- name: " + name + "\n  source: {query: q, key: id}\n  job: {template: job.yaml}\n" + more
}

// queueJob is an unfinished Job of queue q (label), made as the pass makes them.
func queueJob(t *testing.T, cfg *config.Config, i int, key string) *batchv1.Job {
	t.Helper()
	j, err := render.New(cfg.QueueConfig(i), nil).Job(rowsFor(key)[0], 1)
	if err != nil {
		t.Fatal(err)
	}
	return j
}

// TestPassQueues: one pass for several queues, on the fake clientset: one list of Jobs and one of pods whatever the
// number of queues, the install's limits across all of them, the order between queues, the queue label.
func TestPassQueues(t *testing.T) {
	type existing struct {
		queue     int
		key       string
		pod       string // "": none; "unschedulable", "pending"
		suspended bool   // queued (Kueue holds it)
	}
	tests := []struct {
		name      string
		limits    string
		top       string // more top-level keys
		queues    string
		rows      [][]string
		existing  []existing
		want      []string // queue/key of each create, in order
		wantLimit string
		blocked   string
		// what bound each queue's slots, and why each is blocked (nil: not checked)
		queueLimits, queueBlocked []string
	}{
		{
			name: "the install's limits bind on a tie: maxPerTick before maxActive, as a queue's", limits: "maxPerTick: 3, maxActive: 3",
			queues: queue("x", "") + queue("y", ""),
			rows:   [][]string{{"x1", "x2"}, {"y1", "y2"}},
			want:   []string{"x/x1", "y/y1", "x/x2"}, wantLimit: "limits.maxPerTick: 3",
		},
		{
			name: "a queue's own limit is what bound it on a tie with the install's", limits: "maxPerTick: 3",
			queues:      queue("x", "  limits: {maxPerTick: 4, maxActive: 3}\n") + queue("y", ""),
			rows:        [][]string{{"x1"}, {"y1"}},
			want:        []string{"x/x1", "y/y1"},
			queueLimits: []string{"limits.maxActive: 0 of 3 unfinished", "limits.maxPerTick: 3"},
		},
		{
			name: "Kueue: the install's maxQueued counts every queue's queued Jobs", limits: "capacity: kueue, maxQueued: 3",
			top:      "kueue: {localQueue: lq}\n",
			queues:   queue("x", "") + queue("y", ""),
			rows:     [][]string{{"x1", "x2"}, {"y1", "y2"}},
			existing: []existing{{queue: 0, key: "x0", suspended: true}, {queue: 1, key: "y0", suspended: true}},
			want:     []string{"x/x1"}, wantLimit: "limits.maxQueued: 2 of 3 queued",
		},
		{
			name: "Kueue: on a tie maxActive, not maxQueued, is what bound the slots", limits: "capacity: kueue, maxActive: 3, maxQueued: 3",
			top:    "kueue: {localQueue: lq}\n",
			queues: queue("x", "") + queue("y", ""),
			rows:   [][]string{{"x1", "x2"}, {"y1", "y2"}},
			want:   []string{"x/x1", "y/y1", "x/x2"}, wantLimit: "limits.maxActive: 0 of 3 unfinished",
		},
		{
			name: "priority: the higher queue takes the install's slots first", limits: "maxActive: 3",
			queues: queue("a", "  priority: 10\n") + queue("b", ""),
			rows:   [][]string{{"a1", "a2", "a3", "a4"}, {"b1", "b2"}},
			want:   []string{"a/a1", "a/a2", "a/a3"}, wantLimit: "limits.maxActive: 0 of 3 unfinished",
		},
		{
			name: "priority: a queue with no rows leaves its share", limits: "maxActive: 3",
			queues: queue("a", "  priority: 10\n") + queue("b", ""),
			rows:   [][]string{{"a1"}, {"b1", "b2", "b3"}},
			want:   []string{"a/a1", "b/b1", "b/b2"},
		},
		{
			name: "weights 3:1", limits: "maxPerTick: 8",
			queues: queue("x", "  weight: 3\n") + queue("y", ""),
			rows:   [][]string{{"x1", "x2", "x3", "x4", "x5", "x6", "x7", "x8"}, {"y1", "y2", "y3", "y4"}},
			want:   []string{"x/x1", "y/y1", "x/x2", "x/x3", "x/x4", "y/y2", "x/x5", "x/x6"},
		},
		{
			name: "the unfinished Jobs a queue holds count in its share", limits: "maxPerTick: 3, maxActive: 10",
			queues:   queue("x", "") + queue("y", ""),
			rows:     [][]string{{"x1", "x2", "x3"}, {"y1", "y2", "y3"}},
			existing: []existing{{queue: 0, key: "x0"}, {queue: 0, key: "x00"}},
			want:     []string{"y/y1", "y/y2", "x/x1"},
		},
		{
			name: "the install's maxActive counts every queue's unfinished Jobs", limits: "maxActive: 4",
			queues:   queue("x", "") + queue("y", ""),
			rows:     [][]string{{"x1", "x2"}, {"y1", "y2"}},
			existing: []existing{{queue: 0, key: "x0"}, {queue: 1, key: "y0"}, {queue: 1, key: "y00"}},
			want:     []string{"x/x1"}, wantLimit: "limits.maxActive: 3 of 4 unfinished",
		},
		{
			name: "the install full: blocked by the install's maxActive", limits: "maxActive: 2",
			queues:   queue("x", "") + queue("y", ""),
			rows:     [][]string{{"x1"}, {"y1"}},
			existing: []existing{{queue: 0, key: "x0"}, {queue: 1, key: "y0"}},
			blocked:  "limits.maxActive: 2 of 2 unfinished", wantLimit: "limits.maxActive: 2 of 2 unfinished",
			queueBlocked: []string{"limits.maxActive: 2 of 2 unfinished", "limits.maxActive: 2 of 2 unfinished"},
		},
		{
			name: "a queue's own maxActive", limits: "maxActive: 10",
			queues:   queue("x", "  priority: 1\n  limits: {maxActive: 2}\n") + queue("y", ""),
			rows:     [][]string{{"x1", "x2", "x3"}, {"y1", "y2"}},
			existing: []existing{{queue: 0, key: "x0"}},
			want:     []string{"x/x1", "y/y1", "y/y2"},
		},
		{
			name: "an Unschedulable pod of one queue blocks every queue", limits: "maxActive: 10",
			queues:   queue("x", "") + queue("y", ""),
			rows:     [][]string{{"x1"}, {"y1"}},
			existing: []existing{{queue: 0, key: "x0", pod: "unschedulable"}},
			blocked:  "1 pod(s) Unschedulable (batch-x-x0-",
			// the queue without an Unschedulable pod is blocked by the install's, which names the pod's Job
			queueBlocked: []string{"1 pod(s) Unschedulable (batch-x-x0-", "1 pod(s) Unschedulable (batch-x-x0-"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg := queuesConfig(t, tc.limits, tc.queues, tc.top)
			var objects []runtime.Object
			for _, e := range tc.existing {
				j := queueJob(t, cfg, e.queue, e.key)
				j.UID = types.UID("uid-" + j.Name)
				if e.suspended {
					j.Spec.Suspend = ptr.To(true)
				}
				objects = append(objects, j)
				if e.pod != "" {
					pod := makePod(j).Labels(j.Spec.Template.Labels)
					if e.pod == "unschedulable" {
						pod.Unschedulable("0/1 nodes are available: 1 Insufficient cpu.")
					} else {
						pod.Bound("node-0")
					}
					objects = append(objects, pod.Obj())
				}
			}
			client := testkit.NewFake(objects...)
			s := &Scheduler{workers: 1, Config: cfg, Kube: client, Now: func() time.Time { return now }}
			var srcs []*source
			for i := range cfg.Queues {
				src := &source{Rows: rowsFor(tc.rows[i]...)}
				srcs = append(srcs, src)
				s.Queues = append(s.Queues, Queue{Source: src, Renderer: render.New(cfg.QueueConfig(i), nil)})
			}
			res, err := s.Run(context.Background(), Execute)
			if err != nil {
				t.Fatal(err)
			}
			p := res.Plan
			var got []string
			for _, c := range p.Creates {
				got = append(got, c.Queue+"/"+c.Key)
				if l := c.Job.Labels[jobmeta.LabelQueue]; l != c.Queue || c.Job.Spec.Template.Labels[jobmeta.LabelQueue] != c.Queue {
					t.Errorf("create %s: queue label %q, want %q on the Job and its pods", c.Job.Name, l, c.Queue)
				}
				if !strings.HasPrefix(c.Job.Name, "batch-"+c.Queue+"-") {
					t.Errorf("create %s: want the queue's prefix batch-%s", c.Job.Name, c.Queue)
				}
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("creates (-want +got):\n%s", diff)
			}
			if !strings.HasPrefix(p.Blocked, tc.blocked) || (tc.blocked == "") != (p.Blocked == "") || strings.Contains(p.Blocked, "; ") {
				t.Errorf("Blocked = %q, want it to begin with %q (one reason)", p.Blocked, tc.blocked)
			}
			for i, q := range p.Queues {
				if tc.queueLimits != nil && q.Limit != tc.queueLimits[i] {
					t.Errorf("queue %s: Limit %q, want %q", q.Name, q.Limit, tc.queueLimits[i])
				}
				if tc.queueBlocked != nil && !strings.HasPrefix(q.Blocked, tc.queueBlocked[i]) {
					t.Errorf("queue %s: Blocked %q, want it to begin with %q", q.Name, q.Blocked, tc.queueBlocked[i])
				}
			}
			if tc.wantLimit != "" && p.Limit != tc.wantLimit {
				t.Errorf("Limit = %q, want %q", p.Limit, tc.wantLimit)
			}
			wantActions := []string{"list jobs", "list pods"}
			for _, c := range p.Creates {
				wantActions = append(wantActions, "create jobs "+c.Job.Name)
			}
			if diff := cmp.Diff(wantActions, actions(client)); diff != "" {
				t.Errorf("actions (-want +got):\n%s", diff)
			}
			if len(p.Queues) != len(cfg.Queues) {
				t.Fatalf("%d queue plans, want %d", len(p.Queues), len(cfg.Queues))
			}
			for i, q := range p.Queues {
				reads := 0
				if q.Slots > 0 {
					reads = 1
				}
				if len(srcs[i].Calls) != reads {
					t.Errorf("queue %s (slots %d): %d reads, want %d: one read per queue that has slots", q.Name, q.Slots, len(srcs[i].Calls), reads)
				}
			}
		})
	}
}

// TestPassPerGroup: with limits.perGroup the read is given each group's unfinished Jobs (from their group
// annotation) and returns at most maxActive − held rows of a group, in the query's order; a group at its cap gets
// none, and a small tenant is not starved by a big one. (The rows file applies the cap as PostgreSQL does.)
func TestPassPerGroup(t *testing.T) {
	cfg := queuesConfig(t, "maxPerTick: 10", queue("t", "  limits: {perGroup: {column: tenant, maxActive: 2}}\n"))
	var lines strings.Builder
	for _, r := range []struct {
		tenant string
		n      int
	}{{"big", 10}, {"a", 5}, {"b", 5}} {
		for i := range r.n {
			fmt.Fprintf(&lines, "{\"id\": \"%s-%d\", \"tenant\": \"%s\"}\n", r.tenant, i, r.tenant)
		}
	}
	src, err := rows.ReadFrom(strings.NewReader(lines.String()), "rows", "id", rows.PerGroup{Column: "tenant", Max: 2})
	if err != nil {
		t.Fatal(err)
	}
	var objects []runtime.Object
	for _, key := range []string{"big-x", "big-y", "a-x"} {
		row := rows.Row{Key: key, Columns: []rows.Column{{Name: "id", Value: key}}, Group: strings.SplitN(key, "-", 2)[0]}
		j, err := render.New(cfg.QueueConfig(0), nil).Job(row, 1)
		if err != nil {
			t.Fatal(err)
		}
		j.UID = types.UID("uid-" + key)
		objects = append(objects, j)
	}
	client := testkit.NewFake(objects...)
	s := &Scheduler{workers: 1, Config: cfg, Kube: client, Now: func() time.Time { return now },
		Queues: []Queue{{Source: src, Renderer: render.New(cfg.QueueConfig(0), nil)}}}
	res, err := s.Run(context.Background(), Execute)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, c := range res.Plan.Creates {
		got = append(got, c.Key+"@"+c.Job.Annotations[jobmeta.AnnotationGroup])
	}
	if diff := cmp.Diff([]string{"a-0@a", "b-0@b", "b-1@b"}, got); diff != "" {
		t.Errorf("creates (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"a", "b", "big"}, res.Plan.Queues[0].GroupsAtCap); diff != "" {
		t.Errorf("groups at their cap (-want +got):\n%s", diff)
	}
}

// TestUnlabelledJobsBelongToTheInstallsQueue: a Job without the queue label (made before the config had queues:)
// is the queue named after the install's, so an upgrade keeps counting its running Jobs there.
func TestUnlabelledJobsBelongToTheInstallsQueue(t *testing.T) {
	cfg := queuesConfig(t, "maxActive: 10", queue("y", "")+queue("batch", "  limits: {maxActive: 1}\n"))
	old := queueJob(t, cfg, 1, "old")
	delete(old.Labels, jobmeta.LabelQueue)
	old.UID = "uid-old"
	client := testkit.NewFake(old)
	s := &Scheduler{workers: 1, Config: cfg, Kube: client, Now: func() time.Time { return now }}
	for i, keys := range [][]string{{"y1"}, {"b1"}} {
		s.Queues = append(s.Queues, Queue{Source: &source{Rows: rowsFor(keys...)}, Renderer: render.New(cfg.QueueConfig(i), nil)})
	}
	res, err := s.Run(context.Background(), DryRun)
	if err != nil {
		t.Fatal(err)
	}
	p := res.Plan
	if p.Queues[1].Unfinished != 1 || p.Queues[0].Unfinished != 0 || len(p.Creates) != 1 || p.Creates[0].Key != "y1" {
		t.Errorf("queues %+v, creates %d: want the unlabelled Job counted in queue batch (full), y1 created", p.Queues, len(p.Creates))
	}
	if p.Jobs[0].Queue != "batch" {
		t.Errorf("the unlabelled Job is in queue %q, want batch", p.Jobs[0].Queue)
	}
}

// TestReadPerGroupAfterSkips: with limits.perGroup, a read after skipped rows counts the creates the pass admitted
// already against their group's cap, so a group never gets more than its room in one pass (cap 2: a-0 and a-1, not
// a-2), also when no Job of the queue exists yet (no held count observed).
func TestReadPerGroupAfterSkips(t *testing.T) {
	cfg := queuesConfig(t, "maxPerTick: 3", queue("t", "  limits: {perGroup: {column: tenant, maxActive: 2}}\n"))
	lines := `{"id": "a-0", "tenant": "a", "v": "ok"}
{"id": "x-0", "tenant": "x", "v": "\u0000bad"}
{"id": "y-0", "tenant": "y", "v": "\u0000bad"}
{"id": "a-1", "tenant": "a", "v": "ok"}
{"id": "a-2", "tenant": "a", "v": "ok"}
`
	src, err := rows.ReadFrom(strings.NewReader(lines), "rows", "id", rows.PerGroup{Column: "tenant", Max: 2})
	if err != nil {
		t.Fatal(err)
	}
	s := &Scheduler{workers: 1, Config: cfg, Kube: testkit.NewFake(), Now: func() time.Time { return now },
		Queues: []Queue{{Source: src, Renderer: render.New(cfg.QueueConfig(0), nil)}}}
	res, err := s.Run(context.Background(), DryRun)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, c := range res.Plan.Creates {
		got = append(got, c.Key)
	}
	if diff := cmp.Diff([]string{"a-0", "a-1"}, got); diff != "" {
		t.Errorf("creates (-want +got):\n%s", diff)
	}
	if len(res.Plan.Skipped) != 2 {
		t.Errorf("skipped %v, want x-0 and y-0", res.Plan.Skipped)
	}
}

// TestCapacityWarningOncePerPass: what capacity could not read is the install's (one observation for every
// queue's template), so the pass logs it once however many queues there are, not once per queue.
func TestCapacityWarningOncePerPass(t *testing.T) {
	cfg := queuesConfig(t, "capacity: nodes", queue("a", "")+queue("b", "")+queue("c", ""))
	client := testkit.NewFake()
	client.PrependReactor("list", "nodes", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewForbidden(schema.GroupResource{Resource: "nodes"}, "", errors.New("RBAC: access denied"))
	})
	s := &Scheduler{workers: 1, Config: cfg, Kube: client, Now: func() time.Time { return now }}
	for i := range cfg.Queues {
		s.Queues = append(s.Queues, Queue{Source: &source{Rows: rowsFor("1")}, Renderer: render.New(cfg.QueueConfig(i), nil)})
	}
	var log bytes.Buffer
	if _, err := s.Run(zerolog.New(&log).WithContext(t.Context()), Execute); err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(log.String(), "capacity nodes needs list on nodes"); n != 1 {
		t.Errorf("the missing permission is logged %d times, want once:\n%s", n, log.String())
	}
}

// TestCountIn: a queue's Jobs in a state are its own kept ones; "" counts every queue's.
func TestCountIn(t *testing.T) {
	p := &Plan{Jobs: []JobStatus{
		{Queue: "a", State: StateRunning}, {Queue: "a", State: StateRunning}, {Queue: "a", State: StateDead},
		{Queue: "b", State: StateRunning}, {Queue: "b", State: StateRunning, Delete: DeleteRetention},
	}}
	for _, tc := range []struct {
		queue string
		state State
		want  int
	}{{"a", StateRunning, 2}, {"a", StateDead, 1}, {"b", StateRunning, 1}, {"b", StateDead, 0}, {"", StateRunning, 3}, {"c", StateRunning, 0}} {
		if got := p.CountIn(tc.queue, tc.state); got != tc.want {
			t.Errorf("CountIn(%q, %s) = %d, want %d", tc.queue, tc.state, got, tc.want)
		}
	}
}

// TestExplainQueue: each queue's read is explained by its own doctor, with its own exclusions and slots, not the
// install's.
func TestExplainQueue(t *testing.T) {
	cfg := queuesConfig(t, "maxPerTick: 10", queue("a", "  limits: {maxPerTick: 3}\n")+queue("b", "  limits: {maxPerTick: 4}\n"))
	client := testkit.NewFake(queueJob(t, cfg, 0, "a-running"), queueJob(t, cfg, 1, "b-running"))
	s := &Scheduler{workers: 1, Config: cfg, Kube: client, Now: func() time.Time { return now }}
	var doctors []*testkit.DoctorSource
	for i := range cfg.Queues {
		d := &testkit.DoctorSource{Source: source{Rows: rowsFor("x")}, Finding: &querydoctor.Finding{}}
		doctors = append(doctors, d)
		s.Queues = append(s.Queues, Queue{Source: d, Renderer: render.New(cfg.QueueConfig(i), nil)})
	}
	p := Decide(cfg, &Observation{Now: now, Jobs: summaries(t, client)})
	for i, want := range []struct {
		exclude []string
		limit   int
	}{{[]string{"a-running"}, 3}, {[]string{"b-running"}, 4}} {
		if f := s.ExplainQueue(t.Context(), p, i); f != doctors[i].Finding {
			t.Errorf("queue %d: finding %v, want its own doctor's", i, f)
		}
		if !slices.Equal(doctors[i].Exclude, want.exclude) || doctors[i].Limit != want.limit {
			t.Errorf("queue %d: explained with exclude %q, limit %d; want %q, %d", i, doctors[i].Exclude, doctors[i].Limit, want.exclude, want.limit)
		}
	}
}

// summaries are the client's Jobs as the pass observes them.
func summaries(t *testing.T, client *testkit.Fake) []JobSummary {
	t.Helper()
	jobs, err := client.BatchV1().Jobs("work").List(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var out []JobSummary
	for i := range jobs.Items {
		out = append(out, SummarizeJob(&jobs.Items[i]))
	}
	return out
}

// TestDecideCopiesNoJobPerJob: Decide reads the observed Jobs in place, for one queue and for several: it makes no
// copy of each Job on the heap (issue 33: a copy of each summary and of each status per Job, and of every queue's
// summaries, were garbage at the pass's peak; what each holds is summed in place). Its allocations are counted, not timed: they must not grow with the
// Jobs (the slices that hold the plan's Jobs and keys grow a few times).
func TestDecideCopiesNoJobPerJob(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  *config.Config
	}{
		{"no queues:", testkit.Config(t, func(c *config.Config) { c.Limits.MaxActive = ptr.To(100000) })},
		{"two queues", queuesConfig(t, "maxActive: 100000", queue("a", "")+queue("b", ""))},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var jobs []JobSummary
			demand := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("500m")} // summed into Holds: no copy per Job either
			for i := range 1000 {
				jobs = append(jobs, JobSummary{Name: fmt.Sprintf("job-%d", i), Key: fmt.Sprintf("k%d", i), Queue: []string{"a", "b"}[i%2], Attempt: 1,
					Active: 1, PodsPerJob: 2, Demand: demand})
			}
			obs := &Observation{Now: now, Jobs: jobs}
			if got := testing.AllocsPerRun(3, func() { Decide(tc.cfg, obs) }); got > 200 {
				t.Errorf("Decide over 1,000 Jobs allocated %.0f times: it copies each Job", got)
			}
		})
	}
}

// TestBlockedWaits: what bound a pass's slots is a Bound from a fixed set, the install's and each queue's, and a
// blocked pass waits as configured (its Blocked Event Normal) when every queue's bound is a limit or a full
// cluster, whatever the number of queues and however their reasons are joined; a fault in any queue makes it a
// Warning.
func TestBlockedWaits(t *testing.T) {
	tests := []struct {
		name        string
		limits      string
		queues      string
		existing    [][]string // each queue's unfinished Jobs, by key
		cancelFails []bool     // the queue's cancel query fails
		unsched     bool       // the first Job's pod is Unschedulable
		blocked     string
		bound       Bound
		queueBounds []Bound
		waits       bool
	}{
		{name: "every queue full at its own maxActive: a wait, Normal", limits: "maxActive: 10",
			queues:   queue("x", "  limits: {maxActive: 1}\n") + queue("y", "  limits: {maxActive: 2}\n"),
			existing: [][]string{{"x0"}, {"y0", "y00"}},
			blocked:  "x: limits.maxActive: 1 of 1 unfinished; y: limits.maxActive: 2 of 2 unfinished",
			bound:    BoundMaxActive, queueBounds: []Bound{BoundMaxActive, BoundMaxActive}, waits: true},
		{name: "the install full: a wait", limits: "maxActive: 2",
			queues: queue("x", "") + queue("y", ""), existing: [][]string{{"x0"}, {"y0"}},
			blocked: "limits.maxActive: 2 of 2 unfinished",
			bound:   BoundMaxActive, queueBounds: []Bound{BoundMaxActive, BoundMaxActive}, waits: true},
		{name: "one queue full, the other's cancel query failed: a fault, Warning", limits: "maxActive: 10",
			queues:      queue("x", "  limits: {maxActive: 1}\n") + queue("y", "  source: {query: q, key: id, cancelQuery: c}\n"),
			existing:    [][]string{{"x0"}, {"y0"}},
			cancelFails: []bool{false, true},
			blocked:     "x: limits.maxActive: 1 of 1 unfinished; y: reading rows failed",
			bound:       BoundQueues, queueBounds: []Bound{BoundMaxActive, BoundReadFailed}, waits: false},
		{name: "an Unschedulable pod: a fault", limits: "maxActive: 10",
			queues: queue("x", "") + queue("y", ""), existing: [][]string{{"x0"}, nil}, unsched: true,
			blocked: "1 pod(s) Unschedulable (",
			bound:   BoundUnschedulable, queueBounds: []Bound{BoundUnschedulable, BoundUnschedulable}, waits: false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			queues := strings.ReplaceAll(tc.queues, "  source: {query: q, key: id}\n  job: {template: job.yaml}\n  source:", "  job: {template: job.yaml}\n  source:")
			cfg := queuesConfig(t, tc.limits, queues)
			var objects []runtime.Object
			for i, keys := range tc.existing {
				for _, k := range keys {
					j := queueJob(t, cfg, i, k)
					j.UID = types.UID("uid-" + j.Name)
					objects = append(objects, j)
					if tc.unsched && len(objects) == 1 {
						objects = append(objects, makePod(j).Labels(j.Spec.Template.Labels).Unschedulable("0/1 nodes are available").Obj())
					}
				}
			}
			ev := &recorder{}
			s := &Scheduler{workers: 1, Config: cfg, Kube: testkit.NewFake(objects...), Now: func() time.Time { return now }, Events: ev}
			for i := range cfg.Queues {
				var src rows.Source = &source{Rows: rowsFor("r")}
				if tc.cancelFails != nil && tc.cancelFails[i] {
					src = failingCancel{src.(*source), errors.New("connection refused")}
				}
				s.Queues = append(s.Queues, Queue{Source: src, Renderer: render.New(cfg.QueueConfig(i), nil)})
			}
			res, _ := s.Run(context.Background(), Execute)
			p := res.Plan
			var qb []Bound
			for _, q := range p.Queues {
				qb = append(qb, q.Bound)
			}
			if !strings.HasPrefix(p.Blocked, tc.blocked) || p.Bound != tc.bound || !cmp.Equal(qb, tc.queueBounds) || p.Waits() != tc.waits {
				t.Errorf("Blocked %q, bound %s, queues' %v, waits %v; want %q…, %s, %v, %v", p.Blocked, p.Bound, qb, p.Waits(),
					tc.blocked, tc.bound, tc.queueBounds, tc.waits)
			}
			want := tc.blocked
			if !tc.waits {
				want += " (a fault)"
			}
			if len(ev.blocked) != 1 || !strings.HasPrefix(ev.blocked[0], tc.blocked) || strings.HasSuffix(ev.blocked[0], " (a fault)") == tc.waits {
				t.Errorf("PassBlocked %q, want one, %q", ev.blocked, want)
			}
		})
	}
}

// TestPassPerGroupRequests pins limits.perGroup.maxRequests: a group's unfinished Jobs and this pass's creates ask
// at most the cap of each resource; the row that would take its group past it waits, and so do the group's rows
// behind it; a row asking more than the cap alone is skipped with why; a group that reaches the cap exactly is at
// its cap, as one its Jobs hold.
func TestPassPerGroupRequests(t *testing.T) {
	cfg := queuesConfig(t, "maxPerTick: 10", "- name: t\n  source: {query: q, key: id}\n"+
		"  job: {template: job.yaml, requestsFrom: {cpu: cpus}, maxRequests: {cpu: 8}}\n"+
		"  limits: {perGroup: {column: tenant, maxActive: 10, maxRequests: {cpu: 4}}}\n")
	var lines strings.Builder
	for _, r := range [][3]string{{"big-0", "big", "2"}, {"big-1", "big", "1"}, {"big-2", "big", "1"}, {"a-0", "a", "5"}, {"a-1", "a", "1"},
		{"c-0", "c", "3"}, {"c-1", "c", "1"}} {
		fmt.Fprintf(&lines, "{\"id\": %q, \"tenant\": %q, \"cpus\": %q}\n", r[0], r[1], r[2])
	}
	src, err := rows.ReadFrom(strings.NewReader(lines.String()), "rows", "id", rows.PerGroup{Column: "tenant", Max: 10})
	if err != nil {
		t.Fatal(err)
	}
	// big's one unfinished Job asks 2 cpu: its next rows may ask 2 more in all.
	held := rows.Row{Key: "big-x", Columns: []rows.Column{{Name: "id", Value: "big-x"}, {Name: "cpus", Value: "2"}}, Group: "big"}
	j, err := render.New(cfg.QueueConfig(0), nil).Job(held, 1)
	if err != nil {
		t.Fatal(err)
	}
	j.UID = "uid-big-x"
	client := testkit.NewFake(j)
	s := &Scheduler{workers: 1, Config: cfg, Kube: client, Now: func() time.Time { return now },
		Queues: []Queue{{Source: src, Renderer: render.New(cfg.QueueConfig(0), nil)}}}
	res, err := s.Run(context.Background(), Execute)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, c := range res.Plan.Creates {
		got = append(got, c.Key)
	}
	slices.Sort(got)
	if diff := cmp.Diff([]string{"a-1", "big-0", "c-0", "c-1"}, got); diff != "" {
		t.Errorf("creates (-want +got):\n%s", diff)
	}
	want := []Skip{{Queue: "t", Key: "a-0", Size: true, Reason: "no Job: it asks for cpu=5, more than limits.perGroup.maxRequests.cpu (4) lets a group hold"}}
	if diff := cmp.Diff(want, res.Plan.Skipped); diff != "" {
		t.Errorf("skipped (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"big", "c"}, res.Plan.Queues[0].GroupsAtCap); diff != "" {
		t.Errorf("groups at their cap (-want +got):\n%s", diff)
	}
	if res.Summary.Selected != 5 {
		t.Errorf("selected %d, want 5: big-1 and big-2 wait, not counted", res.Summary.Selected)
	}
}
