// Package cmd is jobsched's command line: one file per subcommand, each turning its flags into a call of a pkg
// package.
package cmd

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/rs/zerolog"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/dynamic"

	"github.com/jobsched/jobsched/pkg/capacity"
	"github.com/jobsched/jobsched/pkg/config"
	"github.com/jobsched/jobsched/pkg/kube"
	"github.com/jobsched/jobsched/pkg/pushurl"
	"github.com/jobsched/jobsched/pkg/render"
	"github.com/jobsched/jobsched/pkg/scheduler"
	"github.com/jobsched/jobsched/pkg/source"
)

// Exit codes.
const (
	exitOK     = 0
	exitFailed = 1 // something failed at run time; the rest of the pass still happened
	exitUsage  = 2 // bad usage or configuration; nothing was touched
)

// usageError is bad usage found once a command's RunE runs (a word that is no command, the configuration's
// --rows files, a key that is no dead task). Errors before RunE starts are bad usage without it (see runRoot).
type usageError struct{ error }

// Execute runs the command line and returns the process exit code. Only main exits.
func Execute(ctx context.Context, args []string) int {
	gcForListing()
	return run(ctx, args, os.Stdout, os.Stderr)
}

func run(ctx context.Context, args []string, out, errOut io.Writer) int {
	return runWith(ctx, args, out, errOut, kube.NewClient)
}

// newKubeFunc builds the Kubernetes client; tests give a fake one.
type newKubeFunc func(kube.Options) (kube.Interface, string, error)

func runWith(ctx context.Context, args []string, out, errOut io.Writer, newKube newKubeFunc) int {
	return runRoot(ctx, newRoot(out, errOut, newKube), args, errOut)
}

// runRoot runs root with args and returns the exit code; errors go to errOut. Which errors are bad usage (exit 2)
// is decided here: every error before a command's RunE starts (cobra's flag parsing, Args and flag groups, the
// PersistentPreRunE and PreRunE that validate flags), and a usageError or a config.Error that RunE returns; any
// other error is a failure at run time (exit 1). An error before RunE names the command whose --help tells more.
func runRoot(ctx context.Context, root *cobra.Command, args []string, errOut io.Writer) int {
	ran := false
	markRun(root, &ran)
	root.SetArgs(args)
	cmd, err := root.ExecuteContextC(ctx)
	if err == nil {
		return exitOK
	}
	if !ran && cmd != nil {
		err = fmt.Errorf("%w (see %s --help)", err, cmd.CommandPath())
	}
	if !errors.As(err, new(loggedError)) {
		printError(root, errOut, err)
	}
	var ue usageError
	if !ran || errors.As(err, &ue) || config.IsConfigError(err) {
		return exitUsage
	}
	return exitFailed
}

// markRun sets *ran when the RunE of c or of a command under it starts.
func markRun(c *cobra.Command, ran *bool) {
	if run := c.RunE; run != nil {
		c.RunE = func(cmd *cobra.Command, args []string) error {
			*ran = true
			return run(cmd, args)
		}
	}
	for _, sub := range c.Commands() {
		markRun(sub, ran)
	}
}

// loggedError is an error the pass's `pass done` line already carries: it is not printed a second time.
type loggedError struct{ error }

func (e loggedError) Unwrap() error { return e.error }

// logged marks the error of a pass (scheduler.Run logs it in its `pass done` line).
func logged(err error) error {
	if err == nil {
		return nil
	}
	return loggedError{err}
}

// printError prints the command's error once, in the log format chosen: a JSON line (level error) when the logs are
// JSON, so that a log shipper reads only JSON; else "Error: ..." with its control characters escaped line by line.
func printError(root *cobra.Command, errOut io.Writer, err error) {
	g := &globalOptions{logLevel: "error", errOut: errOut}
	if f := root.PersistentFlags().Lookup("log-format"); f != nil {
		g.logFormat = f.Value.String()
	}
	if g.logFormat == "json" || (g.logFormat == "" && !isTerminal(errOut)) {
		if log, lerr := g.logger(); lerr == nil {
			log.Error().Err(err).Msg("jobsched failed")
			return
		}
	}
	lines := strings.Split(err.Error(), "\n")
	for i, l := range lines {
		lines[i] = printable(l)
	}
	fmt.Fprintln(errOut, "Error:", strings.Join(lines, "\n"))
}

