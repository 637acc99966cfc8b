package scheduler

import (
	"slices"
	"strings"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/jobsched/jobsched/pkg/capacity"
	"github.com/jobsched/jobsched/pkg/config"
)

// State is where one of this scheduler's Jobs stands.
type State string

// Job states, as status reports them.
const (
	StateRunning       State = "running"       // a pod runs
	StateStarting      State = "starting"      // no pod yet, or a pod waits for the scheduler or starts on its node
	StateUnschedulable State = "unschedulable" // a pod is PodScheduled=False, reason Unschedulable
	StateQueued        State = "queued"        // suspended: held until admitted (with Kueue: its Workload, or again, evicted)
	StateSucceeded     State = "succeeded"     // condition Complete
	StateBackoff       State = "backoff"       // condition Failed, and the task has attempts left: it waits, then is retried
	StateDead          State = "dead"          // condition Failed, no attempt left (or failed by its podFailurePolicy)
	StateSuperseded    State = "superseded"    // finished, and a newer attempt of its task exists
)

// States are the states status counts, in the order it shows them (superseded Jobs are deleted by the pass).
var States = []State{StateRunning, StateStarting, StateUnschedulable, StateQueued, StateSucceeded, StateBackoff, StateDead}

// Why a Job is deleted.
const (
	DeleteRetention  = "gc.succeededRetention passed"
	DeleteSuperseded = "a newer attempt exists"
	DeleteDead       = "retry.deadRetention passed"
	DeleteRowGone    = "the query no longer selects its row"
	DeleteRetried    = "retried: deleted once its next attempt exists"
	DeleteReset      = "retry" // `jobsched retry`: the dead task starts again at attempt 1
	DeleteCancelled  = "cancelled: source.cancelQuery returns its key"
)

// SkipCancelled is why a row the query selects gets no Job while the queue's cancel query returns its key.
const SkipCancelled = "cancelled: source.cancelQuery returns its key; no Job while it does (leave such rows out of " +
	"source.query: each pass reads them)"

// JobStatus is one of this scheduler's Jobs as the plan sees it.
type JobStatus struct {
	// Queue is the Job's queue (config queues:); empty for the one queue of a configuration without queues:.
	Queue      string     `json:"queue,omitempty"`
	Name       string     `json:"name"`
	Key        string     `json:"key"`
	Attempt    int        `json:"attempt"`
	State      State      `json:"state"`
	Reason     string     `json:"reason,omitempty"`     // failure reason, or why a pod is unschedulable
	StartedAt  *time.Time `json:"startedAt,omitempty"`  // status.startTime
	FinishedAt *time.Time `json:"finishedAt,omitempty"` // the Complete/Failed condition's time
	// RetryAt is when a task in backoff may get its next attempt (it then competes for a slot like any row).
	RetryAt *time.Time `json:"retryAt,omitempty"`
	// Delete says this pass deletes the Job, and why.
	Delete string `json:"delete,omitempty"`
	// Holder names what holds a queued Job (the capacity mode's word: with Kueue its Workload), when the reports
	// could read it.
	Holder string    `json:"workload,omitempty"`
	UID    types.UID `json:"-"`
}

// Create is a Job the plan creates for a row. Supersedes is the failed attempt it retries, its Delete DeleteRetried
// (marked so in Plan.Jobs too): deleted once this one exists, never before (a pass killed in between loses no count);
// a create that fails leaves it. Attempt is NextAttempt(Supersedes).
type Create struct {
	Queue      string       `json:"queue,omitempty"` // as JobStatus.Queue
	Key        string       `json:"key"`
	Attempt    int          `json:"attempt"`
	Job        *batchv1.Job `json:"job"`
	Supersedes *JobStatus   `json:"supersedes,omitempty"`
	// Requests are the worker container's requests, with job.requestsFrom only (the row's, or the template's where
	// its column is NULL): what dry-run shows of each create.
	Requests corev1.ResourceList `json:"requests,omitempty"`

	// waitingSince is the row's value of its queue's job.backfill.since (zero: no backfill, or not a time).
	waitingSince time.Time
}

