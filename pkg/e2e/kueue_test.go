//go:build integration

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/yaml"

	"github.com/jobsched/jobsched/pkg/jobmeta"
)

// TestKueue runs jobsched in limits.capacity: kueue against a real Kueue: its manager built from source (v0.19.2),
// its webhooks suspending each Job, its scheduler admitting them by ClusterQueue quota, on a control plane of its own
// (KUEUE=1 scripts/cluster.sh up with its own JOBSCHED_CLUSTER_DIR: JOBSCHED_KUEUE_CLUSTER_DIR, else a directory of
// this run's own that is taken down afterwards), so the shared cluster's Jobs never pass Kueue's webhooks.
func TestKueue(t *testing.T) {
	t.Parallel() // its own control plane: nothing it does reaches the shared one
	kcfg := kueueCluster(t)
	t.Run("bounded", func(t *testing.T) { testKueueBounded(t, kcfg) })
	t.Run("priority", func(t *testing.T) { testKueuePriority(t, kcfg) })
	t.Run("eviction", func(t *testing.T) { testKueueEviction(t, kcfg) })
	t.Run("rbac", func(t *testing.T) { testKueueRBAC(t, kcfg) })
	t.Run("multikueue", func(t *testing.T) { testMultiKueue(t, kcfg) })
	t.Run("sized", func(t *testing.T) { testKueueSized(t, kcfg) })
}

// kueueCluster starts the test's own control plane with Kueue and returns its kubeconfig.
func kueueCluster(t *testing.T) string {
	t.Helper()
	return kueueClusterIn(t, "JOBSCHED_KUEUE_CLUSTER_DIR", "cluster-kueue-test-")
}

// kueueClusterIn is kueueCluster with the state directory from variable env, else a new one named prefix-….
func kueueClusterIn(t *testing.T, env, prefix string) string {
	t.Helper()
	kcfg, _ := ownCluster(t, os.Getenv(env), prefix, map[string]string{"KUEUE": "1", "NODES": "0"})
	return kcfg
}

// kueueEnv is a scenario on the Kueue cluster: its namespace, one roomy node, and its own ResourceFlavor,
// ClusterQueue (quota for quotaPods task pods of 100m CPU and 64Mi) and LocalQueue.
type kueueEnv struct {
	*env
	dyn        dynamic.Interface
	cq, lq, rf string
}

var (
	gvrResourceFlavor = schema.GroupVersionResource{Group: "kueue.x-k8s.io", Version: "v1beta2", Resource: "resourceflavors"}
	gvrClusterQueue   = schema.GroupVersionResource{Group: "kueue.x-k8s.io", Version: "v1beta2", Resource: "clusterqueues"}
	gvrLocalQueue     = schema.GroupVersionResource{Group: "kueue.x-k8s.io", Version: "v1beta2", Resource: "localqueues"}
	gvrWorkload       = schema.GroupVersionResource{Group: "kueue.x-k8s.io", Version: "v1beta2", Resource: "workloads"}
	gvrPriorityClass  = schema.GroupVersionResource{Group: "kueue.x-k8s.io", Version: "v1beta2", Resource: "workloadpriorityclasses"}
)

