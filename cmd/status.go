package cmd

import (
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"

	"github.com/jobsched/jobsched/pkg/capacity"
	"github.com/jobsched/jobsched/pkg/scheduler"
)

func newStatusCmd(g *globalOptions) *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:   "status",
		Short: "Read-only report: backlog, Jobs by state, slots, capacity and what the next tick would do",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if output != "table" && output != "json" {
				return usageError{fmt.Errorf("-o: %q is not table or json", output)}
			}
			cfg, err := g.loadConfig()
			if err != nil {
				return err
			}
			s, closeFn, err := g.newScheduler(cfg, schedulerOptions{source: true})
			if err != nil {
				return err
			}
			defer closeFn()
			st, err := s.Status(cmd.Context())
			if err != nil {
				return err
			}
			if output == "json" {
				enc := json.NewEncoder(g.out)
				enc.SetIndent("", "  ")
				return enc.Encode(st)
			}
			return printStatus(g.out, st)
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", "table", "output format: table or json")
	return cmd
}

func printStatus(out io.Writer, st *scheduler.Status) error {
	w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintf(w, "Scheduler:\t%s (namespace %s)\n", st.Scheduler, st.Namespace)
	fmt.Fprintf(w, "Backlog:\t%s row(s) without a Job\n", st.Backlog)
	fmt.Fprintf(w, "Jobs:\t%d running, %d starting, %d unschedulable, %d succeeded (kept), %d failed (kept)\n",
		st.States[scheduler.StateRunning], st.States[scheduler.StateStarting], st.States[scheduler.StateUnschedulable],
		st.States[scheduler.StateSucceeded], st.States[scheduler.StateFailed])
	fmt.Fprintf(w, "Slots:\t%d (bound by %s)\n", st.Slots, st.Limit)
	if c := st.Capacity; c != nil {
		fit := "no limit"
		if c.Fit >= 0 {
			fit = fmt.Sprintf("%d more task pod(s)", c.Fit)
		}
		fmt.Fprintf(w, "Capacity:\t%s; %s\n", fit, c.Binding)
		printNodes(w, c.Nodes)
		for _, q := range c.Quota {
			fmt.Fprintf(w, "  quota %s %s:\t%d more\n", q.Name, q.Resource, q.Fits)
		}
		if c.Warning != "" {
			fmt.Fprintf(w, "  warning:\t%s\n", c.Warning)
		}
	}
	fmt.Fprintf(w, "Next tick:\t%s\n", st.Next)
	for _, j := range st.Jobs {
		if j.State == scheduler.StateFailed || j.State == scheduler.StateUnschedulable {
			fmt.Fprintf(w, "  %s %s:\ttask %q: %s\n", j.State, j.Name, j.Key, j.Reason)
		}
	}
	return w.Flush()
}

// maxNodeLines bounds the per-node lines of the table; -o json has every node.
const maxNodeLines = 10

// printNodes shows the considered nodes with the most room first, then how many were excluded and why.
func printNodes(w io.Writer, nodes []capacity.NodeFit) {
	var considered []capacity.NodeFit
	excluded := map[string]int{}
	for _, n := range nodes {
		if n.Excluded != "" {
			excluded[n.Excluded]++
		} else {
			considered = append(considered, n)
		}
	}
	sort.SliceStable(considered, func(i, j int) bool { return considered[i].Fits > considered[j].Fits })
	for i, n := range considered {
		if i == maxNodeLines {
			fmt.Fprintf(w, "  …\t%d more node(s) considered\n", len(considered)-i)
			break
		}
		fmt.Fprintf(w, "  %s:\t%d more fit (bound by %s); free %s\n", n.Name, n.Fits, n.Limit, resources(n.Free))
	}
	reasons := make([]string, 0, len(excluded))
	for r := range excluded {
		reasons = append(reasons, r)
	}
	sort.Strings(reasons)
	for _, r := range reasons {
		fmt.Fprintf(w, "  excluded:\t%d node(s): %s\n", excluded[r], r)
	}
}

func resources(rl corev1.ResourceList) string {
	var parts []string
	for name, q := range rl {
		parts = append(parts, string(name)+"="+q.String())
	}
	sort.Strings(parts)
	return strings.Join(parts, " ")
}
