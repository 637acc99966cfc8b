//go:build integration

package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	nodev1 "k8s.io/api/node/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/jobsched/jobsched/pkg/jobmeta"
)

// These scenarios check capacity: nodes against kube-scheduler itself: each template is one the hand-written count
// got wrong or that the issue lists, the number of Jobs one tick creates is the number that fits (worked out by hand
// in each comment), every pod is bound, none is Unschedulable, and a second tick finds the nodes full.

// capacityConfig writes a config for scheduler name (rows name-0, name-1, … only) whose Job template has podSpec
// (YAML at column 0) as its pod spec; the pods run 10 minutes on kwok.
func (e *env) capacityConfig(name, podSpec string) string {
	e.t.Helper()
	cfg := e.writeConfig(config{name: name, where: fmt.Sprintf("id LIKE '%s-%%'", name),
		extra: "limits:\n  maxActive: 20\n  maxPerTick: 20\n  capacity: nodes\n"})
	e.capacityConfigTemplate(name, podSpec)
	return cfg
}

// fills ticks scheduler name once and checks it created want Jobs, that all their pods get bound (none
// Unschedulable), and that a second tick creates nothing because the nodes are full. It returns the pods per node.
func (e *env) fills(name, cfg string, want int, env ...string) map[string]int {
	e.t.Helper()
	if s := e.tickEnv(cfg, env...).summary(e.t); s.Created != want || s.Failed != 0 {
		e.t.Fatalf("%s: created %d (failed %d), want %d", name, s.Created, s.Failed, want)
	}
	byNode := e.bound(name, want)
	if s := e.tickEnv(cfg, env...).summary(e.t); s.Created != 0 || !strings.Contains(s.Blocked, "capacity") {
		e.t.Errorf("%s with the nodes full: created %d, blocked %q; want 0, by capacity", name, s.Created, s.Blocked)
	}
	if n := len(e.ours(name)); n != want {
		e.t.Errorf("%s: %d pods, want %d", name, n, want)
	}
	return byNode
}

// bound waits until want pods of scheduler name are bound to a node, failing as soon as one is Unschedulable.
func (e *env) bound(name string, want int) map[string]int {
	e.t.Helper()
	var byNode map[string]int
	e.eventually(fmt.Sprintf("%d pods of %s bound", want, name), time.Minute, func() bool {
		byNode = map[string]int{}
		n := 0
		for _, p := range e.ours(name) {
			if unschedulable(&p) {
				e.t.Fatalf("pod %s is Unschedulable: %v", p.Name, p.Status.Conditions)
			}
			if p.Spec.NodeName != "" {
				byNode[p.Spec.NodeName]++
				n++
			}
		}
		return n == want
	})
	return byNode
}

// ours are the pods of scheduler name.
func (e *env) ours(name string) []corev1.Pod {
	e.t.Helper()
	l, err := e.kube.CoreV1().Pods(e.ns).List(e.ctx, metav1.ListOptions{LabelSelector: jobmeta.LabelScheduler + "=" + name})
	if err != nil {
		e.t.Fatal(err)
	}
	return l.Items
}

// tickEnv is e.tick with extra environment variables (NAME=value).
func (e *env) tickEnv(cfg string, env ...string) result {
	e.t.Helper()
	r := e.run(env, "tick", "--config", cfg)
	if r.code != 0 {
		e.t.Fatalf("tick exited %d:\n%s", r.code, r.stderr)
	}
	return r
}

// runPod creates a pod in the scenario's namespace (not jobsched's) that runs 10 minutes on kwok.
func (e *env) runPod(name string, mutate func(*corev1.Pod)) *corev1.Pod {
	e.t.Helper()
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: map[string]string{"jobsched.io/kwok-duration": "10m"}},
		Spec: corev1.PodSpec{
			RestartPolicy: corev1.RestartPolicyNever,
			NodeSelector:  map[string]string{"jobsched.io/e2e-pool": e.pool},
			Containers:    []corev1.Container{{Name: "c", Image: "other:1"}},
		},
	}
	mutate(p)
	p, err := e.kube.CoreV1().Pods(e.ns).Create(e.ctx, p, metav1.CreateOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	return p
}