func newKueueEnv(t *testing.T, kcfg string, quotaPods int, preempt bool) *kueueEnv {
	t.Helper()
	e := newEnvOn(t, kcfg)
	cfg, err := clientcmd.BuildConfigFromFlags("", kcfg)
	if err != nil {
		t.Fatal(err)
	}
	k := &kueueEnv{env: e, dyn: dynamic.NewForConfigOrDie(cfg), cq: e.pool, lq: "team", rf: e.pool}
	e.addNode("n0", "4", "8Gi", 110, nil)
	k.create(gvrResourceFlavor, fmt.Sprintf("{apiVersion: kueue.x-k8s.io/v1beta2, kind: ResourceFlavor, metadata: {name: %s}}", k.rf))
	preemption := ""
	if preempt {
		preemption = "preemption: {withinClusterQueue: LowerPriority}"
	}
	k.create(gvrClusterQueue, fmt.Sprintf(`apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {name: %s}
spec:
  namespaceSelector: {matchLabels: {kubernetes.io/metadata.name: %s}}
  %s
  resourceGroups:
  - coveredResources: [cpu, memory]
    flavors:
    - name: %s
      resources:
      - {name: cpu, nominalQuota: %dm}
      - {name: memory, nominalQuota: %dMi}
`, k.cq, e.ns, preemption, k.rf, 100*quotaPods, 64*quotaPods))
	k.create(gvrLocalQueue, fmt.Sprintf("{apiVersion: kueue.x-k8s.io/v1beta2, kind: LocalQueue, metadata: {name: %s, namespace: %s}, spec: {clusterQueue: %s}}", k.lq, e.ns, k.cq))
	return k
}

// create makes a Kueue object from YAML; cluster-scoped ones are deleted after the scenario (the namespace takes
// the rest).
func (k *kueueEnv) create(gvr schema.GroupVersionResource, doc string) *unstructured.Unstructured {
	k.t.Helper()
	u := &unstructured.Unstructured{}
	if err := yaml.Unmarshal([]byte(doc), &u.Object); err != nil {
		k.t.Fatalf("%v in:\n%s", err, doc)
	}
	var ri dynamic.ResourceInterface = k.dyn.Resource(gvr)
	if ns := u.GetNamespace(); ns != "" {
		ri = k.dyn.Resource(gvr).Namespace(ns)
	} else {
		k.t.Cleanup(func() { _ = k.dyn.Resource(gvr).Delete(context.Background(), u.GetName(), metav1.DeleteOptions{}) })
	}
	out, err := ri.Create(k.ctx, u, metav1.CreateOptions{})
	if err != nil {
		k.t.Fatalf("creating %s %s: %v", u.GetKind(), u.GetName(), err)
	}
	return out
}

// kueueConfig is the scheduler's config in the Kueue mode.
func (k *kueueEnv) config(c config, limits, kueueExtra string) string {
	c.extra = fmt.Sprintf("limits:\n  capacity: kueue\n%skueue:\n  localQueue: %s\n%s", limits, k.lq, kueueExtra) + c.extra
	return k.writeConfig(c)
}

// kueueWatch follows every Job and pod of the namespace from before the first tick and keeps what the scenario
// asserts: the most Jobs ever suspended (queued) and ever running unsuspended (admitted) at once, the order in which
// Jobs were first admitted, and every pod that was ever Unschedulable.
type kueueWatch struct {
	mu            sync.Mutex
	jobs          map[types.UID]*batchv1.Job
	maxQueued     int
	maxAdmitted   int
	admitted      []string // Job names, in the order they were first unsuspended
	completed     map[string]bool
	unschedulable map[string]bool
}

