package capacity

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"sync"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	nodev1 "k8s.io/api/node/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"

	"github.com/jobsched/jobsched/pkg/apitext"
	"github.com/jobsched/jobsched/pkg/autoscaler"
	"github.com/jobsched/jobsched/pkg/config"
	"github.com/jobsched/jobsched/pkg/jobmeta"
	"github.com/jobsched/jobsched/pkg/kube"
)

// NonTerminal selects the pods that hold node resources (a field selector); terminal pods have released theirs.
const NonTerminal = "status.phase!=" + string(corev1.PodSucceeded) + ",status.phase!=" + string(corev1.PodFailed)

// Per-node listing: when the templates together may use at most maxNodeLists nodes and at most one node in
// nodeListRatio, Observe lists the pods of those nodes (one LIST each, field selector spec.nodeName, listWorkers at
// once) instead of every pod in the cluster. A LIST costs the API server a fixed part plus a part per pod it returns: with about the
// same pods on every node, listing 1 node in 8 costs about an eighth of listing all, plus the fixed parts, which
// maxNodeLists bounds (and keeps within the client's default burst).
const (
	maxNodeLists  = 100
	nodeListRatio = 8
	listWorkers   = 16
)

// Options is what Observe needs besides the client and the namespace.
type Options struct {
	// Nodes counts the nodes (and the pods on them) as well as the ResourceQuotas; else only the quotas count.
	Nodes bool
	// Templates are the Job templates of every queue, observed once for all: their pod specs pick the nodes whose
	// pods are listed (the union of the nodes any of them may use), and each RuntimeClass they name is read once.
	// None (or a nil one) lists every pod.
	Templates []*batchv1.Job
	// Scheduler is this scheduler's name: its own unbound pods are the caller's to count (Fit's unbound), so they are
	// left out of Snapshot.Pending.
	Scheduler string
	// Self is the name of the pod this pass runs in, in the namespace (SelfPod()); "" when none. That pod is the
	// CronJob's: its spec (requests, nodeSelector, affinity, tolerations) is the next tick's, for which room is kept.
	// When no such pod is found (the pass runs outside the cluster, e.g. status or dry-run from a laptop), no room is
	// kept: there is no tick pod to start.
	Self string
	// NoNextPassRoom keeps no room for the next pass's own pod (the next tick) even when Self is found.
	NoNextPassRoom bool
	// Config is the configuration, for the keys only a mode reads (nil: their defaults).
	Config *config.Config
	// Follow, when set, keeps what is read between the passes of a fill run (see Follow); nil: a pass lists.
	Follow *Follow
}

// SelfPod is the name of the pod this process runs in, "" outside a pod: inside one, the kubelet sets
// KUBERNETES_SERVICE_HOST, and HOSTNAME to the pod's name (unless the pod sets spec.hostname).
func SelfPod() string {
	if os.Getenv("KUBERNETES_SERVICE_HOST") == "" {
		return ""
	}
	return os.Getenv("HOSTNAME")
}

// Snapshot is the aggregate of what the cluster holds, built while listing so memory does not grow with pods.
type Snapshot struct {
	Mode        config.Capacity        // what was observed: CapacityNodes (Fit uses Nodes), or CapacityQuota (asked for, or the fallback)
	Nodes       []Node                 // sorted by name
	Quotas      []corev1.ResourceQuota // in the namespace
	LimitRanges []corev1.LimitRange    // in the namespace
	// RuntimeClasses are the ones the templates name, by name, those that could be read.
	RuntimeClasses map[string]*nodev1.RuntimeClass
	// Pending are the non-terminal pods bound to no node, not this scheduler's, whose demand could take room on the
	// templates' nodes, sorted by namespace/name.
	Pending     []Pending
	NextPassPod *corev1.Pod // the pod this pass runs in (its spec): the next pass's own pod is the same, room is kept for it; nil for none
	Listed      string      // which pods were listed: "all pods" or "pods of N nodes"
	// Warnings say once what could not be read for lack of a permission, and what the pass did instead.
	Warnings []string
	// Autoscale is what the autoscaler can still add (limits.capacity: autoscale; nil in other modes), and
	// MaxPending how many of our pods may wait for new nodes at once (limits.maxPending).
	Autoscale  *autoscaler.State
	MaxPending int
}

