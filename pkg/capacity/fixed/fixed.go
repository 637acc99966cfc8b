// Package fixed is a capacity mode for tests only: at most Slots of the install's Jobs are unfinished at once. It
// is what a new mode costs: this package and one registration line, `var _ = capacity.Register(fixed.Mode{...})`,
// in a test file (pkg/scheduler's modes_test.go); the binary never registers it.
package fixed

import (
	"context"
	"fmt"

	"github.com/jobsched/jobsched/pkg/capacity"
	"github.com/jobsched/jobsched/pkg/config"
)

// Name is the mode's value of limits.capacity.
const Name config.Capacity = "fixed"

// Mode is limits.capacity: fixed, with Slots slots.
type Mode struct{ Slots int }

func (Mode) Name() config.Capacity { return Name }

// Observe reads nothing: the slots are fixed.
func (Mode) Observe(context.Context, capacity.Clients, string, capacity.Options) (*capacity.Snapshot, error) {
	return nil, nil
}

func (Mode) Room(*capacity.Snapshot, []capacity.Claim) capacity.Room { return nil }

// Bound is Slots − the install's unfinished Jobs.
func (m Mode) Bound(_ *config.Config, n capacity.Counts) (int, string) {
	return m.Slots - n.Unfinished, fmt.Sprintf("fixed: %d of %d slots taken", n.Unfinished, m.Slots)
}

func (Mode) Needs() capacity.Needs { return capacity.Needs{} }
