//go:build integration

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	batchv1 "k8s.io/api/batch/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/jobsched/jobsched/pkg/jobmeta"
	"github.com/jobsched/jobsched/pkg/lease"
	"github.com/jobsched/jobsched/pkg/rate"
)

// dryRunPlan is what TestDryRunIsWhatTickDoes reads of `dry-run -o json`.
type dryRunPlan struct {
	NotKnown []string `json:"notKnown"`
	Selected int      `json:"selected"`
	Jobs     []struct {
		Name   string `json:"name"`
		Delete string `json:"delete"`
	} `json:"jobs"`
	Creates []struct {
		Queue      string              `json:"queue"`
		Key        string              `json:"key"`
		Requests   corev1.ResourceList `json:"requests"`
		Job        *batchv1.Job        `json:"job"`
		Supersedes *struct {
			Name   string `json:"name"`
			Delete string `json:"delete"`
		} `json:"supersedes"`
	} `json:"creates"`
	Skipped []struct {
		Key, Reason string
		Size        bool
	} `json:"skipped"`
	Queues []queuePlan `json:"queues"`
}

// queuePlan is what TestDryRunIsWhatTickDoes reads of a queue's part of the plan.
type queuePlan struct {
	Name    string `json:"name"`
	Limit   string `json:"limit"`
	Creates int    `json:"creates"`
}