// Node is one node and what the pods bound to it request.
type Node struct {
	Name          string
	Labels        map[string]string
	Taints        []corev1.Taint
	Unschedulable bool   // spec.unschedulable (cordoned)
	Ready         bool   // NodeReady condition True
	ProviderID    string // spec.providerID: which node group it is of (limits.capacity: autoscale)
	Allocatable   corev1.ResourceList
	Requested     Requests // sum of Demand of every non-terminal pod bound to it (all namespaces)
	Pods          int      // number of non-terminal pods bound to it
}

// Pending is a pod bound to no node yet: what it requests and where it may go.
type Pending struct {
	Namespace, Name string
	Demand          corev1.ResourceList
	Spec            corev1.PodSpec // only nodeName, nodeSelector, affinity and tolerations are kept
}

// Observe lists what the quotas and, with o.Nodes, the nodes hold (the nodes and quota modes observe with it): one
// LIST of ResourceQuotas and one of LimitRanges in namespace, and one GET of each RuntimeClass the templates name.
// With o.Nodes also: one paginated LIST of nodes; the tick pod (one LIST in namespace with field selector
// metadata.name=Self); then either one paginated LIST of non-terminal pods in all namespaces, or, when the templates
// together may use few nodes (see maxNodeLists), one per such node (field selector spec.nodeName=<node>, concurrently) plus
// one of the unbound ones (spec.nodeName=). Pods are aggregated page by page into Node.Requested/Pods and dropped;
// pods with a deletionTimestamp still count (they hold room until gone).
//
// A Forbidden LIST of nodes or pods cluster-wide makes the pass count the quotas alone (Snapshot.Mode quota); a Forbidden LimitRange list
// or RuntimeClass get counts the template as written. Each is said in Warnings, never an error. Any other error is
// returned.
func Observe(ctx context.Context, c kube.Interface, namespace string, o Options) (*Snapshot, error) {
	snap := &Snapshot{Mode: config.CapacityQuota}
	if o.Nodes {
		snap.Mode = config.CapacityNodes
	}
	f := o.Follow
	if f == nil {
		f = &Follow{} // this pass's lists only
	}
	f.init(c, namespace, o, o.Follow != nil)
	lrs, err := synced(ctx, f.limits, func() ([]corev1.LimitRange, error) {
		l, err := c.CoreV1().LimitRanges(namespace).List(ctx, metav1.ListOptions{})
		if err != nil {
			return nil, err
		}
		return l.Items, nil
	})
	switch {
	case apierrors.IsForbidden(err):
		snap.Warnings = append(snap.Warnings, fmt.Sprintf("cannot list LimitRanges in %s (the Role needs list on "+
			"limitranges): counting the template without their defaults", namespace))
	case err != nil:
		return nil, fmt.Errorf("capacity: list limitranges in namespace %s: %w", namespace, err)
	default:
		snap.LimitRanges = lrs
	}
	if err := observeRuntimeClasses(ctx, c, o.Templates, snap); err != nil {
		return nil, err
	}
	if o.Nodes {
		var specs []*corev1.Pod // nil when a template is missing: every pod is listed
		for _, tpl := range o.Templates {
			if tpl == nil {
				specs = nil
				break
			}
			specs = append(specs, snap.admitted(tpl))
		}
		err := observeNodes(ctx, c, f, o, specs, snap)
		switch {
		case apierrors.IsForbidden(err):
			snap.Mode, snap.Nodes, snap.Pending, snap.NextPassPod, snap.Listed = config.CapacityQuota, nil, nil, nil, ""
			snap.Warnings = append(snap.Warnings, fmt.Sprintf("capacity nodes needs list on nodes and pods cluster-wide "+
				"(the ClusterRole of manifests/capacity): %v; using quota for this pass", err))
		case err != nil:
			return nil, err
		}
	}
	snap.Quotas, err = synced(ctx, f.quotas, func() ([]corev1.ResourceQuota, error) {
		l, err := c.CoreV1().ResourceQuotas(namespace).List(ctx, metav1.ListOptions{})
		if err != nil {
			return nil, err
		}
		return l.Items, nil
	})
	if err != nil {
		return nil, fmt.Errorf("capacity: list resourcequotas in namespace %s: %w", namespace, err)
	}
	return snap, nil
}

