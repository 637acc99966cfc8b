// Package karpenterkit is what the e2e tests and the bench share to run a scenario on Karpenter's KWOK provider
// (KARPENTER=1 scripts/cluster.sh up): the NodePool of scripts/karpenter/nodepool.yaml under a name of the
// scenario's, and a Watch of what Karpenter and kube-scheduler do with the scenario's pods.
package karpenterkit

import (
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/yaml"

	"github.com/jobsched/jobsched/pkg/autoscaler"
	"github.com/jobsched/jobsched/pkg/testkit/kwokkit"
)

// The resources of Karpenter v1 and of its KWOK provider.
var (
	NodePools   = autoscaler.NodePools
	NodeClaims  = autoscaler.NodeClaims
	NodeClasses = schema.GroupVersionResource{Group: "karpenter.kwok.sh", Version: "v1alpha1", Resource: "kwoknodeclasses"}
)

// PoolLabel is the label Karpenter puts on its NodeClaims and nodes: the NodePool's name.
const PoolLabel = "karpenter.sh/nodepool"

// Fixture is the path of the NodePool fixture below the repository root.
const Fixture = "scripts/karpenter/nodepool.yaml"

// LimitMessage is in Karpenter's FailedScheduling Event of a pod that no NodePool can add a node for without passing
// its limits.
const LimitMessage = "exceed limits for nodepool"

// Pool is the fixture's KWOKNodeClass and NodePool, both named name, the NodePool limited to cpuLimit and putting
// labels on its nodes.
func Pool(root, name, cpuLimit string, labels map[string]string) (class, pool *unstructured.Unstructured, err error) {
	b, err := os.ReadFile(filepath.Join(root, Fixture))
	if err != nil {
		return nil, nil, err
	}
	for _, doc := range strings.Split(string(b), "\n---\n") {
		u := &unstructured.Unstructured{}
		if err := yaml.Unmarshal([]byte(doc), &u.Object); err != nil {
			return nil, nil, fmt.Errorf("%s: %w", Fixture, err)
		}
		u.SetName(name)
		switch u.GetKind() {
		case "KWOKNodeClass":
			class = u
		case "NodePool":
			pool = u
		}
	}
	if class == nil || pool == nil {
		return nil, nil, fmt.Errorf("%s: want a KWOKNodeClass and a NodePool", Fixture)
	}
	l := map[string]any{}
	for k, v := range labels {
		l[k] = v
	}
	for _, set := range []struct {
		value any
		path  []string
	}{
		{cpuLimit, []string{"spec", "limits", "cpu"}},
		{l, []string{"spec", "template", "metadata", "labels"}},
		{name, []string{"spec", "template", "spec", "nodeClassRef", "name"}},
	} {
		if err := unstructured.SetNestedField(pool.Object, set.value, set.path...); err != nil {
			return nil, nil, fmt.Errorf("%s: %w", Fixture, err)
		}
	}
	return class, pool, nil
}

// Create creates Pool's objects and returns the function that deletes them again (the NodePool first: Karpenter
// then deletes its NodeClaims and their nodes).
func Create(ctx context.Context, dyn dynamic.Interface, root, name, cpuLimit string, labels map[string]string) (func(context.Context), error) {
	class, pool, err := Pool(root, name, cpuLimit, labels)
	if err != nil {
		return nil, err
	}
	del := func(ctx context.Context) {
		_ = dyn.Resource(NodePools).Delete(ctx, name, metav1.DeleteOptions{})
		_ = dyn.Resource(NodeClasses).Delete(ctx, name, metav1.DeleteOptions{})
	}
	if _, err := dyn.Resource(NodeClasses).Create(ctx, class, metav1.CreateOptions{}); err != nil {
		return nil, fmt.Errorf("creating KWOKNodeClass %s: %w", name, err)
	}
	if _, err := dyn.Resource(NodePools).Create(ctx, pool, metav1.CreateOptions{}); err != nil {
		del(ctx)
		return nil, fmt.Errorf("creating NodePool %s: %w", name, err)
	}
	return del, nil
}

