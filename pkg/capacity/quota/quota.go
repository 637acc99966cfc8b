// Package quota is limits.capacity: quota: each template's room is what the namespace's ResourceQuotas admit, nodes
// not counted. The base Role's list on resourcequotas and limitranges is all it needs (get on the RuntimeClass a
// template names, from manifests/capacity, adds its overhead; without it the template is counted as written).
package quota

import (
	"context"

	"github.com/jobsched/jobsched/pkg/capacity"
	"github.com/jobsched/jobsched/pkg/config"
)

// Mode is limits.capacity: quota.
type Mode struct{}

var _ = capacity.Register(Mode{})

func (Mode) Name() config.Capacity { return config.CapacityQuota }

func (Mode) Observe(ctx context.Context, c capacity.Clients, namespace string, o capacity.Options) (*capacity.Snapshot, error) {
	o.Nodes = false
	return capacity.Observe(ctx, c.Kube, namespace, o)
}

func (Mode) Room(snap *capacity.Snapshot, claims []capacity.Claim) capacity.Room {
	return capacity.NewPlacer(snap, claims)
}

func (Mode) Needs() capacity.Needs { return capacity.Needs{} }