// observeRuntimeClasses reads each RuntimeClass the templates name, once, in the order they are first named.
func observeRuntimeClasses(ctx context.Context, c kube.Interface, templates []*batchv1.Job, snap *Snapshot) error {
	seen := map[string]bool{}
	for _, tpl := range templates {
		if tpl == nil {
			continue
		}
		name := tpl.Spec.Template.Spec.RuntimeClassName
		if name == nil || *name == "" || seen[*name] {
			continue
		}
		seen[*name] = true
		rc, err := c.NodeV1().RuntimeClasses().Get(ctx, *name, metav1.GetOptions{})
		switch {
		case apierrors.IsForbidden(err):
			snap.Warnings = append(snap.Warnings, fmt.Sprintf("cannot get RuntimeClass %s (the ClusterRole of manifests/capacity "+
				"needs get on runtimeclasses): counting the template without its overhead", *name))
		case apierrors.IsNotFound(err):
			snap.Warnings = append(snap.Warnings, fmt.Sprintf("RuntimeClass %s does not exist: the API server rejects the "+
				"template's pods", *name))
		case err != nil:
			return fmt.Errorf("capacity: get runtimeclass %s: %w", *name, err)
		default:
			if snap.RuntimeClasses == nil {
				snap.RuntimeClasses = map[string]*nodev1.RuntimeClass{}
			}
			snap.RuntimeClasses[*name] = rc
		}
	}
	return nil
}

// admitted is tpl's pod as the API server admits it in the snapshot's namespace (see Admitted): with the
// namespace's LimitRanges and the RuntimeClass it names.
func (s *Snapshot) admitted(tpl *batchv1.Job) *corev1.Pod {
	spec := &tpl.Spec.Template.Spec
	var rc *nodev1.RuntimeClass
	if name := spec.RuntimeClassName; name != nil {
		rc = s.RuntimeClasses[*name]
	}
	return Admitted(spec, s.LimitRanges, rc)
}

func observeNodes(ctx context.Context, c kube.Interface, f *Follow, o Options, pods []*corev1.Pod, snap *Snapshot) error {
	namespace := f.namespace
	var err error
	snap.Nodes, err = synced(ctx, f.nodes, func() ([]Node, error) {
		var nodes []Node
		_, err := kube.List(ctx, c.CoreV1().Nodes().List, metav1.ListOptions{}, func(n *corev1.Node) { nodes = append(nodes, newNode(n)) })
		slices.SortFunc(nodes, func(a, b Node) int { return cmp.Compare(a.Name, b.Name) })
		return nodes, err
	})
	if err != nil {
		return fmt.Errorf("capacity: list nodes: %w", err)
	}
	for i := range snap.Nodes {
		snap.Nodes[i].Requested = nil // summed below: never the feed's
	}
	if f.pods.Watch { // every pod is followed, the tick pod among them
		if err := f.pods.Sync(ctx); err != nil {
			return fmt.Errorf("capacity: list pods in all namespaces: %w", err)
		}
	}
	if !o.NoNextPassRoom {
		if o.Self != "" && f.pods.Watch {
			if spec := f.selfSpec(); spec != nil {
				snap.NextPassPod = &corev1.Pod{Spec: *spec}
			}
		} else if o.Self != "" {
			self := fields.OneTermEqualSelector("metadata.name", o.Self).String()
			list, err := c.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{FieldSelector: self})
			if err != nil {
				return fmt.Errorf("capacity: list pod %s in %s: %w", o.Self, namespace, err)
			}
			for i := range list.Items {
				if p := &list.Items[i]; p.Name == o.Self {
					snap.NextPassPod = &corev1.Pod{Spec: *p.Spec.DeepCopy()}
				}
			}
		}
		if snap.NextPassPod == nil && o.Self != "" {
			snap.Warnings = append(snap.Warnings, fmt.Sprintf("running in a pod, but no pod %q in %s (HOSTNAME is not "+
				"the pod's name?): no room kept for the next tick", o.Self, namespace))
		}
	}
	// The nodes any of the templates may use, Ready or not (readiness comes and goes; Fit checks it).
	index := make(map[string]*Node, len(snap.Nodes))
	var eligible []string
	var wheres []placement
	for _, p := range pods {
		wheres = append(wheres, newPlacement(&p.Spec))
	}
	for i := range snap.Nodes {
		n := &snap.Nodes[i]
		index[n.Name] = n
		ready := *n
		ready.Ready = true
		if slices.ContainsFunc(wheres, func(w placement) bool { return w.excluded(&ready) == "" }) {
			eligible = append(eligible, n.Name)
		}
	}
	agg := &aggregator{index: index, namespace: namespace, scheduler: o.Scheduler}
	if len(pods) == 0 || len(eligible) > maxNodeLists || len(eligible)*nodeListRatio > len(snap.Nodes) {
		snap.Listed = "all pods"
		if f.pods.Watch {
			f.addHeld(agg)
		} else {
			err = listPods(ctx, c, NonTerminal, "in all namespaces", agg)
		}
	} else {
		snap.Listed = fmt.Sprintf("pods of %d node(s)", len(eligible))
		agg.only = map[string]bool{}
		for _, n := range eligible {
			agg.only[n] = true
		}
		if f.pods.Watch {
			f.addHeld(agg)
		} else {
			err = listPodsOf(ctx, c, eligible, agg)
		}
	}
	if err != nil {
		return err
	}
	snap.Pending = agg.pending
	slices.SortFunc(snap.Pending, func(a, b Pending) int {
		return cmp.Or(cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Name, b.Name))
	})
	return nil
}

