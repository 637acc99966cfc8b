package cmd

import (
	"errors"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/jobsched/jobsched/pkg/config"
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
