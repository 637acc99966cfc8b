package cmd

import (
	"bytes"
	"strings"
	"testing"
	"text/tabwriter"

	"github.com/jobsched/jobsched/pkg/capacity"
	"github.com/jobsched/jobsched/pkg/scheduler"
)

// TestPrintAutoscale: status and dry-run show, for limits.capacity: autoscale, what new nodes take and each
// NodePool's limit, use and room for the template, with the same lines.
func TestPrintAutoscale(t *testing.T) {
	rep := &capacity.Report{Fit: 2, Binding: "karpenter: 2 more on new nodes", Autoscale: &capacity.AutoscaleFit{
		Source: "karpenter", Adds: 2, Binding: "2 on NodePool batch", Waiting: 1,
		Pools: []capacity.PoolFit{{Kind: "NodePool", Name: "batch", Pods: 2, Bound: "limits.cpu: 4 left"}}}}
	want := []string{"karpenter:       2 more Job(s) on new nodes (2 on NodePool batch); 1 of our pods wait for new nodes",
		"NodePool batch:  no limit, used nothing; adds 2 more pod(s) (limits.cpu: 4 left)"}

	var status bytes.Buffer
	if err := printCapacity(&status, tabwriter.NewWriter(&status, 0, 4, 2, ' ', 0), "Capacity", rep); err != nil {
		t.Fatal(err)
	}
	var plan bytes.Buffer
	if err := printPlan(&plan, "text", &scheduler.Plan{Scheduler: "s", Namespace: "ns", Capacity: rep}); err != nil {
		t.Fatal(err)
	}
	for name, out := range map[string]string{"status": status.String(), "dry-run": plan.String()} {
		for _, line := range want {
			if !strings.Contains(out, line) {
				t.Errorf("%s does not show %q:\n%s", name, line, out)
			}
		}
	}
}
