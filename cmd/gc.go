package cmd

import (
	"github.com/spf13/cobra"

	"github.com/jobsched/jobsched/pkg/config"
	"github.com/jobsched/jobsched/pkg/scheduler"
)

func newGCCmd(g *globalOptions) *cobra.Command {
	return &cobra.Command{
		Use:   "gc",
		Short: "Only delete this scheduler's finished Jobs past their retention (no database is opened)",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := g.loadConfig()
			if err != nil {
				return err
			}
			cfg.Limits.Capacity = config.CapacityOff // gc creates nothing: no need to look at nodes
			s, closeFn, err := g.newScheduler(cfg, schedulerOptions{})
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