// TestDryRunIsWhatTickDoes pins issue 28's promise, one plan: on one cluster and database state, `dry-run -o json`
// prints exactly the writes the tick after it makes, call by call as the API server's watch of the namespace's Jobs
// shows them: each delete (retention, and the failed attempt of each retry, after its retry exists) and each
// create, whole; and the tick's pass done counts what the plan holds. The state has two queues, one bound by its
// fit (a ResourceQuota), retries superseding failed attempts, succeeded Jobs past their retention, and skips (a row
// too large for a Job, and rows still selected after their Job succeeded). One planned name is held by another
// scheduler's Job, which no plan can know (issue 56): the dry run says what it cannot know (notKnown), and the tick
// records that create's outcome (a log line with outcome nameTaken) and counts it skipped; every other planned
// write is made. (A rate reservation the Lease refuses: TestDryRunRateRefused.)
func TestDryRunIsWhatTickDoes(t *testing.T) {
	t.Parallel()
	e := newQueuesEnv(t, "8", "16Gi")
	e.insertQueue("plain", "p", "", 4)
	e.exec(`INSERT INTO ` + e.table + ` (id, url, queue) VALUES ('p-big', repeat('x', 200000), 'plain')`) // over 128 KiB
	e.insertQueue("fit", "f", "", 8)
	// Rows that say their own cpu (job.requestsFrom): two that fit, one that is no quantity, one over maxRequests.
	e.exec(`ALTER TABLE ` + e.table + ` ADD COLUMN cpus text`)
	e.exec(`INSERT INTO ` + e.table + ` (id, url, queue, cpus) VALUES ('s-0', 'u', 'sized', '100m'), ('s-1', 'u', 'sized', '200m'),
		('s-2', 'u', 'sized', 'lots'), ('s-3', 'u', 'sized', '3')`)
	quota := &corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Name: "cpu"},
		Spec: corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{corev1.ResourceRequestsCPU: resource.MustParse("2")}}}
	if _, err := e.kube.CoreV1().ResourceQuotas(e.ns).Create(e.ctx, quota, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	cfg := e.writeQueues(queuesConfig{limits: "{capacity: quota, maxPerTick: 20, maxActive: 30}",
		extra: "gc: {succeededRetention: 0s}\nretry: {maxAttempts: 3, backoff: 0s}\n",
		queues: []queueSpec{{name: "plain", cpu: "50m", duration: "1s", fail: "first"}, {name: "fit", cpu: "600m", duration: "1s"},
			{name: "sized", cpu: "50m", duration: "1s", fail: "first", columns: "id, url, tenant, cpus",
				job: "    requestsFrom: {cpu: cpus}\n    maxRequests: {cpu: 1}\n"}}})

	// The state: a first tick's Jobs, all finished (attempt 1 of plain's tasks failed, fit's succeeded), and the
	// quota's usage back to none, so that nothing changes between the dry run and the tick.
	e.tick(cfg)
	e.eventually("the first tick's Jobs finished and the quota unused", 2*time.Minute, func() bool {
		for _, j := range e.jobs() {
			if !finished(&j) {
				return false
			}
		}
		q, err := e.kube.CoreV1().ResourceQuotas(e.ns).Get(e.ctx, "cpu", metav1.GetOptions{})
		used, ok := q.Status.Used[corev1.ResourceRequestsCPU]
		return err == nil && ok && used.IsZero()
	})

	// Another scheduler's Job (suspended: it makes no pod) holds the name of a new row's planned Job.
	taken := ""
	for _, c := range e.dryRunPlan(cfg).Creates {
		if c.Supersedes == nil {
			taken = c.Job.Name
			break
		}
	}
	if taken == "" {
		t.Fatal("the plan creates no Job for a new row")
	}
	foreign := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: taken, Labels: map[string]string{jobmeta.LabelScheduler: "another"}},
		Spec: batchv1.JobSpec{Suspend: ptr.To(true), Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
			RestartPolicy: corev1.RestartPolicyNever, Containers: []corev1.Container{{Name: "other", Image: "other:1"}}}}}}
	if _, err := e.kube.BatchV1().Jobs(e.ns).Create(e.ctx, foreign, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	plan := e.dryRunPlan(cfg)
	if !slices.ContainsFunc(plan.NotKnown, func(k string) bool { return strings.Contains(k, "holds a planned name") }) {
		t.Errorf("dry-run does not say it cannot know whether a name is free: notKnown %q", plan.NotKnown)
	}
	var deletes, retired, creates []string
	for _, j := range plan.Jobs {
		if j.Delete != "" {
			deletes = append(deletes, j.Name)
		}
	}
	queues := map[string]bool{}
	for _, c := range plan.Creates {
		creates = append(creates, c.Job.Name)
		queues[c.Queue] = true
		if s := c.Supersedes; s != nil {
			retired = append(retired, s.Name)
			if !slices.Contains(deletes, s.Name) || s.Delete == "" {
				t.Errorf("the failed attempt %s that %s supersedes is not among jobs[]'s deletes %v", s.Name, c.Job.Name, deletes)
			}
		}
	}
	// The scenario is what it says: each kind of write and skip is in the plan.
	fitBound := slices.ContainsFunc(plan.Queues, func(q queuePlan) bool {
		return q.Name == "fit" && strings.HasPrefix(q.Limit, "capacity:") && q.Creates > 0
	})
	sorted := func(s []string) []string { return slices.Sorted(slices.Values(s)) }
	// The sized queue: its retries ask their rows' cpu, its bad rows are size skips.
	sizedReqs := map[string]string{}
	for _, c := range plan.Creates {
		if c.Queue == "sized" {
			sizedReqs[c.Key] = c.Requests.Cpu().String()
		}
	}
	var sizeSkips []string
	for _, sk := range plan.Skipped {
		if sk.Size {
			sizeSkips = append(sizeSkips, sk.Key)
		}
	}
	if !maps.Equal(sizedReqs, map[string]string{"s-0": "100m", "s-1": "200m"}) || !slices.Equal(sorted(sizeSkips), []string{"s-2", "s-3"}) {
		t.Errorf("the sized queue's creates ask %v, its size skips %v; want s-0 100m, s-1 200m; s-2, s-3", sizedReqs, sizeSkips)
	}
	if len(retired) == 0 || len(deletes) <= len(retired) || len(plan.Skipped) < 2 || !queues["plain"] || !queues["fit"] || !queues["sized"] || !fitBound {
		t.Fatalf("the plan lacks a kind of write: %d deletes (%d of retried attempts), creates %v in queues %v, %d skips, queues %+v",
			len(deletes), len(retired), creates, queues, len(plan.Skipped), plan.Queues)
	}

	// The tick on the same state, as the API server saw its writes.
	var sum summary
	var nameTaken []string // the Jobs the tick found their name taken for, as its outcome lines say
	writes, added := e.writesOf(func() {
		r := e.tick(cfg)
		sum, nameTaken = r.summary(t), outcomesOf(t, r.stderr, "nameTaken")
	})
	if !slices.Equal(nameTaken, []string{taken}) {
		t.Errorf("the tick recorded the outcome nameTaken for %v, want %s (another scheduler's Job holds it)", nameTaken, taken)
	}

	var gotCreates, gotDeletes []string
	for _, w := range writes {
		verb, name, _ := strings.Cut(w, " ")
		if verb == "create" {
			gotCreates = append(gotCreates, name)
		} else {
			gotDeletes = append(gotDeletes, name)
		}
	}
	made := slices.DeleteFunc(slices.Clone(creates), func(n string) bool { return slices.Contains(nameTaken, n) })
	if !slices.Equal(sorted(made), sorted(gotCreates)) {
		t.Errorf("dry-run planned the creates %v (%v: name taken, as the tick recorded); tick made %v", sorted(creates), nameTaken, sorted(gotCreates))
	}
	if !slices.Equal(sorted(deletes), sorted(gotDeletes)) {
		t.Errorf("dry-run planned the deletes %v; tick made %v", sorted(deletes), sorted(gotDeletes))
	}
	// The order the plan promises: a retried attempt only after its retry (the finished Jobs' deletes run beside
	// the creates, in no order with them: scheduler.TestDeletesBeside).
	for _, c := range plan.Creates {
		if c.Supersedes != nil && slices.Index(writes, "delete "+c.Supersedes.Name) < slices.Index(writes, "create "+c.Job.Name) {
			t.Errorf("%s was deleted before its retry %s existed: %v", c.Supersedes.Name, c.Job.Name, writes)
		}
		// The Job created is the planned one, as the plan printed it: its labels, annotations and pod template.
		got, want := added[c.Job.Name], c.Job
		if got == nil {
			continue
		}
		for k, v := range want.Labels {
			if got.Labels[k] != v {
				t.Errorf("%s: label %s = %q, planned %q", c.Job.Name, k, got.Labels[k], v)
			}
		}
		for k, v := range want.Annotations {
			if got.Annotations[k] != v {
				t.Errorf("%s: annotation %s = %q, planned %q", c.Job.Name, k, got.Annotations[k], v)
			}
		}
		if g, w := got.Spec.Template.Spec.Containers[0].Env, want.Spec.Template.Spec.Containers[0].Env; !equality.Semantic.DeepEqual(g, w) {
			t.Errorf("%s: env %v, planned %v", c.Job.Name, g, w)
		}
		if g, w := got.Spec.Template.Spec.Containers[0].Resources, want.Spec.Template.Spec.Containers[0].Resources; !equality.Semantic.DeepEqual(g, w) {
			t.Errorf("%s: resources %v, planned %v", c.Job.Name, g, w)
		}
	}
	if sum.Created != len(made) || sum.Deleted != len(deletes) || sum.Skipped != len(plan.Skipped)+len(nameTaken) || sum.SkippedSize != len(sizeSkips) ||
		sum.Selected != plan.Selected || sum.Failed != 0 {
		t.Errorf("tick's pass done %+v; the plan: %d creates (%d names taken), %d deletes, %d skips, %d selected", sum, len(creates), len(nameTaken),
			len(deletes), len(plan.Skipped), plan.Selected)
	}
	if _, err := e.kube.BatchV1().Jobs(e.ns).Get(e.ctx, taken, metav1.GetOptions{}); err != nil {
		t.Errorf("the other scheduler's Job %s: %v", taken, err)
	}
}

