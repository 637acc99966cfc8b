package cmd

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/jobsched/jobsched/pkg/version"
)

// examples are the Examples section of each command's help, by command name. A test runs every line that starts
// with "jobsched" through the flag parser, so an example cannot name a flag that does not exist.
var examples = map[string]string{
	"jobsched": `  # Try the example offline: the Jobs it would create from its sample rows, with no database and no cluster
  jobsched dry-run --offline --config manifests/examples/reports/jobsched.yaml --rows manifests/examples/reports/sample-rows.jsonl -o yaml

  # Shell completion of commands, flags and their values (also zsh, fish, powershell)
  source <(jobsched completion bash)`,

	"tick": `  # One pass with ./jobsched.yaml against the current kubeconfig context; the DSN from $DATABASE_URL
  jobsched tick

  # As the CronJob runs it: the mounted config, JSON logs, refilling the room its Jobs free for 2 minutes
  jobsched tick --config /etc/jobsched/jobsched.yaml --log-format json --fill-for 2m --timeout 20s

  # Another cluster and namespace
  jobsched tick --config jobsched.yaml --context prod -n batch`,

	"gc": `  # Only delete this scheduler's finished Jobs past their retention; needs no database
  jobsched gc --config jobsched.yaml

  # See first what it would delete (the "delete" lines)
  jobsched dry-run --config jobsched.yaml`,

	"status": `  # Backlog, Jobs by state, slots, capacity, and what the next tick would do
  jobsched status --config jobsched.yaml --context my-cluster

  # The same as a document for scripts
  jobsched status --config jobsched.yaml -o json

  # One task: its Jobs and attempts, their pods, its row's variables, and why it waits
  jobsched status --config jobsched.yaml task-42

  # Redraw every 5 seconds until Ctrl-C
  jobsched status --config jobsched.yaml -w`,

	"dry-run": `  # The plan tick would carry out now, with no writes
  jobsched dry-run --config jobsched.yaml

  # The exact Jobs of a config change from sample rows, with no database and no cluster (CI)
  jobsched dry-run --config jobsched.yaml --offline --rows sample-rows.jsonl -o yaml

  # Let the API server validate and admit the planned Jobs (Pod Security, quota, webhooks) without storing them
  jobsched dry-run --config jobsched.yaml --server

  # Just the Jobs, as a v1 List that kubectl takes
  jobsched dry-run --config jobsched.yaml -o jobs | kubectl apply --dry-run=server -f -`,

	"retry": `  # Start a dead task again at attempt 1 (its row must still be selected by the query)
  jobsched retry --config jobsched.yaml task-42

  # See first what it would delete, then retry every dead task
  jobsched retry --config jobsched.yaml --all-dead --dry-run
  jobsched retry --config jobsched.yaml --all-dead`,

	"version": `  jobsched version
  jobsched version -o json
  jobsched --version`,
}

// outputFormats are the values each command's -o/--output takes, offered by shell completion.
var outputFormats = map[string][]string{
	"status":  {"table", "json", "yaml"},
	"dry-run": {"table", "json", "yaml", "jobs"},
	"version": versionOutputs,
}

// logLevels and logFormats are the values of --log-level and --log-format.
var (
	logLevels  = []string{"debug", "info", "warn", "error"}
	logFormats = []string{"json", "console"}
)

// addHelp gives the root command its --version flag, every command its examples, and the flags with a fixed set of
// values their shell completion. A command that already has an Example or a completion keeps it.
func addHelp(root *cobra.Command) {
	root.SetHelpCommand(&cobra.Command{
		Use:   "help [command | topic]",
		Short: "Help about any command, or a topic: the rules a pass follows (see Additional help topics)",
		ValidArgsFunction: func(c *cobra.Command, args []string, _ string) ([]string, cobra.ShellCompDirective) {
			if len(args) > 0 {
				return nil, cobra.ShellCompDirectiveNoFileComp
			}
			var names []string
			for _, sub := range c.Root().Commands() {
				if sub.IsAvailableCommand() || sub.IsAdditionalHelpTopicCommand() {
					names = append(names, sub.Name()+"\t"+sub.Short)
				}
			}
			return names, cobra.ShellCompDirectiveNoFileComp
		},
		RunE: func(c *cobra.Command, args []string) error {
			target, rest, err := c.Root().Find(args)
			if err != nil || target == nil || len(rest) > 0 {
				return usageError{fmt.Errorf("help: unknown command %q for %q; the commands are in jobsched --help",
					strings.Join(args, " "), c.Root().Name())}
			}
			return target.Help()
		},
	})
	for _, t := range allTopics() {
		// A command with no Run is a help topic: cobra lists it apart and `help` prints its Long alone.
		root.AddCommand(&cobra.Command{Use: t.name, Short: t.short, Long: t.long})
	}
	root.InitDefaultHelpCmd()
	root.InitDefaultCompletionCmd()
	for _, c := range root.Commands() {
		if c.Name() != "completion" {
			continue
		}
		shells := make([]string, 0, len(c.Commands()))
		for _, sh := range c.Commands() {
			shells = append(shells, sh.Name())
			sh.Args = func(_ *cobra.Command, args []string) error {
				if len(args) > 0 {
					return fmt.Errorf("completion takes one shell (%s), not %d arguments", strings.Join(shells, ", "), len(args)+1)
				}
				return nil
			}
		}
		c.Args = func(_ *cobra.Command, args []string) error {
			if len(args) > 0 {
				return fmt.Errorf("completion: %q is not one of %s", args[0], strings.Join(shells, ", "))
			}
			return nil
		}
		c.RunE = func(c *cobra.Command, _ []string) error { return c.Help() }
	}
	root.Version = version.Get().String()
	root.SetVersionTemplate("jobsched {{.Version}}\n")
	for _, c := range append([]*cobra.Command{root}, root.Commands()...) {
		if c.Example == "" {
			c.Example = examples[c.Name()]
		}
		if formats, ok := outputFormats[c.Name()]; ok && c.Flags().Lookup("output") != nil {
			if _, exists := c.GetFlagCompletionFunc("output"); !exists {
				_ = c.RegisterFlagCompletionFunc("output", cobra.FixedCompletions(formats, cobra.ShellCompDirectiveNoFileComp))
			}
		}
	}
	_ = root.RegisterFlagCompletionFunc("log-level", cobra.FixedCompletions(logLevels, cobra.ShellCompDirectiveNoFileComp))
	_ = root.RegisterFlagCompletionFunc("log-format", cobra.FixedCompletions(logFormats, cobra.ShellCompDirectiveNoFileComp))
}