func (k *kueueEnv) watch() *kueueWatch {
	w := &kueueWatch{jobs: map[types.UID]*batchv1.Job{}, unschedulable: map[string]bool{}, completed: map[string]bool{}}
	k.follow(func() (string, error) {
		l, err := k.kube.BatchV1().Jobs(k.ns).List(k.ctx, metav1.ListOptions{})
		if err != nil {
			return "", err
		}
		return l.ResourceVersion, nil
	}, func(rv string) (watch.Interface, error) {
		return k.kube.BatchV1().Jobs(k.ns).Watch(k.ctx, metav1.ListOptions{ResourceVersion: rv})
	}, func(ev watch.Event) {
		job, ok := ev.Object.(*batchv1.Job)
		if !ok {
			return
		}
		w.mu.Lock()
		defer w.mu.Unlock()
		if ev.Type == watch.Deleted {
			delete(w.jobs, job.UID)
		} else {
			if prev := w.jobs[job.UID]; (prev == nil || suspended(prev)) && !suspended(job) && !finished(job) {
				w.admitted = append(w.admitted, job.Name)
			}
			w.jobs[job.UID] = job
		}
		for _, c := range job.Status.Conditions { // a deleted Job's last state counts too
			if c.Type == batchv1.JobComplete && c.Status == corev1.ConditionTrue {
				w.completed[job.Name] = true
			}
		}
		queued, admitted := 0, 0
		for _, j := range w.jobs {
			switch {
			case finished(j):
			case suspended(j):
				queued++
			default:
				admitted++
			}
		}
		w.maxQueued, w.maxAdmitted = max(w.maxQueued, queued), max(w.maxAdmitted, admitted)
	})
	k.follow(func() (string, error) {
		l, err := k.kube.CoreV1().Pods(k.ns).List(k.ctx, metav1.ListOptions{})
		if err != nil {
			return "", err
		}
		return l.ResourceVersion, nil
	}, func(rv string) (watch.Interface, error) {
		return k.kube.CoreV1().Pods(k.ns).Watch(k.ctx, metav1.ListOptions{ResourceVersion: rv})
	}, func(ev watch.Event) {
		if pod, ok := ev.Object.(*corev1.Pod); ok && unschedulable(pod) {
			w.mu.Lock()
			w.unschedulable[pod.Name] = true
			w.mu.Unlock()
		}
	})
	return w
}

func suspended(j *batchv1.Job) bool { return j.Spec.Suspend != nil && *j.Spec.Suspend }

func finished(j *batchv1.Job) bool {
	for _, c := range j.Status.Conditions {
		if (c.Type == batchv1.JobComplete || c.Type == batchv1.JobFailed) && c.Status == corev1.ConditionTrue {
			return true
		}
	}
	return false
}

// kueueStatus is what the scenarios read of `jobsched status -o json`.
type kueueStatus struct {
	States map[string]int `json:"states"`
	Slots  int            `json:"slots"`
	Limit  string         `json:"limit"`
	Kueue  *struct {
		MaxQueued   int    `json:"maxQueued"`
		Unavailable string `json:"unavailable"`
		LocalQueue  *struct {
			Name         string `json:"name"`
			Found        bool   `json:"found"`
			ClusterQueue string `json:"clusterQueue"`
			Pending      int    `json:"pending"`
			Admitted     int    `json:"admitted"`
		} `json:"localQueue"`
	} `json:"kueue"`
	Jobs []struct {
		Name   string `json:"name"`
		Key    string `json:"key"`
		State  string `json:"state"`
		Reason string `json:"reason"`
	} `json:"jobs"`
}

func (k *kueueEnv) status(cfg string) kueueStatus {
	k.t.Helper()
	r := k.jobsched("status", "--config", cfg, "-o", "json")
	if r.code != 0 {
		k.t.Fatalf("status exited %d:\n%s", r.code, r.stderr)
	}
	var st kueueStatus
	if err := json.Unmarshal([]byte(r.stdout), &st); err != nil {
		k.t.Fatalf("%v in:\n%s", err, r.stdout)
	}
	return st
}

// drain ticks (as the CronJob would, back to back) until every row is done and no Job is left unfinished (with
// gc.succeededRetention 0s a pass deletes each succeeded Job; the watch saw them complete), calling each with every
// pass's summary.
func (k *kueueEnv) drain(cfg string, rows int, each func(summary)) {
	k.t.Helper()
	k.eventually(fmt.Sprintf("%d rows done and no Job unfinished", rows), 4*time.Minute, func() bool {
		s := k.tick(cfg).summary(k.t)
		if each != nil {
			each(s)
		}
		done := 0
		for _, st := range k.statuses() {
			if st == "done" {
				done++
			}
		}
		for _, j := range k.jobs() {
			if !finished(&j) {
				return false
			}
		}
		return done == rows
	})
}