// globalOptions are the flags every subcommand shares (kubectl conventions).
type globalOptions struct {
	configFile string
	kube       kube.Options
	newKube    newKubeFunc
	// newDynamic builds the client for the objects of other APIs a capacity mode reads (its Needs().Dynamic); nil: none.
	newDynamic func(kube.Options) (dynamic.Interface, error)
	namespace  string
	logLevel   string
	logFormat  string
	timeout    time.Duration
	out        io.Writer
	errOut     io.Writer

	pushgateway string // --pushgateway: overrides metrics.pushgateway

	leaseDuration time.Duration // tick's --lease-duration
}

// DefaultTimeout bounds a pass: below the shipped CronJob's activeDeadlineSeconds (170, manifests/base/cronjob.yaml
// and the chart's values.yaml), so that a pass ends with its `pass done` line before the kubelet kills it.
const DefaultTimeout = 2 * time.Minute

func newRootCmd(out, errOut io.Writer) *cobra.Command {
	return newRoot(out, errOut, kube.NewClient)
}

func newRoot(out, errOut io.Writer, newKube newKubeFunc) *cobra.Command {
	g := &globalOptions{out: out, errOut: errOut, newKube: newKube, newDynamic: kube.NewDynamic}
	cmd := &cobra.Command{
		Use:   "jobsched",
		Short: "Turn rows in a PostgreSQL table into Kubernetes Jobs, one Job per row, in one stateless pass",
		Long: `jobsched reads the rows a query selects and creates one Kubernetes Job per row, with the row's columns as
environment variables. Each run is one pass: delete finished Jobs, look at what runs and what fits, read only the
rows there is room for, create their Jobs, exit. It never writes to the database and keeps no state.`,
		SilenceUsage:               true,
		SilenceErrors:              true,
		SuggestionsMinimumDistance: 2,
		// The root runs only for a word that is no subcommand: that is bad usage (exit 2), not a run-time failure.
		Args: cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 {
				return cmd.Help()
			}
			msg := fmt.Sprintf("unknown command %q for %q", args[0], cmd.CommandPath())
			if s := cmd.SuggestionsFor(args[0]); len(s) > 0 {
				msg += "; did you mean " + strings.Join(s, " or ") + "?"
			}
			return usageError{errors.New(msg)}
		},
		PersistentPreRunE: func(cmd *cobra.Command, _ []string) error {
			logger, err := g.logger()
			if err != nil {
				return err
			}
			if g.namespace != "" {
				if msgs := validation.IsDNS1123Label(g.namespace); len(msgs) > 0 {
					return fmt.Errorf("-n/--namespace: %q is not a valid namespace: %s", g.namespace, strings.Join(msgs, "; "))
				}
			}
			if err := pushurl.Validate(g.pushgateway); err != nil {
				return fmt.Errorf("--pushgateway: %w", err)
			}
			if q := float64(g.kube.QPS); math.IsNaN(q) || math.IsInf(q, 0) {
				return fmt.Errorf("--kube-qps: %v is not a finite number, e.g. --kube-qps 20", q)
			}
			if g.kube.QPS < 0 {
				return fmt.Errorf("--kube-qps: must not be negative (0: no client-side cap), not %v", g.kube.QPS)
			}
			if g.kube.QPS > 0 && g.kube.Burst < 1 {
				return fmt.Errorf("--kube-burst: must be at least 1 with --kube-qps %v, e.g. --kube-burst 100", g.kube.QPS)
			}
			if g.timeout <= 0 {
				return fmt.Errorf("--timeout: must be positive, not %s", g.timeout)
			}
			cmd.SetContext(logger.WithContext(cmd.Context()))
			return nil
		},
	}
	cmd.SetOut(out)
	cmd.SetErr(errOut)
	cmd.SetFlagErrorFunc(flagError)

	defaultConfig := "jobsched.yaml"
	if env := os.Getenv("JOBSCHED_CONFIG"); env != "" {
		defaultConfig = env
	}
	f := cmd.PersistentFlags()
	f.StringVar(&g.configFile, "config", defaultConfig, "configuration file (env JOBSCHED_CONFIG)")
	f.StringVar(&g.kube.Kubeconfig, "kubeconfig", "", "path to the kubeconfig file (default: in-cluster, else $KUBECONFIG, else ~/.kube/config)")
	f.StringVar(&g.kube.Context, "context", "", "the kubeconfig context to use")
	f.StringVarP(&g.namespace, "namespace", "n", "", "namespace of the Jobs (overrides the config's namespace)")
	f.StringVar(&g.logLevel, "log-level", "info", "log level: debug, info, warn, error")
	f.StringVar(&g.logFormat, "log-format", "", "log format: json or console (default: console when stderr is a terminal, else json)")
	f.Float32Var(&g.kube.QPS, "kube-qps", 0, "a client-side cap on queries per second to the API server; 0: none (the API server's Priority and Fairness paces jobsched, and its 429s are retried as it asks)")
	f.IntVar(&g.kube.Burst, "kube-burst", 100, "burst of queries above --kube-qps (with --kube-qps > 0)")
	f.StringVar(&g.pushgateway, "pushgateway", "", "tick and gc push each pass's metrics to this Prometheus Pushgateway URL (overrides metrics.pushgateway)")
	f.DurationVar(&g.timeout, "timeout", DefaultTimeout, "a pass ends after this long, with its \"pass done\" line (keep it below the CronJob's activeDeadlineSeconds)")

	cmd.AddCommand(newTickCmd(g), newGCCmd(g), newStatusCmd(g), newDryRunCmd(g), newRetryCmd(g), newVersionCmd(g))
	addHelp(cmd) // --version, Examples, completion of flag values (help.go)
	return cmd
}

