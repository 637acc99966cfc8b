// Package autoscale is limits.capacity: autoscale: each template's room is what fits on the nodes (as nodes) plus
// what the cluster's autoscaler can still add for it (grow.go, the Placer's capacity.Growth: Karpenter's NodePools
// within their limits, the cluster-autoscaler's node groups up to their maxSize), after the pods already waiting for
// new nodes, with at most limits.maxPending of ours waiting at once. Without an autoscaler to read (none installed,
// or no grant of manifests/autoscale) it counts as nodes, and says why. It needs manifests/capacity too, for the
// nodes.
//
// An Unschedulable pod of ours the autoscaler provides a node for waits for it rather than block the pass, and so
// does one it has not spoken of yet, for AnswerGrace (Answers.Judge).
package autoscale

import (
	"context"
	"fmt"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/jobsched/jobsched/pkg/autoscaler"
	"github.com/jobsched/jobsched/pkg/capacity"
	"github.com/jobsched/jobsched/pkg/config"
)

// Mode is limits.capacity: autoscale.
type Mode struct{}

var _ = capacity.Register(Mode{})

func (Mode) Name() config.Capacity { return config.CapacityAutoscale }

// FollowsPods: a fill run follows every pod, for the nodes' room.
func (Mode) FollowsPods() bool { return true }

// Observe is nodes' Observe, then one read of the autoscaler (autoscaler.Read).
func (Mode) Observe(ctx context.Context, c capacity.Clients, namespace string, o capacity.Options) (*capacity.Snapshot, error) {
	o.Nodes = true
	snap, err := capacity.Observe(ctx, c.Kube, namespace, o)
	if err != nil {
		return nil, err
	}
	st, err := autoscaler.Read(ctx, c.Dynamic, c.Kube)
	if err != nil {
		return nil, fmt.Errorf("capacity autoscale: %w", err)
	}
	snap.Autoscale = st
	if o.Config != nil {
		snap.MaxPending = o.Config.MaxPending()
	}
	if st.Source == "" {
		snap.Warnings = append(snap.Warnings, fmt.Sprintf("capacity autoscale: %s: counting as nodes", st.Note))
	}
	return snap, nil
}

// Room is the Placer's, with the autoscaler's room for the pods that fit on no node (growingPlacer).
func (Mode) Room(snap *capacity.Snapshot, claims []capacity.Claim) capacity.Room {
	return growingPlacer(snap, claims)
}

// AnswerGrace is how long after a pod of ours turned Unschedulable the pass waits for the autoscaler to say whether
// it provides a node for it: until then the pod counts as waiting for a new node (and against limits.maxPending),
// then it blocks unless the autoscaler's Event says it provides one. Both decide on a pod within 10 s: Karpenter
// batches pending pods for at most 10 s (1 s without a new one) before it simulates and writes Nominated, the
// cluster-autoscaler scans every 10 s; 5 s more are for the simulation and the Event's write.
const AnswerGrace = 15 * time.Second

// Waits reads the Events of pods that the components of limits.autoscalerEvents wrote (autoscaler.Waits). Without
// list on Events (manifests/autoscale) or when they cannot be read, every Unschedulable pod blocks, as with nodes,
// and note says so.
func (Mode) Waits(ctx context.Context, c capacity.Clients, cfg *config.Config, pods []string) (capacity.Waits, string) {
	if len(pods) == 0 {
		return nil, ""
	}
	waits, err := autoscaler.Waits(ctx, c.Kube, cfg.Namespace, pods, cfg.AutoscalerEvents())
	switch {
	case apierrors.IsForbidden(err):
		return nil, fmt.Sprintf("cannot list Events in %s (the Role of manifests/autoscale grants list): every Unschedulable pod blocks, as with nodes", cfg.Namespace)
	case err != nil:
		return nil, fmt.Sprintf("%v: every Unschedulable pod blocks, as with nodes", err)
	}
	return Answers(waits), ""
}

// Answers are what the autoscaler said of our Unschedulable pods, by name (the Events were read).
type Answers map[string]autoscaler.Wait

// Judge: a pod the autoscaler provides a node for waits for it, one it says it cannot blocks (with its Event); one
// it has not spoken of yet waits until AnswerGrace after it turned Unschedulable (Due), then blocks.
func (w Answers) Judge(pod capacity.PodSummary, now time.Time) capacity.Verdict {
	said, ok := w[pod.Name]
	due := pod.UnschedulableSince.Add(AnswerGrace)
	switch {
	case ok && said.Provided:
		return capacity.Verdict{Waits: true, Reason: "waiting for a new node: " + said.Event}
	case ok:
		return capacity.Verdict{Reason: said.Event}
	case !pod.UnschedulableSince.IsZero() && now.Before(due):
		return capacity.Verdict{Waits: true, Due: due,
			Reason: "waiting for a new node: the autoscaler has not said yet (it blocks from " + due.Format(time.RFC3339) + ")"}
	}
	return capacity.Verdict{Reason: "the autoscaler said nothing of it within " + AnswerGrace.String()}
}

// Inspect reads nothing beyond a pass's own observation: status shows what the pass decided (Status).
func (Mode) Inspect(context.Context, capacity.Clients, *config.Config) (capacity.Details, error) {
	return nil, nil
}

// Status is the document's waitingForNodes and waitsNote and the table's Autoscaler line: our Unschedulable pods the
// autoscaler provides a node for, and why every Unschedulable pod blocks instead; nothing when neither is.
func (Mode) Status(_ *config.Config, n capacity.Counts, _ capacity.Details) capacity.Section {
	if n.Waiting == 0 && n.WaitsNote == "" {
		return capacity.Section{}
	}
	var fields []capacity.Field
	text := fmt.Sprintf("%d pod(s) wait for the new nodes it makes", n.Waiting)
	if n.Waiting > 0 {
		fields = append(fields, capacity.Field{Key: "waitingForNodes", Value: n.Waiting})
	}
	if n.WaitsNote != "" {
		fields = append(fields, capacity.Field{Key: "waitsNote", Value: n.WaitsNote})
		text += "; " + n.WaitsNote
	}
	return capacity.Section{Fields: fields, Lines: []capacity.Line{{Label: "Autoscaler", Text: text}}}
}

func (Mode) Needs() capacity.Needs {
	return capacity.Needs{Component: "autoscale", Dynamic: true, Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{"karpenter.sh"}, Resources: []string{"nodepools", "nodeclaims"}, Verbs: []string{"get", "list"}},
		{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get"}, ResourceNames: []string{"cluster-autoscaler-status"}},
		{APIGroups: []string{""}, Resources: []string{"events"}, Verbs: []string{"list"}},
	}}
}
