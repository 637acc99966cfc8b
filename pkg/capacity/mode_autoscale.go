package capacity

import (
	"context"
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/jobsched/jobsched/pkg/capacity/autoscale"
	"github.com/jobsched/jobsched/pkg/config"
)

// autoscaleMode is limits.capacity: autoscale: each template's room is what fits on the nodes (as nodes) plus what
// the cluster's autoscaler can still add for it (see growth: Karpenter's NodePools within their limits, the
// cluster-autoscaler's node groups up to their maxSize), after the pods already waiting for new nodes, with at most
// limits.maxPending of ours waiting at once. Without an autoscaler to read (none installed, or no grant of
// manifests/autoscale) it counts as nodes, and says why. It needs manifests/capacity too, for the nodes.
type autoscaleMode struct{ quiet }

func (autoscaleMode) Name() config.Capacity { return config.CapacityAutoscale }

func (autoscaleMode) followsPods() {}

// Observe is nodes' Observe, then one read of the autoscaler (autoscale.Read).
func (autoscaleMode) Observe(ctx context.Context, c Clients, namespace string, o Options) (*Snapshot, error) {
	o.Mode = config.CapacityNodes
	snap, err := Observe(ctx, c.Kube, namespace, o)
	if err != nil {
		return nil, err
	}
	st, err := autoscale.Read(ctx, c.Dynamic, c.Kube)
	if err != nil {
		return nil, fmt.Errorf("capacity autoscale: %w", err)
	}
	snap.Autoscale, snap.MaxPending = st, o.MaxPending
	if st.Source == "" {
		snap.Warnings = append(snap.Warnings, fmt.Sprintf("capacity autoscale: %s: counting as nodes", st.Note))
	}
	return snap, nil
}

// Room is the Placer's, with the autoscaler's room for the pods that fit on no node. A node whose NodeClaim is being
// deleted is no room (it carries Karpenter's disrupted taint here, as it soon does on the cluster): its NodeClaim no
// longer counts against the NodePool's limits, so its room is counted there, on the new nodes it lets in, once.
func (autoscaleMode) Room(snap *Snapshot, claims []Claim) Room {
	snap = withoutDisrupted(snap)
	p := NewPlacer(snap, claims)
	p.grow = newGrowth(snap, p)
	return p
}

// WordGrace is how long after a pod of ours turned Unschedulable the pass waits for the autoscaler to say whether
// it provides a node for it (limits.capacity: autoscale): until then the pod counts as waiting for a new node (and
// against limits.maxPending), then it blocks unless the autoscaler's Event says it provides one. Both decide on a
// pod within 10 s: Karpenter batches pending pods for at most 10 s (1 s without a new one) before it simulates and
// writes Nominated, the cluster-autoscaler scans every 10 s; 5 s more are for the simulation and the Event's write.
const WordGrace = 15 * time.Second

// Waits reads the Events of pods that the components from wrote (autoscale.Waits). Without list on Events (manifests/autoscale) or when they cannot
// be read, every Unschedulable pod blocks, as with nodes, and note says so.
func (autoscaleMode) Waits(ctx context.Context, c Clients, namespace string, pods, from []string) (map[string]Wait, string) {
	if len(pods) == 0 {
		return nil, ""
	}
	waits, err := autoscale.Waits(ctx, c.Kube, namespace, pods, from)
	switch {
	case apierrors.IsForbidden(err):
		return nil, fmt.Sprintf("cannot list Events in %s (the Role of manifests/autoscale grants list): every Unschedulable pod blocks, as with nodes", namespace)
	case err != nil:
		return nil, fmt.Sprintf("%v: every Unschedulable pod blocks, as with nodes", err)
	}
	return waits, ""
}

func (autoscaleMode) Needs() Needs {
	return Needs{Component: "autoscale", Dynamic: true, Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{"karpenter.sh"}, Resources: []string{"nodepools", "nodeclaims"}, Verbs: []string{"get", "list"}},
		{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get"}, ResourceNames: []string{"cluster-autoscaler-status"}},
		{APIGroups: []string{""}, Resources: []string{"events"}, Verbs: []string{"list"}},
	}}
}

// disruptedTaint is the taint Karpenter puts on a node it is about to remove (karpenter.sh/disrupted).
var disruptedTaint = corev1.Taint{Key: "karpenter.sh/disrupted", Effect: corev1.TaintEffectNoSchedule}

// withoutDisrupted is snap with Karpenter's disrupted taint on the nodes of NodeClaims being deleted (a copy when
// there are any): the nodes watch may show such a node without it for a moment.
func withoutDisrupted(snap *Snapshot) *Snapshot {
	if snap == nil || snap.Autoscale == nil {
		return snap
	}
	gone := map[string]bool{}
	for _, p := range snap.Autoscale.Pools {
		for _, id := range p.Disrupted {
			gone[id] = true
		}
	}
	var nodes []Node
	for i, n := range snap.Nodes {
		if n.ProviderID == "" || !gone[n.ProviderID] || slices.ContainsFunc(n.Taints, func(t corev1.Taint) bool { return t.MatchTaint(&disruptedTaint) }) {
			continue
		}
		if nodes == nil {
			nodes = slices.Clone(snap.Nodes)
		}
		nodes[i].Taints = append(slices.Clone(n.Taints), disruptedTaint)
	}
	if nodes == nil {
		return snap
	}
	c := *snap
	c.Nodes = nodes
	return &c
}
