package scheduler

// The capacity modes a scheduler may be configured with: the one place outside pkg/capacity that wires them.
import _ "github.com/jobsched/jobsched/pkg/capacity/modes"
