//go:build integration

package scheduler

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/jobsched/jobsched/pkg/capacity"
	"github.com/jobsched/jobsched/pkg/config"
	"github.com/jobsched/jobsched/pkg/jobmeta"
	"github.com/jobsched/jobsched/pkg/testkit"
)

// sameQuantity compares quantities by value (a sum the watches kept may hold 1000m where a fresh one holds 1).
var sameQuantity = cmp.Comparer(func(a, b resource.Quantity) bool { return a.Cmp(b) == 0 })

// TestFollowedIsFresh: through a sequence of changes on a real API server (Jobs created, run, completed and
// deleted; pods created, bound and deleted; a node added and removed; a LimitRange and a ResourceQuota), what a
// Follow keeps comes out equal to a fresh observation (its Jobs, its Pending pods, the capacity snapshot) after
// each step, and reading it sends no request but watches: a refill lists nothing. Each step waits for the watches
// to deliver its changes (and what the controllers do after them), bounded by the test's deadline.
func TestFollowedIsFresh(t *testing.T) {
	var counting atomic.Bool
	var mu sync.Mutex
	var reads []string          // the requests other than WATCHes sent while the followed observation was read
	watches := map[string]int{} // the WATCHes sent, by path, but streaming lists (only the followed observation watches)
	c, ns := testkit.CountingCluster(t, "follow", func(r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		q := r.URL.Query()
		switch {
		case q.Get("watch") == "true" && q.Get("sendInitialEvents") != "true":
			watches[r.URL.Path]++
		case counting.Load():
			reads = append(reads, r.Method+" "+r.URL.Path)
		}
	})
	// The test keeps to a node of its own: its pods and its template select the label pool=NS, which only that node
	// has, so the other tests of the suite never count its unbound pods as taking room on their nodes, and tolerate
	// the node's taint, which keeps their pods (the README's installs have no nodeSelector) off it. Both
	// observations read every node and every unbound pod of the shared cluster, which those tests change all the
	// time; they are compared on this test's node and namespace only (mine).
	deadline, cancel := context.WithTimeout(context.Background(), 2*time.Minute) // for the steps, not the reads
	defer cancel()
	ctx := context.Background()
	pool := map[string]string{"pool": ns}
	taint := corev1.Taint{Key: "jobsched.io/test", Value: ns, Effect: corev1.TaintEffectNoSchedule}
	tolerate := []corev1.Toleration{{Key: taint.Key, Operator: corev1.TolerationOpEqual, Value: taint.Value, Effect: taint.Effect}}
	cfg := testConfig(t, func(c *config.Config) {
		c.Namespace, c.Limits.Capacity = ns, config.CapacityNodes
		c.Template.Spec.Template.Spec.NodeSelector, c.Template.Spec.Template.Spec.Tolerations = pool, tolerate
		c.Template.Spec.Template.Spec.Containers[0].Resources.Requests = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m")}
	})
	node := "follow-" + ns
	mine := func(o *Observation) {
		o.Capacity.Nodes = slices.DeleteFunc(o.Capacity.Nodes, func(n capacity.Node) bool { return n.Name != node })
		o.Capacity.Pending = slices.DeleteFunc(o.Capacity.Pending, func(p capacity.Pending) bool { return p.Namespace != ns })
		o.Capacity.Listed = "" // how many nodes were listed depends on the other tests' nodes
	}
	fresh := &Scheduler{Config: cfg, Kube: c.Kube, Now: time.Now}
	followed := &Scheduler{Config: cfg, Kube: c.Kube, Now: time.Now, Follow: NewFollow()}
	defer followed.Follow.Stop()
	observe := func(s *Scheduler) *Observation {
		t.Helper()
		ctx, cancel := context.WithTimeout(ctx, time.Minute)
		defer cancel()
		obs, err := s.observe(ctx, true)
		if err != nil {
			t.Fatal(err)
		}
		if obs.Capacity, obs.CapacityErr = s.readCapacity(ctx); obs.PodsErr != nil || obs.CapacityErr != nil {
			t.Fatal(obs.PodsErr, obs.CapacityErr)
		}
		obs.Now, obs.JobsResourceVersion = time.Time{}, ""
		mine(obs)
		return obs
	}
	observe(followed) // the first pass: it lists, and watches from there

	// step does change, then waits until a fresh observation satisfies until and the followed one equals it.
	step := func(name string, change func() error, until func(*Observation) bool) {
		t.Helper()
		if err := change(); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		for {
			next := followed.Follow.changes.Wait()
			counting.Store(true)
			got := observe(followed)
			counting.Store(false)
			want := observe(fresh)
			if until(want) && cmp.Equal(got, want, sameQuantity) {
				return
			}
			select {
			case <-next:
			case <-deadline.Done():
				t.Fatalf("%s: the fresh observation holds what the step waits for: %t; the followed one (-) against it (+):\n%s",
					name, until(want), cmp.Diff(got, want, sameQuantity))
			}
		}
	}
	jobs, pods := c.BatchV1().Jobs(ns), c.CoreV1().Pods(ns)
	// newJob is a Job of ours; with schedulerName "nobody" its pod stays unbound until the test binds it. (A pod made
	// by hand for a Job would not do: the Job controller releases a pod its selector does not match, and deletes the
	// pods of a suspended Job.)
	newJob := func(key, schedulerName string) *batchv1.Job {
		l := map[string]string{jobmeta.LabelScheduler: cfg.Name}
		j := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: testkit.Name(key), Labels: l,
			Annotations: map[string]string{jobmeta.AnnotationTaskKey: key}}, Spec: *cfg.Template.Spec.DeepCopy()}
		j.Spec.Template.Labels = l
		j.Spec.Template.Spec.SchedulerName = schedulerName
		return j
	}
	t.Cleanup(func() { _ = c.CoreV1().Nodes().Delete(context.Background(), node, metav1.DeleteOptions{}) })
	hasJob := func(name string, finished bool) func(*Observation) bool {
		return func(o *Observation) bool {
			return slices.ContainsFunc(o.Jobs, func(j JobSummary) bool { return j.Name == name && (j.Finished != nil) == finished })
		}
	}
	anything := func(*Observation) bool { return true }
	gone := func(name string) func(*Observation) bool {
		return func(o *Observation) bool {
			return !slices.ContainsFunc(o.Jobs, func(j JobSummary) bool { return j.Name == name })
		}
	}

	var held *batchv1.Job
	step("a Job whose pod no scheduler binds", func() (err error) {
		held, err = jobs.Create(ctx, newJob("held", "nobody"), metav1.CreateOptions{})
		return err
	}, func(o *Observation) bool { return hasJob(held.Name, false)(o) && len(o.Pods) == 1 && !o.Pods[0].Bound })
	step("a pod of another tenant, unbound", func() error {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "other"}, Spec: corev1.PodSpec{SchedulerName: "nobody",
			NodeSelector: pool, Tolerations: tolerate,
			Containers: []corev1.Container{{Name: "c", Image: "i", Resources: corev1.ResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("250m")}}}}}}
		_, err := pods.Create(ctx, p, metav1.CreateOptions{})
		return err
	}, func(o *Observation) bool {
		return slices.ContainsFunc(o.Capacity.Pending, func(p capacity.Pending) bool { return p.Name == "other" })
	})
	step("a node added", func() error {
		n := testkit.MakeNode(node).Allocatable(corev1.ResourceCPU, "4").Allocatable(corev1.ResourcePods, "110").Obj()
		n.Labels, n.Spec.Taints = pool, []corev1.Taint{taint}
		n.Annotations = map[string]string{"kwok.x-k8s.io/node": "fake"} // kwok runs its pods: the Job below runs there
		_, err := c.CoreV1().Nodes().Create(ctx, n, metav1.CreateOptions{})
		return err
	}, func(o *Observation) bool {
		return slices.ContainsFunc(o.Capacity.Nodes, func(n capacity.Node) bool { return n.Name == node })
	})
	step("the pods bound", func() error {
		l, err := pods.List(ctx, metav1.ListOptions{LabelSelector: jobmeta.LabelScheduler + "=" + cfg.Name})
		if err != nil || len(l.Items) != 1 {
			return fmt.Errorf("the Job's pods: %d, %v", len(l.Items), err)
		}
		for _, p := range []string{l.Items[0].Name, "other"} {
			b := &corev1.Binding{ObjectMeta: metav1.ObjectMeta{Name: p}, Target: corev1.ObjectReference{Kind: "Node", Name: node}}
			if err := pods.Bind(ctx, b, metav1.CreateOptions{}); err != nil {
				return err
			}
		}
		return nil
	}, func(o *Observation) bool { // kwok runs them: ours is bound while Pending, then no longer Pending
		return len(o.Capacity.Pending) == 0 && !slices.ContainsFunc(o.Pods, func(p capacity.PodSummary) bool { return !p.Bound })
	})
	step("a Job runs and completes", func() error {
		_, err := jobs.Create(ctx, newJob("runs", ""), metav1.CreateOptions{})
		return err
	}, hasJob(testkit.Name("runs"), true))
	step("a LimitRange and a ResourceQuota", func() error {
		lr := &corev1.LimitRange{ObjectMeta: metav1.ObjectMeta{Name: "defaults"}, Spec: corev1.LimitRangeSpec{Limits: []corev1.LimitRangeItem{{
			Type: corev1.LimitTypeContainer, DefaultRequest: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("64Mi")}}}}}
		if _, err := c.CoreV1().LimitRanges(ns).Create(ctx, lr, metav1.CreateOptions{}); err != nil {
			return err
		}
		q := &corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Name: "cpu"}, Spec: corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{
			corev1.ResourceRequestsCPU: resource.MustParse("8")}}}
		_, err := c.CoreV1().ResourceQuotas(ns).Create(ctx, q, metav1.CreateOptions{})
		return err
	}, func(o *Observation) bool {
		return len(o.Capacity.LimitRanges) == 1 && len(o.Capacity.Quotas) == 1 && o.Capacity.Quotas[0].Status.Used != nil
	})
	step("the first Job deleted", func() error {
		return jobs.Delete(ctx, held.Name, metav1.DeleteOptions{PropagationPolicy: ptr.To(metav1.DeletePropagationBackground)})
	}, gone(held.Name))
	step("the node removed", func() error {
		return c.CoreV1().Nodes().Delete(ctx, node, metav1.DeleteOptions{})
	}, func(o *Observation) bool {
		return !slices.ContainsFunc(o.Capacity.Nodes, func(n capacity.Node) bool { return n.Name == node })
	})
	step("the other tenant's pod deleted", func() error {
		return pods.Delete(ctx, "other", metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)})
	}, anything)

	mu.Lock()
	defer mu.Unlock()
	if len(reads) > 0 {
		t.Errorf("reading the followed observation sent %v: a refill must list nothing", reads)
	}
	// Its Pending pods are read from capacity's watch of every pod: their events come once.
	if n := watches["/api/v1/namespaces/"+ns+"/pods"]; n > 0 || watches["/api/v1/pods"] == 0 {
		t.Errorf("the followed observation watched the pods in %s %d time(s) and in all namespaces %d time(s), want 0 and at least 1",
			ns, n, watches["/api/v1/pods"])
	}
}