// testKueueBounded: a ClusterQueue with quota for exactly 2 task pods, 10 rows, maxQueued 3. jobsched never has more
// than 3 Jobs waiting in Kueue, Kueue never runs more than 2, every row is done with exactly one Job, and no pod is
// ever Unschedulable (Kueue admits only what its quota holds; the node has room for all).
func testKueueBounded(t *testing.T, kcfg string) {
	k := newKueueEnv(t, kcfg, 2, false)
	keys := k.insert("row", 10)
	cfg := k.config(config{duration: "2s"}, "  maxQueued: 3\n", "")
	l := k.ledger()
	w := k.watch()
	k.worker()

	first := k.tick(cfg).summary(t)
	if first.Created != 3 {
		t.Errorf("first tick created %d Jobs, want 3 (maxQueued: 3, nothing waits yet)", first.Created)
	}
	// Kueue admits two and holds the third: status says why, from the Workload, and shows the LocalQueue.
	var st kueueStatus
	k.eventually("two admitted, one queued with Kueue's reason", time.Minute, func() bool {
		st = k.status(cfg)
		return st.States["queued"] == 1 && st.Kueue != nil && st.Kueue.LocalQueue != nil && st.Kueue.LocalQueue.Admitted == 2 &&
			st.Kueue.LocalQueue.Pending == 1 && queuedReason(st, "insufficient")
	})
	if st.Kueue.MaxQueued != 3 || st.Kueue.Unavailable != "" || st.Kueue.LocalQueue.ClusterQueue != k.cq || st.Slots != 2 ||
		!strings.Contains(st.Limit, "limits.maxQueued: 1 of 3 queued") {
		t.Errorf("status: kueue %+v local queue %+v, slots %d (%s); want maxQueued 3, ClusterQueue %s, slots 2 bound by limits.maxQueued",
			*st.Kueue, *st.Kueue.LocalQueue, st.Slots, st.Limit, k.cq)
	}

	k.drain(cfg, 10, func(s summary) {
		if s.Failed != 0 || s.Blocked != "" && !strings.Contains(s.Blocked, "maxQueued") && !strings.Contains(s.Blocked, "no rows") {
			t.Errorf("a pass failed or was blocked for another reason: %+v", s)
		}
	})
	// The drain ends on a list that shows every Job finished; the watch delivers the last completions a moment later.
	k.eventually("the watch seeing 10 Jobs complete", time.Minute, func() bool {
		w.mu.Lock()
		defer w.mu.Unlock()
		return len(w.completed) >= 10
	})
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.maxQueued > 3 {
		t.Errorf("%d Jobs were queued at once; maxQueued is 3", w.maxQueued)
	}
	if w.maxAdmitted > 2 {
		t.Errorf("%d Jobs ran at once; the ClusterQueue holds 2", w.maxAdmitted)
	}
	if w.maxQueued == 0 || w.maxAdmitted < 2 {
		t.Errorf("never saw a queued Job (%d) or 2 admitted ones (%d): the scenario did not exercise Kueue", w.maxQueued, w.maxAdmitted)
	}
	if len(w.unschedulable) > 0 {
		t.Errorf("pods were Unschedulable: %v", w.unschedulable)
	}
	for _, key := range keys {
		if n := l.created()[key]; n != 1 {
			t.Errorf("row %s got %d Jobs, want exactly 1", key, n)
		}
	}
	if len(w.completed) != 10 {
		t.Errorf("%d Jobs completed, want 10", len(w.completed))
	}
}

// queuedReason: a queued Job's reason in status carries Kueue's word (from its Workload's conditions).
func queuedReason(st kueueStatus, word string) bool {
	for _, j := range st.Jobs {
		if j.State == "queued" && strings.Contains(j.Reason, word) {
			return true
		}
	}
	return false
}

