package cmd

import (
	"errors"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/jobsched/jobsched/pkg/scheduler"
)

func newRetryCmd(g *globalOptions) *cobra.Command {
	var allDead, dryRun bool
	cmd := &cobra.Command{
		Use:   "retry KEY... | --all-dead",
		Short: "Start dead tasks again at attempt 1: delete their last failed Job (the record); the next tick retries them",
		Long: `retry deletes the record of each dead task named (its last failed Job), so that the next pass starts the
task again at attempt 1, if the query still selects its row. A key that is not a dead task of this scheduler is
an error (exit 2) and nothing is deleted. --dry-run says what it would delete.`,
		Args: func(_ *cobra.Command, keys []string) error {
			if allDead == (len(keys) > 0) {
				return errors.New("give the keys of dead tasks, or --all-dead (not both)")
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, keys []string) error {
			s, closeFn, err := g.newScheduler(cmd.Context(), schedulerOptions{})
			if err != nil {
				return err
			}
			defer closeFn()
			records, err := s.ResetDead(cmd.Context(), keys, allDead, dryRun)
			var notDead *scheduler.NotDeadError
			if errors.As(err, &notDead) {
				return usageError{err}
			}
			verb := "deleted"
			if dryRun {
				verb = "would delete"
			}
			for _, j := range records {
				fmt.Fprintf(g.out, "%s %s (task %q, attempt %d): the next tick starts it again at attempt 1\n", verb, printable(j.Name), j.Key, j.Attempt)
			}
			return err
		},
	}
	cmd.Flags().BoolVar(&allDead, "all-dead", false, "retry every dead task of this scheduler")
	cmd.Flags().BoolVar(&dryRun, "dry-run", false, "only say what would be deleted")
	return cmd
}
