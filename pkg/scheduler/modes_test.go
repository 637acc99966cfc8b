package scheduler

import (
	"github.com/jobsched/jobsched/pkg/capacity"
	"github.com/jobsched/jobsched/pkg/capacity/fixed"
)

// The test-only capacity mode (see fixed_test.go): its one registration line.
var _ = capacity.Register(fixed.Mode{Slots: 2})