// testKueuePriority: rows of a low and of a high WorkloadPriorityClass (kueue.priorityColumn) wait together while the
// ClusterQueue is held; once it is released, the high row's Job is admitted first, though its row comes last.
func testKueuePriority(t *testing.T, kcfg string) {
	k := newKueueEnv(t, kcfg, 1, false)
	for name, value := range map[string]int{"low": 10, "high": 1000} {
		k.create(gvrPriorityClass, fmt.Sprintf("{apiVersion: kueue.x-k8s.io/v1beta2, kind: WorkloadPriorityClass, metadata: {name: %s-%s}, value: %d}", k.pool, name, value))
	}
	hold := func(policy string) {
		patch := fmt.Sprintf(`{"spec":{"stopPolicy":%q}}`, policy)
		if _, err := k.dyn.Resource(gvrClusterQueue).Patch(k.ctx, k.cq, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	hold("Hold")
	k.exec(`ALTER TABLE ` + k.table + ` ADD COLUMN prio text`)
	k.insert("low", 3)
	k.exec(`INSERT INTO `+k.table+` (id, url, prio) VALUES ('high-0', 'u', $1)`, k.pool+"-high")
	cfg := k.config(config{duration: "1s", query: fmt.Sprintf("SELECT id, url, prio FROM %s WHERE status = 'waiting' ORDER BY n", k.table)},
		"  maxQueued: 4\n", fmt.Sprintf("  priorityClass: %s-low\n  priorityColumn: prio\n", k.pool))
	w := k.watch()
	k.worker()

	if s := k.tick(cfg).summary(t); s.Created != 4 {
		t.Fatalf("the tick created %d Jobs, want all 4", s.Created)
	}
	for _, j := range k.jobs() {
		want := k.pool + "-low"
		if j.Annotations[jobmeta.AnnotationTaskKey] == "high-0" {
			want = k.pool + "-high"
		}
		if got := j.Labels["kueue.x-k8s.io/priority-class"]; got != want {
			t.Errorf("Job %s has priority class %q, want %q", j.Name, got, want)
		}
	}
	k.eventually("4 Workloads pending while the ClusterQueue is held", time.Minute, func() bool {
		l, err := k.dyn.Resource(gvrWorkload).Namespace(k.ns).List(k.ctx, metav1.ListOptions{})
		return err == nil && len(l.Items) == 4 && k.status(cfg).States["queued"] == 4
	})
	hold("None")
	k.drain(cfg, 4, nil)
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.admitted) == 0 || !strings.Contains(w.admitted[0], "high-0") {
		t.Errorf("admitted in the order %v, want the high row's Job first", w.admitted)
	}
	if w.maxAdmitted > 1 {
		t.Errorf("%d Jobs ran at once; the ClusterQueue holds 1", w.maxAdmitted)
	}
}

// testKueueEviction: a low-priority row's Job runs; a high-priority row arrives, and Kueue preempts the low one
// (ClusterQueue preemption withinClusterQueue: LowerPriority): Kueue suspends the Job again and requeues its Workload.
// jobsched counts it as queued, with Kueue's reason, creates no second Job for it and no next attempt: once the high
// row is done, the same Job (attempt 1) is admitted again and completes.
func testKueueEviction(t *testing.T, kcfg string) {
	k := newKueueEnv(t, kcfg, 1, true)
	for name, value := range map[string]int{"low": 10, "high": 1000} {
		k.create(gvrPriorityClass, fmt.Sprintf("{apiVersion: kueue.x-k8s.io/v1beta2, kind: WorkloadPriorityClass, metadata: {name: %s-%s}, value: %d}", k.pool, name, value))
	}
	k.exec(`ALTER TABLE ` + k.table + ` ADD COLUMN prio text`)
	k.exec(`INSERT INTO `+k.table+` (id, url, prio) VALUES ('low-0', 'u', $1)`, k.pool+"-low")
	cfg := k.config(config{duration: "6s", query: fmt.Sprintf("SELECT id, url, prio FROM %s WHERE status = 'waiting' ORDER BY n", k.table)},
		"  maxQueued: 2\n", "  priorityColumn: prio\n")
	l := k.ledger()
	w := k.watch()
	// The worker closes a row only when its pod succeeds: the low row must still be selected after its eviction.
	k.workerOn(corev1.PodSucceeded)

	k.tick(cfg)
	k.eventually("the low row's pod running", time.Minute, func() bool {
		for _, p := range k.pods() {
			if p.Status.Phase == corev1.PodRunning {
				return true
			}
		}
		return false
	})
	k.exec(`INSERT INTO `+k.table+` (id, url, prio) VALUES ('high-0', 'u', $1)`, k.pool+"-high")
	k.tick(cfg)
	var st kueueStatus
	k.eventually("the low row's Job evicted and queued", time.Minute, func() bool {
		st = k.status(cfg)
		for _, j := range st.Jobs {
			if j.Key == "low-0" && j.State == "queued" && strings.Contains(j.Reason, "evicted") {
				return true
			}
		}
		return false
	})
	// status KEY shows the attempt's Workload with its Evicted condition.
	r := k.jobsched("status", "--config", cfg, "-o", "json", "low-0")
	var task struct {
		State    string `json:"state"`
		Attempts []struct {
			Attempt  int `json:"attempt"`
			Workload *struct {
				Name       string `json:"name"`
				Conditions []struct{ Type, Status, Reason string }
			} `json:"kueueWorkload"`
		} `json:"attempts"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &task); err != nil || r.code != 0 {
		t.Fatalf("status low-0: exit %d, %v:\n%s%s", r.code, err, r.stdout, r.stderr)
	}
	evictedSeen := false
	if len(task.Attempts) == 1 && task.Attempts[0].Workload != nil {
		for _, c := range task.Attempts[0].Workload.Conditions {
			evictedSeen = evictedSeen || c.Type == "Evicted" && c.Status == "True"
		}
	}
	if task.State != "queued" || !evictedSeen {
		t.Errorf("status low-0: %s, want one attempt, queued, with its Workload's Evicted condition", r.stdout)
	}
	k.drain(cfg, 2, func(s summary) {
		if s.Failed != 0 {
			t.Errorf("a pass failed: %+v", s)
		}
	})
	if n := l.created()["low-0"]; n != 1 {
		t.Errorf("the evicted row got %d Jobs, want 1 (an eviction is no failure: no next attempt)", n)
	}
	job := l.first("low-0")
	if job == nil || job.Labels[jobmeta.LabelAttempt] != "1" {
		t.Errorf("the evicted row's Job: %v, want attempt 1", job)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	admittedLow := 0
	for _, name := range w.admitted {
		if job != nil && name == job.Name {
			admittedLow++
		}
	}
	if admittedLow != 2 {
		t.Errorf("the low row's Job was admitted %d times, want 2 (before and after its eviction); order %v", admittedLow, w.admitted)
	}
}

// testKueueRBAC: the pass needs only the base Role (it counts queued Jobs from the Jobs); status with the base Role
// alone says it cannot read Kueue's objects and still counts the suspended Job as queued; with the Role of
// manifests/kueue added it gives Kueue's reason and the LocalQueue's counts.
func testKueueRBAC(t *testing.T, kcfg string) {
	k := newKueueEnv(t, kcfg, 1, false)
	k.insert("row", 3)
	cfg := k.config(config{duration: "30s"}, "  maxQueued: 2\n", "")
	base, _ := shippedRules(t)
	var kueueRole rbacv1.Role
	pickDoc(t, kustomizeDocs(t, filepath.Join(manifestsDir, "kueue")), "Role", &kueueRole)

	k.kcfg = k.asServiceAccount("base", base, nil)
	if s := k.tick(cfg).summary(t); s.Created != 2 || s.Failed != 0 {
		t.Fatalf("a tick with the base Role only: %+v, want 2 created (maxQueued: 2)", s)
	}
	k.eventually("one admitted, one queued, seen without Kueue's objects", time.Minute, func() bool {
		st := k.status(cfg)
		return st.States["queued"] == 1 && st.States["running"]+st.States["starting"] == 1 && st.Kueue != nil &&
			strings.Contains(st.Kueue.Unavailable, "cannot list workloads") && queuedReason(st, "cannot be read")
	})
	k.kcfg = k.asServiceAccount("with-kueue", append(base, kueueRole.Rules...), nil)
	// The LocalQueue's counts are Kueue's, updated by it a moment after it admits.
	k.eventually("status with the Role of manifests/kueue: Kueue's reason and the LocalQueue's counts", time.Minute, func() bool {
		st := k.status(cfg)
		return st.Kueue != nil && st.Kueue.Unavailable == "" && st.Kueue.LocalQueue != nil && st.Kueue.LocalQueue.Found &&
			st.Kueue.LocalQueue.Pending == 1 && st.Kueue.LocalQueue.Admitted == 1 && queuedReason(st, "no quota reserved")
	})
}

// testMultiKueue: jobsched runs against a MultiKueue manager; a second control plane with Kueue is its worker. The
// manager's ClusterQueue has a MultiKueue AdmissionCheck, so Kueue's webhook gives each Job managedBy
// kueue.x-k8s.io/multikueue and Kueue runs a copy on the worker (where its pod runs), mirroring its status back.
// jobsched sees the manager's Job finish and deletes it; Kueue removes the worker's copy. Each row gets exactly one
// Job on each cluster.
func testMultiKueue(t *testing.T, kcfg string) {
	workerKcfg := kueueClusterIn(t, "JOBSCHED_KUEUE_WORKER_CLUSTER_DIR", "cluster-kueue-worker-test-")
	m := newKueueEnv(t, kcfg, 2, false)
	// The worker: the same namespace and LocalQueue name (the Job is copied with its labels), quota, a node.
	w := &kueueEnv{env: &env{t: t, ctx: m.ctx, db: m.db, ns: m.ns, pool: m.pool, table: m.table, dir: m.dir, kcfg: workerKcfg},
		cq: m.cq, lq: m.lq, rf: m.rf}
	wcfg, err := clientcmd.BuildConfigFromFlags("", workerKcfg)
	if err != nil {
		t.Fatal(err)
	}
	w.kube, w.dyn = kubernetes.NewForConfigOrDie(wcfg), dynamic.NewForConfigOrDie(wcfg)
	if _, err := w.kube.CoreV1().Namespaces().Create(m.ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: m.ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = w.kube.CoreV1().Namespaces().Delete(context.Background(), m.ns, metav1.DeleteOptions{}) })
	w.addNode("n0", "4", "8Gi", 110, nil)
	w.create(gvrResourceFlavor, fmt.Sprintf("{apiVersion: kueue.x-k8s.io/v1beta2, kind: ResourceFlavor, metadata: {name: %s}}", w.rf))
	w.create(gvrClusterQueue, fmt.Sprintf(`{apiVersion: kueue.x-k8s.io/v1beta2, kind: ClusterQueue, metadata: {name: %s}, spec: {namespaceSelector: {},
  resourceGroups: [{coveredResources: [cpu, memory], flavors: [{name: %s, resources: [{name: cpu, nominalQuota: 200m}, {name: memory, nominalQuota: 128Mi}]}]}]}}`, w.cq, w.rf))
	w.create(gvrLocalQueue, fmt.Sprintf("{apiVersion: kueue.x-k8s.io/v1beta2, kind: LocalQueue, metadata: {name: %s, namespace: %s}, spec: {clusterQueue: %s}}", w.lq, w.ns, w.cq))

	// The manager: the worker's kubeconfig in a Secret in Kueue's namespace, the MultiKueue objects, and its
	// ClusterQueue made to require the MultiKueue AdmissionCheck.
	raw, err := os.ReadFile(workerKcfg)
	if err != nil {
		t.Fatal(err)
	}
	secret := m.pool + "-worker"
	if _, err := m.kube.CoreV1().Secrets("kueue-system").Create(m.ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: secret},
		Data: map[string][]byte{"kubeconfig": raw}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = m.kube.CoreV1().Secrets("kueue-system").Delete(context.Background(), secret, metav1.DeleteOptions{})
	})
	m.create(gvrMultiKueueCluster, fmt.Sprintf("{apiVersion: kueue.x-k8s.io/v1beta2, kind: MultiKueueCluster, metadata: {name: %s}, spec: {clusterSource: {kubeConfig: {locationType: Secret, location: %s}}}}", m.pool, secret))
	m.create(gvrMultiKueueConfig, fmt.Sprintf("{apiVersion: kueue.x-k8s.io/v1beta2, kind: MultiKueueConfig, metadata: {name: %s}, spec: {clusters: [%s]}}", m.pool, m.pool))
	m.create(gvrAdmissionCheck, fmt.Sprintf("{apiVersion: kueue.x-k8s.io/v1beta2, kind: AdmissionCheck, metadata: {name: %s}, spec: {controllerName: kueue.x-k8s.io/multikueue, parameters: {apiGroup: kueue.x-k8s.io, kind: MultiKueueConfig, name: %s}}}", m.pool, m.pool))
	patch := fmt.Sprintf(`{"spec":{"admissionChecksStrategy":{"admissionChecks":[{"name":%q}]}}}`, m.pool)
	if _, err := m.dyn.Resource(gvrClusterQueue).Patch(m.ctx, m.cq, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	m.eventually("the MultiKueue AdmissionCheck Active", 2*time.Minute, func() bool {
		ac, err := m.dyn.Resource(gvrAdmissionCheck).Get(m.ctx, m.pool, metav1.GetOptions{})
		if err != nil {
			return false
		}
		conds, _, _ := unstructured.NestedSlice(ac.Object, "status", "conditions")
		for _, c := range conds {
			if c, ok := c.(map[string]any); ok && c["type"] == "Active" && c["status"] == "True" {
				return true
			}
		}
		return false
	})

	keys := m.insert("row", 3)
	cfg := m.config(config{duration: "2s"}, "  maxQueued: 3\n", "")
	managerJobs, workerJobs := m.ledger(), w.ledger()
	// The row's pod runs on the worker: that is where the stand-in worker looks.
	w.worker()
	m.drain(cfg, 3, func(s summary) {
		if s.Failed != 0 {
			t.Errorf("a pass failed: %+v", s)
		}
	})
	for _, key := range keys {
		mj, wj := managerJobs.first(key), workerJobs.first(key)
		if n := managerJobs.created()[key]; n != 1 {
			t.Errorf("row %s got %d Jobs on the manager, want 1", key, n)
		}
		if n := workerJobs.created()[key]; n != 1 {
			t.Errorf("row %s got %d Jobs on the worker, want 1", key, n)
		}
		if mj == nil || mj.Spec.ManagedBy == nil || *mj.Spec.ManagedBy != "kueue.x-k8s.io/multikueue" {
			t.Errorf("row %s: the manager's Job %v is not managed by MultiKueue", key, mj)
		}
		if mj != nil && wj != nil && mj.Name != wj.Name {
			t.Errorf("row %s: the worker's Job is %s, the manager's %s", key, wj.Name, mj.Name)
		}
	}
	// jobsched deleted the manager's finished Jobs; Kueue removes the worker's copies.
	w.eventually("the worker's copies removed", 2*time.Minute, func() bool { return len(w.jobs()) == 0 })
	for _, p := range m.pods() {
		t.Errorf("pod %s ran on the manager; every pod belongs on the worker", p.Name)
	}
}

var (
	gvrMultiKueueCluster = schema.GroupVersionResource{Group: "kueue.x-k8s.io", Version: "v1beta2", Resource: "multikueueclusters"}
	gvrMultiKueueConfig  = schema.GroupVersionResource{Group: "kueue.x-k8s.io", Version: "v1beta2", Resource: "multikueueconfigs"}
	gvrAdmissionCheck    = schema.GroupVersionResource{Group: "kueue.x-k8s.io", Version: "v1beta2", Resource: "admissionchecks"}
)
