// Package modes wires the capacity modes jobsched ships: importing it registers each (capacity.Register), and
// nothing else names them. A new mode is a package under pkg/capacity and one import here.
package modes

import (
	// Each registers its mode of limits.capacity.
	_ "github.com/jobsched/jobsched/pkg/capacity/autoscale"
	_ "github.com/jobsched/jobsched/pkg/capacity/kueue"
	_ "github.com/jobsched/jobsched/pkg/capacity/nodes"
	_ "github.com/jobsched/jobsched/pkg/capacity/off"
	_ "github.com/jobsched/jobsched/pkg/capacity/quota"
)
