package cmd

import (
	"encoding"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/jobsched/jobsched/pkg/capacity"
	"github.com/jobsched/jobsched/pkg/metrics"
	"github.com/jobsched/jobsched/pkg/report"
	"github.com/jobsched/jobsched/pkg/scheduler"
)

// topics are the rules a user relies on that do not fit a command's help: `jobsched help TOPIC` prints one, and
// `jobsched --help` lists them under "Additional help topics". They are for people with the binary and no clone
// (a Helm install); the package docs say how the code keeps these rules. A test checks that every topic the
// Markdown files name exists and that each line fits a terminal.
var topics = []topic{
	{
		"pass",
		"The rules of a pass: what counts as unfinished, which keys it excludes, its read, failures, cost, log line",
		`The rules of a pass (tick, gc, dry-run; status shows the plan the same rules make).

Finished and unfinished. A Job is finished when its Complete or Failed condition is True; its age (for the
retentions) is that condition's lastTransitionTime. Unfinished Jobs count against limits.maxActive: running,
starting (no pod yet, or waiting for the scheduler, pulling, starting on a node), unschedulable, and queued
(suspended: Kueue holds it; an evicted and requeued Job is queued again, not failed, and costs no attempt).
Pods that are scheduled but still starting do not block. Deletes use propagationPolicy Background (the garbage
collector removes the pods) and a UID precondition, so a Job another pass has just re-created under the same
name is never deleted. A finished Job whose condition has no lastTransitionTime finished at an unknown time:
no retention or backoff passes, so it is kept and its task not retried until the Job is deleted (as
Kubernetes' TTL controller keeps it).

The keys it excludes. The key of every unfinished Job, every kept failed Job and every succeeded Job is left
out of the read, so a row never gets a second Job while one of its Jobs exists, and a failed task waits out
its backoff. A row still selected while its Job has succeeded is a worker bug: it is warned with its key and
gets no second Job (once the succeeded Job is deleted, the row is a new task again). Keys are compared as
values of the key column's type (integers, uuid, timestamps, bytea), else as text; a Job whose key annotation
does not parse as that type matches no row and never fails a pass.

The read. The query is wrapped as
    SELECT * FROM (<query>) AS jobsched_q WHERE jobsched_q.<key> IS NOT NULL
      AND jobsched_q.<key> NOT IN (SELECT unnest($1::<type>[])) LIMIT $2
and run with bound parameters in a READ ONLY transaction with statement_timeout (source.timeout). With an
index matching the query's WHERE and ORDER BY the database reads about slots + excluded rows whatever the
backlog (jobsched status's Query line checks it). A query that tries to write fails there: exit 2, nothing
created.

Failures. The plan comes from one observation taken at the start; the deletes of finished Jobs start first,
run beside the creates (a finished Job holds no slot, so no create waits for them) and never wait on anything
that may fail. If the Pending pods, the capacity lists or the database fail (refused, or a host that
never answers: every read has source.timeout), the deletes still happen, nothing is created, the log says why
and the pass exits 1. A pass with no slot still sends one SELECT, so a lost database fails it even while the
queue is full. A wrong configuration is exit 2 before anything is contacted.

Racing passes. A tick's passes take turns through the scheduler's Lease (jobsched help lease), so maxActive
and the capacity fit hold across them. Without the Lease, names still make racing safe: a Job's name is a
function of its key, so a second create is AlreadyExists and counted as already present.

Cost. Three calls on the Lease, one streaming list of the scheduler's Jobs (a watch with sendInitialEvents;
page by page, 500 a page, where the API server refuses that), one list of its Pending pods; with capacity:
nodes the lists of jobsched help capacity; one read of the keys of succeeded, dead and due tasks when there
are any; with a source.cancelQuery one read of it about the keys of the unfinished Jobs, when there are any
(jobsched help cancel); then one call per create or delete, 16 in flight. A pass keeps a small summary of each
Job as it arrives, never a page of them. There is no client-side rate limit unless --kube-qps is set: the API
server's Priority and Fairness answers 429 with Retry-After, which the client honours (up to 10 retries a
call; --kube-burst, default 100, counts only with --kube-qps). What a pass could not create before its
--timeout waits for the next pass.

A refill (tick --fill-for). The first pass of a run lists as above, but every non-terminal pod in the
cluster (not only those of the template's nodes; with capacity: nodes or autoscale its own Pending pods
are read from that list, not from one of their own), and then watches each list from its resourceVersion,
keeping the same summaries (a few hundred bytes per Job, pod or node, never the objects). A refill lists
nothing: it reads what those watches delivered, with the previous pass's own creates and deletes taken in
as the API server answered them (not waiting for the watch), so it costs its own writes, its database reads,
a GET per RuntimeClass a template names, and the events received since (and the Lease's calls when it took
the Lease again: jobsched help lease). It lists afresh what it
cannot trust: a watch the API server ended with 410 Gone (or refused: without watch in the Role, those lists
are made each pass), and everything when another holder took the Lease since this run's last pass. The wait
for a Job to end reads the same watch of the Jobs.

Its log line. Every pass ends with one line, "pass done": selected, created, alreadyPresent, skipped, blocked,
deleted, failed, duration (ms), retried, dead, cancelled (jobsched help cancel); refill in a --fill-for run;
dryRun and wouldCreate in a dry run; notCreated when it ran out of time or lost its Lease before all its
creates (those rows wait for the next pass); with queues: readAhead (rows read for a queue the share gave no
slot: read again next pass). Each selected row is in one of created, alreadyPresent, skipped, failed,
notCreated, readAhead. A tick adds lease (held, held by HOLDER, lost, forbidden or error) and leaseWait (ms).
Logs carry the fields namespace, job and task.`,
	},
	{
		"cancel",
		"Cancel a task from its row: source.cancelQuery, what a pass deletes, what the worker pod sees",
		`source.cancelQuery (a queue's source, or the top-level one without queues:) is a read-only SELECT returning
the keys of the tasks to cancel, in a column named as source.key and of its type (e.g. SELECT id FROM tasks
WHERE status = 'cancelled'). jobsched never reads it whole and never writes a row: it is wrapped as
    SELECT jobsched_q.<key> FROM (<cancelQuery>) AS jobsched_q WHERE jobsched_q.<key> = ANY($1)
and asked only about given keys, with bound parameters, in a READ ONLY transaction under source.timeout:
  - after a pass's first deletes, about the keys of the queue's unfinished Jobs: one read, none when the queue
    has no unfinished Job. Each Job whose key it returns is deleted before anything is created (propagation
    Background and a UID precondition, as the retention deletes); its slot is free in the same pass
    (maxActive, its group's; its room on the nodes once its pod is gone: capacity counts a terminating pod)
    and its key is left out of the read;
  - in the read's own transaction, about the rows the read is about to admit: one statement per read, bounded
    by the rows read. A row it returns gets no Job: it is skipped ("cancelled: ...") and read past, like a bad
    row. Leave cancelled rows out of source.query and they are never read, however many there are. This also
    holds a failed task: once its backoff passes, its row is skipped while its key is returned.

A task gets no new attempt while its key is returned. Stop returning it (with its row still selected by
source.query) and it runs again: the cancel deleted its Job, so no attempt record is left, and it starts at
attempt 1. jobsched retry resets dead tasks only: a cancelled task has no Job left, so retry KEY says "not a
dead task" (exit 2) and deletes nothing; a dead task is never asked about. Nor is a succeeded one.

The worker pod. Deleting the Job makes the garbage collector delete its pods: each container gets SIGTERM,
then SIGKILL after the template's terminationGracePeriodSeconds (default 30s). A worker that must stop cleanly
traps SIGTERM. Its row is the user's: jobsched leaves it as it is.

What shows it. pass done counts cancelled (counted in deleted too); each cancelled Job gets a Normal Event
Cancelled; dry-run lists the cancel deletes with the others ("cancelled: source.cancelQuery returns its key");
status lists the Jobs the next pass cancels, and status KEY says "cancelled". The query doctor (the Query line
of status and dry-run) checks the cancel read too ("cancelQuery: ..."): without an index on the key, it reads
the whole table in every pass that has an unfinished Job.

tick --fill-for waits for a Job to end, and while a queue has a cancelQuery at most 5s: then it runs the next
pass anyway, so a cancel takes effect within about 5s plus a pass.

Failures. A cancel read that fails blocks its queue for the pass (it cannot tell which rows are cancelled);
the deletes before it still happen. A wrong cancelQuery (syntax, no column named source.key, a key of another
type) is exit 2, naming source.cancelQuery. gc does not cancel: it reads no row.`,
	},
	{
		"lease",
		"How passes take turns: the Lease, its wait and takeover, what losing it does, its RBAC",
		`A tick holds the coordination.k8s.io Lease jobsched-NAME (NAME: the config's name) in its namespace from
before it lists its Jobs until its last create, so passes observe and create one at a time: a pass started by
hand (kubectl create job --from=cronjob/..., a laptop) and the CronJob's take turns, and maxActive and the
capacity fit hold across them. gc, status and dry-run take no Lease (deletes are safe without it: UID
preconditions); status shows who holds it (lease in -o json|yaml). tick --fill-for keeps it from pass to pass
while its Jobs keep ending, and gives it up once none has ended for a third of its duration (5 s), taking it
again for the next pass; with limits.rate each of its passes takes and releases it.

Held by another. The pass waits for it, at most one Lease duration and a second (16 s) and never more than
half of what is left of its --timeout. A pass holds it for about the time of its creates (a fill run, while
its Jobs keep ending), so a pass started by hand gets its turn. If the holder keeps renewing it for the
whole wait, the pass still deletes its finished Jobs, creates nothing and exits 0: blocked "not the holder:
Lease jobsched-NAME is held by ... (waited 16s)" and lease "held by ..." in pass done,
jobsched_pass_blocked 1 and jobsched_slots 0, and a Blocked Event.

A killed holder (SIGKILL, a lost node) blocks the others for at most one Lease duration, 15 s: the next pass
takes the Lease over once it has gone unrenewed that long, counted on its own clock (no two clocks are
compared). tick --lease-duration sets it (whole seconds, 3s to 24h); the renewals and the wait scale with it.

Renewing. Every third of the duration (5 s) while the pass holds it. A renewal that fails (the API server
unreachable, the Lease written by someone else) stops the creates at once: none starts after it, those in
flight are cancelled, and at the latest they stop 10 s after the last renewal that succeeded, 5 s before
another pass may take the Lease over. Such a pass logs "lost the Lease", ends with lease "lost" and
notCreated, and exits 1. A pass cut short by its --timeout or a signal lets its Lease expire rather than
release it, so the next holder observes after what was in flight has landed.

RBAC. get, create and update on leases in the Role (no resourceNames: create cannot be limited by name).
Without them the pass logs once "caps not guaranteed under racing passes" and runs unserialised (lease
"forbidden"): maxActive then holds for each pass alone, and racing passes may add up, never to two Jobs for
one row. Apply the current Role (manifests/base/role.yaml, or helm upgrade) to get the guarantee back. An API
server that has just started answers Forbidden until its RBAC cache is filled, so a Forbidden counts as the
Role's answer only after a read the Role grants has succeeded; until then the pass creates nothing.

Cost. Three API calls per tick: GET and PUT (take), PUT (release); the first tick of a scheduler creates it
(POST). A pass that creates for longer adds one PUT per 5 s; one that waits reads it twice a second. A refill
that keeps it costs none but those renewals.`,
	},
	{
		"capacity",
		"What limits.capacity counts, what it does not, what it needs and what it costs",
		`limits.capacity decides how a pass knows what fits now, so that it creates only Jobs whose pods can start.
nodes (the default) counts the free room on the nodes the template may use and the ResourceQuota headroom;
quota the headroom alone; off nothing, only the limits, with blockOnUnschedulable as the brake (a cluster with
an autoscaler, where Unschedulable pods are the signal to grow); kueue the Jobs Kueue holds, against
limits.maxQueued, and Kueue's quotas decide the rest; autoscale what nodes counts plus what the cluster's
autoscaler can still add (below).

What nodes counts.
  - The template as the pod the API server admits from it: LimitRange defaults and a RuntimeClass's overhead,
    nodeSelector and tolerations; extended resources (nvidia.com/gpu) count like cpu and memory. A Job with
    parallelism above 1 counts min(parallelism, completions) pods.
  - The nodes it may use: Ready, uncordoned, whose NoSchedule and NoExecute taints it tolerates and whose
    labels its nodeSelector and required node affinity match (as kube-scheduler matches them); on each, the
    room the non-terminal pods bound there leave.
  - Pending pods that could land there, this scheduler's and others', count as taking room, so installs
    sharing a pool do not count it twice (capacity.pending in status -o json). With limits.reserveForTick room
    is kept for the next tick's own pod (capacity.tick).
  - The fit is a number of Jobs, capped by the ResourceQuota headroom: requests.*, limits.*, pods and
    count/jobs.batch, with the quotas' scopes. capacity: quota counts that alone.
  - Several queues' templates share one observation: each Job is placed on a node it fits, the one with the
    most cpu and memory left, and charged to the quotas that apply, so 2-CPU and 500m pods fill a node
    exactly.

Not counted: pod affinity and anti-affinity, topology spread, DRA claims, volume limits, host ports, and two
installs that observe at the same moment (the passes of one install take turns through its Lease).
limits.blockOnUnschedulable is the guard for these: a pod they overbook goes Unschedulable, and the passes
create nothing until it starts.

What it needs. Without the ClusterRole of manifests/capacity (list, watch nodes and pods cluster-wide) a pass
counts as capacity: quota instead of failing; without list on LimitRanges or get on RuntimeClasses it counts
the template as written. Each is said once in the pass's log and in status.

What it costs. Per pass: one LIST each of nodes, LimitRanges and ResourceQuotas, then the non-terminal pods
page by page, or one LIST per node for a template whose pool is at most 100 nodes. A template that may use
every node of a cluster of thousands pays a full pod listing each time, which may not fit the shipped
--timeout 20s: give the template a pool of nodes, use capacity: quota, or raise --timeout. A tick --fill-for
pays that once: its first pass lists every non-terminal pod and watches them, its refills list nothing
(jobsched help pass).

capacity: autoscale (a cluster that Karpenter or the cluster-autoscaler grows). Room = what nodes counts on
the nodes that exist + what the autoscaler can still add for the template - the pods already waiting for new
nodes; at most limits.maxPending of this install's pods wait for new nodes at once (default limits.maxPerTick:
one pass's creates, which Karpenter provisions as one batch; 0 lets none wait).
  - Karpenter (karpenter.sh/v1): the NodePools the template's pod can use: it tolerates the NoSchedule and
    NoExecute taints of spec.template.spec.taints (startupTaints do not count) and its nodeSelector and
    required node affinity can match the nodes the pool makes (its template labels, a value its requirements
    allow, any value of a well-known label such as topology.kubernetes.io/zone or karpenter.* labels, no other
    label); a pool whose Ready condition is False (its nodeClassRef not ready), or that (or one of its
    NodeClaims) cannot be read, adds nothing, and says why. What is left of
    its limits is spec.limits - the larger of status.resources and what its NodeClaims not being deleted hold
    (status.capacity, 1 node each: Karpenter counts a NodeClaim at once, status.resources later); a nodes
    limit reached adds nothing; no limits: without bound (maxPending bounds it). Node shapes are the cloud's
    instance types, which jobsched cannot list: the pool's newest NodeClaim that shows one (status.capacity
    and allocatable) is taken as the shape of the nodes it makes next. With a shape: its NodeClaims launched
    but not yet registered, then as many new nodes as what is left holds (each charged the larger of the
    shape's capacity and allocatable, as Karpenter charges an instance type), each taking the pods that fit in
    the shape's allocatable. Without one yet (a pool that never made a node): one Job's pods, within what is
    left, so that Karpenter makes a node whose shape the next pass counts on. Karpenter may pick another
    instance type: a pod the pool cannot take goes Unschedulable and blocks (below).
  - cluster-autoscaler: ConfigMap kube-system/cluster-autoscaler-status (the YAML status of releases 1.30 and
    later; the older text status is refused): each node group adds maxSize - ready new nodes (at most 1000),
    each the shape of a node of the group: allocatable, labels, taints. A node is of a group when one of its
    labels has the group's name as value (cloud.google.com/gke-nodepool, eks.amazonaws.com/nodegroup, ...) or
    its spec.providerID has it as a path segment (Azure scale sets). A group with no such node is unknown and
    adds nothing.
  - Pods waiting: ours that fit on no node count against maxPending and take their room in the pools first,
    as do others' unbound pods that fit on no node. Every Unschedulable pod of ours that waits for a node (the
    autoscaler nominated one, or it is in the 15 s below) counts against maxPending whatever its reason (a
    taken hostPort, an affinity), and while they reach maxPending the template gets no room on the nodes
    either. ResourceQuotas still cap the room.
  - Unschedulable pods are a signal, not a stop: for each of ours, the latest of its Events that speaks of the
    autoscaler decides: only Events whose reportingController or source.component is one of
    limits.autoscalerEvents (default [karpenter, cluster-autoscaler], the names their recorders write; set it
    where an install renames them) count, each at the latest time its writer set but never later than the API
    server stored it (creationTimestamp, managedFields) nor than now. Karpenter's Nominated ("Pod should
    schedule on: nodeclaim/...") or the cluster-autoscaler's TriggeredScaleUp: the pod waits for its node and
    does not block. Karpenter's
    FailedScheduling "all available instance types exceed limits for nodepool" or "no instance type has
    enough resources", or NotTriggerScaleUp: it blocks as with nodes (limits.blockOnUnschedulable), the Event
    in the reason (pass done's blocked, status). No such Event yet: both autoscalers decide on a pod within
    10 s (Karpenter batches pending pods up to 10 s, the cluster-autoscaler scans every 10 s), so for 15 s
    after its Unschedulable condition's lastTransitionTime the pod waits for a node (counted against
    maxPending, which bounds the waste) and does not block; from then on it blocks until the autoscaler
    speaks, "the autoscaler said nothing of it within 15s" in the reason. tick --fill-for runs a pass when
    those 15 s end.
  - Neither autoscaler found (none installed, or no grant): the mode counts as nodes and says why in the
    pass's log and in status; without list on Events every Unschedulable pod blocks, said likewise.
  - Needs: manifests/capacity (as nodes) and manifests/autoscale (chart: autoscale: true): get and list on
    NodePools and NodeClaims, get on the ConfigMap cluster-autoscaler-status, list on Events in the namespace.
  - Costs beyond nodes: one LIST each of NodePools and NodeClaims (or one GET of the ConfigMap) per
    observation, and one LIST of Events per Unschedulable pod of ours (field selector on its name).
  - status shows, per NodePool or node group, its limit, what it holds, the NodeClaims launching and what it
    can still add for each queue's template (capacity.autoscale in -o json; dry-run -o json the same).`,
	},
	{
		"queues",
		"How one install's slots are shared among its queues and tenants, and whose a Job is",
		`An install with queues: schedules several kinds of work in one pass, from one observation (its Jobs and
Pending pods listed once), each queue with its own query, template, retry, gc and limits.

Whose Job. A Job carries its queue in the label jobsched.io/queue. A Job without it (made by a config without
queues:) belongs to the queue named after the install if there is one, else to the first; so does a Job whose
queue is no longer in the file: it is counted, kept for its retention and deleted, and its task is retried by
that queue only if that queue's query selects its row. No queue's job.namePrefix may begin with another's and
- (r, r-b): their names could be equal. A problem in a queue's keys names it: queues[1]
(exports).limits.maxActive: must be at least 1.

Room. The install's room is R = min(limits.maxPerTick, limits.maxActive - the unfinished Jobs of all queues),
and with Kueue also limits.maxQueued - the queued Jobs of all queues. A queue's own room is min(its
maxPerTick, its maxActive - its unfinished Jobs, what fits for its template alone, R). An Unschedulable pod of
any queue blocks every queue (limits.blockOnUnschedulable is the install's). Each queue with room reads its
rows once, up to its room (again only to replace rows it skipped); a queue with no room reads nothing.

The share. The R slots are given one at a time, among the queues with a row read and not yet given a slot
whose next Job fits: to the highest priority; among equal priorities to the queue with the smallest
(unfinished Jobs + slots given this pass) / weight (compared exactly, no rounding); ties to the queue first in
the file. A queue whose next Job does not fit on what is left is out for the rest of the pass (a smaller pod
of another queue may still fit). Each queue keeps its first rows in its query's order; rows read beyond its
share are neither created nor skipped, and the next pass reads them again.

Across passes. Nothing is remembered: a queue's share follows the unfinished Jobs it holds, which the cluster
keeps. With weights 3 and 1 and Jobs of equal length, the unfinished Jobs of the two approach 3:1, and so do
the creates over passes. A queue with no waiting rows leaves its share to the others; a queue starved by
priority does not get its missed slots back. The Lease is the install's: one pass at a time creates for all
queues, so the install's maxActive holds with racing passes.

Tenants. With limits.perGroup a queue caps its unfinished Jobs per value of a column (a group): a group at its
cap gets no row that pass, each other at most cap - unfinished, in the query's order, so a tenant with 10,000
waiting rows never starves one with 5. The group is the annotation jobsched.io/group and the label of the same
name (the value when it is a valid label value, else h- and 16 hex digits of its SHA-256). A group value that
is not valid UTF-8 or is over 1 KiB skips its row. jobsched_g, jobsched_ord and jobsched_n are reserved column
names with perGroup.

In status. The install's totals, then each queue, with perGroup its first 10 groups at their cap. status KEY
shows the task's queue: its newest Job's, else the first whose query returns the key.`,
	},
	{
		"rate",
		"limits.rate: at most N creates in any window, kept on the Lease; what status, fill and the metrics say",
		`limits.rate: {creates: N, per: DURATION} allows at most N creates in ANY window of length per (a sliding
window over the times of the creates: a token bucket of N would let nearly 2N through in one window).
Top-level limits.rate bounds the whole install, a queue's limits.rate that queue (it does not inherit the
install's), and limits.perGroup.rate each group of the queue (its rows are then held back in the read like a
group at its maxActive). creates is 1 to 1000000, per 1s to 24h; exit 2 otherwise, naming the key.

How it binds. Each pass may create N less the creates in the window that ends now; that is a bound on its
slots like maxPerTick: pass done and status say "limits.rate: 30 per 1m, next create at 12:00:41" (UTC; with
its date when not today), the plan's nextCreate says when; jobsched_slots_limit_info{limit="rate"} and
jobsched_next_create_timestamp_seconds show it. Times are counted rounded up to per/1000, so the limit is at
most N in any window of per plus that (stricter, never looser).

Where the window is kept. Nothing outside the cluster: the scheduler's Lease (jobsched help lease) carries the
record as the annotation jobsched.io/rate-windows, written only by the pass that holds it. Before its first
create a pass writes the record with its creates counted 10 s ahead (its creates must start within those 10 s;
the rest wait for the next pass); its release then writes them at the time they returned. A pass killed in
between leaves them 10 s ahead: the next one counts them longer, never shorter. The window is also the larger
of that record and the creation times of the install's Jobs that still exist. The clocks of the passes and of
the API server are taken to be in step (NTP).

Lost record. A record that cannot be read, one with a time later than now + 10 s + 1 min of clock skew
(no pass writes one), or none on a Lease while the install has Jobs (the Lease was deleted, or limits.rate
was just added), or one with fewer creates in a window than the install's Jobs show, counts as N creates at
the moment a pass saw it: no create until per after that (nor by a queue's groups with perGroup.rate). The
record knows nothing from before its Lease was made: a Lease younger than per (a new install's, or one deleted
and made again) counts N creates at its creationTimestamp, so a new install's first create waits per.
The record holds at most 128 KiB: the install's and the queues' windows at their largest must fit in half
(exit 2 otherwise). A group is recorded by its value, or a hash of a value over 64 bytes; groups' windows
that do not fit the rest are left out with a warning, and the queue creates nothing until the last of them
would have ended (nor while a hashed group no Job names has a window). Without the Lease's RBAC
there is no record: the windows are the creation times of the Jobs that still exist, and the pass warns.

Waiting. tick --fill-for waits for the window to open as well as for a Job to end, whichever allows a create
first, then runs the next pass. status says when the next create is allowed and why (the limit line of the
install and of each queue). The metrics jobsched_rate_limited_rows and jobsched_queue_rate_limited_rows are
the backlog a rate held back (the rows waiting after a pass whose slots a limits.rate bound; 0 otherwise).

Cost. One more PUT of the Lease per pass that creates (the reservation); status and dry-run read it (one GET).`,
	},
}

