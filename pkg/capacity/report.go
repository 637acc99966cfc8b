package capacity

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
)

// Report says how many more Jobs of a template fit now, and why.
type Report struct {
	Fit        int                 `json:"fit"`                  // how many more Jobs fit; -1 = no limit known
	Binding    string              `json:"binding,omitempty"`    // the binding constraint in words
	PodsPerJob int                 `json:"podsPerJob,omitempty"` // pods one Job runs at once (set when above 1)
	Demand     corev1.ResourceList `json:"demand,omitempty"`     // one pod's requests, as the API server admits it
	Nodes      []NodeFit           `json:"nodes,omitempty"`      // every node considered or excluded, sorted by name
	Quota      []QuotaFit          `json:"quota,omitempty"`      // every quota resource that limits the template
	Tick       string              `json:"tick,omitempty"`       // the room kept for the next tick, in words
	Pending    []PendingFit        `json:"pending,omitempty"`    // others' unbound pods counted as taking room
	Listed     string              `json:"listed,omitempty"`     // which pods were listed to count the room
	Autoscale  *AutoscaleFit       `json:"autoscale,omitempty"`  // what the autoscaler can still add (limits.capacity: autoscale)
	Warning    string              `json:"warning,omitempty"`    // e.g. a permission that is missing
	// AwaitsBinds, when above 0, is how many of our unbound pods of other sizes lowered Fit: it counts what is sure
	// to fit wherever kube-scheduler binds them (sure.go), and may grow once they are bound.
	AwaitsBinds int `json:"awaitsBinds,omitempty"`
}

// NodeFit is how many more pods of the template fit on one node.
type NodeFit struct {
	Name     string `json:"name"`
	Fits     int    `json:"fits"`               // 0 if excluded
	Excluded string `json:"excluded,omitempty"` // why not considered; "" if considered
	Limit    string `json:"limit,omitempty"`    // the resource that binds on this node
	Free     Free   `json:"free,omitzero"`      // free per resource the demand names, plus pods
}

// QuotaFit is how many more Jobs one resource of one ResourceQuota admits.
type QuotaFit struct {
	Name     string `json:"name"`
	Resource string `json:"resource"`
	Fits     int    `json:"fits"`
}

// PendingFit is a pod of someone else, not yet bound, that could land on a node of the template: it is counted on
// the node where it would cost our pods the most room.
type PendingFit struct {
	Pod   string `json:"pod"` // namespace/name
	Node  string `json:"node"`
	Costs int    `json:"costs"` // how many of our pods fit less on that node
}

// AutoscaleFit is what the autoscaler can still add for the template (limits.capacity: autoscale).
type AutoscaleFit struct {
	Source  string    `json:"source"`  // karpenter or cluster-autoscaler
	Adds    int       `json:"adds"`    // more Jobs on new nodes, after the pods waiting for them
	Binding string    `json:"binding"` // what bound Adds, in words
	Waiting int       `json:"waiting"` // our pods waiting for new nodes (against limits.maxPending)
	Pools   []PoolFit `json:"pools"`   // every NodePool or node group, sorted by name
}

// PoolFit is one NodePool or node group: its limit, what it holds, and how many more pods of the template it takes.
type PoolFit struct {
	Kind      string              `json:"kind"` // NodePool or node group
	Name      string              `json:"name"`
	Limit     corev1.ResourceList `json:"limit,omitempty"` // a NodePool's spec.limits; a group's maxSize as nodes
	Used      corev1.ResourceList `json:"used,omitempty"`  // a NodePool's status.resources, or its NodeClaims' when more; a group's ready nodes as nodes
	Launching int                 `json:"launching,omitempty"`
	Pods      int                 `json:"pods"`            // more pods of the template it takes; -1 = no limit
	Bound     string              `json:"bound,omitempty"` // what bound Pods
	Excluded  string              `json:"excluded,omitempty"`
}

// Words is the pool's line of status: its limit, what it holds, and what it can still add for the template.
func (f PoolFit) Words() string {
	limit, used := "no limit", "nothing"
	if len(f.Limit) > 0 {
		limit = "limit " + Quantities(f.Limit)
	}
	if len(f.Used) > 0 {
		used = Quantities(f.Used)
	}
	s := fmt.Sprintf("%s, used %s", limit, used)
	if f.Launching > 0 {
		s += fmt.Sprintf(", %d NodeClaim(s) launching", f.Launching)
	}
	switch {
	case f.Excluded != "":
		return s + "; the template cannot use it: " + f.Excluded
	case f.Pods < 0:
		return s + "; adds pods without bound (" + f.Bound + ")"
	}
	return s + fmt.Sprintf("; adds %d more pod(s) (%s)", f.Pods, f.Bound)
}

// Lines are what the report says beyond the nodes and the quotas (what the autoscaler can still add), as lines of
// status's and dry-run's tables; none when it says nothing more.
func (r *Report) Lines() []Line {
	a := r.Autoscale
	if a == nil {
		return nil
	}
	lines := []Line{{Label: a.Source, Text: fmt.Sprintf("%d more Job(s) on new nodes (%s); %d of our pods wait for new nodes", a.Adds, a.Binding, a.Waiting)}}
	for _, p := range a.Pools {
		lines = append(lines, Line{Label: p.Kind + " " + p.Name, Text: p.Words()})
	}
	return lines
}
