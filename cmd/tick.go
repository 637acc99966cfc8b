package cmd

import (
	"github.com/spf13/cobra"

	"github.com/jobsched/jobsched/pkg/scheduler"
)

func newTickCmd(g *globalOptions) *cobra.Command {
	return &cobra.Command{
		Use:   "tick",
		Short: "One full pass: delete finished Jobs, then create a Job for each new row there is room for",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := g.loadConfig()
			if err != nil {
				return err
			}
			s, closeFn, err := g.newScheduler(cfg, schedulerOptions{source: true})
			if err != nil {
				return err
			}
			defer closeFn()
			ctx := cmd.Context()
			return runPass(ctx, s, func(p *scheduler.Plan) (scheduler.Summary, error) {
				return s.Execute(ctx, p, false)
			})
		},
	}
}
