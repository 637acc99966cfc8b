// Package scheduler holds the pass: one stateless run that turns the rows a query selects into Kubernetes Jobs,
// within limits, and deletes the Jobs it no longer needs.
//
// # The pass is a line of values
//
// Run is a list of steps, each a function of the value the step before returned (see Run for the list):
//
//	observe  → Observation  this scheduler's Jobs (and the list's resourceVersion), its Pending pods
//	decide   → Plan         Decide: each Job's state, the deletes, the keys the read excludes, the room the limits leave
//	execute  ·              the decided deletes, first: they never wait on a step that may fail
//	observe  → Observation  capacity (nodes, quotas), only when the limits leave room
//	fit      → Plan         Plan.Fit: the slots, bounded by what fits
//	check    → RowCheck     the rows of succeeded, dead and due tasks: worker bugs, rows gone (their Jobs deleted)
//	read     → Admission    the rows there is room for, each admitted (a Create) or skipped (a Skip)
//	execute  ·              the creates; a retry's failed attempt deleted once its next attempt exists
//
// Nothing outside that line changes the plan: `dry-run` prints Result.Plan, the value `tick` executes, and `status`
// (package report) shows the plan the same Observe and Decide make. A step that cannot read what it needs (pods,
// capacity, rows) puts that in its value; the plan then creates nothing (Plan.Blocked says why) and the pass fails,
// but the deletes still happen. Only a wrong configuration (a *config.Error) stops the line.
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
// # Names
//
// A task is a row's key; its Jobs are its attempts, numbered by NextAttempt. The command `jobsched retry` is
// Scheduler.ResetDead: it deletes a dead task's record so that it starts again at attempt 1. A Mode is what a
// command lets a pass do: Execute (tick), DeleteOnly (gc), DryRun and ServerDryRun (dry-run).
package scheduler