// topic is one help topic: `jobsched help NAME` prints long.
type topic struct{ name, short, long string }

// allTopics are the written topics and the generated one.
func allTopics() []topic { return append(slices.Clone(topics), documentsTopic(), metricsTopic()) }

// metricsTopic lists the metrics a pass pushes, made from the ones this build pushes (pkg/metrics), so it cannot
// drift from them.
func metricsTopic() topic {
	var b strings.Builder
	b.WriteString("The metrics each pass pushes to a Pushgateway (metrics.pushgateway or --pushgateway), from this build.\n\n")
	b.WriteString(wrap(`Each pass pushes the group job="jobsched" (tick) or job="jobsched-gc" (gc), with labels scheduler
and namespace; a push replaces the metrics of the names it sends and keeps the others. Values are the last pass's;
what it could not learn is NaN. A failed pass leaves jobsched_last_success_timestamp_seconds as it was; an unreadable
config pushes nothing; a failed push is logged and never fails the pass. The backlog costs one more read, made only
when pushing. gc pushes the duration, failed, deleted, failed writes, Jobs by state (`+strings.Join(stateNames(), ", ")+`)
and last success. The jobsched_queue_* series come with queues: only, one per queue (label queue). Scrape the
Pushgateway with honor_labels: true.`, "", 110))
	for _, m := range metrics.All() {
		b.WriteString("\n\n" + m.Name)
		if len(m.Labels) > 0 {
			b.WriteString("{" + strings.Join(m.Labels, ",") + "}")
		}
		b.WriteString("\n" + wrap(m.Help, "    ", 106))
	}
	return topic{"metrics", "The metrics each pass pushes to a Pushgateway, and what they mean", b.String()}
}