// Skip is a row that gets no Job this pass, and why.
type Skip struct {
	Queue  string `json:"queue,omitempty"` // as JobStatus.Queue
	Key    string `json:"key"`
	Reason string `json:"reason"`
	// Size says the row asks for requests it cannot have (job.requestsFrom: not a quantity, not more than 0, over
	// job.maxRequests, more than any node or quota could hold): pass done counts these apart (skippedSize).
	Size bool `json:"size,omitempty"`
}

// Plan is the whole decision of one pass, a plain value: its exported fields are what a user reads (the document
// dry-run prints, status shows from), planState what the steps keep for each other.
type Plan struct {
	Scheduler string      `json:"scheduler"`
	Namespace string      `json:"namespace"`
	Jobs      []JobStatus `json:"jobs"`
	// Unfinished counts Jobs with neither a Complete nor a Failed condition: they count against maxActive.
	Unfinished int `json:"unfinished"`
	// Holds is what the unfinished Jobs hold, every queue's (QueuePlan.Holds): for a configuration without queues:,
	// its one queue's.
	Holds         corev1.ResourceList `json:"holds,omitempty"`
	Unschedulable int                 `json:"unschedulablePods"`
	// Waiting counts the Unschedulable pods the capacity mode says wait rather than block (capacity.Waiter: for a
	// node the cluster makes); WaitsNote says why every Unschedulable pod blocks instead, when the mode could not tell.
	Waiting   int    `json:"waitingForNodes,omitempty"`
	WaitsNote string `json:"waitsNote,omitempty"`
	// WaitDue is when the first of the waiting pods stops waiting unless the mode hears otherwise (capacity.Verdict's
	// Due): a pass from then blocks on it; nil for none. tick --fill-for runs a pass then.
	WaitDue  *time.Time       `json:"wordDue,omitempty"`
	Capacity *capacity.Report `json:"capacity,omitempty"`
	// Slots is how many Jobs this pass may create and Limit what bound it; Blocked is set when nothing may be created.
	Slots int    `json:"slots"`
	Limit string `json:"limit"`
	// Bound is what bound the slots, from a fixed set (Limit says it in words; when Blocked, what blocked them).
	Bound Bound `json:"-"`
	// NextCreate is when a limits.rate that bound the slots allows the next create beyond them (nil: none bound).
	NextCreate *time.Time `json:"nextCreate,omitempty"`
	Blocked    string     `json:"blocked,omitempty"`
	Selected   int        `json:"selected"` // rows read from the source (the rows of succeeded tasks still selected included)
	Creates    []Create   `json:"creates"`
	Skipped    []Skip     `json:"skipped,omitempty"`
	// ReadAhead are the rows read for a queue that got no slot in the share, or behind a row of a sized queue that
	// did not fit (strict order, sizes.go): neither created nor skipped, the next pass reads them again.
	ReadAhead int `json:"readAhead,omitempty"`
	// Passed are those of ReadAhead that did not fit now and that rows behind them passed (job.backfill, sizes.go).
	Passed int `json:"passed,omitempty"`
	// Query is what the query doctor says about the read (dry-run only; nil without a database; with queues: in
	// each queue's plan).
	Query *QueryFinding `json:"query,omitempty"`
	// Queues are the queues' parts of the plan, in the configuration's order (nil for a configuration without
	// queues:, whose one queue the fields above are). With queues:, Capacity is in each queue's part.
	Queues []QueuePlan `json:"queues,omitempty"`

	planState
}

