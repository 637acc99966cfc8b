package capacity

import (
	"context"

	"github.com/jobsched/jobsched/pkg/config"
)

// quotaMode is limits.capacity: quota: each template's room is what the namespace's ResourceQuotas admit, nodes
// not counted. The base Role's list on resourcequotas and limitranges is all it needs (get on the RuntimeClass a
// template names, from manifests/capacity, adds its overhead; without it the template is counted as written).
type quotaMode struct{ fitted }

func (quotaMode) Name() config.Capacity { return config.CapacityQuota }

func (quotaMode) Observe(ctx context.Context, c Clients, namespace string, o Options) (*Snapshot, error) {
	o.Mode = config.CapacityQuota
	return Observe(ctx, c.Kube, namespace, o)
}

func (quotaMode) Needs() Needs { return Needs{} }
