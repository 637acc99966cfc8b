package capacity

import (
	"context"
	"fmt"

	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/client-go/dynamic"

	"github.com/jobsched/jobsched/pkg/capacity/autoscale"
	"github.com/jobsched/jobsched/pkg/config"
	"github.com/jobsched/jobsched/pkg/kube"
	"github.com/jobsched/jobsched/pkg/kueue"
)

// Mode is one value of limits.capacity. A pass asks its mode what to read of the cluster (Observe), what room that
// gives each queue's template (Room) and what it bounds the install's Jobs to beyond limits.maxActive and
// limits.maxPerTick (Bound); status also asks what the mode shows of itself (Inspect, Status); the manifests grant
// what it Needs. Every mode is listed in Modes; the package doc says how to add one.
type Mode interface {
	// Name is the mode's value of limits.capacity.
	Name() config.Capacity
	// Observe reads, once per pass, what the templates' room is counted on (o.Templates: every queue's). A mode
	// that counts no room returns nil, nil and makes no call.
	Observe(ctx context.Context, c Clients, namespace string, o Options) (*Snapshot, error)
	// Room is the room the mode gives the claims' templates (claim i is queue i's) on what its Observe returned
	// (asked only when that is not nil): a Room places Jobs one at a time and reports how many more fit. nil for a
	// mode that bounds no template by capacity, whatever snap holds: the limits alone bound the creates.
	Room(snap *Snapshot, claims []Claim) Room
	// Bound is the install's room the mode allows beyond limits.maxActive and limits.maxPerTick, given its Jobs that
	// are queued (suspended), and the limit in words; ok is false when the mode sets none.
	Bound(cfg *config.Config, queued int) (slots int, limit string, ok bool)
	// Inspect reads what status shows of the mode beyond the pass's Observe (nil, nil: nothing). A pass never
	// calls it, so the tick's Role need not grant what it reads.
	Inspect(ctx context.Context, c Clients, cfg *config.Config) (*Details, error)
	// Status is the mode's section of status, from Inspect's details (nil when none was read) and the install's
	// queued Jobs; the zero Section for a mode that shows nothing beyond each template's Report.
	Status(cfg *config.Config, queued int, d *Details) Section
	// Waits says which of our Unschedulable pods (by name, in namespace) the cluster's autoscaler provides a node
	// for (Wait.Provided: it does not block the pass) or says it cannot (Wait.Event: why). nil for a mode where
	// every Unschedulable pod blocks, or, with note saying why, when the mode could not tell (every one blocks).
	Waits(ctx context.Context, c Clients, namespace string, pods, from []string) (waits map[string]Wait, note string)
	// Needs is what the mode needs beyond the base Role and the typed client.
	Needs() Needs
}

// Wait is what the autoscaler says of one of our Unschedulable pods (limits.capacity: autoscale).
type Wait = autoscale.Wait

// Modes are the capacity modes, in the order of config.Capacities: the one place a mode is registered.
func Modes() []Mode {
	return []Mode{nodesMode{}, quotaMode{}, offMode{}, kueueMode{}, autoscaleMode{}}
}

// ModeOf is the mode named name. A name no mode has (a configuration not validated: a programming error) is a mode
// that fails: its Observe and Inspect return Check's error, it fits nothing and bounds nothing.
func ModeOf(name config.Capacity) Mode {
	for _, m := range Modes() {
		if m.Name() == name {
			return m
		}
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

// FollowsPods says m, in a fill run, follows every pod in the cluster (nodes and autoscale: Follow's pods feed): the
// caller reads its own Pending pods from that watch (Follow.Ours), not from one of its own.
func FollowsPods(m Mode) bool {
	_, ok := m.(interface{ followsPods() })
	return ok
}

// Room is the room a pass has for its templates (claim i is queue i's): Place places one more Job of claim i and
// says whether it fitted; Report says how many more Jobs of claim i fit after the placements so far, and why.
// *Placer is one.
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

// Details is what a mode's Inspect read for status.
type Details struct {
	// Kueue is what Kueue says of the Jobs (limits.capacity: kueue).
	Kueue *kueue.Snapshot
}

// Section is what status shows of a mode beyond each template's Report.
type Section struct {
	Kueue *KueueStatus // limits.capacity: kueue
}

// quiet is the part of a mode that bounds the install by nothing beyond the limits and shows nothing beyond each
// template's Report.
type quiet struct{}

func (quiet) Bound(*config.Config, int) (int, string, bool) { return 0, "", false }

func (quiet) Inspect(context.Context, Clients, *config.Config) (*Details, error) { return nil, nil }

func (quiet) Status(*config.Config, int, *Details) Section { return Section{} }

func (quiet) Waits(context.Context, Clients, string, []string, []string) (map[string]Wait, string) {
	return nil, ""
}

// fitted is a quiet mode that places the claims on what it observed (the Placer).
type fitted struct{ quiet }

func (fitted) Room(snap *Snapshot, claims []Claim) Room { return NewPlacer(snap, claims) }

// unknownMode is ModeOf of a name no mode has: Observe and Inspect fail with Check's error, and it gives no Room
// (Observe never returns a snapshot to fit on).
type unknownMode struct {
	quiet
	name config.Capacity
}

func (u unknownMode) Name() config.Capacity { return u.name }

func (u unknownMode) Observe(context.Context, Clients, string, Options) (*Snapshot, error) {
	return nil, Check(u.name)
}

func (u unknownMode) Inspect(context.Context, Clients, *config.Config) (*Details, error) {
	return nil, Check(u.name)
}

func (unknownMode) Room(*Snapshot, []Claim) Room { return nil }

func (unknownMode) Needs() Needs { return Needs{} }