// listPods lists the pods that selector selects, page by page, into agg.
func listPods(ctx context.Context, c kube.Interface, selector, what string, agg *aggregator) error {
	_, err := kube.List(ctx, c.CoreV1().Pods(metav1.NamespaceAll).List, metav1.ListOptions{FieldSelector: selector}, func(p *corev1.Pod) {
		if r, ok := agg.record(p); ok {
			agg.add(r)
		}
	})
	if err != nil {
		return fmt.Errorf("capacity: list pods %s: %w", what, err)
	}
	return nil
}

// listPodsOf lists the non-terminal pods bound to each of nodes (listWorkers at once) and those bound to none.
func listPodsOf(ctx context.Context, c kube.Interface, nodes []string, agg *aggregator) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	names := append(slices.Clone(nodes), "")
	errs := make([]error, len(names))
	workqueue.ParallelizeUntil(ctx, listWorkers, len(names), func(i int) {
		sel := fields.OneTermEqualSelector("spec.nodeName", names[i]).String() + "," + NonTerminal
		if err := listPods(ctx, c, sel, "on node "+names[i], agg); err != nil {
			if ctx.Err() == nil { // the first error; the others only saw it cancel their LIST
				errs[i] = err
			}
			cancel()
		}
	})
	if err := errors.Join(errs...); err != nil {
		return err
	}
	return ctx.Err()
}

// aggregator adds pods to the nodes they are bound to, and keeps the unbound pods of others.
type aggregator struct {
	mu                   sync.Mutex
	index                map[string]*Node
	only                 map[string]bool // the nodes whose pods count (nil: every node's)
	namespace, scheduler string
	self                 string // the tick pod's name in namespace (Options.Self)
	pending              []Pending
}

// podRecord is what capacity reads of a non-terminal pod: where it is bound and what it holds. A pass sums them as
// they are listed; a fill run keeps each in a compact form between its passes (storedPod).
type podRecord struct {
	Node      string              // bound to ("": none)
	Demand    corev1.ResourceList // what it holds
	Deleting  bool
	Ours      bool // this scheduler's, in its namespace: its unbound pods are the caller's to count
	*podExtra      // an unbound pod's name and placement, the tick pod's spec, our pod's summary; nil for the rest
}

// podExtra is what few pods need kept: those that wait for a node, the tick pod, and our own pods.
type podExtra struct {
	Namespace, Name string
	Where           *corev1.PodSpec // unbound: its nodeSelector, affinity and tolerations
	Self            *corev1.PodSpec // the tick pod's spec (Options.Self)
	Own             *PodSummary     // one of ours (Follow.Ours)
}

