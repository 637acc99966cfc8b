// Package capacity admits Jobs by capacity: it answers how many more Jobs of a template can start now on the
// cluster's nodes and within the namespace's ResourceQuotas, so that no pod of ours is left Unschedulable.
//
// It reads the cluster once per pass for every template (Observe) and then decides without I/O: Fit for one
// template, or a Placer that places Jobs of several templates one at a time, each pod on a node it fits on and
// subtracted there, so pods of different sizes share the nodes and the quotas exactly. A pod's requests, node
// affinity and taint tolerations are counted by the helpers kube-scheduler itself uses (k8s.io/component-helpers);
// this package keeps only jobsched's own logic: what the API server adds to the template at admission (LimitRange
// defaults, RuntimeClass overhead), summing per node, the quota headroom, the room kept for the next tick, and the
// report.
//
// The files, by job: observe.go reads the cluster (nodes, pods, quotas, the pass's own pod); admission.go is what the
// API server adds to the template at admission (LimitRange defaults, RuntimeClass); demand.go is one pod's and one
// Job's demand; quotascope.go is which ResourceQuotas apply to a pod (their scopes); resources.go is ResourceList
// arithmetic; fit.go is Fit and which nodes a pod may use; placer.go is the Placer (nodes and quota); tick.go is the
// room kept for the next tick; report.go is the Report.
package capacity