func stateNames() []string {
	var out []string
	for _, st := range scheduler.States {
		out = append(out, string(st))
	}
	return out
}

// wrap breaks s into lines of at most width characters, each begun with indent.
func wrap(s, indent string, width int) string {
	var lines []string
	line := indent
	for _, w := range strings.Fields(s) {
		if line != indent && len(line)+1+len(w) > width {
			lines, line = append(lines, line), indent
		}
		if line != indent {
			line += " "
		}
		line += w
	}
	return strings.Join(append(lines, line), "\n")
}

// documentsTopic is the topic that lists the fields of the documents jobsched prints, made from the types the
// commands encode, so it is this build's and cannot drift from them.
func documentsTopic() topic {
	var b strings.Builder
	b.WriteString(`The fields of the documents that -o json and -o yaml print, from this build's types. A name with []
is a list, one with {} a map by name or resource; "omitted": left out when empty; "as X": the fields listed
under X.`)
	for _, d := range []struct {
		title string
		v     any
	}{
		{"jobsched status -o json|yaml (kind: Status)", report.Status{}},
		{"jobsched status KEY -o json|yaml (kind: Task)", report.TaskView{}},
		{"jobsched dry-run -o json|yaml (the plan)", scheduler.Plan{}},
	} {
		b.WriteString("\n\n" + d.title)
		writeFields(&b, reflect.TypeOf(d.v), "", map[reflect.Type]string{})
	}
	return topic{"documents", "The fields of the -o json|yaml documents of status and dry-run", b.String()}
}