// dryRunPlan is `dry-run -o json` of config cfg.
func (e *env) dryRunPlan(cfg string) dryRunPlan {
	e.t.Helper()
	r := e.jobsched("dry-run", "--config", cfg, "-o", "json")
	if r.code != 0 {
		e.t.Fatalf("dry-run exited %d: %s", r.code, r.stderr)
	}
	var plan dryRunPlan
	if err := json.Unmarshal([]byte(r.stdout), &plan); err != nil {
		e.t.Fatalf("dry-run -o json: %v\n%s", err, r.stdout)
	}
	return plan
}

// outcomesOf are the Jobs of the lines of a pass's log (stderr) that record the outcome of a planned create, in order.
func outcomesOf(t *testing.T, stderr, outcome string) []string {
	t.Helper()
	var out []string
	for _, line := range strings.Split(stderr, "\n") {
		if !strings.Contains(line, `"outcome"`) {
			continue
		}
		var l struct{ Outcome, Job string }
		if err := json.Unmarshal([]byte(line), &l); err != nil {
			t.Fatalf("a log line that is not JSON: %v: %s", err, line)
		}
		if l.Outcome == outcome {
			out = append(out, l.Job)
		}
	}
	return out
}

// TestDryRunRateRefused: with limits.rate a tick writes its creates in the Lease's rate record before it makes them
// (the reservation). When the API server refuses that write (here a ValidatingAdmissionPolicy that lets no update of
// this namespace's Leases change the record), the tick makes none of the creates dry-run planned, records that
// outcome (a log line with outcome reservationRefused) and counts them notCreated; dry-run said it cannot know it
// (notKnown). Issue 56: dry-run printed creates where tick made none, silently.
func TestDryRunRateRefused(t *testing.T) {
	t.Parallel()
	e := newNodeEnv(t, "8", "16Gi")
	cfg := e.writeConfig(config{extra: "limits:\n  maxActive: 10\n  maxPerTick: 10\n  capacity: off\n  rate: {creates: 10, per: 2s}\n"})
	// The Lease and its record, made by a tick with no row, older than per (a younger Lease counts a full window).
	e.tick(cfg)
	ls, err := e.kube.CoordinationV1().Leases(e.ns).Get(e.ctx, lease.Name("e2e"), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	e.eventually("the Lease older than limits.rate.per", 30*time.Second, func() bool {
		return time.Since(ls.CreationTimestamp.Time) > 3*time.Second
	})
	e.refuseRateRecord()
	e.insert("task", 3)

	plan := e.dryRunPlan(cfg)
	if len(plan.Creates) != 3 || !slices.ContainsFunc(plan.NotKnown, func(k string) bool { return strings.Contains(k, "rate reservation") }) {
		t.Fatalf("dry-run plans %d creates (want 3) and says it cannot know %q (want the rate reservation among it)", len(plan.Creates), plan.NotKnown)
	}
	var r result
	writes, _ := e.writesOf(func() { r = e.jobsched("tick", "--config", cfg) })
	sum := r.summary(t)
	if r.code != 1 || len(writes) != 0 || sum.NotCreated != len(plan.Creates) || sum.Created != 0 {
		t.Errorf("tick exited %d, wrote %v, pass done %+v; want exit 1, no write, the %d planned creates notCreated:\n%s",
			r.code, writes, sum, len(plan.Creates), r.stderr)
	}
	if !strings.Contains(r.stderr, `"outcome":"reservationRefused"`) {
		t.Errorf("the tick did not record the outcome reservationRefused:\n%s", r.stderr)
	}
}

// refuseRateRecord makes the API server refuse, in the scenario's namespace, every update of a Lease that changes
// its rate record (a ValidatingAdmissionPolicy and its binding, removed when the test ends), and waits until it does.
func (e *env) refuseRateRecord() {
	e.t.Helper()
	const key = rate.Annotation
	value := func(o string) string {
		return fmt.Sprintf("(has(%[1]s.metadata.annotations) && '%[2]s' in %[1]s.metadata.annotations ? %[1]s.metadata.annotations['%[2]s'] : '')", o, key)
	}
	name := "refuse-rate-record-" + e.ns
	policy := &admissionregistrationv1.ValidatingAdmissionPolicy{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{
			FailurePolicy: ptr.To(admissionregistrationv1.Fail),
			MatchConstraints: &admissionregistrationv1.MatchResources{ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{
				RuleWithOperations: admissionregistrationv1.RuleWithOperations{
					Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Update},
					Rule: admissionregistrationv1.Rule{APIGroups: []string{"coordination.k8s.io"}, APIVersions: []string{"v1"},
						Resources: []string{"leases"}}}}}},
			Validations: []admissionregistrationv1.Validation{{Expression: value("object") + " == " + value("oldObject"),
				Message: "the rate record may not change here (an e2e test's policy)"}}}}
	binding := &admissionregistrationv1.ValidatingAdmissionPolicyBinding{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{PolicyName: name,
			ValidationActions: []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny},
			MatchResources: &admissionregistrationv1.MatchResources{NamespaceSelector: &metav1.LabelSelector{
				MatchLabels: map[string]string{"kubernetes.io/metadata.name": e.ns}}}}}
	api := e.kube.AdmissionregistrationV1()
	if _, err := api.ValidatingAdmissionPolicies().Create(e.ctx, policy, metav1.CreateOptions{}); err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() {
		_ = api.ValidatingAdmissionPolicyBindings().Delete(context.Background(), name, metav1.DeleteOptions{})
		_ = api.ValidatingAdmissionPolicies().Delete(context.Background(), name, metav1.DeleteOptions{})
	})
	if _, err := api.ValidatingAdmissionPolicyBindings().Create(e.ctx, binding, metav1.CreateOptions{}); err != nil {
		e.t.Fatal(err)
	}
	// The API server applies a policy once its informers see it: probe with a Lease of the test's own.
	probe, err := e.kube.CoordinationV1().Leases(e.ns).Create(e.ctx, &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "probe"}}, metav1.CreateOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	probe.Annotations = map[string]string{key: "changed"}
	e.eventually("the policy refusing a change of the rate record", 30*time.Second, func() bool {
		_, err := e.kube.CoordinationV1().Leases(e.ns).Update(e.ctx, probe, metav1.UpdateOptions{DryRun: []string{metav1.DryRunAll}})
		return apierrors.IsInvalid(err) || apierrors.IsForbidden(err)
	})
}
