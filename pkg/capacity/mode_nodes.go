package capacity

import (
	"context"

	rbacv1 "k8s.io/api/rbac/v1"

	"github.com/jobsched/jobsched/pkg/config"
)

// nodesMode is limits.capacity: nodes (the default): each template's room is what fits on the nodes it may use and
// within the namespace's ResourceQuotas (see Fit). Without the ClusterRole of manifests/capacity a pass counts as
// quota does, and says so.
type nodesMode struct{ fitted }

func (nodesMode) Name() config.Capacity { return config.CapacityNodes }

func (nodesMode) Observe(ctx context.Context, c Clients, namespace string, o Options) (*Snapshot, error) {
	o.Mode = config.CapacityNodes
	return Observe(ctx, c.Kube, namespace, o)
}

func (nodesMode) followsPods() {}

func (nodesMode) Needs() Needs {
	return Needs{Component: "capacity", Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"nodes"}, Verbs: []string{"list", "watch"}},
		{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"list", "watch"}},
		{APIGroups: []string{"node.k8s.io"}, Resources: []string{"runtimeclasses"}, Verbs: []string{"get"}},
	}}
}