// record is what is kept of p; false for a terminal pod (the server-side field selector already drops them;
// fakes and caches may not), which has released what it held.
func (a *aggregator) record(p *corev1.Pod) (podRecord, bool) {
	if p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
		return podRecord{}, false
	}
	r := podRecord{Node: p.Spec.NodeName, Demand: Demand(p), Deleting: p.DeletionTimestamp != nil,
		Ours: p.Namespace == a.namespace && a.scheduler != "" && p.Labels[jobmeta.LabelScheduler] == a.scheduler}
	self := a.self != "" && p.Namespace == a.namespace && p.Name == a.self
	var own *PodSummary
	if r.Ours {
		if s, ok := SummarizePod(p); ok {
			own = &s
		}
	}
	if r.Node == "" || self || own != nil {
		r.podExtra = &podExtra{Namespace: p.Namespace, Name: p.Name, Own: own}
	}
	if r.Node == "" {
		r.Where = &corev1.PodSpec{NodeSelector: p.Spec.NodeSelector, Affinity: p.Spec.Affinity, Tolerations: p.Spec.Tolerations}
	}
	if self {
		r.Self = p.Spec.DeepCopy()
	}
	return r, true
}

// add adds one pod, bound to a node listed (and counted: only), or unbound and kept in pending unless it is this
// scheduler's (the caller counts those) or is being deleted. Pods with a deletionTimestamp on a node still count
// (they hold room until gone).
func (a *aggregator) add(r podRecord) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if r.Node == "" {
		if !r.Deleting && !r.Ours {
			a.pending = append(a.pending, Pending{Namespace: r.Namespace, Name: r.Name, Demand: r.Demand, Spec: *r.Where})
		}
		return
	}
	if a.only != nil && !a.only[r.Node] {
		return
	}
	if n := a.index[r.Node]; n != nil {
		n.Pods++
		n.Requested.add(r.Demand)
	}
}

func newNode(n *corev1.Node) Node {
	ready := false
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			ready = c.Status == corev1.ConditionTrue
		}
	}
	return Node{
		Name:          n.Name,
		Labels:        n.Labels,
		Taints:        n.Spec.Taints,
		Unschedulable: n.Spec.Unschedulable,
		Ready:         ready,
		ProviderID:    n.Spec.ProviderID,
		Allocatable:   n.Status.Allocatable,
	}
}

// PodSummary is what a pass keeps of one of its non-terminal pods (scheduler.Observation.Pods).
type PodSummary struct {
	Name          string
	Job           types.UID // its controlling Job
	Bound         bool      // spec.nodeName is set
	Running       bool      // past Pending (phase Running or Unknown): bound, its containers started
	Unschedulable bool      // PodScheduled=False with reason Unschedulable (not SchedulingGated or any other)
	Message       string    // the scheduler's message when Unschedulable
	// UnschedulableSince is when it turned Unschedulable (the condition's lastTransitionTime, UTC; zero if unknown).
	UnschedulableSince time.Time
	// Demand is what it requests (Demand) while bound to no node: a sized queue's pods are counted by their own.
	Demand corev1.ResourceList
}

// SummarizePod keeps what a pass needs of a non-terminal pod; ok is false for a pod that holds nothing: being
// deleted (its Job is gone or going), controlled by no Job, or terminal (Succeeded or Failed).
func SummarizePod(pod *corev1.Pod) (s PodSummary, ok bool) {
	owner := metav1.GetControllerOf(pod)
	if pod.DeletionTimestamp != nil || owner == nil || pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed {
		return PodSummary{}, false
	}
	s = PodSummary{Name: pod.Name, Job: owner.UID, Bound: pod.Spec.NodeName != "", Running: pod.Status.Phase != corev1.PodPending}
	if !s.Bound {
		s.Demand = Demand(pod)
	}
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable {
			s.Unschedulable, s.Message, s.UnschedulableSince = true, apitext.Quote(c.Message), c.LastTransitionTime.UTC()
		}
	}
	return s, true
}