// valueKinds say, by pflag type, what a flag's value must be and an example of it after the flag's name.
var valueKinds = map[string]struct{ kind, example string }{
	"float32":  {"a number", " 20"},
	"float64":  {"a number", " 20"},
	"int":      {"a whole number", " 100"},
	"duration": {"a duration", " 90s"},
	"bool":     {"true or false", "=true"}, // a bool flag takes its value after "=" only
}

// flagError says in one sentence what is wrong with a flag's value (pflag's error names strconv or time).
func flagError(_ *cobra.Command, err error) error {
	var invalid *pflag.InvalidValueError
	if !errors.As(err, &invalid) {
		return err
	}
	k, ok := valueKinds[invalid.GetFlag().Value.Type()]
	if !ok {
		return err
	}
	name := "--" + invalid.GetFlag().Name
	return fmt.Errorf("%s: %q is not %s, e.g. %s%s", name, invalid.GetValue(), k.kind, name, k.example)
}

func (g *globalOptions) logger() (zerolog.Logger, error) {
	// Only the levels of logLevels: none silences errors (zerolog's fatal, panic, disabled and numbers would, and
	// a failing pass would exit 1 with nothing said).
	level, err := zerolog.ParseLevel(g.logLevel)
	if err != nil || !slices.Contains(logLevels, g.logLevel) {
		return zerolog.Logger{}, fmt.Errorf("--log-level: %q is not one of debug, info, warn, error", g.logLevel)
	}
	w := g.errOut
	// zerolog quotes the fields of a console line, not its message, which may hold a row's text (a skip reason).
	console := zerolog.ConsoleWriter{Out: g.errOut, TimeFormat: time.TimeOnly,
		FormatMessage: func(i any) string { return printable(fmt.Sprint(i)) }}
	switch g.logFormat {
	case "json":
	case "console":
		w = console
	case "":
		if isTerminal(g.errOut) {
			w = console
		}
	default:
		return zerolog.Logger{}, fmt.Errorf("--log-format: %q is not json or console", g.logFormat)
	}
	return zerolog.New(w).Level(level).With().Timestamp().Logger(), nil
}

func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

// loadConfig reads the configuration under ctx; the namespace comes from -n, else the config, else the kubeconfig
// context.
func (g *globalOptions) loadConfig(ctx context.Context) (*config.Config, error) {
	return config.LoadContext(ctx, g.configFile, g.namespace)
}

// reading is ctx for reading the inputs (the config, its templates, source.dsnFile, --rows): it ends with ctx
// (SIGTERM) or after --timeout, so that a FIFO or a pipe that stays open ends the run.
func (g *globalOptions) reading(ctx context.Context) (context.Context, context.CancelFunc) {
	if g.timeout <= 0 { // not from the flags, which take only a positive --timeout
		return context.WithCancel(ctx)
	}
	return context.WithTimeoutCause(ctx, g.timeout, fmt.Errorf("--timeout %s passed", g.timeout))
}

// schedulerOptions say which parts of a scheduler a subcommand needs.
type schedulerOptions struct {
	source   bool      // open the row source
	rowsFile string    // read rows from this JSON-lines file instead of PostgreSQL ("-": stdin)
	stdin    io.Reader // standard input, for --rows -
	offline  bool      // contact no cluster: it is taken as empty
}

