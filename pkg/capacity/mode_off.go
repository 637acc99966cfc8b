package capacity

import (
	"context"

	"github.com/jobsched/jobsched/pkg/config"
)

// offMode is limits.capacity: off: no room is counted; limits.maxActive and limits.maxPerTick alone bound the
// creates, and an Unschedulable pod (limits.blockOnUnschedulable) is the only sign of a full cluster.
type offMode struct{ quiet }

func (offMode) Name() config.Capacity { return config.CapacityOff }

func (offMode) Observe(context.Context, Clients, string, Options) (*Snapshot, error) { return nil, nil }

func (offMode) Room(*Snapshot, []Claim) Room { return nil }

func (offMode) Needs() Needs { return Needs{} }
