// Package off is limits.capacity: off: no room is counted; limits.maxActive and limits.maxPerTick alone bound the
// creates, and an Unschedulable pod (limits.blockOnUnschedulable) is the only sign of a full cluster.
package off

import (
	"context"

	"github.com/jobsched/jobsched/pkg/capacity"
	"github.com/jobsched/jobsched/pkg/config"
)

// Mode is limits.capacity: off.
type Mode struct{}

var _ = capacity.Register(Mode{})

func (Mode) Name() config.Capacity { return config.CapacityOff }

func (Mode) Observe(context.Context, capacity.Clients, string, capacity.Options) (*capacity.Snapshot, error) {
	return nil, nil
}

func (Mode) Room(*capacity.Snapshot, []capacity.Claim) capacity.Room { return nil }

func (Mode) Needs() capacity.Needs { return capacity.Needs{} }
