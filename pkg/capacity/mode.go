package capacity

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"

	"github.com/jobsched/jobsched/pkg/capacity/labeler"
	"github.com/jobsched/jobsched/pkg/config"
	"github.com/jobsched/jobsched/pkg/kube"
)

// Mode is one value of limits.capacity, a package of its own that registers itself (Register; the shipped ones are
// wired in pkg/capacity/modes). A pass asks its mode what to read of the cluster (Observe) and what room that gives
// each queue's template (Room); the manifests grant what it Needs. What only some modes do is an optional interface
// the shared code checks with a type assertion: Bounder (a bound on the install's Jobs), Waiter (pods that wait
// rather than block), Inspector (what status shows of it), Queuer (why a queued Job waits), Labeler (labels on each
// Job), PodFollower (a fill run follows every pod). The package doc says how to add one.
type Mode interface {
	// Name is the mode's value of limits.capacity.
	Name() config.Capacity
	// Observe reads, once per pass, what the templates' room is counted on (o.Templates: every queue's). A mode
	// that counts no room returns nil, nil and makes no call.
	Observe(ctx context.Context, c Clients, namespace string, o Options) (*Snapshot, error)
	// Room is the room the mode gives the claims' templates (claim i is queue i's; claims after the queues' are
	// more shapes of a queue whose rows set their Jobs' requests: pkg/scheduler's sizes.go) on what its Observe returned
	// (asked only when that is not nil): a Room places Jobs one at a time and reports how many more fit. nil for a
	// mode that bounds no template by capacity, whatever snap holds: the limits alone bound the creates.
	Room(snap *Snapshot, claims []Claim) Room
	// Needs is what the mode needs beyond the base Role and the typed client.
	Needs() Needs
}

// Counts are what a pass decided of the install's Jobs and pods, as a mode is told them: its unfinished Jobs, of
// them the queued (suspended) ones, and the Unschedulable pods a Waiter said wait (WaitsNote: why it could not tell).
type Counts struct {
	Unfinished, Queued, Waiting int
	WaitsNote                   string
}

// Bounder is a mode that bounds the install's Jobs beyond limits.maxActive and limits.maxPerTick.
type Bounder interface {
	// Bound is the install's room the mode allows, given its Jobs, and the limit in words.
	Bound(cfg *config.Config, n Counts) (slots int, limit string)
}

// Waiter is a mode under which some of our Unschedulable pods wait (for a node the cluster makes) rather than block
// the pass (limits.blockOnUnschedulable).
type Waiter interface {
	// Waits reads, once per pass, what decides which of our Unschedulable pods (by name) wait. nil with note saying
	// why when the mode could not tell: every one blocks.
	Waits(ctx context.Context, c Clients, cfg *config.Config, pods []string) (w Waits, note string)
}

// Waits is what a Waiter read: Judge says of one of our Unschedulable pods, at now, whether it waits.
type Waits interface {
	Judge(pod PodSummary, now time.Time) Verdict
}

// Verdict is what a mode says of one of our Unschedulable pods. Waits: it does not block, and Reason says for what
// it waits; else it blocks and Reason (when set) is added to its message. Due is when a pod that waits now blocks
// unless the mode hears otherwise (zero: no such time): a fill run wakes then.
type Verdict struct {
	Waits  bool
	Reason string
	Due    time.Time
}

// Inspector is a mode that status shows beyond each template's Report: Inspect reads what it shows (nil: nothing
// beyond the pass's own observation; a pass never calls it, so the tick's Role need not grant what it reads),
// Status is its section from that (nil when nothing was read) and what the pass decided.
type Inspector interface {
	Inspect(ctx context.Context, c Clients, cfg *config.Config) (Details, error)
	Status(cfg *config.Config, n Counts, d Details) Section
}

// Details are what an Inspector's Inspect read, of its own type; only the mode reads them.
type Details any

// Queuer is a mode that queues Jobs (a Job of it is suspended until something admits it).
type Queuer interface {
	// WhyQueued says why the queued Job uid waits, from what Inspect read (nil in a pass, which reads nothing
	// more), and names what holds it ("" when unknown).
	WhyQueued(d Details, uid types.UID) (reason, holder string)
	// JobField is the field `status KEY` shows of the Job uid's attempt from what Inspect read; ok is false when
	// there is none.
	JobField(d Details, uid types.UID) (f Field, ok bool)
}

// Section is what status shows of a mode beyond each template's Report.
type Section struct {
	// Fields are the mode's top-level fields of the status document, in order.
	Fields []Field
	// Lines are its lines of the status table, after the Jobs line.
	Lines []Line
	// Queued titles the status table's list of queued (suspended) Jobs in a mode that queues Jobs ("" when it does
	// not: the Jobs line then counts queued Jobs only when there are some).
	Queued string
}

