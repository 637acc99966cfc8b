package cmd

import (
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/jobsched/jobsched/pkg/capacity"
	"github.com/jobsched/jobsched/pkg/config"
	"github.com/jobsched/jobsched/pkg/report"
	"github.com/jobsched/jobsched/pkg/scheduler"
)

type dryRunOptions struct {
	output   string
	rowsFile string
	offline  bool
	server   bool
}

func newDryRunCmd(g *globalOptions) *cobra.Command {
	o := &dryRunOptions{}
	cmd := &cobra.Command{
		Use:   "dry-run",
		Short: "The full pass with no writes: print the plan (what tick would delete and create, and why)",
		Long: `dry-run makes the same plan tick would and prints it; it creates and deletes nothing.
--rows FILE reads rows from JSON lines instead of the database; --offline contacts no cluster (taken as empty);
together they render the exact Jobs of a config change in CI. --server sends each planned create to the API server
with dryRun=All, so the server validates the Jobs (admission included) without storing them. What only making a
create tells is printed as "Not known before executing" (notKnown): whether another scheduler's Job holds a name,
and with limits.rate whether the Lease takes the reservation; tick logs what came of each (its field outcome).

A --rows line is one row: an object whose keys are its columns, in column order; strings are taken as they are,
numbers and booleans as written, null as NULL, objects and arrays as compact JSON. With queues:, a queue without a
file reads no row. --offline sees no node or quota limit and nothing queued by Kueue; its output is the same on every
run while env.passthrough copies nothing.`,
		Args:    cobra.NoArgs,
		PreRunE: func(*cobra.Command, []string) error { return o.validate() },
		RunE: func(cmd *cobra.Command, _ []string) error {
			s, closeFn, err := g.newScheduler(cmd.Context(), schedulerOptions{source: true, rowsFile: o.rowsFile, offline: o.offline, stdin: cmd.InOrStdin()})
			if err != nil {
				return err
			}
			defer closeFn()
			action := scheduler.DryRun
			if o.server {
				action = scheduler.ServerDryRun
			}
			res, err := s.Run(cmd.Context(), action)
			err = logged(err)
			if res.Plan == nil || config.IsConfigError(err) {
				return err
			}
			return errors.Join(err, printPlan(g.out, o.output, res.Plan)) // the plan as the pass made it, whole
		},
	}
	f := cmd.Flags()
	f.StringVarP(&o.output, "output", "o", "table", "output format: table, json, yaml (the plan), or jobs (just the Jobs, as a v1 List for kubectl)")
	f.StringVar(&o.rowsFile, "rows", "", "read rows from this JSON-lines file (one object per line, at most 64 MiB; - for standard input) instead of the database; with queues: QUEUE=FILE,QUEUE=FILE")
	f.BoolVar(&o.offline, "offline", false, "contact no cluster: it is taken as empty")
	f.BoolVar(&o.server, "server", false, "send each planned create to the API server with dryRun=All")
	cmd.MarkFlagsMutuallyExclusive("server", "offline")
	return cmd
}

func (o *dryRunOptions) validate() error {
	switch o.output {
	case "table", "json", "yaml", "jobs":
	default:
		return fmt.Errorf("-o: %q is not table, json, yaml or jobs", o.output)
	}
	return nil
}

// jobList is the planned Jobs as a v1 List, which `kubectl apply --dry-run=server -f -` and `kubectl create -f -` take.
type jobList struct {
	APIVersion string         `json:"apiVersion"`
	Kind       string         `json:"kind"`
	Items      []*batchv1.Job `json:"items"`
}

// planKind is the kind of the document dry-run -o json|yaml prints.
const planKind = "Plan"

// planDocument is the document dry-run -o json|yaml prints: the plan's fields under an apiVersion (that of status's
// documents) and a kind, so that a reader of a saved document can tell what it is and which version wrote it.
type planDocument struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	// NotKnown is what the creates depend on that only making them tells (scheduler.Plan.NotKnown).
	NotKnown []string `json:"notKnown,omitempty"`
	*scheduler.Plan
}

func newPlanDocument(p *scheduler.Plan) *planDocument {
	return &planDocument{APIVersion: report.StatusAPIVersion, Kind: planKind, NotKnown: p.NotKnown(), Plan: p}
}

