// Package capacity admits Jobs by capacity: it answers, in the mode limits.capacity names, how many more Jobs of a
// template can start now (with nodes, on the cluster's nodes within the namespace's ResourceQuotas), so that no pod
// of ours is left Unschedulable.
//
// It reads the cluster once per pass for every template (Observe) and then decides without I/O: Fit for one
// template, or a Placer that places Jobs of several templates one at a time, each pod on a node it fits on and
// subtracted there, so pods of different sizes share the nodes and the quotas exactly. A pod's requests, node
// affinity and taint tolerations are counted by the helpers kube-scheduler itself uses (k8s.io/component-helpers);
// this package keeps only jobsched's own logic: what the API server adds to the template at admission (LimitRange
// defaults, RuntimeClass overhead), summing per node, the quota headroom, the room kept for the next tick, and the
// report.
//
// The files, by job: mode.go is the Mode interface, its optional interfaces and the registry (Register, ModeOf);
// observe.go reads the cluster (nodes, pods, quotas, the pass's own pod); admission.go is what the API server
// adds to the template at admission (LimitRange defaults, RuntimeClass); demand.go is one pod's and one Job's demand;
// quotascope.go is which ResourceQuotas apply to a pod (their scopes); resources.go is the arithmetic of room: a node's
// free room and a pod's need as int64 amounts over the resources the pass's pods demand, in kube-scheduler's own units
// (a map per node was most of a pass's memory at 5,000 nodes), a node's requests (Requests) and a report's free room
// (Free); fit.go is Fit and which nodes a pod may use; placer.go is the Placer (nodes and quota); sure.go is how sure
// a placement is of our pods not yet bound; tick.go is the room kept for the next tick; report.go is the Report;
// growth.go is Growth, room beyond the nodes that a mode gives the Placer: pkg/capacity/autoscale's grow.go, what
// an autoscaler can still add, on what pkg/autoscaler reads (Karpenter's NodePools and NodeClaims, the
// cluster-autoscaler's status) and matches (a pod against a NodePool).
//
// # Capacity modes
//
// Each value of limits.capacity is a Mode, a package under pkg/capacity that registers itself (Register) and is
// wired by one import in pkg/capacity/modes: what a pass reads (Observe), the room that gives each queue's template
// (Room: a Room places Jobs one at a time and reports why they fit; nodes and quota use the Placer) and what it needs
// granted (Needs: the kustomize component and its rules). What only some modes do is an optional interface the
// shared code finds with a type assertion: a bound on the install's Jobs beyond maxActive and maxPerTick (Bounder:
// Kueue's maxQueued), pods that wait rather than block (Waiter: autoscale's answers and their grace), a section of status
// (Inspector: read by status only), why a queued Job waits (Queuer), labels on each Job (Labeler), a fill run that
// follows every pod (PodFollower). The scheduler, the reports, the renderer and the commands ask the interfaces and
// never name a mode or its concepts (TestSharedCodeNamesNoMode, in the repository's root, holds them to it). To add
// a mode:
//
//  1. its name in config.Capacities (with the keys only it reads, in config's schema and validation);
//  2. a package pkg/capacity/<name> with a type that implements Mode and the optional interfaces it needs, which
//     registers it (`var _ = capacity.Register(Mode{})`), and its import in pkg/capacity/modes (a mode that counts
//     the nodes as nodes does observes with Options.Nodes and gives the Placer, as pkg/capacity/nodes);
//  3. when it reads beyond the base Role: a kustomize component under manifests/ named by Needs().Component that
//     grants exactly Needs().Rules (TestModeNeeds holds them equal), and the chart value of the same name;
//  4. the README's Capacity section and `jobsched help capacity` (cmd/help/capacity.md).
//
// pkg/capacity/fixed is a mode for tests only (at most N unfinished Jobs): its package and one registration line in
// pkg/scheduler's tests are all it took. What a mode says of each template goes in its Report (status and dry-run
// show it as it is, and its Lines); what it shows of the install as a whole is its Section. Which Unschedulable pods
// block a pass (limits.blockOnUnschedulable) is the scheduler's rule; a mode only says which of them wait.
//
// # What autoscale adds (limits.capacity: autoscale)
//
// Room = nodes' fit + what the autoscaler can still add for the template − the pods already waiting for new
// nodes, at most limits.maxPending of ours waiting (autoscale's grow.go, a Growth; the rules users read: `jobsched
// help capacity`). A Job that fits on no node (or not with the next tick's room kept) is placed on a NodePool's
// remaining limits or a node group's new nodes, and still charged to the quotas.
//
// # What the fit counts (limits.capacity: nodes)
//
// Users read this and the cost below in `jobsched help capacity` (cmd/help/capacity.md); a change here changes it.
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
//     quotas that apply, so 2-CPU and 500m pods fill a node exactly. A Job goes on the nodes only when every
//     claim's pods still find a node however kube-scheduler binds our unbound pods of other sizes (sure.go).
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