// newScheduler loads the configuration (exit 2 before anything is contacted), then makes the clients: a Renderer
// and a Source per queue, the queues' sources on one database pool. The returned close func releases the pool.
func (g *globalOptions) newScheduler(ctx context.Context, o schedulerOptions) (*scheduler.Scheduler, func(), error) {
	ctx, cancel := g.reading(ctx)
	defer cancel()
	cfg, err := g.loadConfig(ctx)
	if err != nil {
		return nil, nil, err
	}
	s := &scheduler.Scheduler{Config: cfg, Now: time.Now, Timeout: g.timeout}
	s.Queues = make([]scheduler.Queue, len(cfg.AllQueues()))
	closeFn := func() {}
	if o.source {
		var err error
		if o.rowsFile != "" {
			err = openFiles(ctx, cfg, s.Queues, o)
		} else {
			closeFn, err = openPostgres(ctx, cfg, s.Queues)
		}
		if err != nil {
			return nil, nil, err
		}
	}
	if !o.offline {
		c, ns, err := g.newKube(g.kube)
		if err != nil {
			closeFn()
			return nil, nil, &config.Error{Err: err}
		}
		s.Kube = c
		if cfg.Namespace == "" {
			cfg.Namespace = ns
		}
		if capacity.ModeOf(cfg.Limits.Capacity).Needs().Dynamic && g.newDynamic != nil {
			if s.Dynamic, err = g.newDynamic(g.kube); err != nil {
				closeFn()
				return nil, nil, &config.Error{Err: err}
			}
		}
	} else if cfg.Namespace == "" {
		cfg.Namespace = "default"
	}
	// The renderers see the namespace as it is now: a queue's view (config.QueueConfig) is a copy.
	for i := range s.Queues {
		s.Queues[i].Renderer = render.New(cfg.QueueConfig(i), os.Environ())
	}
	if err := refuseCarriedPassword(ctx, cfg, s.Queues); err != nil {
		closeFn()
		return nil, nil, err
	}
	return s, closeFn, nil
}

// refuseCarriedPassword is a configuration error when an env.passthrough variable holds the database's password
// (APP_DB=postgres://jobsched:PASSWORD@…): every Job, dry-run -o yaml and status KEY would show it. The names
// alone cannot tell, so the values are compared.
func refuseCarriedPassword(ctx context.Context, cfg *config.Config, qs []scheduler.Queue) error {
	passes := false
	for i := range qs {
		passes = passes || len(cfg.QueueConfig(i).Env.Passthrough) > 0
	}
	if !passes {
		return nil
	}
	pw := source.Password(ctx, cfg)
	for _, q := range qs {
		if name := q.Renderer.Carrying(pw); name != "" {
			return &config.Error{Err: fmt.Errorf("env.passthrough: %s holds the database's password (the DSN's): a Job must "+
				"not carry it; give the workers their own credentials in the template (valueFrom.secretKeyRef, envFrom), "+
				"and leave %s out of env.passthrough", name, name)}
		}
	}
	return nil
}

// openPostgres gives each queue its source, all on one pool; the close func releases it.
func openPostgres(ctx context.Context, cfg *config.Config, qs []scheduler.Queue) (func(), error) {
	srcs, closeFn, err := source.Postgres(ctx, cfg)
	if err != nil {
		return nil, err
	}
	for i, src := range srcs {
		qs[i].Source = src
	}
	return closeFn, nil
}

// openFiles gives the queues their --rows files: the one file of a configuration without queues:, else
// QUEUE=FILE,QUEUE=FILE (a queue without one reads no row).
func openFiles(ctx context.Context, cfg *config.Config, qs []scheduler.Queue, o schedulerOptions) error {
	read := func(i int, file string) error {
		f, err := source.File(ctx, cfg, i, file, o.stdin)
		if err == nil {
			qs[i].Source = f
		}
		return err
	}
	all := cfg.AllQueues()
	if all[0].Implicit {
		return read(0, o.rowsFile)
	}
	for _, part := range strings.Split(o.rowsFile, ",") {
		name, file, ok := strings.Cut(part, "=")
		i := slices.IndexFunc(all, func(q config.Queue) bool { return q.Name == name })
		if !ok || i < 0 || file == "" {
			return usageError{fmt.Errorf("--rows: with queues: give QUEUE=FILE for each queue that reads rows, separated by commas (e.g. %s=rows.jsonl), not %q", all[0].Name, part)}
		}
		if err := read(i, file); err != nil {
			return err
		}
	}
	return nil
}