// planState is the steps' own state in a Plan, which no output shows (the exported fields of Plan are the document
// dry-run prints): parts are the queues' own parts (one for a configuration without queues:), and inst the
// install's room.
type planState struct {
	parts []*queuePart
	inst  installRoom
	// exclude are the keys that must not be read (a Job exists and is kept, or succeeded and is deleted by this
	// pass): every queue's.
	exclude []string
	// queued counts the unfinished Jobs that are suspended (StateQueued).
	queued int
	// hard says Blocked has a cause that capacity cannot change (see fitQueue).
	hard bool
	// waits says what bound the slots is a wait as configured in every queue (Bound.Waits): the Blocked Event is
	// then Normal.
	waits bool
	// roomBound says the slots were bound by room a finishing Job frees: limits.maxActive, the nodes or the quota.
	roomBound bool
	// capacityBound says the capacity mode's fit bound them (below every limit): a node turning usable may add room,
	// as a finishing Job does; with limits.maxActive binding, it cannot.
	capacityBound bool
	// awaitsBinds says the fit refused a Job that fits until our unbound pods of other sizes are bound (AwaitsBinds).
	awaitsBinds bool
	// rates are the pass's rate windows (nil without limits.rate).
	rates *rates
}

// queuePart is one queue's part of a pass's plan, as the steps decide it: its Jobs' counts, its room and what bound
// it, the keys its read excludes, what its row check and its read found, and its creates. The install's Plan is
// made of them (Plan.Queues is what a user reads of each); it is never printed itself.
type queuePart struct {
	queueName string // the queue's name, as JobStatus.Queue has it
	// Jobs are the queue's Jobs while decideQueue decides them; the install's plan holds them after (assemble).
	Jobs                               []JobStatus
	Unfinished, Unschedulable, Waiting int
	// Holds is what its unfinished Jobs that are not suspended hold (QueuePlan.Holds); nil for none.
	Holds corev1.ResourceList
	// Slots, Limit, Bound and Blocked are the queue's room, as Plan's are the install's; nextCreate its NextCreate.
	Slots      int
	Limit      string
	Bound      Bound
	Blocked    string
	nextCreate time.Time
	Capacity   *capacity.Report
	// Creates are those of admittedCreates the share kept; Skipped its skips; Selected its rows read (rooms);
	// Query what the query doctor says of its read (dry-run).
	Creates  []Create
	Skipped  []Skip
	Selected int
	Query    *QueryFinding

	exclude []string // as Plan.exclude, the queue's
	// retry maps the key of a task whose backoff has passed to its last failed attempt: its row gets the next one.
	retry map[string]*JobStatus
	// succeeded, dead and due are the keys this pass asks the source about in one read: a succeeded task whose row
	// is still selected is a worker bug; a dead task, or one due for a retry, whose row is gone loses its Job.
	succeeded, dead, due []string
	// held counts the unfinished Jobs of each group (limits.perGroup), from their group annotation, and
	// heldRequests sums what those not suspended request (with limits.perGroup.maxRequests only).
	held         map[string]int
	heldRequests map[string]corev1.ResourceList
	// queued counts the unfinished Jobs that are suspended (StateQueued).
	queued int
	// unboundPods are this scheduler's pods bound to no node yet, podlessPods the pods its unfinished Jobs with no
	// pod yet will make: both will take room that the nodes still show as free.
	unboundPods, podlessPods int
	// unboundSizes are, for a sized queue, those of unboundPods whose demand is observed, by size (their count
	// included in unboundPods; and in Waiting, those of them that wait for a new node).
	unboundSizes []unboundSize
	// waitDue is the queue's part of Plan.WaitDue (zero: none).
	waitDue time.Time
	// sized says the queue takes its Jobs' requests from its rows (job.requestsFrom; sizes.go), and backfill is
	// its job.backfill (nil: none, or not sized).
	sized    bool
	backfill *config.Backfill
	// hard, roomBound, capacityBound and awaitsBinds are as Plan's, for the queue.
	hard, roomBound, capacityBound, awaitsBinds bool
	// groupRoom is what each group's rate leaves of the read (see rates.groupRoom).
	groupRoom map[string]int
	// checkedRows are the rows its row check selected (its worker bugs), readRows those its read admitted or
	// skipped, and admittedCreates the creates its read admitted, before the share keeps some (Creates).
	checkedRows, readRows int
	admittedCreates       []Create
}

