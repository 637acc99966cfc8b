//go:build integration

package e2e

import (
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/jobsched/jobsched/pkg/testkit/tcpkit"
)

// pushgateway is the real Pushgateway scripts/test.sh starts (scripts/pushgateway.sh).
var pushgateway = os.Getenv("JOBSCHED_TEST_PUSHGATEWAY")

func needPushgateway(t *testing.T) {
	t.Helper()
	if pushgateway == "" {
		t.Fatal("JOBSCHED_TEST_PUSHGATEWAY must be set: run scripts/test.sh, which starts the Pushgateway (scripts/pushgateway.sh up)")
	}
}

// events returns jobsched's Events in the namespace (events.k8s.io/v1), oldest first.
func (e *env) events() []eventsv1.Event {
	e.t.Helper()
	l, err := e.kube.EventsV1().Events(e.ns).List(e.ctx, metav1.ListOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	var out []eventsv1.Event
	for _, ev := range l.Items {
		if ev.ReportingController == "jobsched" {
			out = append(out, ev)
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].EventTime.Before(&out[j].EventTime) })
	return out
}

func (e *env) eventsWith(reason string) []eventsv1.Event {
	var out []eventsv1.Event
	for _, ev := range e.events() {
		if ev.Reason == reason {
			out = append(out, ev)
		}
	}
	return out
}

// pushed reads the Pushgateway's /metrics and returns this scenario's samples (label namespace = e.ns), keyed
// `name{job="…",other labels}` with the grouping labels namespace, scheduler and instance left out.
func (e *env) pushed(scheduler string) map[string]float64 {
	e.t.Helper()
	resp, err := http.Get(pushgateway + "/metrics")
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		e.t.Fatalf("parsing the Pushgateway's /metrics: %v", err)
	}
	out := map[string]float64{}
	for name, mf := range families {
		for _, m := range mf.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["namespace"] != e.ns || labels["scheduler"] != scheduler {
				continue
			}
			var keep []string
			for k, v := range labels {
				if k != "namespace" && k != "scheduler" && k != "instance" {
					keep = append(keep, fmt.Sprintf("%s=%q", k, v))
				}
			}
			sort.Strings(keep)
			v := m.GetGauge().GetValue()
			if m.GetUntyped() != nil {
				v = m.GetUntyped().GetValue()
			}
			out[name+"{"+strings.Join(keep, ",")+"}"] = v
		}
	}
	return out
}

