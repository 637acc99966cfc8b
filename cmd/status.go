package cmd

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"

	"github.com/jobsched/jobsched/pkg/report"
	"github.com/jobsched/jobsched/pkg/scheduler"
)

type statusOptions struct {
	output   string
	watch    bool
	interval time.Duration
}

func newStatusCmd(g *globalOptions) *cobra.Command {
	o := &statusOptions{}
	cmd := &cobra.Command{
		Use:   "status [TASK-KEY]",
		Short: "Read-only report: backlog, Jobs by state, retries, slots, capacity and what the next tick would do; or one task",
		Long: `status reports on the scheduler: backlog, Jobs by state, the tasks in backoff and the dead ones, slots,
capacity and what the next tick would do. With a task key it shows that task: its Jobs and attempts, their pods
(phase, node, reason), the variables its row would get now, and why it waits. It writes nothing.`,
		Args: cobra.MaximumNArgs(1),
		PreRunE: func(*cobra.Command, []string) error {
			if o.output != "table" && o.output != "json" && o.output != "yaml" {
				return fmt.Errorf("-o: %q is not table, json or yaml", o.output)
			}
			if o.interval <= 0 {
				return fmt.Errorf("--interval: must be positive, not %s", o.interval)
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			s, closeFn, err := g.newScheduler(cmd.Context(), schedulerOptions{source: true})
			if err != nil {
				return err
			}
			defer closeFn()
			ctx := scheduler.WithRunLog(cmd.Context(), s.Config)
			if len(args) == 1 {
				key := args[0]
				return o.run(ctx, g.out, func(ctx context.Context) (any, error) { return report.TaskViewOf(ctx, s, key) })
			}
			return o.run(ctx, g.out, func(ctx context.Context) (any, error) { return report.StatusOf(ctx, s) })
		},
	}
	cmd.Flags().StringVarP(&o.output, "output", "o", "table", "output format: table, json or yaml")
	cmd.Flags().BoolVarP(&o.watch, "watch", "w", false, "report again every --interval until interrupted")
	cmd.Flags().DurationVar(&o.interval, "interval", 5*time.Second, "how often -w reports")
	return cmd
}

// run reports once, or with -w again every interval until ctx ends (Ctrl-C): a table is redrawn in place on a
// terminal, and separated by a line elsewhere; documents follow each other (a YAML stream with -o yaml).
func (o *statusOptions) run(ctx context.Context, out io.Writer, once func(context.Context) (any, error)) error {
	for n := 0; ; n++ {
		st, err := once(ctx)
		if err != nil {
			if n > 0 && ctx.Err() != nil {
				return nil //nolint:nilerr // interrupted while watching: the documents so far are the output
			}
			return err
		}
		switch {
		case o.output != "table":
			if n > 0 && o.output == "yaml" {
				fmt.Fprintln(out, "---")
			}
			err = printReport(out, o.output, st)
		default:
			if n > 0 {
				if isTerminal(out) {
					fmt.Fprint(out, "\033[H\033[2J") // home and clear: redraw in place
				} else {
					fmt.Fprintf(out, "\n--- %s\n", time.Now().UTC().Format(time.RFC3339))
				}
			}
			switch st := st.(type) {
			case *report.Status:
				err = printStatus(out, st)
			case *report.TaskView:
				err = printTask(out, st)
			}
		}
		if err != nil || !o.watch {
			return err
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(o.interval):
		}
	}
}
