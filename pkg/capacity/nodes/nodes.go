// Package nodes is limits.capacity: nodes (the default): each template's room is what fits on the nodes it may use
// and within the namespace's ResourceQuotas (see capacity.Fit). Without the ClusterRole of manifests/capacity a pass
// counts as quota does, and says so.
package nodes

import (
	"context"

	rbacv1 "k8s.io/api/rbac/v1"

	"github.com/jobsched/jobsched/pkg/capacity"
	"github.com/jobsched/jobsched/pkg/config"
)

// Mode is limits.capacity: nodes.
type Mode struct{}

var _ = capacity.Register(Mode{})

func (Mode) Name() config.Capacity { return config.CapacityNodes }

func (Mode) Observe(ctx context.Context, c capacity.Clients, namespace string, o capacity.Options) (*capacity.Snapshot, error) {
	o.Nodes = true
	return capacity.Observe(ctx, c.Kube, namespace, o)
}

func (Mode) Room(snap *capacity.Snapshot, claims []capacity.Claim) capacity.Room {
	return capacity.NewPlacer(snap, claims)
}

// FollowsPods: a fill run follows every pod, for the nodes' room.
func (Mode) FollowsPods() bool { return true }

func (Mode) Needs() capacity.Needs {
	return capacity.Needs{Component: "capacity", Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"nodes"}, Verbs: []string{"list", "watch"}},
		{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"list", "watch"}},
		{APIGroups: []string{"node.k8s.io"}, Resources: []string{"runtimeclasses"}, Verbs: []string{"get"}},
	}}
}
