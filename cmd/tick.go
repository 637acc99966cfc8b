package cmd

import (
	"context"

	"github.com/spf13/cobra"

	"github.com/jobsched/jobsched/pkg/scheduler"
)

func newTickCmd(g *globalOptions) *cobra.Command {
	return &cobra.Command{
		Use:   "tick",
		Short: "One full pass: delete finished Jobs, then create a Job for each new row there is room for",
		Args:  noArgs,
		RunE:  func(cmd *cobra.Command, _ []string) error { return g.executePass(cmd.Context(), false) },
	}
}

// executePass is tick, and gc when gcOnly: the pass with its writes. gc opens no database and lists only Jobs.
func (g *globalOptions) executePass(ctx context.Context, gcOnly bool) error {
	cfg, err := g.loadConfig()
	if err != nil {
		return err
	}
	s, closeFn, err := g.newScheduler(cfg, schedulerOptions{source: !gcOnly})
	if err != nil {
		return err
	}
	defer closeFn()
	mode := scheduler.Tick
	if gcOnly {
		mode = scheduler.GC
	}
	_, _, err = s.Run(ctx, mode)
	return err
}
