//go:build integration

package e2e

import (
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestSeedScenario is the seed's measurement with capacity admission: one 6-CPU node, task pods requesting 2500m CPU
// and 2048Mi, 12 rows, maxActive 10, pods that run 15 s, a worker, a tick as soon as a Job ends. At no observation is
// a pod of jobsched Unschedulable, all rows drain with one Job each, and 2 pods run most of the time. Between a pod's
// end and the next one's start lie the test's tick (a process), the pass and the pod's start: a second or two, more
// on a loaded machine; pods of 5 s made that gap 40% of the time in full runs, pods of 15 s make it a small share.
func TestSeedScenario(t *testing.T) {
	t.Parallel()
	e, keys, cfg := newTaskScenario(t, "6", "16Gi", 12, config{cpu: "2500m", duration: "15s", extra: "limits:\n  maxActive: 10\n  capacity: nodes\n"})
	l := e.ledger()
	e.worker()

	var mu sync.Mutex
	var samples, two, maxRunning int
	var problems []string
	stop := make(chan struct{})
	observed := make(chan struct{})
	go func() { // the observer: what the API server shows, every 200ms
		defer close(observed)
		for {
			select {
			case <-stop:
				return
			case <-time.After(200 * time.Millisecond):
			}
			pods := e.pods()
			running := 0
			mu.Lock()
			for _, p := range pods {
				if unschedulable(&p) {
					problems = append(problems, p.Name+" Unschedulable: "+p.Status.Conditions[0].Message)
				}
				if p.Status.Phase == corev1.PodRunning {
					running++
				}
			}
			if running > 0 || len(pods) > 0 {
				samples++
				if running == 2 {
					two++
				}
			}
			maxRunning = max(maxRunning, running)
			mu.Unlock()
		}
	}()
	if !e.passUntil(cfg, l, 4*time.Minute, func(int) bool { return len(l.created()) == len(keys) && len(e.jobs()) == 0 }) {
		t.Fatalf("not drained: %d of %d rows got a Job, %d Jobs left", len(l.created()), len(keys), len(e.jobs()))
	}
	close(stop)
	<-observed
	if len(problems) > 0 {
		t.Errorf("%d observations of Unschedulable pods, e.g. %s", len(problems), problems[0])
	}
	for k, n := range l.created() {
		if n != 1 {
			t.Errorf("task %s had %d Jobs", k, n)
		}
	}
	share := float64(two) / float64(samples)
	t.Logf("%d samples with pods; 2 running in %.0f%%; at most %d running", samples, 100*share, maxRunning)
	if maxRunning != 2 || share < 0.6 {
		t.Errorf("the node was not kept busy: at most %d running, 2 running in %.0f%% of samples", maxRunning, 100*share)
	}
}

// TestCapacityFitsByHand: three nodes of different sizes, one tainted, one cordoned: the number created equals what
// fits, computed by hand, and status names the constraint.
func TestCapacityFitsByHand(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	free := e.addNode("free", "5", "16Gi", 110, nil)
	e.addNode("tainted", "8", "16Gi", 110, func(n *corev1.Node) {
		n.Spec.Taints = []corev1.Taint{{Key: "dedicated", Value: "gpu", Effect: corev1.TaintEffectNoSchedule}}
	})
	e.addNode("cordoned", "6", "16Gi", 110, func(n *corev1.Node) { n.Spec.Unschedulable = true })
	e.insert("task", 10)
	cfg := e.writeConfig(config{cpu: "1500m", duration: "10m", extra: "limits:\n  maxActive: 10\n"})

	// By hand: only the untainted, schedulable node counts; floor(5 / 1.5) = 3.
	st := e.jobsched("status", "--config", cfg)
	if st.code != 0 || !strings.Contains(st.stdout, "cpu: 3 more fit on "+free) {
		t.Errorf("status does not show the capacity (exit %d):\n%s\n%s", st.code, st.stdout, st.stderr)
	}
	if s := e.tick(cfg).summary(t); s.Created != 3 || s.Failed != 0 {
		t.Fatalf("created %d (failed %d), want 3", s.Created, s.Failed)
	}
	e.eventually("3 pods running", time.Minute, func() bool {
		running := 0
		for _, p := range e.pods() {
			if unschedulable(&p) {
				t.Fatalf("pod %s is Unschedulable", p.Name)
			}
			if p.Status.Phase == corev1.PodRunning && p.Spec.NodeName == free {
				running++
			}
		}
		return running == 3
	})
	if s := e.tick(cfg).summary(t); s.Created != 0 || !strings.Contains(s.Blocked, "capacity") {
		t.Errorf("with the node full: created %d, blocked %q", s.Created, s.Blocked)
	}
}

// TestCapacityQuota: a ResourceQuota tighter than the nodes: creation stops at the quota, with no rejected create.
func TestCapacityQuota(t *testing.T) {
	t.Parallel()
	e := newNodeEnv(t, "8", "16Gi")
	q, err := e.kube.CoreV1().ResourceQuotas(e.ns).Create(e.ctx, &corev1.ResourceQuota{
		ObjectMeta: metav1.ObjectMeta{Name: "compute"},
		Spec:       corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{corev1.ResourceRequestsCPU: resource.MustParse("2")}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	e.eventually("the quota controller to fill in the quota's status", time.Minute, func() bool {
		q, err = e.kube.CoreV1().ResourceQuotas(e.ns).Get(e.ctx, q.Name, metav1.GetOptions{})
		return err == nil && q.Status.Hard != nil
	})
	e.insert("task", 10)
	cfg := e.writeConfig(config{cpu: "500m", duration: "10m", extra: "limits:\n  maxActive: 10\n"})
	if s := e.tick(cfg).summary(t); s.Created != 4 || s.Failed != 0 {
		t.Fatalf("created %d, failed %d; want 4 (2 CPU of quota / 500m) and no rejected create", s.Created, s.Failed)
	}
	e.eventually("4 pods", time.Minute, func() bool { return len(e.pods()) == 4 })
	e.eventually("quota used updated", time.Minute, func() bool {
		q, _ = e.kube.CoreV1().ResourceQuotas(e.ns).Get(e.ctx, q.Name, metav1.GetOptions{})
		used := q.Status.Used[corev1.ResourceRequestsCPU]
		return used.Cmp(resource.MustParse("2")) == 0
	})
	s := e.tick(cfg).summary(t)
	if s.Created != 0 || s.Failed != 0 || !strings.Contains(s.Blocked, "quota compute/requests.cpu") {
		t.Errorf("at the quota: created %d, failed %d, blocked %q", s.Created, s.Failed, s.Blocked)
	}
}

// TestCapacityWithoutClusterRole: with only the namespaced Role (no ClusterRole to list nodes), capacity nodes falls
// back to quota for the pass, says so, and still creates.
func TestCapacityWithoutClusterRole(t *testing.T) {
	t.Parallel()
	e, _, cfg := newTaskScenario(t, "8", "16Gi", 2, config{extra: "limits:\n  capacity: nodes\n"})
	e.kcfg = e.asServiceAccount("jobsched", []rbacv1.PolicyRule{
		{APIGroups: []string{"batch"}, Resources: []string{"jobs"}, Verbs: []string{"list", "create", "delete", "get"}},
		{APIGroups: []string{""}, Resources: []string{"pods", "resourcequotas"}, Verbs: []string{"list"}},
	}, nil)
	r := e.tick(cfg)
	if s := r.summary(t); s.Created != 2 {
		t.Errorf("created %d, want 2", s.Created)
	}
	if !strings.Contains(r.stderr, "using quota for this pass") {
		t.Errorf("the pass does not say it fell back to quota:\n%s", r.stderr)
	}
}