// writeFields writes the JSON fields of t, one a line, under path; listed holds the struct types written so far
// (by path), which are named rather than written again.
func writeFields(b *strings.Builder, t reflect.Type, path string, listed map[reflect.Type]string) {
	depth := 1
	if path != "" {
		depth += strings.Count(path, ".") + 1
	}
	indent := strings.Repeat("  ", depth)
	for i := range t.NumField() {
		f := t.Field(i)
		name, opts, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "-" || !f.IsExported() {
			continue
		}
		ft := f.Type
		for ft.Kind() == reflect.Pointer {
			ft = ft.Elem()
		}
		if as, ok := writtenAs[ft]; ok {
			ft = as
		}
		if f.Anonymous && name == "" && ft.Kind() == reflect.Struct {
			writeFields(b, ft, path, listed) // embedded: its fields are the parent's
			continue
		}
		if name == "" {
			name = f.Name
		}
		kind, inner := jsonKind(ft)
		switch {
		case ft.Kind() == reflect.Slice && ft.Elem().Kind() != reflect.Uint8:
			name += "[]"
		case ft.Kind() == reflect.Map:
			name += "{}"
		}
		here := strings.TrimPrefix(path+"."+name, ".")
		if first, ok := listed[inner]; ok && inner != nil {
			kind, inner = "object, as "+first, nil
		}
		if strings.Contains(opts, "omitempty") || strings.Contains(opts, "omitzero") {
			kind += ", omitted"
		}
		fmt.Fprintf(b, "\n%s%-*s %s", indent, max(24-len(indent), len(name)), name, kind)
		if inner != nil {
			listed[inner] = here
			writeFields(b, inner, here, listed)
		}
	}
}