// TestObserveTick: a tick reports a Created Event on each Job it creates (task key and attempt in the note), a
// blocked tick a Blocked Event on the jobsched pod (POD_NAME/POD_NAMESPACE, as the CronJob sets them) or, outside a
// pod, on no object; each pass pushes its metrics to the Pushgateway of metrics.pushgateway, and a failed pass
// leaves the last success time as it was.
func TestObserveTick(t *testing.T) {
	t.Parallel()
	needPushgateway(t)
	e := newNodeEnv(t, "8", "16Gi")
	e.insert("task", 3)
	cfg := e.writeConfig(config{duration: "10m",
		extra: "limits:\n  maxActive: 2\n  capacity: quota\nmetrics:\n  pushgateway: " + pushgateway + "\n"})
	pod := []string{"POD_NAME=jobsched-29000000-abcde", "POD_NAMESPACE=" + e.ns, "POD_UID=0b5c6f3e-0000-4000-8000-000000000001"}
	podRef := corev1.ObjectReference{APIVersion: "v1", Kind: "Pod", Namespace: e.ns, Name: "jobsched-29000000-abcde", UID: "0b5c6f3e-0000-4000-8000-000000000001"}

	start := time.Now()
	r := e.run(pod, "tick", "--config", cfg)
	if r.code != 0 || r.summary(t).Created != 2 {
		t.Fatalf("tick 1: exit %d, want 0 and 2 created:\n%s", r.code, r.stderr)
	}

	// Events: one Created per Job, regarding it (with its UID), related to the pod.
	jobs := map[string]batchv1.Job{}
	for _, j := range e.jobs() {
		jobs[j.Name] = j
	}
	created := e.eventsWith("Created")
	if len(created) != 2 {
		t.Fatalf("%d Created Events, want 2: %+v", len(created), e.events())
	}
	for i, ev := range created {
		j, ok := jobs[ev.Regarding.Name]
		if !ok || ev.Regarding.Kind != "Job" || ev.Regarding.UID != j.UID {
			t.Errorf("Created Event %d regards %+v, not one of the Jobs created", i, ev.Regarding)
			continue
		}
		key := j.Annotations["jobsched.io/task-key"]
		for _, want := range []string{fmt.Sprintf("task %q", key), "attempt 1", "slot(s) this pass, bound by limits.maxActive"} {
			if !strings.Contains(ev.Note, want) {
				t.Errorf("Created Event on %s: note %q lacks %q", j.Name, ev.Note, want)
			}
		}
		if ev.Type != "Normal" || ev.Action != "Create" || ev.Related == nil || *ev.Related != podRef ||
			!strings.HasPrefix(ev.ReportingInstance, "jobsched-") {
			t.Errorf("Created Event on %s: type %s, action %s, related %+v, instance %s", j.Name, ev.Type, ev.Action, ev.Related, ev.ReportingInstance)
		}
	}

	// What a user sees: kubectl describe job lists the Created Event, from jobsched.
	name := created[0].Regarding.Name
	describe := exec.CommandContext(e.ctx, "kubectl", "describe", "job", "-n", e.ns, name, "--kubeconfig", kubeconfig)
	out, err := describe.CombinedOutput()
	if err != nil {
		t.Fatalf("kubectl describe job: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "Created") || !strings.Contains(string(out), "jobsched") ||
		!strings.Contains(string(out), fmt.Sprintf("task %q", jobs[name].Annotations["jobsched.io/task-key"])) {
		t.Errorf("kubectl describe job %s shows no Created Event from jobsched:\n%s", name, out)
	}

	// Metrics of tick 1.
	m := e.pushed("e2e")
	want := map[string]float64{
		`jobsched_pass_created_jobs{job="jobsched"}`: 2,
		`jobsched_pass_failed{job="jobsched"}`:       0,
		`jobsched_pass_blocked{job="jobsched"}`:      0,
		`jobsched_backlog_rows{job="jobsched"}`:      1, // task-2
		`jobsched_slots{job="jobsched"}`:             2,
	}
	for k, v := range want {
		if got, ok := m[k]; !ok || got != v {
			t.Errorf("pushed %s = %v (present %v), want %v", k, got, ok, v)
		}
	}
	success1 := m[`jobsched_last_success_timestamp_seconds{job="jobsched"}`]
	if success1 < float64(start.Unix()) {
		t.Errorf("jobsched_last_success_timestamp_seconds = %v, want at least %d (the tick's start)\n%v", success1, start.Unix(), m)
	}

	// Tick 2, in the pod: maxActive reached. Blocked regards the pod. It starts after tick 1 ended, and the last
	// success is pushed to the nanosecond: it is later than tick 1's without waiting for the next second.
	if r := e.run(pod, "tick", "--config", cfg); r.code != 0 || r.summary(t).Blocked == "" {
		t.Fatalf("tick 2: exit %d, want 0 and blocked:\n%s", r.code, r.stderr)
	}
	blocked := e.eventsWith("Blocked")
	if len(blocked) != 1 || blocked[0].Regarding != podRef || blocked[0].Type != "Normal" ||
		blocked[0].Note != "Created no Job: limits.maxActive: 2 of 2 unfinished" {
		t.Fatalf("Blocked Events after tick 2: %+v", blocked)
	}
	m = e.pushed("e2e")
	for k, v := range map[string]float64{
		`jobsched_pass_created_jobs{job="jobsched"}`:                  0,
		`jobsched_pass_blocked{job="jobsched"}`:                       1,
		`jobsched_slots{job="jobsched"}`:                              0,
		`jobsched_slots_limit_info{job="jobsched",limit="maxActive"}`: 1,
	} {
		if got, ok := m[k]; !ok || got != v {
			t.Errorf("after tick 2: pushed %s = %v (present %v), want %v", k, got, ok, v)
		}
	}
	if unfinished := m[`jobsched_jobs{job="jobsched",state="running"}`] + m[`jobsched_jobs{job="jobsched",state="starting"}`]; unfinished != 2 {
		t.Errorf("after tick 2: running + starting Jobs pushed %v, want 2\n%v", unfinished, m)
	}
	success2 := m[`jobsched_last_success_timestamp_seconds{job="jobsched"}`]
	if success2 <= success1 {
		t.Errorf("last success after tick 2 = %v, want later than %v", success2, success1)
	}

	// Tick 3, outside a pod: Blocked regards no object, in the scheduler's namespace.
	if r := e.run(nil, "tick", "--config", cfg); r.code != 0 {
		t.Fatalf("tick 3: exit %d:\n%s", r.code, r.stderr)
	}
	blocked = e.eventsWith("Blocked")
	if len(blocked) != 2 || blocked[1].Regarding != (corev1.ObjectReference{Namespace: e.ns}) || blocked[1].Related != nil {
		t.Fatalf("Blocked Events after tick 3 (outside a pod): %+v", blocked)
	}
	// The README's selector, on the core Events API that kubectl get events reads.
	core, err := e.kube.CoreV1().Events(e.ns).List(e.ctx, metav1.ListOptions{FieldSelector: "reportingComponent=jobsched,reason=Blocked"})
	if err != nil || len(core.Items) != 2 {
		t.Errorf("core Events with reportingComponent=jobsched,reason=Blocked: %v (err %v), want the 2 Blocked", core, err)
	}
	success3 := e.pushed("e2e")[`jobsched_last_success_timestamp_seconds{job="jobsched"}`]

	// Tick 4 fails: its Jobs gone, it reads rows from a database that is not there. It pushes failed=1 and
	// leaves the last success time of tick 3.
	for _, j := range e.jobs() {
		bg := metav1.DeletePropagationBackground
		if err := e.kube.BatchV1().Jobs(e.ns).Delete(e.ctx, j.Name, metav1.DeleteOptions{PropagationPolicy: &bg}); err != nil {
			t.Fatal(err)
		}
	}
	e.eventually("the Jobs gone", time.Minute, func() bool { return len(e.jobs()) == 0 })
	r = e.run([]string{"DATABASE_URL=postgres://nobody@127.0.0.1:1/none?sslmode=disable&connect_timeout=2"}, "tick", "--config", cfg)
	if r.code != 1 {
		t.Fatalf("tick 4 with no database: exit %d, want 1:\n%s", r.code, r.stderr)
	}
	m = e.pushed("e2e")
	if got := m[`jobsched_pass_failed{job="jobsched"}`]; got != 1 {
		t.Errorf("after the failed tick: jobsched_pass_failed = %v, want 1", got)
	}
	if got := m[`jobsched_last_success_timestamp_seconds{job="jobsched"}`]; got != success3 {
		t.Errorf("after the failed tick: last success %v, want tick 3's %v kept", got, success3)
	}
}

// TestObserveGC: gc reports a Deleted Event on each Job it deletes and pushes to --pushgateway, in its own group
// (job jobsched-gc).
func TestObserveGC(t *testing.T) {
	t.Parallel()
	needPushgateway(t)
	e := newNodeEnv(t, "8", "16Gi")
	e.insert("task", 1)
	e.worker()
	cfg := e.writeConfig(config{duration: "1s", extra: "limits:\n  capacity: quota\ngc:\n  succeededRetention: 0s\n"})
	e.tick(cfg)
	e.waitJobs(batchv1.JobComplete, 1)
	job := e.jobs()[0]
	r := e.jobsched("gc", "--config", cfg, "--pushgateway", pushgateway)
	if r.code != 0 || r.summary(t).Deleted != 1 {
		t.Fatalf("gc: exit %d, want 0 and 1 deleted:\n%s", r.code, r.stderr)
	}
	deleted := e.eventsWith("Deleted")
	if len(deleted) != 1 || deleted[0].Regarding.Name != job.Name || deleted[0].Regarding.UID != job.UID ||
		!strings.Contains(deleted[0].Note, `task "task-0", attempt 1, succeeded: gc.succeededRetention passed`) {
		t.Fatalf("Deleted Events: %+v", deleted)
	}
	m := e.pushed("e2e")
	if got := m[`jobsched_pass_deleted_jobs{job="jobsched-gc"}`]; got != 1 {
		t.Errorf("jobsched_pass_deleted_jobs of gc = %v, want 1\n%v", got, m)
	}
	if _, ok := m[`jobsched_last_success_timestamp_seconds{job="jobsched-gc"}`]; !ok {
		t.Errorf("gc pushed no last success\n%v", m)
	}
	if _, ok := m[`jobsched_last_success_timestamp_seconds{job="jobsched"}`]; ok {
		t.Errorf("the tick, which had no --pushgateway, pushed metrics\n%v", m)
	}
}

// TestObserveWithoutEventsRBAC: with the shipped Role less create on events, a tick still creates its Jobs and
// exits 0; the refusal is only logged. So is a Pushgateway that is not there.
func TestObserveWithoutEventsRBAC(t *testing.T) {
	t.Parallel()
	shipped, _ := shippedRules(t)
	e := newEnv(t)
	keys := e.insert("task", 2)
	cfg := e.writeConfig(config{extra: "limits:\n  capacity: quota\nmetrics:\n  pushgateway: http://" + tcpkit.ClosedPort(t) + "\n"})
	rules := withoutVerb(t, shipped, "events.k8s.io", "events", "create")
	e.kcfg = e.asServiceAccount("jobsched", rules, nil)
	e.waitAllowed(e.kcfg, rules, false)
	r := e.tick(cfg)
	if s := r.summary(t); s.Created != len(keys) || s.Failed != 0 {
		t.Errorf("tick without events create: created %d, failed %d; want %d and 0", s.Created, s.Failed, len(keys))
	}
	for _, want := range []string{`cannot create resource \"events\"`, "metrics not pushed"} {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("stderr lacks %s:\n%s", want, r.stderr)
		}
	}
	if evs := e.events(); len(evs) != 0 {
		t.Errorf("Events written without the permission: %+v", evs)
	}
	var uids []types.UID
	for _, j := range e.jobs() {
		uids = append(uids, j.UID)
	}
	if len(uids) != len(keys) {
		t.Errorf("%d Jobs, want %d", len(uids), len(keys))
	}
}

// TestObserveFillEventsAsTheyHappen: in a tick --fill-for run, the Created Event of its first pass is on the API
// server while the run still goes on (it waits for the Job, which runs 10 minutes), not only when it ends; a run then
// killed (SIGKILL, as activeDeadlineSeconds or an eviction would) keeps it.
func TestObserveFillEventsAsTheyHappen(t *testing.T) {
	t.Parallel()
	e, _, cfg := newTaskScenario(t, "2", "8Gi", 3, config{cpu: "1500m", duration: "10m"}) // 1 fits
	cmd, stderr := e.start(dsn, "tick", "--config", cfg, "--fill-for", "10m")
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	e.eventually("the first pass's Created Event, during the run", time.Minute, func() bool {
		select {
		case <-exited:
			t.Fatalf("the run ended before its Created Event was seen:\n%s", stderr)
		default:
		}
		return len(e.eventsWith("Created")) == 1
	})
	select {
	case <-exited:
		t.Fatalf("the run ended (its --fill-for is 10m):\n%s", stderr)
	default:
	}
	if strings.Contains(stderr.String(), fillEnded) {
		t.Fatalf("the run had ended its fill when the Event was seen:\n%s", stderr)
	}
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	<-exited
	jobs := e.jobs()
	created := e.eventsWith("Created")
	if len(jobs) != 1 || len(created) != 1 || created[0].Regarding.Name != jobs[0].Name || created[0].Regarding.UID != jobs[0].UID {
		t.Errorf("after the kill: Jobs %d, Created Events %+v; want the one Job's Event", len(jobs), created)
	}
}