func printPlan(out io.Writer, format string, p *scheduler.Plan) error {
	switch format {
	case "jobs":
		list := jobList{APIVersion: "v1", Kind: "List", Items: []*batchv1.Job{}}
		for _, c := range p.Creates {
			list.Items = append(list.Items, c.Job)
		}
		return printDoc(out, "yaml", list)
	case "json", "yaml":
		plan := *p
		plan.Jobs = nil // written one at a time
		return printDocWith(out, format, newPlanDocument(&plan), "jobs", p.Jobs)
	}
	fmt.Fprintf(out, "Scheduler %s in namespace %s: %d unfinished, slots %d (%s)\n", p.Scheduler, p.Namespace, p.Unfinished, p.Slots,
		printable(bound("bound by ", p.Limit, p.Blocked, p.Slots)))
	if p.Blocked != "" {
		fmt.Fprintf(out, "Blocked: %s\n", printable(p.Blocked))
	}
	printQuery(out, p.Query)
	if len(p.Queues) == 0 {
		if err := printReportLines(out, p.Capacity); err != nil {
			return err
		}
		if err := printActions(out, p, ""); err != nil {
			return err
		}
		printNotKnown(out, p)
		return nil
	}
	for _, q := range p.Queues {
		fmt.Fprintf(out, "\nQueue %s (priority %d, weight %d): %d unfinished, slots %d (%s), %d to create\n",
			q.Name, q.Priority, q.Weight, q.Unfinished, q.Slots, printable(bound("bound by ", q.Limit, q.Blocked, q.Slots)), q.Creates)
		printQuery(out, q.Query)
		if err := printReportLines(out, q.Capacity); err != nil {
			return err
		}
		if err := printActions(out, p, q.Name); err != nil {
			return err
		}
	}
	printNotKnown(out, p)
	return nil
}

// printNotKnown prints what the plan's creates depend on that only making them tells (nothing without a create).
func printNotKnown(out io.Writer, p *scheduler.Plan) {
	ks := p.NotKnown()
	if len(ks) == 0 {
		return
	}
	fmt.Fprintln(out, "Not known before executing (tick logs what came of each create):")
	for _, k := range ks {
		fmt.Fprintf(out, "  %s\n", k)
	}
}

// printQuery prints what the query doctor says of a read (the plan's problems and the role's warnings), as status's
// Query line does; nothing without a database.
func printQuery(out io.Writer, f *scheduler.QueryFinding) {
	if f != nil {
		fmt.Fprintf(out, "Query: %s\n", printable(f.String()))
	}
}

// printReportLines prints what a template's capacity report says beyond the nodes and quotas (Report.Lines), as
// status does; nothing when it says nothing more.
func printReportLines(out io.Writer, c *capacity.Report) error {
	if c == nil || len(c.Lines()) == 0 {
		return nil
	}
	w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	printLines(w, "  ", c.Lines())
	return w.Flush()
}

// printActions prints the deletes, creates and skips of queue (all of them for a configuration without queues:,
// whose queue is ""), in the order tick makes them: the deletes, then each create, a retry's followed by the delete
// of the attempt it supersedes.
func printActions(out io.Writer, p *scheduler.Plan, queue string) error {
	w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	// With job.requestsFrom each create's worker requests are its row's: a column of their own.
	sized := slices.ContainsFunc(p.Creates, func(c scheduler.Create) bool { return c.Requests != nil })
	col := func(s string) string {
		if !sized {
			return ""
		}
		return s + "\t"
	}
	fmt.Fprintln(w, "ACTION\tJOB\tTASK\tATTEMPT\t"+col("REQUESTS")+"WHY")
	del := func(d scheduler.JobStatus) {
		fmt.Fprintf(w, "delete\t%s\t%q\t%d\t%s%s %s: %s\n", printable(d.Name), d.Key, d.Attempt, col("-"), d.State, stamp(d.FinishedAt), printable(d.Delete))
	}
	for _, d := range p.Deletes() {
		if d.Queue == queue && d.Delete != scheduler.DeleteRetried {
			del(d)
		}
	}
	for _, c := range p.Creates {
		if c.Queue != queue {
			continue
		}
		why := "new row"
		if c.Supersedes != nil {
			why = fmt.Sprintf("retry: attempt %d failed (%s)", c.Supersedes.Attempt, printable(c.Supersedes.Reason))
		}
		fmt.Fprintf(w, "create\t%s\t%q\t%d\t%s%s\n", c.Job.Name, c.Key, c.Attempt, col(requestsText(c.Requests)), why)
		if c.Supersedes != nil {
			del(*c.Supersedes)
		}
	}
	for _, sk := range p.Skipped {
		if sk.Queue != queue {
			continue
		}
		fmt.Fprintf(w, "skip\t-\t%q\t-\t%s%s\n", sk.Key, col("-"), printable(sk.Reason))
	}
	return w.Flush()
}

// requestsText is a create's requests in words, by resource: "cpu=2,memory=1Gi" ("-" for none: the template's).
func requestsText(l corev1.ResourceList) string {
	if len(l) == 0 {
		return "-"
	}
	var parts []string
	for _, r := range slices.Sorted(maps.Keys(l)) {
		v := l[r]
		parts = append(parts, printable(string(r))+"="+v.String())
	}
	return strings.Join(parts, ",")
}