// jsonKind names how a value of t is encoded, and the struct whose fields follow it (nil: none).
func jsonKind(t reflect.Type) (string, reflect.Type) {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch {
	case t == reflect.TypeOf(time.Time{}) || t == reflect.TypeOf(metav1.Time{}):
		return "time (RFC 3339)", nil
	case strings.HasPrefix(t.PkgPath(), "k8s.io/api/"): // a Kubernetes object or field: the API's reference has it
		return "Kubernetes " + strings.TrimPrefix(t.PkgPath(), "k8s.io/api/") + " " + t.Name(), nil
	case t.Implements(jsonMarshaler) || reflect.PointerTo(t).Implements(jsonMarshaler),
		t.Implements(textMarshaler) || reflect.PointerTo(t).Implements(textMarshaler):
		return "string (" + t.String() + ")", nil
	}
	switch t.Kind() {
	case reflect.Struct:
		return "object", t
	case reflect.Slice, reflect.Array:
		if t.Elem().Kind() == reflect.Uint8 {
			return "string (base64)", nil
		}
		return jsonKind(t.Elem())
	case reflect.Map:
		return jsonKind(t.Elem())
	case reflect.String:
		return "string", nil
	case reflect.Bool:
		return "boolean", nil
	case reflect.Float32, reflect.Float64:
		return "number", nil
	case reflect.Interface:
		return "any", nil
	default:
		return "integer", nil
	}
}

// writtenAs are the types whose MarshalJSON writes another type's document (a node's free room, held in a few
// numbers, writes a ResourceList).
var writtenAs = map[reflect.Type]reflect.Type{
	reflect.TypeFor[capacity.Free](): reflect.TypeFor[corev1.ResourceList](),
}

var (
	jsonMarshaler = reflect.TypeOf((*json.Marshaler)(nil)).Elem()
	textMarshaler = reflect.TypeOf((*encoding.TextMarshaler)(nil)).Elem()
)
