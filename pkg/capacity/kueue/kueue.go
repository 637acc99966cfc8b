// Package kueue is limits.capacity: kueue: Kueue admits the Jobs (its webhook suspends each, its ClusterQueue's
// quota decides when it runs), so no template is fitted here; what jobsched bounds is how many of the install's Jobs
// wait in Kueue at once (limits.maxQueued). Status reads each queued Job's Workload and the LocalQueue
// (manifests/kueue); a pass reads neither.
package kueue

import (
	"context"
	"fmt"
	"strings"

	batchv1 "k8s.io/api/batch/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/jobsched/jobsched/pkg/capacity"
	"github.com/jobsched/jobsched/pkg/config"
	kueueapi "github.com/jobsched/jobsched/pkg/kueue"
)

// Mode is limits.capacity: kueue.
type Mode struct{}

var _ = capacity.Register(Mode{})

func (Mode) Name() config.Capacity { return config.CapacityKueue }

func (Mode) Observe(context.Context, capacity.Clients, string, capacity.Options) (*capacity.Snapshot, error) {
	return nil, nil
}

func (Mode) Room(*capacity.Snapshot, []capacity.Claim) capacity.Room { return nil }

// Bound is limits.maxQueued − the install's queued Jobs: Kueue, not jobsched, decides when a Job runs, so what
// jobsched bounds is how many wait there.
func (Mode) Bound(cfg *config.Config, n capacity.Counts) (int, string) {
	return cfg.MaxQueued() - n.Queued, fmt.Sprintf("limits.maxQueued: %d of %d queued", n.Queued, cfg.MaxQueued())
}

// Inspect reads the namespace's Workloads and the LocalQueue (with queues: the first queue's; the Workloads are the
// namespace's): a *kueueapi.Snapshot.
func (Mode) Inspect(ctx context.Context, c capacity.Clients, cfg *config.Config) (capacity.Details, error) {
	snap, err := kueueapi.Observe(ctx, c.Dynamic, cfg.Namespace, cfg.QueueConfig(0).Kueue.LocalQueue)
	if err != nil {
		return nil, fmt.Errorf("observing Kueue: %w", err)
	}
	return snap, nil
}

// snapshot is what Inspect read, nil when nothing was.
func snapshot(d capacity.Details) *kueueapi.Snapshot {
	snap, _ := d.(*kueueapi.Snapshot)
	return snap
}

// WhyQueued: a queued Job is one Kueue has not admitted (its Workload has no quota reserved) or has evicted and
// requeued; either way it is no failure and costs no attempt, and it makes no pod until Kueue lets it. The reason is
// Kueue's, when status read its Workloads.
func (Mode) WhyQueued(d capacity.Details, uid types.UID) (reason, holder string) {
	snap := snapshot(d)
	switch {
	case snap == nil:
		return "suspended: waiting for Kueue to admit it", ""
	case snap.Unavailable != "":
		return "suspended (Kueue's Workloads cannot be read)", ""
	}
	w := snap.Workloads[uid]
	if w != nil {
		holder = w.Name
	}
	return w.Why(), holder
}

// JobField is the attempt's kueueWorkload: its Workload with its conditions, when status read it.
func (Mode) JobField(d capacity.Details, uid types.UID) (capacity.Field, bool) {
	snap := snapshot(d)
	if snap == nil || snap.Workloads[uid] == nil {
		return capacity.Field{}, false
	}
	return capacity.Field{Key: "kueueWorkload", Value: snap.Workloads[uid]}, true
}

// Status is what status shows of Kueue (the document's kueue): how many Jobs wait in it against limits.maxQueued,
// the LocalQueue's own counts, and why Kueue's objects could not be read, if so.
type Status struct {
	MaxQueued   int                  `json:"maxQueued"`
	Queued      int                  `json:"queued"`
	LocalQueue  *kueueapi.LocalQueue `json:"localQueue,omitempty"`
	Unavailable string               `json:"unavailable,omitempty"`
}

// StatusOf is the Status of what Inspect read (d, nil when nothing was) with queued Jobs queued.
func StatusOf(cfg *config.Config, queued int, d capacity.Details) *Status {
	ks := &Status{MaxQueued: cfg.MaxQueued(), Queued: queued}
	if snap := snapshot(d); snap != nil {
		ks.LocalQueue, ks.Unavailable = snap.LocalQueue, snap.Unavailable
	}
	return ks
}

// Status is the document's kueue (Status) and its line of the status table.
func (Mode) Status(cfg *config.Config, n capacity.Counts, d capacity.Details) capacity.Section {
	return StatusOf(cfg, n.Queued, d).Section()
}

// Section is k as status's section.
func (k *Status) Section() capacity.Section {
	return capacity.Section{
		Fields: []capacity.Field{{Key: "kueue", Value: k}},
		Lines:  []capacity.Line{{Label: "Kueue", Text: k.Line()}},
		Queued: "Queued in Kueue (suspended until their Workload is admitted)",
	}
}

// Line is the Kueue line of the status table.
func (k *Status) Line() string {
	s := fmt.Sprintf("%d queued (limits.maxQueued %d)", k.Queued, k.MaxQueued)
	switch q := k.LocalQueue; {
	case k.Unavailable != "":
		return s + "; " + k.Unavailable
	case q == nil:
		return s
	case !q.Found:
		return s + fmt.Sprintf("; LocalQueue %s does not exist: Kueue admits none of the Jobs", q.Name)
	default:
		return s + fmt.Sprintf("; LocalQueue %s (ClusterQueue %s): %d pending, %d reserving, %d admitted", q.Name, q.ClusterQueue, q.Pending, q.Reserving, q.Admitted)
	}
}

// Label puts the Job into kueue.localQueue, at the row's WorkloadPriorityClass (kueue.priorityColumn) or else
// kueue.priorityClass (a kueue: block, which config accepts with limits.capacity: kueue only). Kueue reads both
// labels from the Job itself.
func (Mode) Label(cfg *config.Config, col func(string) (string, bool, bool), job *batchv1.Job) error {
	if cfg.Kueue == nil {
		return nil
	}
	if job.Labels == nil {
		job.Labels = map[string]string{}
	}
	job.Labels[kueueapi.QueueLabel] = cfg.Kueue.LocalQueue
	class := cfg.Kueue.PriorityClass
	if name := cfg.Kueue.PriorityColumn; name != "" {
		v, null, ok := col(name)
		if !ok {
			return &config.Error{Err: fmt.Errorf("%s: kueue.priorityColumn: the query returns no column %q", cfg.File, name)}
		}
		if !null && v != "" {
			if msgs := append(validation.IsDNS1123Subdomain(v), validation.IsValidLabelValue(v)...); len(msgs) > 0 {
				return fmt.Errorf("kueue.priorityColumn %q: %q is not a WorkloadPriorityClass name (%s)", name, v, strings.Join(msgs, "; "))
			}
			class = v
		}
	}
	if class != "" {
		job.Labels[kueueapi.PriorityLabel] = class
	}
	return nil
}

func (Mode) Needs() capacity.Needs {
	return capacity.Needs{Component: "kueue", Dynamic: true, Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{"kueue.x-k8s.io"}, Resources: []string{"workloads", "localqueues"}, Verbs: []string{"get", "list"}},
	}}
}
