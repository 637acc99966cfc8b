package capacity

import (
	"context"
	"fmt"

	rbacv1 "k8s.io/api/rbac/v1"

	"github.com/jobsched/jobsched/pkg/config"
	"github.com/jobsched/jobsched/pkg/kueue"
)

// kueueMode is limits.capacity: kueue: Kueue admits the Jobs (its webhook suspends each, its ClusterQueue's quota
// decides when it runs), so no template is fitted here; what jobsched bounds is how many of the install's Jobs wait
// in Kueue at once (limits.maxQueued). Status reads each queued Job's Workload and the LocalQueue (manifests/kueue);
// a pass reads neither.
type kueueMode struct{}

func (kueueMode) Name() config.Capacity { return config.CapacityKueue }

func (kueueMode) Observe(context.Context, Clients, string, Options) (*Snapshot, error) {
	return nil, nil
}

func (kueueMode) Room(*Snapshot, []Claim) Room { return nil }

// Bound is limits.maxQueued − the install's queued Jobs: Kueue, not jobsched, decides when a Job runs, so what
// jobsched bounds is how many wait there.
func (kueueMode) Bound(cfg *config.Config, queued int) (int, string, bool) {
	return cfg.MaxQueued() - queued, fmt.Sprintf("limits.maxQueued: %d of %d queued", queued, cfg.MaxQueued()), true
}

// Inspect reads the namespace's Workloads and the LocalQueue (with queues: the first queue's; the Workloads are the
// namespace's).
func (kueueMode) Inspect(ctx context.Context, c Clients, cfg *config.Config) (*Details, error) {
	snap, err := kueue.Observe(ctx, c.Dynamic, cfg.Namespace, cfg.QueueConfig(0).Kueue.LocalQueue)
	if err != nil {
		return nil, fmt.Errorf("observing Kueue: %w", err)
	}
	return &Details{Kueue: snap}, nil
}

// KueueStatus is what status shows of Kueue: how many Jobs wait in it against limits.maxQueued, the LocalQueue's
// own counts, and why Kueue's objects could not be read, if so.
type KueueStatus struct {
	MaxQueued   int               `json:"maxQueued"`
	Queued      int               `json:"queued"`
	LocalQueue  *kueue.LocalQueue `json:"localQueue,omitempty"`
	Unavailable string            `json:"unavailable,omitempty"`
}

func (kueueMode) Status(cfg *config.Config, queued int, d *Details) Section {
	ks := &KueueStatus{MaxQueued: cfg.MaxQueued(), Queued: queued}
	if d != nil && d.Kueue != nil {
		ks.LocalQueue, ks.Unavailable = d.Kueue.LocalQueue, d.Kueue.Unavailable
	}
	return Section{Kueue: ks}
}

func (kueueMode) Waits(context.Context, Clients, string, []string, []string) (map[string]Wait, string) {
	return nil, ""
}

func (kueueMode) Needs() Needs {
	return Needs{Component: "kueue", Dynamic: true, Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{"kueue.x-k8s.io"}, Resources: []string{"workloads", "localqueues"}, Verbs: []string{"get", "list"}},
	}}
}
