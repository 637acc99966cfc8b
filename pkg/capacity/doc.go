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
//
// # What the fit counts (limits.capacity: nodes)
//
// Users read this and the cost below in `jobsched help capacity` (cmd/topics.go); a change here changes that text.
//
//   - The template as the pod the API server admits from it: LimitRange defaults (read with the Role's list on
//     limitranges) and a RuntimeClass's overhead, nodeSelector and tolerations; extended resources (nvidia.com/gpu)
//     count like cpu and memory. A Job with parallelism > 1 counts min(parallelism, completions) pods.
//   - The nodes it may use: Ready, uncordoned, whose NoSchedule/NoExecute taints it tolerates (Lt/Gt tolerations
//     tolerate nothing, as in kube-scheduler while their alpha feature gate is off) and whose labels its nodeSelector
//     and required node affinity match; on each, the room the non-terminal pods bound there leave.
//   - Pending pods that could land there, this scheduler's and others' (capacity.pending in `status -o json`), count
//     as taking room, so installs sharing a pool do not count it twice. With limits.reserveForTick room is kept for
//     the next tick's pod (capacity.tick): exactly for one template, with some margin for a mix of templates.
//   - The fit is a number of Jobs, capped by the ResourceQuota headroom (limits.capacity: quota counts that alone:
//     requests.*, limits.*, pods, count/jobs.batch, with the quotas' scopes).
//   - Several templates (config queues:) share one observation: the Jobs the share keeps are placed one at a time,
//     each pod on a node it fits, the one with the most cpu and memory left, subtracted there and charged to the
//     quotas that apply, so 2-CPU and 500m pods fill a node exactly.
//   - Not counted: pod affinity and anti-affinity, topology spread, DRA claims, volume limits, host ports, and the
//     passes of two installs that observe at the same moment (the passes of one install take turns through its
//     Lease). limits.blockOnUnschedulable is the guard for these: a pod they overbook goes Unschedulable and the
//     next passes create nothing until it starts.
//   - Permissions: without the ClusterRole (list nodes and pods cluster-wide) the pass counts as limits.capacity:
//     quota instead of failing; without list on LimitRanges or get on RuntimeClasses it counts the template as
//     written. Each is said once in the pass log and in `status`.
//
// # What it costs
//
// Per pass: one LIST each of nodes, LimitRanges and ResourceQuotas, then the non-terminal pods page by page (for a
// template whose pool is at most 100 nodes, one LIST per node instead: see Observe). A template that may use every
// node of a cluster of thousands pays a full pod listing on every pass and every refill of `tick --fill-for`, which
// may not fit the shipped `--timeout 20s`: give the template a pool, use limits.capacity: quota, or raise --timeout
// and lower --fill-for. The measured figures: scripts/bench/README.md.
package capacity