// Watch follows, from its start until its context ends, a NodePool (its status.resources), its NodeClaims, and the
// pods and Events of one namespace, and keeps what a scenario measures. The pool is at its limit when its
// status.resources.cpu leaves less than one node of it (a NodeClaim's capacity) below spec.limits.cpu: Karpenter
// can add no node. It is settled at its limit when, at its limit, every NodeClaim of it is Initialized (its node
// registered, Ready, its startup taints gone): no node is coming that a pod could wait for.
//
// Two figures say a pod waited Unschedulable with no node coming for it, each exactly, neither counting the pods
// that wait for a node that is launching (they go Unschedulable before Karpenter's node is up, and are bound within
// a second of it being Ready):
//   - LimitEventPods: Karpenter's FailedScheduling "... exceed limits for nodepool" Event. Karpenter writes it for a
//     pending pod it could place on no node, existing or launching, and for which the pool's limits leave no new
//     one; a pod it can place on a launching node is Nominated instead.
//   - WaitedAtLimit: a pod that kube-scheduler marks (or marks again) Unschedulable while the pool is settled at its
//     limit, or with a message that every node the pool can have (its limit over a node's cpu) lacked cpu: it
//     tried the pod on the pool's nodes, all of them up, and none had room. The message counts the pods that
//     kube-scheduler saw the pool full for before Karpenter's NodeClaims said Initialized: it writes a pod's
//     condition only when its message changes, so a pod it tried on the full pool just before the last
//     NodeClaim's Initialized is not marked again after it. The message does not count while a node may be coming
//     that the pod waits for: while the pool has more NodeClaims than its limit holds nodes (one launched past the
//     limit, as Karpenter checks its limits eventually consistently, or one replacing another), or while Karpenter's
//     own count (status.resources) leaves a node's room below the limit. That count lags the NodeClaims, so a pod
//     still waiting with such a message when it reaches the limit counts then.
//
// Why each pod counted in WaitedAtLimit did (kube-scheduler's message and the NodeClaims then) is kept for a test's
// failure to print: AtLimit.
type Watch struct {
	mu     sync.Mutex
	limit  resource.Quantity
	used   resource.Quantity // the NodePool's status.resources.cpu, as last seen
	node   resource.Quantity // the largest capacity.cpu of its NodeClaims
	claims map[string]bool   // its NodeClaims now: whether each is Initialized
	peak   int               // the most NodeClaims at once
	unsch  map[string]string // the pods Unschedulable now: kube-scheduler's message
	atLim  map[string]string // the pods marked Unschedulable while the pool was settled at its limit: why
	// ended counts the pods of the namespace that ended (Succeeded, Failed or deleted), each once (done); endedAt is,
	// per pod of atLim, ended when it was counted there. A pod of atLim bound while ended is still that value was
	// bound with no pod ended since it was marked: the room was there, kube-scheduler had not yet seen the end
	// jobsched counted (its cache lags its watch under load), and no pod was too many. It leaves atLim for lagged.
	ended   int
	done    map[string]bool
	endedAt map[string]int
	lagged  map[string]string
	limEv   map[string]bool // the pods of Karpenter's FailedScheduling Event at the pool's limits
	last    time.Time
	secs    float64         // Unschedulable pod-seconds
	secsAt  float64         // of them while the pool was at its limit
	reach   bool            // the pool was at its limit once
	seen    map[string]bool // every NodeClaim of the pool seen
	nodeSec float64         // NodeClaim-seconds: the pool's NodeClaims, integrated over time
}

// Figures are what a Watch measured.
type Figures struct {
	PeakNodeClaims int     // the most NodeClaims of the pool at once
	ReachedLimit   bool    // the pool was at its limit at some moment
	LimitEventPods int     // pods Karpenter said it cannot provide for within the pool's limits (its Event)
	WaitedAtLimit  int     // pods marked Unschedulable while the pool was settled at its limit
	PodSeconds     float64 // Unschedulable pod-seconds, in all
	PodSecondsAt   float64 // Unschedulable pod-seconds while the pool was at its limit
	// NodeClaims is how many NodeClaims of the pool were seen in all (launched, as the watch saw them);
	// NodeClaimSeconds the seconds each existed, summed: what the nodes cost.
	NodeClaims       int
	NodeClaimSeconds float64
}

