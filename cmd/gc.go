package cmd

import "github.com/spf13/cobra"

func newGCCmd(g *globalOptions) *cobra.Command {
	return &cobra.Command{
		Use:   "gc",
		Short: "Only delete this scheduler's finished Jobs past their retention (no database is opened)",
		Args:  cobra.NoArgs,
		RunE:  func(cmd *cobra.Command, _ []string) error { return g.executePass(cmd.Context(), true) },
	}
}
