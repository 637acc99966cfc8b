//go:build integration

package e2e

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// dryRunPlan is what TestDryRunIsWhatTickDoes reads of `dry-run -o json`.
type dryRunPlan struct {
	Selected int `json:"selected"`
	Jobs     []struct {
		Name   string `json:"name"`
		Delete string `json:"delete"`
	} `json:"jobs"`
	Creates []struct {
		Queue      string       `json:"queue"`
		Job        *batchv1.Job `json:"job"`
		Supersedes *struct {
			Name   string `json:"name"`
			Delete string `json:"delete"`
		} `json:"supersedes"`
	} `json:"creates"`
	Skipped []struct{ Key, Reason string } `json:"skipped"`
	Queues  []queuePlan                    `json:"queues"`
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
// too large for a Job, and rows still selected after their Job succeeded).
func TestDryRunIsWhatTickDoes(t *testing.T) {
	t.Parallel()
	e := newQueuesEnv(t, "8", "16Gi")
	e.insertQueue("plain", "p", "", 4)
	e.exec(`INSERT INTO ` + e.table + ` (id, url, queue) VALUES ('p-big', repeat('x', 200000), 'plain')`) // over 128 KiB
	e.insertQueue("fit", "f", "", 8)
	quota := &corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Name: "cpu"},
		Spec: corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{corev1.ResourceRequestsCPU: resource.MustParse("2")}}}
	if _, err := e.kube.CoreV1().ResourceQuotas(e.ns).Create(e.ctx, quota, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	cfg := e.writeQueues(queuesConfig{limits: "{capacity: quota, maxPerTick: 20, maxActive: 30}",
		extra:  "gc: {succeededRetention: 0s}\nretry: {maxAttempts: 3, backoff: 0s}\n",
		queues: []queueSpec{{name: "plain", cpu: "50m", duration: "1s", fail: "first"}, {name: "fit", cpu: "600m", duration: "1s"}}})

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

	r := e.jobsched("dry-run", "--config", cfg, "-o", "json")
	if r.code != 0 {
		t.Fatalf("dry-run exited %d: %s", r.code, r.stderr)
	}
	var plan dryRunPlan
	if err := json.Unmarshal([]byte(r.stdout), &plan); err != nil {
		t.Fatalf("dry-run -o json: %v\n%s", err, r.stdout)
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
	if len(retired) == 0 || len(deletes) <= len(retired) || len(plan.Skipped) < 2 || !queues["plain"] || !queues["fit"] || !fitBound {
		t.Fatalf("the plan lacks a kind of write: %d deletes (%d of retried attempts), creates %v in queues %v, %d skips, queues %+v",
			len(deletes), len(retired), creates, queues, len(plan.Skipped), plan.Queues)
	}

	// The tick on the same state, as the API server saw its writes.
	var sum summary
	writes, added := e.writesOf(func() { sum = e.tick(cfg).summary(t) })

	var gotCreates, gotDeletes []string
	for _, w := range writes {
		verb, name, _ := strings.Cut(w, " ")
		if verb == "create" {
			gotCreates = append(gotCreates, name)
		} else {
			gotDeletes = append(gotDeletes, name)
		}
	}
	sorted := func(s []string) []string { return slices.Sorted(slices.Values(s)) }
	if !slices.Equal(sorted(creates), sorted(gotCreates)) {
		t.Errorf("dry-run planned the creates %v; tick made %v", sorted(creates), sorted(gotCreates))
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
	}
	if sum.Created != len(creates) || sum.Deleted != len(deletes) || sum.Skipped != len(plan.Skipped) || sum.Selected != plan.Selected || sum.Failed != 0 {
		t.Errorf("tick's pass done %+v; the plan: %d creates, %d deletes, %d skips, %d selected", sum, len(creates), len(deletes), len(plan.Skipped), plan.Selected)
	}
}