// Field is one field of the status document: Value under Key.
type Field struct {
	Key   string
	Value any
}

// Line is one line of the status table: Label, then Text (printed with its control characters escaped).
type Line struct {
	Label, Text string
}

// Labeler is a mode that puts labels of its own on each Job (kueue: its LocalQueue and priority class); Register
// records it in pkg/capacity/labeler, where the Job renderer finds it.
type Labeler = labeler.Labeler

// PodFollower is a mode that, in a fill run, follows every pod in the cluster (Follow's pods feed): the caller reads
// its own Pending pods from that watch (Follow.Ours), not from one of its own.
type PodFollower interface {
	FollowsPods() bool
}

// FollowsPods says m is a PodFollower that follows the pods.
func FollowsPods(m Mode) bool {
	f, ok := m.(PodFollower)
	return ok && f.FollowsPods()
}

// registry holds the registered modes by name.
var registry = struct {
	sync.RWMutex
	modes map[config.Capacity]Mode
}{modes: map[config.Capacity]Mode{}}

// Register adds m to the modes ModeOf finds and returns it (a mode's package registers itself with
// `var _ = capacity.Register(Mode{})`). A second mode of one name is a programming error: it panics.
func Register(m Mode) Mode {
	registry.Lock()
	defer registry.Unlock()
	if _, ok := registry.modes[m.Name()]; ok {
		panic(fmt.Sprintf("capacity: mode %q registered twice", m.Name()))
	}
	registry.modes[m.Name()] = m
	if l, ok := m.(Labeler); ok {
		labeler.Register(m.Name(), l)
	}
	return m
}

// Modes are the registered modes: those of config.Capacities in its order, then any other by name.
func Modes() []Mode {
	registry.RLock()
	defer registry.RUnlock()
	order := func(n config.Capacity) int {
		if i := slices.Index(config.Capacities(), n); i >= 0 {
			return i
		}
		return len(config.Capacities())
	}
	ms := make([]Mode, 0, len(registry.modes))
	for _, m := range registry.modes {
		ms = append(ms, m)
	}
	slices.SortFunc(ms, func(a, b Mode) int {
		return cmp.Or(cmp.Compare(order(a.Name()), order(b.Name())), cmp.Compare(a.Name(), b.Name()))
	})
	return ms
}

// ModeOf is the mode named name. A name no mode has (a configuration not validated, or a mode not wired: a
// programming error) is a mode that fails: its Observe and Inspect return Check's error, it fits nothing.
func ModeOf(name config.Capacity) Mode {
	registry.RLock()
	defer registry.RUnlock()
	if m, ok := registry.modes[name]; ok {
		return m
	}
	return unknownMode{name: name}
}

// Check is nil for a name a mode has, else the error that says it has none: a pass checks it before counting
// capacity, also when it observes nothing (offline), so that it never fits as if capacity were counted.
func Check(name config.Capacity) error {
	if _, ok := ModeOf(name).(unknownMode); ok {
		return fmt.Errorf("capacity: unknown mode %q (want one of %s)", name, config.CapacityNames())
	}
	return nil
}

// Room is the room a pass has for its templates (claim i is queue i's, and the claims after the queues' more shapes
// of sized queues): Place places one more Job of claim i and says whether it fitted; Report says how many more Jobs
// of claim i fit after the placements so far, and why. *Placer is one; its Never says why a Job of a claim could
// never fit.
type Room interface {
	Place(i int) bool
	Report(i int) Report
}

// Clients are the clients a mode reads with. Dynamic is nil unless the mode Needs it.
type Clients struct {
	Kube    kube.Interface
	Dynamic dynamic.Interface
}

// Needs is what a mode needs granted and built beyond the base Role (manifests/base) and the typed client.
type Needs struct {
	// Component is the kustomize component of manifests/ (and the chart value of the same name) that grants
	// Rules; "" when the base Role is enough.
	Component string
	// Rules are the rules the mode reads with, beyond the base Role's, as the component grants them.
	Rules []rbacv1.PolicyRule
	// Dynamic says the mode reads objects of other APIs (CRDs) through the dynamic client.
	Dynamic bool
}

// unknownMode is ModeOf of a name no mode has: Observe and Inspect fail with Check's error, and it gives no Room
// (Observe never returns a snapshot to fit on).
type unknownMode struct {
	name config.Capacity
}

func (u unknownMode) Name() config.Capacity { return u.name }

func (u unknownMode) Observe(context.Context, Clients, string, Options) (*Snapshot, error) {
	return nil, Check(u.name)
}

func (u unknownMode) Inspect(context.Context, Clients, *config.Config) (Details, error) {
	return nil, Check(u.name)
}

func (unknownMode) Status(*config.Config, Counts, Details) Section { return Section{} }

func (unknownMode) Room(*Snapshot, []Claim) Room { return nil }

func (unknownMode) Needs() Needs { return Needs{} }