// What a plan cannot know before its creates are made (Plan.NotKnown); each create's Outcome says what came of it.
const (
	NotKnownName = "whether a Job this scheduler does not list (another scheduler's, one made by hand) holds a " +
		"planned name: tick skips that row"
	NotKnownRate = "whether the Lease takes the rate reservation (limits.rate): tick creates nothing without it"
)

// NotKnown is what p's creates depend on that only making them tells (nil when it creates nothing): a dry run
// prints it; a tick records what came of each create (Result.Outcomes).
func (p *Plan) NotKnown() []string {
	if len(p.Creates) == 0 {
		return nil
	}
	out := []string{NotKnownName}
	if p.rates != nil {
		out = append(out, NotKnownRate)
	}
	return out
}

// Waits says the pass waits as configured: in every queue, what bound its slots is a limit or a full cluster.
func (p *Plan) Waits() bool { return p.waits }

// job finds an existing Job by name.
func (p *Plan) job(name string) (JobStatus, bool) {
	i, ok := p.jobIndex(name)
	if !ok {
		return JobStatus{}, false
	}
	return p.Jobs[i], true
}

// jobIndex is where the Job name is in p.Jobs (sorted by name, once, by Decide).
func (p *Plan) jobIndex(name string) (int, bool) {
	return slices.BinarySearchFunc(p.Jobs, name, func(j JobStatus, name string) int { return strings.Compare(j.Name, name) })
}

// Deletes are every Job this pass deletes, by name: beside its creates, the finished Jobs past their retention,
// superseded, dead past retry.deadRetention, or (once the source was asked) whose row is gone; before its creates,
// the cancelled ones (DeleteCancelled); and after its create, the failed attempt of each retry (DeleteRetried: see
// Create.Supersedes).
func (p *Plan) Deletes() []JobStatus {
	var out []JobStatus
	for _, j := range p.Jobs {
		if j.Delete != "" {
			out = append(out, j)
		}
	}
	return out
}

// finishedDeletes are the deletes the pass starts at once, beside the rest of it: Deletes but the cancels (and, in
// the plan Decide makes, before the share marks any, the retried attempts).
func (p *Plan) finishedDeletes() []JobStatus {
	var out []JobStatus
	for _, j := range p.Jobs {
		if j.Delete != "" && j.Delete != DeleteCancelled {
			out = append(out, j)
		}
	}
	return out
}

// Cancels are the Jobs this pass cancels (DeleteCancelled), by name: unfinished Jobs whose key the queue's
// source.cancelQuery returns.
func (p *Plan) Cancels() []JobStatus {
	var out []JobStatus
	for _, j := range p.Jobs {
		if j.Delete == DeleteCancelled {
			out = append(out, j)
		}
	}
	return out
}

// Excluded are the keys the read leaves out: a Job exists for them and is kept, or succeeded (kept or deleted now),
// or waits out its backoff. The reports count the backlog with them.
func (p *Plan) Excluded() []string { return slices.Clone(p.exclude) }

// Count returns how many Jobs are in state s and kept.
func (p *Plan) Count(s State) int { return p.CountIn("", s) }

// CountIn returns how many Jobs of queue (a queue's name; "": every queue) are in state s and kept: what status,
// the metrics and the pass count as a queue's Jobs in a state.
func (p *Plan) CountIn(queue string, s State) int {
	n := 0
	for _, j := range p.Jobs {
		if j.State == s && j.Delete == "" && (queue == "" || j.Queue == queue) {
			n++
		}
	}
	return n
}

// NextAttempt is the attempt a new Job of a task gets after last, its newest Job (nil: none, attempt 1). It is
// computed here only: admit numbers the creates with it.
func NextAttempt(last *JobStatus) int {
	if last == nil {
		return 1
	}
	return last.Attempt + 1
}

// RowAttempt is the attempt a task's row is rendered for now, given its newest Job (nil: none): that Job's own,
// unless it failed with attempts left (in backoff), then the next one, the one the pass creates for the row.
func RowAttempt(newest *JobStatus) int {
	if newest != nil && newest.State != StateBackoff {
		return newest.Attempt
	}
	return NextAttempt(newest)
}