// Start starts a Watch of NodePool pool and namespace ns.
func Start(ctx context.Context, kube kubernetes.Interface, dyn dynamic.Interface, ns, pool string) (*Watch, error) {
	w := &Watch{claims: map[string]bool{}, unsch: map[string]string{}, atLim: map[string]string{}, limEv: map[string]bool{}, last: time.Now(),
		seen: map[string]bool{}}
	np, err := dyn.Resource(NodePools).Get(ctx, pool, metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	lim, _, _ := unstructured.NestedString(np.Object, "spec", "limits", "cpu")
	if w.limit, err = resource.ParseQuantity(lim); err != nil {
		return nil, fmt.Errorf("NodePool %s: spec.limits.cpu %q: %w", pool, lim, err)
	}
	claimSel := metav1.ListOptions{LabelSelector: PoolLabel + "=" + pool}
	poolSel := metav1.ListOptions{FieldSelector: "metadata.name=" + pool}
	follows := []struct {
		list func(context.Context) (string, error)
		open func(context.Context, string) (watch.Interface, error)
		on   func(watch.Event)
	}{
		{func(ctx context.Context) (string, error) {
			l, err := dyn.Resource(NodePools).List(ctx, poolSel)
			return rvOf(l, err)
		}, func(ctx context.Context, rv string) (watch.Interface, error) {
			return dyn.Resource(NodePools).Watch(ctx, withRV(poolSel, rv))
		}, w.onPool},
		{func(ctx context.Context) (string, error) {
			l, err := dyn.Resource(NodeClaims).List(ctx, claimSel)
			return rvOf(l, err)
		}, func(ctx context.Context, rv string) (watch.Interface, error) {
			return dyn.Resource(NodeClaims).Watch(ctx, withRV(claimSel, rv))
		}, w.onClaim},
		{func(ctx context.Context) (string, error) {
			l, err := kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
			return rvOf(l, err)
		}, func(ctx context.Context, rv string) (watch.Interface, error) {
			return kube.CoreV1().Pods(ns).Watch(ctx, withRV(metav1.ListOptions{}, rv))
		}, w.onPod},
		{func(ctx context.Context) (string, error) {
			l, err := kube.CoreV1().Events(ns).List(ctx, metav1.ListOptions{})
			return rvOf(l, err)
		}, func(ctx context.Context, rv string) (watch.Interface, error) {
			return kube.CoreV1().Events(ns).Watch(ctx, withRV(metav1.ListOptions{}, rv))
		}, w.onEvent},
	}
	for _, f := range follows {
		rv, err := f.list(ctx)
		if err != nil {
			return nil, err
		}
		go follow(ctx, rv, f.open, f.on)
	}
	return w, nil
}

func rvOf(l metav1.ListInterface, err error) (string, error) {
	if err != nil {
		return "", err
	}
	return l.GetResourceVersion(), nil
}

func withRV(o metav1.ListOptions, rv string) metav1.ListOptions {
	o.ResourceVersion, o.AllowWatchBookmarks = rv, true
	return o
}

// follow hands on every event of the watch open opens from rv, resuming from the last resourceVersion seen when a
// watch ends (100ms later when it cannot open), until ctx ends.
func follow(ctx context.Context, rv string, open func(context.Context, string) (watch.Interface, error), on func(watch.Event)) {
	wait.UntilWithContext(ctx, func(ctx context.Context) {
		w, err := open(ctx, rv)
		if err != nil {
			return
		}
		defer w.Stop()
		for ev := range w.ResultChan() {
			if ev.Type == watch.Error {
				return
			}
			if m, ok := ev.Object.(metav1.Object); ok {
				rv = m.GetResourceVersion()
			}
			if ev.Type != watch.Bookmark {
				on(ev)
			}
		}
	}, 100*time.Millisecond)
}

// advance counts the pod-seconds and NodeClaim-seconds since the last change, under w.mu.
func (w *Watch) advance() {
	now := time.Now()
	w.nodeSec += now.Sub(w.last).Seconds() * float64(len(w.claims))
	dt := now.Sub(w.last).Seconds() * float64(len(w.unsch))
	w.secs += dt
	if w.atLimit() {
		w.secsAt += dt
		w.reach = true
	}
	w.last = now
}

// settled says the pool is at its limit with every NodeClaim Initialized, under w.mu.
func (w *Watch) settled() bool {
	if !w.atLimit() || len(w.claims) == 0 {
		return false
	}
	for _, initialized := range w.claims {
		if !initialized {
			return false
		}
	}
	return true
}

// insufficientCPU is the count of nodes kube-scheduler's FailedScheduling message (the PodScheduled condition's)
// gives as lacking cpu: "0/4 nodes are available: 1 node(s) didn't match ..., 3 Insufficient cpu. preemption: ...".
var insufficientCPU = regexp.MustCompile(`(\d+) Insufficient cpu`)

// poolFull says kube-scheduler's try that wrote message msg found as many nodes without the cpu for it as the pool
// can have at its limit, and no node can come, under w.mu.
func (w *Watch) poolFull(msg string) bool {
	if w.node.Sign() <= 0 {
		return false
	}
	most := w.limit.MilliValue() / w.node.MilliValue()
	if int64(len(w.claims)) > most || !w.atLimit() { // a NodeClaim past the limit, or room for one: a node may come
		return false
	}
	if m := insufficientCPU.FindStringSubmatch(msg); m != nil {
		n, err := strconv.ParseInt(m[1], 10, 64)
		return err == nil && most > 0 && n >= most
	}
	return false
}

// scheduledMessage is the message of pod p's PodScheduled condition, "" without one.
func scheduledMessage(p *corev1.Pod) string {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodScheduled {
			return c.Message
		}
	}
	return ""
}

func (w *Watch) atLimit() bool {
	free := w.limit.DeepCopy()
	free.Sub(w.used)
	return free.Cmp(w.node) < 0 || free.Sign() <= 0
}

