package scheduler

// Bound is what bound the slots of a pass, or of one of its queues, from a fixed set: the label of the metrics that
// say it (jobsched_slots_limit_info), and what decides the type of the Blocked Event. Plan.Limit says the same in
// words, with its numbers and times.
type Bound string

// The bounds. The first four are waits as configured (Bound.Waits): the pass creates nothing until a Job ends,
// the window opens or room frees; BoundQueues waits when each queue's bound does (Plan.Waits); the others are
// faults the user must look at.
const (
	BoundMaxPerTick Bound = "maxPerTick" // limits.maxPerTick
	BoundMaxActive  Bound = "maxActive"  // limits.maxActive (the install's or the queue's)
	BoundRate       Bound = "rate"       // limits.rate (the install's or the queue's)
	BoundCapacity   Bound = "capacity"   // what fits now (limits.capacity: nodes, quota, a NodePool; kueue's maxQueued)
	BoundQueues     Bound = "queues"     // with queues:, each queue's own bound, not all the same (jobsched_queue_*)

	BoundUnschedulable   Bound = "unschedulable"   // a Pending pod is Unschedulable (limits.blockOnUnschedulable)
	BoundLease           Bound = "lease"           // another pass holds the Lease
	BoundPodsUnknown     Bound = "podsUnknown"     // its pods could not be listed
	BoundCapacityUnknown Bound = "capacityUnknown" // capacity could not be observed
	BoundReadFailed      Bound = "readFailed"      // reading rows (or asking the cancel query) failed
)

// Bounds are every Bound, waits first.
var Bounds = []Bound{BoundMaxPerTick, BoundMaxActive, BoundRate, BoundCapacity, BoundQueues,
	BoundUnschedulable, BoundLease, BoundPodsUnknown, BoundCapacityUnknown, BoundReadFailed}

// Waits says a pass bound by b waits as configured: a limit or a full cluster, not a fault.
func (b Bound) Waits() bool {
	switch b {
	case BoundMaxPerTick, BoundMaxActive, BoundRate, BoundCapacity:
		return true
	}
	return false
}
