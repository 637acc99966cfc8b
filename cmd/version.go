package cmd

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/jobsched/jobsched/pkg/version"
)

func newVersionCmd(g *globalOptions) *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the version",
		Args:  noArgs,
		RunE: func(*cobra.Command, []string) error {
			_, err := fmt.Fprintln(g.out, version.Version)
			return err
		},
	}
}
