// Package scheduler holds the pass: one stateless run that turns the rows a query selects into Kubernetes Jobs,
// within limits.
//
// The pass also deletes the Jobs it no longer needs.
//
// # The pass is a line of values
//
// Run is a list of steps, each a function of the value the step before returned (see Run for the list):
//
//	observe  → Observation  the install's Jobs (and the list's resourceVersion), its pods: once for all queues
//	cancel   → Cancellation per queue with source.cancelQuery and unfinished Jobs, which of their keys it returns
//	decide   → Plan         Decision, once, per queue: each Job's state, the deletes (the cancelled Jobs'
//	                        among them, holding no slot), the keys the read excludes, the room the queue's limits
//	                        leave; then the install's limits over all queues
//	execute  ·              the decided deletes start: finished Jobs, holding no slot, deleted beside the steps
//	                        after; no create waits on them, and the pass ends once each is answered; then the
//	                        cancel deletes, before anything is created
//	observe  → Observation  capacity (nodes, quotas), only when the limits leave room
//	fit      → Plan         each queue's slots, bounded by what fits for its template alone (the pass's one placer)
//	check    → RowCheck     per queue, the rows of succeeded, dead and due tasks: worker bugs, rows gone
//	read     → Admission    per queue with slots, the rows there is room for, each admitted (a Create) or skipped
//	share    → Plan         the install's slots given to the queues' creates, one at a time (see Queues below), with
//	                        the fit's placer (a queue with job.requestsFrom: each create by its own shape, in
//	                        strict order or job.backfill, sizes.go); the failed attempt each kept retry supersedes
//	                        marked for its delete (DeleteRetried); then the install's room and counts, derived once from the queues'
//	execute  → []Outcome    the creates; a retry's failed attempt deleted once its next attempt exists; what came
//	                        of each create, beside the plan (a name another scheduler's Job holds, a refused rate
//	                        reservation: what only executing can tell)
//
// Decision is that line from decide to share (its reads, and the deletes' start, through a Reader), the one function
// `tick`, `dry-run` and `status` call (status with a Reader that reads no row: Estimate). Nothing outside that line
// changes the plan: `dry-run` prints Result.Plan, the value `tick` executes (every delete and create of the pass is in
// it, and what it cannot know is said: Plan.NotKnown), and `status` (package report) shows the plan Decision makes.
// Each field of the plan is set by the step that decides it, and the summary is counted once, from the plan and each
// create's Outcome (summarize). A step that cannot read what it needs (pods, capacity, rows) puts that in its value;
// the plan then creates nothing (Plan.Blocked says why) and the pass fails, but the deletes still happen.
// Only a wrong configuration (a *config.Error) stops the line.
//
// # Hooks for what comes next
//
// Scheduler.Guard is taken before the observation that decides the creates (a Lease: one creating pass at a time);
// the creates run under the context it returns, so losing it stops them at once, and a refusal blocks the creates.
// Result carries what a caller needs to decide whether to run another pass at once (tick --fill-for): what bound the
// slots (Limit), whether it was Blocked, whether rows may still wait (RowsWait) and the resourceVersion of its Jobs
// list (JobsResourceVersion). Scheduler.BeforeCreates lets the command set process-wide policy (the collector's)
// where the creates begin, without the library setting it.
//
// # The rules of a pass
//
// Users read these rules in `jobsched help pass` (cmd/help/pass.md), in their words; a change here changes it.
//
//   - Finished means the Job's `Complete` or `Failed` condition is True; its age is that condition's
//     `lastTransitionTime` (failed Jobs have no `completionTime`). Deletion uses `propagationPolicy: Background`
//     (the garbage collector removes the pods) and a UID precondition, so a Job that a concurrent pass has just
//     re-created under the same name is never deleted.
//   - Unfinished Jobs count against `maxActive`: running, starting (no pod yet, waiting for the scheduler, pulling
//     or starting on a node), unschedulable, or queued (suspended: Kueue holds it; an evicted and requeued Job is
//     queued again, not failed, and costs no attempt). Pods that are scheduled but still starting do not block.
//   - With limits.capacity: kueue the room is also bounded by maxQueued − queued, and capacity is not fitted (Kueue's
//     quota decides what runs); blockOnUnschedulable still applies to the pods of admitted Jobs.
//   - Excluded keys: every unfinished Job's, every kept failed Job's and every succeeded Job's key is excluded
//     from the read, so a row is never given a second Job while its Job exists, and bad rows never take a slot. A
//     row still selected while its Job has succeeded is a worker bug: it is warned with its key and gets no second
//     Job in that pass (once the succeeded Job has been deleted, the row is a new task again). Keys are compared
//     as values of the key column's type where it has one jobsched renders (integers, uuid, timestamps, bytea), so
//     an index on the key serves the read, and as text otherwise; a Job whose key annotation does not parse as
//     that type matches no row and never fails a pass. A failed task waits out its backoff with its key excluded;
//     then its row, if still selected, competes for a slot and gets the next attempt (the README's Retries).
//   - The read: the query is wrapped as `SELECT * FROM (<query>) AS jobsched_q WHERE jobsched_q.<key> IS NOT NULL
//     AND jobsched_q.<key> NOT IN (SELECT unnest($1::<type>[])) LIMIT $2` in a `READ ONLY` transaction with
//     `statement_timeout`. Every statement jobsched sends has bound parameters, so PostgreSQL parses it as one
//     statement (the README's Trust model). The exclusion and the LIMIT are pushed into the statement, so with an
//     index matching the query's WHERE and ORDER BY the database reads about `slots + excluded` rows whatever the
//     backlog. A query that tries to write fails in the READ ONLY transaction (exit 2) and nothing is created.
//   - Order and failures: the plan comes from one observation taken at the start. The deletes of finished Jobs start
//     first, run beside the rest (no create waits for them: a finished Job holds no slot and its key is excluded)
//     and wait on nothing that may fail but the cancel query's read, whose answers the decision needs (bounded by
//     `source.timeout`): if its pods, the capacity LISTs or the database fail (refused, or a host that
//     never answers: connections time out and every read has `source.timeout`), the deletes still happen,
//     nothing is created, the log says why and the pass exits 1. `gc` lists only the Jobs.
//   - Concurrency: a tick's Guard is the scheduler's Lease (pkg/lease), so its passes observe and create one at a
//     time and maxActive and the capacity fit hold across them. Without it (a Role without the Lease's verbs) Job
//     names still make racing safe: they are deterministic, so two passes running at once cannot create two Jobs
//     for one row; the loser gets `AlreadyExists` and counts it as already present.
//   - Cost per pass: with the Lease three calls on it (take: GET and PUT, or POST the first time; release: PUT),
//     one streaming list of Jobs and one of its pods (label and field selectors on the server),
//     plus with `capacity: nodes` one LIST of nodes, one of non-terminal pods cluster-wide and one of
//     ResourceQuotas (the README's Capacity); one pushed-down read of the keys of succeeded, dead and due tasks
//     when there are any; with a source.cancelQuery one read of it about the unfinished Jobs' keys, when there are
//     any; then one call per create or delete; with limits.rate one more PUT of the Lease (the reservation,
//     rate.go) when the pass creates. A streaming list is a WATCH with
//     `sendInitialEvents=true` (streaming lists,
//     https://kubernetes.io/docs/reference/using-api/api-concepts/#streaming-lists: the API server's `WatchList`
//     feature, beta and on by default in v1.37, checked on the local control plane). The API server sends the
//     objects one at a time from its watch cache, then a bookmark; jobsched keeps a summary of each as it arrives
//     (name, UID, key, attempt, conditions, pods) and drops the rest, so a pass holds about 200 bytes per Job and
//     never a page of them. Where the API server refuses it (older versions, the feature off, a Role without
//     `watch`) the pass lists page by page (pages of 500) instead; the debug log says so. What a stream costs the
//     API server, against a LIST: scripts/bench/README.md.
//   - A refill (tick --fill-for, Scheduler.Follow): the first pass lists as above (every non-terminal pod
//     cluster-wide with capacity: nodes or autoscale, its pods then read from that list and its watch, not
//     from a list and a watch of their own) and watches each list from its resourceVersion (package follow); a
//     refill lists nothing: it decides from the summaries the watches keep, with the previous pass's own creates
//     and deletes applied as the API server answered them (no wait for the watch to deliver them), and lists
//     afresh after a 410 Gone, a refused watch, or another holder of the Lease.
//   - Pace: creates run concurrently, 16 in flight, and the deletes beside them, 16 more, with no client-side rate
//     limit by default: the API server's Priority and Fairness protects it and answers 429 with `Retry-After`,
//     which the client honours (up to 10 retries per call). `--kube-qps N` (with `--kube-burst`) puts a client-side cap back, for clusters that
//     want one. What a pass could not create before its `--timeout` waits for the next pass; `pass done` says how
//     many (`notCreated`).
//
// # Queues
//
// Users read these rules in `jobsched help queues` (cmd/help/queues.md); a change here changes that text.
//
// A configuration with queues: (config.Queue) is one install of several queues; one without is one implicit queue
// named after the install: its plan has no Plan.Queues, its Jobs carry no queue label, and its outputs have no
// queue sections. The rules:
//
//   - Whose Job: a Job carries its queue in the label jobsched.io/queue. A Job without it (made by a
//     configuration without queues:) belongs to the queue named after the install if there is one, else to the first
//     queue; so does a Job whose queue is no longer in the file (it is counted, kept for its retention and deleted,
//     and its task is retried by that queue only if that queue's query selects its row).
//   - One observation: a pass lists the install's Jobs once (label jobsched.io/scheduler) and its pods once,
//     whatever the number of queues; then each queue's part of the plan is decided from its own Jobs with its own
//     retry, gc and limits (config.QueueConfig).
//   - Room: R = min(limits.maxPerTick, limits.maxActive − the unfinished Jobs of all queues [, the capacity mode's
//     bound, a capacity.Bounder's: with Kueue limits.maxQueued − the queued Jobs of all queues]) is the install's; a
//     queue's own room is r = min(its maxPerTick, its maxActive − its unfinished Jobs, what fits for its template
//     alone, R). An Unschedulable pod of
//     any queue blocks every queue (limits.blockOnUnschedulable is the install's), unless the capacity mode says it
//     waits (a capacity.Waiter's Waits, read in observe: with autoscale, for a node the autoscaler provides); such a
//     pod waits (Plan.Waiting) and its room is the mode's to count. Plan.Slots is min(R, Σ r).
//   - Read: each queue with r > 0 reads once (again only to replace rows it skipped, up to MaxSkippedRows), up to r rows; a queue
//     with no room is not read.
//   - Share: the R slots are given one at a time. The candidates are the queues with a create admitted and not yet
//     kept whose next Job fits; the slot goes to the highest priority; among equal priorities to the queue with the
//     smallest (unfinished + kept) / weight, where unfinished are the queue's unfinished Jobs at the observation and
//     kept its creates given a slot so far in this pass (compared by cross-multiplying: no rounding); ties go to the
//     queue first in the file. A queue whose next Job does not fit on the capacity left is out for the rest of the
//     pass (a smaller pod of another queue may still fit). Each queue keeps the first of its creates in its query's
//     order; the rest were read ahead and are not created (nor skipped): the next pass reads them again. The creates
//     are made in the order the slots were given.
//   - Fair across passes without state: a queue's share is derived from the unfinished Jobs it holds, which the
//     cluster keeps between passes. With two queues of weights 3 and 1 and Jobs of equal length, each pass gives
//     slots so that the unfinished Jobs of the two approach 3:1, and as Jobs finish at equal rates the creates over
//     passes approach 3:1 too. A queue with no waiting rows admits nothing and leaves its share to the others. Nothing
//     is remembered between passes: a queue that was starved by priority does not get its missed slots back.
//   - The Lease is the install's (jobsched-<name>): one pass at a time creates for all queues, so the install's
//     maxActive holds with racing passes.
//
// # Cancel
//
// Users read these rules in `jobsched help cancel` (cmd/help/cancel.md). The cancel query is only asked about given
// keys (rows.Source.Cancelled, and Select's rows in the read's own transaction: rows.Row.Cancelled), so a pass
// costs what it asks, never the rows the cancel query could return. A cancel deletes the Job, so no attempt record
// remains: a task whose key stops being returned starts again at attempt 1.
//
// # Names
//
// A task is a row's key; its Jobs are its attempts, numbered by NextAttempt. The command `jobsched retry` is
// Scheduler.ResetDead: it deletes a dead task's record so that it starts again at attempt 1. An Action is what a
// command lets a pass do: Execute (tick), DeleteOnly (gc), DryRun and ServerDryRun (dry-run).
package scheduler
