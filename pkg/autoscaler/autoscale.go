// Package autoscaler reads what a cluster's autoscaler can still add: Karpenter's NodePools and NodeClaims
// (karpenter.sh/v1, through the dynamic client, as unstructured objects: no Karpenter module is imported) or the
// cluster-autoscaler's status ConfigMap (kube-system/cluster-autoscaler-status, the YAML of recent releases), and
// says whether a pod may land on the nodes a NodePool makes. It returns plain values; pkg/capacity counts the room on
// them (limits.capacity: autoscale).
package autoscaler

import (
	corev1 "k8s.io/api/core/v1"
)

// Sources of a State.
const (
	Karpenter          = "karpenter"
	ClusterAutoscaler  = "cluster-autoscaler"
	KindNodePool       = "NodePool"
	KindNodeGroup      = "node group"
	nodesResource      = corev1.ResourceName("nodes") // Karpenter's count of a NodePool's nodes in limits and status.resources
	nodePoolLabel      = "karpenter.sh/nodepool"
	statusConfigMap    = "cluster-autoscaler-status"
	statusConfigMapKey = "status"
)

// State is what the autoscaler says it can still add, as read once per pass.
type State struct {
	// Source is Karpenter or ClusterAutoscaler; "" when neither was found (or readable): the mode counts as nodes.
	Source string
	Pools  []Pool // sorted by name
	// Note says, when Source is "", what was looked for and why nothing was found (a missing grant, no CRD).
	Note string
}

// Pool is one NodePool or node group.
type Pool struct {
	Kind, Name string
	// Limits are what it may hold in all (a NodePool's spec.limits; nil: no limit), Used what its nodes hold now,
	// NodeClaims still launching counted (status.resources).
	Limits, Used corev1.ResourceList
	// Claimed is what its NodeClaims not being deleted hold, as Karpenter counts them against the limits at once
	// (their status.capacity, and 1 node each); status.resources, updated later, may not count them yet.
	Claimed corev1.ResourceList
	// Launching are its NodeClaims that have launched but whose NodeClaim does not say Registered yet: room that is
	// coming, by NodeClaim name.
	Launching map[string]Launch
	// Disrupted are the providerIDs of its NodeClaims being deleted (consolidation, expiry): Karpenter counts them
	// against the limits no more, and their nodes go away, whether or not they show its disrupted taint yet.
	Disrupted []string
	// Labels and Requirements are what its nodes carry (template labels; spec.template.spec.requirements); Taints
	// the taints they keep (startupTaints, removed once the node is up, are not).
	Labels       map[string]string
	Requirements []corev1.NodeSelectorRequirement
	Taints       []corev1.Taint
	// Shape is the node a NodePool makes, as its newest NodeClaim with a known one shows it; nil when none does.
	Shape *Shape
	// Group is a node group's sizes (cluster-autoscaler), nil for a NodePool.
	Group *Group
	// Unavailable says why it adds nothing whatever its limits (its Ready condition is False), "" when it may.
	Unavailable string
}

// Launch is a launching NodeClaim: the providerID of the node it makes (the node carries it in spec.providerID
// once created) and its allocatable.
type Launch struct {
	ProviderID  string
	Allocatable corev1.ResourceList
}

// Shape is one node's capacity (what Karpenter counts against a NodePool's limits) and allocatable (what pods
// get), and the NodeClaim it was read from.
type Shape struct {
	Capacity, Allocatable corev1.ResourceList
	From                  string
}

// Group is a cluster-autoscaler node group's sizes, from its status.
type Group struct {
	MinSize, MaxSize, Target, Ready, Registered int
}