func requests(cpu, memory string) corev1.ResourceRequirements {
	return corev1.ResourceRequirements{Requests: corev1.ResourceList{
		corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse(memory)}}
}

// workerOneCPU is the containers: of a template (YAML at column 0): one container "worker" that requests 1 CPU.
var workerOneCPU = "containers:\n" + container("worker", "1", false)

// container is one item of a template's list of (init) containers, YAML at column 0: image name:1, requesting cpu
// ("": nothing); a sidecar (restartPolicy: Always) when sidecar.
func container(name, cpu string, sidecar bool) string {
	c := fmt.Sprintf("- name: %s\n  image: %s:1\n", name, name)
	if sidecar {
		c += "  restartPolicy: Always\n"
	}
	if cpu != "" {
		c += fmt.Sprintf("  resources:\n    requests:\n      cpu: %q\n", cpu)
	}
	return c
}

// poolSelector is the nodeSelector of the scenario's pool, as template YAML.
func (e *env) poolSelector() string {
	return "nodeSelector:\n  jobsched.io/e2e-pool: " + e.pool + "\n"
}

// TestCapacityLimitRangeDefault is the measurement: one 4-CPU node, a LimitRange default of 1 CPU, a
// template without requests plus a 500m restartable sidecar: 1.5 CPU per pod, so 2 fit (the template as written
// counts 500m, and 8 were created, 6 of them Unschedulable).
func TestCapacityLimitRangeDefault(t *testing.T) {
	t.Parallel()
	e := newNodeEnv(t, "4", "8Gi")
	_, err := e.kube.CoreV1().LimitRanges(e.ns).Create(e.ctx, &corev1.LimitRange{
		ObjectMeta: metav1.ObjectMeta{Name: "defaults"},
		Spec: corev1.LimitRangeSpec{Limits: []corev1.LimitRangeItem{{Type: corev1.LimitTypeContainer,
			Default: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	e.insert("lr", 10)
	cfg := e.capacityConfig("lr", e.poolSelector()+"initContainers:\n"+container("proxy", "500m", true)+"containers:\n"+container("worker", "", false))
	e.fills("lr", cfg, 2)
}

// TestCapacityRuntimeClassOverhead: a RuntimeClass with 500m of overhead and a 1-CPU template: 1.5 CPU per pod on a
// 4-CPU node, so 2 fit (4 without the overhead).
func TestCapacityRuntimeClassOverhead(t *testing.T) {
	t.Parallel()
	e := newNodeEnv(t, "4", "8Gi")
	rc := "e2e-" + e.pool
	_, err := e.kube.NodeV1().RuntimeClasses().Create(e.ctx, &nodev1.RuntimeClass{
		ObjectMeta: metav1.ObjectMeta{Name: rc}, Handler: "kata",
		Overhead: &nodev1.Overhead{PodFixed: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("500m")}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e.kube.NodeV1().RuntimeClasses().Delete(context.Background(), rc, metav1.DeleteOptions{}) })
	e.insert("rc", 10)
	cfg := e.capacityConfig("rc", e.poolSelector()+"runtimeClassName: "+rc+"\n"+workerOneCPU)
	e.fills("rc", cfg, 2)
}

// TestCapacitySidecar: a 1-CPU container with a 1-CPU restartable sidecar, and an init container of 2.5 CPU that
// starts after the sidecar (3.5 CPU while it runs): 3.5 CPU per pod on a 7.5-CPU node, so 2 fit.
func TestCapacitySidecar(t *testing.T) {
	t.Parallel()
	e := newNodeEnv(t, "7500m", "8Gi")
	e.insert("sc", 10)
	cfg := e.capacityConfig("sc", e.poolSelector()+"initContainers:\n"+container("proxy", "1", true)+container("setup", "2500m", false)+workerOneCPU)
	e.fills("sc", cfg, 2)
}

// TestCapacityTaint: a plain and a NoSchedule-tainted node of 4 CPU, 1-CPU pods. A template without the toleration
// fills the plain node (4); one that tolerates the taint with operator Exists then fills the tainted one (4).
func TestCapacityTaint(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	plain := e.addNode("plain", "4", "8Gi", 110, nil)
	tainted := e.addNode("tainted", "4", "8Gi", 110, func(n *corev1.Node) {
		n.Spec.Taints = []corev1.Taint{{Key: "dedicated", Value: "batch", Effect: corev1.TaintEffectNoSchedule}}
	})
	e.insert("plain", 10)
	e.insert("tol", 10)
	if got := e.fills("plain", e.capacityConfig("plain", e.poolSelector()+workerOneCPU), 4); got[plain] != 4 {
		t.Errorf("pods per node %v, want 4 on %s", got, plain)
	}
	tol := e.capacityConfig("tol", e.poolSelector()+`tolerations:
- key: dedicated
  operator: Exists
  effect: NoSchedule
`+workerOneCPU)
	if got := e.fills("tol", tol, 4); got[tainted] != 4 {
		t.Errorf("pods per node %v, want 4 on %s", got, tainted)
	}
}

// TestCapacityAffinity: two 4-CPU nodes labelled tier=a and tier=b, 1-CPU pods: required node affinity tier In (a)
// fills a (4), then tier NotIn (a) fills b (4).
func TestCapacityAffinity(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	tier := func(v string) func(*corev1.Node) { return func(n *corev1.Node) { n.Labels["tier"] = v } }
	a := e.addNode("a", "4", "8Gi", 110, tier("a"))
	b := e.addNode("b", "4", "8Gi", 110, tier("b"))
	e.insert("in", 10)
	e.insert("notin", 10)
	template := func(op string) string {
		return e.poolSelector() + `affinity:
  nodeAffinity:
    requiredDuringSchedulingIgnoredDuringExecution:
      nodeSelectorTerms:
      - matchExpressions:
        - key: tier
          operator: ` + op + `
          values: ["a"]
` + workerOneCPU
	}
	if got := e.fills("in", e.capacityConfig("in", template("In")), 4); got[a] != 4 {
		t.Errorf("In: pods per node %v, want 4 on %s", got, a)
	}
	if got := e.fills("notin", e.capacityConfig("notin", template("NotIn")), 4); got[b] != 4 {
		t.Errorf("NotIn: pods per node %v, want 4 on %s", got, b)
	}
}

// TestCapacityTickStarts: the pass runs in a pod (the CronJob's: 50m/64Mi, any node of the pool) on a small node
// that another pod fills; tasks may use only the 4-CPU work node. Filling the work node with 4 tasks of 1 CPU would
// leave the next tick nowhere to start: the pass creates 3, and the next tick's pod starts on the work node.
func TestCapacityTickStarts(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	role := func(v string) func(*corev1.Node) { return func(n *corev1.Node) { n.Labels["role"] = v } }
	sys := e.addNode("sys", "1", "1Gi", 110, role("sys"))
	work := e.addNode("work", "4", "8Gi", 110, role("work"))
	e.runPod("other", func(p *corev1.Pod) { p.Spec.Containers[0].Resources = requests("1", "256Mi"); p.Spec.NodeName = sys })
	tick := func(name string, mutate func(*corev1.Pod)) *corev1.Pod {
		return e.runPod(name, func(p *corev1.Pod) {
			p.Labels = map[string]string{"app.kubernetes.io/name": "jobsched"}
			p.Spec.Containers[0].Resources = requests("50m", "64Mi")
			if mutate != nil {
				mutate(p)
			}
		})
	}
	// This pass's pod, put on the full sys node by hand (as if it had started there before the other pod).
	current := tick("jobsched-tick-1", func(p *corev1.Pod) { p.Spec.NodeName = sys })
	e.insert("task", 10)
	cfg := e.capacityConfig("task", `nodeSelector:
  role: work
  jobsched.io/e2e-pool: `+e.pool+"\n"+workerOneCPU)
	// The pass believes it runs in the pod `current`, as it does in the CronJob's pod.
	inPod := []string{"KUBERNETES_SERVICE_HOST=127.0.0.1", "HOSTNAME=" + current.Name}
	if got := e.fills("task", cfg, 3, inPod...); got[work] != 3 {
		t.Errorf("pods per node %v, want 3 on %s", got, work)
	}
	if err := e.kube.CoreV1().Pods(e.ns).Delete(e.ctx, current.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	next := tick("jobsched-tick-2", nil)
	e.eventually("the next tick's pod to run", time.Minute, func() bool {
		p, err := e.kube.CoreV1().Pods(e.ns).Get(e.ctx, next.Name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if unschedulable(p) {
			t.Fatalf("the next tick's pod is Unschedulable: %v", p.Status.Conditions)
		}
		return p.Spec.NodeName == work && p.Status.Phase == corev1.PodRunning
	})
}

// TestCapacityTwoSchedulers: two schedulers share a 4-CPU pool with 1-CPU pods. The first creates 2 Jobs whose
// pods stay unbound (no scheduler serves their schedulerName until the test binds them), the second ticks meanwhile:
// it counts them as taking room and creates 2, not 4. Once bound, all 4 run and the node is exactly full.
func TestCapacityTwoSchedulers(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	node := e.addNode("n0", "4", "8Gi", 110, nil)
	e.insert("first", 10)
	e.insert("second", 10)
	first := e.writeConfig(config{name: "first", where: "id LIKE 'first-%'", extra: "limits:\n  maxPerTick: 2\n  capacity: nodes\n"})
	e.capacityConfigTemplate("first", e.poolSelector()+"schedulerName: e2e-nobody\n"+workerOneCPU)
	if s := e.tick(first).summary(t); s.Created != 2 {
		t.Fatalf("first: created %d, want 2", s.Created)
	}
	e.eventually("the first scheduler's 2 pods", time.Minute, func() bool { return len(e.ours("first")) == 2 })

	second := e.capacityConfig("second", e.poolSelector()+workerOneCPU)
	r := e.tick(second)
	if s := r.summary(t); s.Created != 2 {
		t.Fatalf("second, with the first's 2 pods unbound: created %d, want 2", s.Created)
	}
	e.bound("second", 2)
	for _, p := range e.ours("first") {
		if err := e.kube.CoreV1().Pods(e.ns).Bind(e.ctx, &corev1.Binding{
			ObjectMeta: metav1.ObjectMeta{Name: p.Name}, Target: corev1.ObjectReference{Kind: "Node", Name: node},
		}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	e.bound("first", 2)
	e.eventually("4 pods running", time.Minute, func() bool {
		running := 0
		for _, p := range e.pods() {
			if p.Status.Phase == corev1.PodRunning {
				running++
			}
		}
		return running == 4
	})
	if s := e.tick(second).summary(t); s.Created != 0 || !strings.Contains(s.Blocked, "capacity") {
		t.Errorf("second with the node full: created %d, blocked %q", s.Created, s.Blocked)
	}
}

// capacityConfigTemplate replaces the Job template of a config written by writeConfig for scheduler name: pods
// that run 10 minutes with podSpec.
func (e *env) capacityConfigTemplate(name, podSpec string) {
	e.t.Helper()
	e.writeTemplate(name, jobTemplate{duration: "10m", podSpec: podSpec})
}

// TestCapacityWithoutLimitRangeRBAC: without list on limitranges and get on runtimeclasses, the pass says so once
// and still creates, counting the template as written.
func TestCapacityWithoutLimitRangeRBAC(t *testing.T) {
	t.Parallel()
	e := newNodeEnv(t, "8", "16Gi")
	e.insert("task", 2)
	cfg := e.writeConfig(config{extra: "limits:\n  capacity: nodes\n"})
	e.kcfg = e.asServiceAccount("jobsched", []rbacv1.PolicyRule{
		{APIGroups: []string{"batch"}, Resources: []string{"jobs"}, Verbs: []string{"list", "create", "delete", "get"}},
		{APIGroups: []string{""}, Resources: []string{"pods", "resourcequotas"}, Verbs: []string{"list"}},
	}, []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"nodes", "pods"}, Verbs: []string{"list"}}})
	r := e.tick(cfg)
	if s := r.summary(t); s.Created != 2 {
		t.Errorf("created %d, want 2", s.Created)
	}
	if n := strings.Count(r.stderr, "the Role needs list on limitranges"); n != 1 {
		t.Errorf("the pass says %d times that it cannot list LimitRanges, want once:\n%s", n, r.stderr)
	}
}