func (w *Watch) onPool(ev watch.Event) {
	u, ok := ev.Object.(*unstructured.Unstructured)
	if !ok {
		return
	}
	cpu, _, _ := unstructured.NestedString(u.Object, "status", "resources", "cpu")
	q, err := resource.ParseQuantity(cpu)
	if err != nil {
		q = resource.Quantity{}
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.advance()
	w.used = q
	w.advance() // the pods waiting now, at the new state (no time passes)
	// status.resources lags the NodeClaims: a pod may have found the pool full before it said so.
	for name, msg := range w.unsch {
		if _, counted := w.atLim[name]; !counted && w.poolFull(msg) {
			w.count(name, fmt.Sprintf("%q with %d NodeClaims, still waiting when Karpenter counted %s of %s cpu", msg, len(w.claims), w.used.String(), w.limit.String()))
		}
	}
}

func (w *Watch) onClaim(ev watch.Event) {
	u, ok := ev.Object.(*unstructured.Unstructured)
	if !ok {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.advance()
	if ev.Type == watch.Deleted {
		delete(w.claims, u.GetName())
	} else {
		conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
		w.claims[u.GetName()], w.seen[u.GetName()] = false, true
		for _, c := range conds {
			if c, ok := c.(map[string]any); ok && c["type"] == "Initialized" && c["status"] == "True" {
				w.claims[u.GetName()] = true
			}
		}
		if cpu, _, _ := unstructured.NestedString(u.Object, "status", "capacity", "cpu"); cpu != "" {
			if q, err := resource.ParseQuantity(cpu); err == nil && q.Cmp(w.node) > 0 {
				w.node = q
			}
		}
	}
	w.peak = max(w.peak, len(w.claims))
}

func (w *Watch) onPod(ev watch.Event) {
	p, ok := ev.Object.(*corev1.Pod)
	if !ok {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.advance()
	if (ev.Type == watch.Deleted || p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed) && !w.done[p.Name] {
		if w.done == nil {
			w.done = map[string]bool{}
		}
		w.done[p.Name] = true
		w.ended++
	}
	if at, counted := w.endedAt[p.Name]; counted && p.Spec.NodeName != "" && at == w.ended {
		if w.lagged == nil {
			w.lagged = map[string]string{}
		}
		w.lagged[p.Name] = w.atLim[p.Name]
		delete(w.atLim, p.Name)
		delete(w.endedAt, p.Name)
	}
	if ev.Type != watch.Deleted && kwokkit.Unschedulable(p) && p.Spec.NodeName == "" {
		msg := scheduledMessage(p)
		w.unsch[p.Name] = msg
		switch {
		case w.settled():
			w.count(p.Name, fmt.Sprintf("Unschedulable with the pool settled at its limit (%d NodeClaims, all Initialized)", len(w.claims)))
		case w.poolFull(msg):
			w.count(p.Name, fmt.Sprintf("%q with %d NodeClaims", msg, len(w.claims)))
		}
	} else {
		delete(w.unsch, p.Name)
	}
	w.advance()
}

// count counts pod name as waiting at the limit, for why, unless it counts already (the first why stays).
func (w *Watch) count(name, why string) {
	if _, counted := w.atLim[name]; counted {
		return
	}
	if _, lagged := w.lagged[name]; lagged {
		return
	}
	w.atLim[name] = why
	if w.endedAt == nil {
		w.endedAt = map[string]int{}
	}
	w.endedAt[name] = w.ended
}

// Lagged is, per pod marked Unschedulable at the limit and then bound with no pod ended in between (not counted in
// Figures.WaitedAtLimit), why it was marked.
func (w *Watch) Lagged() map[string]string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return maps.Clone(w.lagged)
}

func (w *Watch) onEvent(ev watch.Event) {
	e, ok := ev.Object.(*corev1.Event)
	if !ok || e.InvolvedObject.Kind != "Pod" || e.Reason != "FailedScheduling" || !strings.Contains(e.Message, LimitMessage) {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.limEv[e.InvolvedObject.Name] = true
}

// Figures are the figures so far.
func (w *Watch) Figures() Figures {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.advance()
	return Figures{PeakNodeClaims: w.peak, ReachedLimit: w.reach, LimitEventPods: len(w.limEv), WaitedAtLimit: len(w.atLim),
		PodSeconds: w.secs, PodSecondsAt: w.secsAt, NodeClaims: len(w.seen), NodeClaimSeconds: w.nodeSec}
}

// AtLimit is, per pod of Figures.WaitedAtLimit, why it counted: kube-scheduler's message then and the pool's
// NodeClaims.
func (w *Watch) AtLimit() map[string]string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return maps.Clone(w.atLim)
}

// NodeClaims is how many NodeClaims the pool has now.
func (w *Watch) NodeClaims() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.claims)
}
