// Package config reads jobsched.yaml, with the Job template it names, into a validated Config.
package config

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/utils/ptr"

	"github.com/jobsched/jobsched/pkg/input"
	"github.com/jobsched/jobsched/pkg/kueue"
	"github.com/jobsched/jobsched/pkg/pushurl"
	"github.com/jobsched/jobsched/pkg/rate"
	"github.com/jobsched/jobsched/pkg/strictyaml"
)

// Capacity modes of limits.capacity.
const (
	CapacityNodes Capacity = "nodes"
	CapacityQuota Capacity = "quota"
	CapacityOff   Capacity = "off"
	// CapacityKueue leaves admission to Kueue: every Job carries kueue.localQueue's queue-name label, Kueue's
	// webhook suspends it and Kueue admits it when its ClusterQueue has quota; jobsched bounds the Jobs that wait
	// (limits.maxQueued) instead of fitting them onto nodes itself.
	CapacityKueue Capacity = "kueue"
	// CapacityAutoscale counts, beyond what fits on the nodes (as nodes), what the cluster's autoscaler (Karpenter's
	// NodePools, the cluster-autoscaler's node groups) can still add for the template, and lets at most
	// limits.maxPending of the Jobs' pods wait for new nodes at once.
	CapacityAutoscale Capacity = "autoscale"
)

// Config is jobsched.yaml.
type Config struct {
	// APIVersion and Kind version the file (optional: absent is APIVersion, Kind).
	APIVersion string `json:"apiVersion,omitempty"`
	Kind       string `json:"kind,omitempty"`
	Name       string `json:"name"`
	Namespace  string `json:"namespace,omitempty"`
	Source     Source `json:"source"`
	Job        Job    `json:"job"`
	Env        Env    `json:"env"`
	Limits     Limits `json:"limits"`
	GC         GC     `json:"gc"`
	Retry      Retry  `json:"retry"`
	// Kueue is read with limits.capacity: kueue only.
	Kueue *Kueue `json:"kueue,omitempty"`

	// Queues are the install's queues. After Parse it always holds at least one, resolved (inheritance and defaults
	// applied, template loaded): a file without queues: holds one implicit queue, named after the install and made
	// of the top-level source, job, env, retry, gc and kueue.
	Queues []Queue `json:"queues,omitempty"`

	// Metrics says where each pass pushes its metrics.
	Metrics Metrics `json:"metrics"`

	// File is the path the configuration was read from; Template is the parsed job.template.
	File     string       `json:"-"`
	Template *batchv1.Job `json:"-"`
	// QueueName is set in the view QueueConfig returns of an explicit queue: the value of its Jobs' queue label.
	QueueName string `json:"-"`
}

// Source says where rows come from.
type Source struct {
	DSNEnv  string          `json:"dsnEnv,omitempty"`
	DSNFile string          `json:"dsnFile,omitempty"`
	Query   string          `json:"query"`
	Key     string          `json:"key"`
	Timeout metav1.Duration `json:"timeout,omitempty"`
	// CancelQuery, when set, returns the keys of tasks to cancel (a column named Key): a pass asks it only about the
	// keys it is about to run or holds an unfinished Job for (see `jobsched help cancel`).
	CancelQuery string `json:"cancelQuery,omitempty"`
	// Notify and Poll are the install's (the top-level source): during tick --fill-for, a notification on the
	// channel Notify (LISTEN) runs a pass at once, and while the run waits a pass runs every Poll; with either the
	// run covers its whole --fill-for (`jobsched help pass`).
	Notify string          `json:"notify,omitempty"`
	Poll   metav1.Duration `json:"poll,omitempty"`
}

// Wakes says a fill run wakes on its own (source.notify or source.poll), so it covers its whole --fill-for.
func (c *Config) Wakes() bool { return c.Source.Notify != "" || c.Source.Poll.Duration > 0 }

// Job says how a row becomes a Job.
type Job struct {
	Template   string `json:"template"`
	NamePrefix string `json:"namePrefix,omitempty"`
	Container  string `json:"container,omitempty"`
	// RequestsFrom names, per resource, the column whose value is the worker container's request (sizes.go);
	// MaxRequests is the most a row may ask of each, required for each resource of RequestsFrom.
	RequestsFrom map[corev1.ResourceName]string            `json:"requestsFrom,omitempty"`
	MaxRequests  map[corev1.ResourceName]resource.Quantity `json:"maxRequests,omitempty"`
	// Backfill lets rows behind a row that does not fit now pass it, until it has waited MaxWait (sizes.go).
	Backfill *Backfill `json:"backfill,omitempty"`
}

// isZero says no job key is set.
func (j Job) isZero() bool {
	return j.Template == "" && j.NamePrefix == "" && j.Container == "" && j.RequestsFrom == nil && j.MaxRequests == nil && j.Backfill == nil
}

// Env says which environment variables a Job gets.
type Env struct {
	Prefix      string   `json:"prefix,omitempty"`
	Columns     []string `json:"columns,omitempty"`
	Passthrough []string `json:"passthrough,omitempty"`
}

// Limits bound what one pass creates.
type Limits struct {
	MaxActive            *int     `json:"maxActive,omitempty"`
	MaxPerTick           *int     `json:"maxPerTick,omitempty"`
	BlockOnUnschedulable *bool    `json:"blockOnUnschedulable,omitempty"`
	ReserveForTick       *bool    `json:"reserveForTick,omitempty"`
	Capacity             Capacity `json:"capacity,omitempty"`
	// MaxQueued bounds the Jobs Kueue holds suspended (limits.capacity: kueue); default maxPerTick.
	MaxQueued *int `json:"maxQueued,omitempty"`
	// MaxPending bounds the pods that wait for new nodes at once (limits.capacity: autoscale); default maxPerTick.
	MaxPending *int `json:"maxPending,omitempty"`
	// AutoscalerEvents are the writers (an Event's reportingController or source.component) whose Events speak for
	// the autoscaler (limits.capacity: autoscale); default DefaultAutoscalerEvents.
	AutoscalerEvents []string `json:"autoscalerEvents,omitempty"`
	// Rate bounds the creates of the whole install in any window (rate.go).
	Rate *Rate `json:"rate,omitempty"`
}

// Kueue says which Kueue LocalQueue the Jobs go to, and at which WorkloadPriorityClass.
type Kueue struct {
	LocalQueue string `json:"localQueue"`
	// PriorityClass is the WorkloadPriorityClass of every Job; PriorityColumn, when set, names a column whose
	// value is the row's own (an empty or NULL value falls back to PriorityClass).
	PriorityClass  string `json:"priorityClass,omitempty"`
	PriorityColumn string `json:"priorityColumn,omitempty"`
}

// Capacity is limits.capacity. YAML 1.1 reads a bare `off` as the boolean false, so false is taken as "off".
type Capacity string

// Capacities are the values of limits.capacity, in the order the errors name them. Each is a mode of
// pkg/capacity, a package each that registers itself (capacity.Register; pkg/capacity/modes wires them, and a test
// there holds the two lists equal).
func Capacities() []Capacity {
	return []Capacity{CapacityNodes, CapacityQuota, CapacityOff, CapacityKueue, CapacityAutoscale}
}

// CapacityNames are Capacities in words: "nodes, quota, off, kueue, autoscale".
func CapacityNames() string {
	names := make([]string, 0, len(Capacities()))
	for _, c := range Capacities() {
		names = append(names, string(c))
	}
	return strings.Join(names, ", ")
}

// UnmarshalJSON implements json.Unmarshaler.
func (c *Capacity) UnmarshalJSON(data []byte) error {
	if string(data) == "false" {
		*c = CapacityOff
		return nil
	}
	var s string
	if err := json.Unmarshal(data, &s); err != nil {
		return fmt.Errorf("limits.capacity: %s is not one of %s", data, CapacityNames())
	}
	*c = Capacity(s)
	return nil
}

// Retry says how often a failing task is tried, and how long jobsched waits between attempts.
type Retry struct {
	MaxAttempts   *int             `json:"maxAttempts,omitempty"`   // Jobs per task in all; 1 = never retry
	Backoff       *metav1.Duration `json:"backoff,omitempty"`       // wait after attempt 1 failed; doubles per attempt
	MaxBackoff    *metav1.Duration `json:"maxBackoff,omitempty"`    // the longest wait
	DeadRetention metav1.Duration  `json:"deadRetention,omitempty"` // how long a dead task's last Job is kept; 0 = while its row is selected
}

// Metrics says where each pass pushes its metrics (none when empty).
type Metrics struct {
	Pushgateway string `json:"pushgateway,omitempty"` // the Pushgateway's base URL, http(s)://host[:port][/path]
}

// GC says how long finished Jobs are kept. FailedRetention is only read to say what replaced it (retry).
type GC struct {
	SucceededRetention metav1.Duration  `json:"succeededRetention,omitempty"`
	FailedRetention    *metav1.Duration `json:"failedRetention,omitempty"`
}

// Defaults of the optional keys.
const (
	DefaultDSNEnv      = "DATABASE_URL"
	DefaultTimeout     = 30 * time.Second
	DefaultMaxActive   = 10
	DefaultMaxPerTick  = 10
	DefaultMaxAttempts = 3
	DefaultBackoff     = time.Minute
	DefaultMaxBackoff  = time.Hour
)

// The ranges of the numbers a configuration gives, checked at load. Every count (limits.maxActive, maxPerTick,
// maxQueued, perGroup.maxActive, retry.maxAttempts, a queue's weight) is at most MaxCount: far above what one
// namespace runs, and small enough that no sum or product of counts a pass makes can overflow. source.timeout is
// PostgreSQL's statement_timeout, an int of milliseconds: from 1ms (0 would be no timeout) to MaxTimeout.
// Durations are at most what a time.Duration holds (about 292 years): the arithmetic on them saturates.
const (
	MaxCount   = 1_000_000
	MinTimeout = time.Millisecond
	MaxTimeout = math.MaxInt32 * time.Millisecond
)

// maxNamePrefix leaves room in a 63-character Job name for "-" and the key's hash.
const maxNamePrefix = 40

// Error is a configuration problem: the command exits 2 and nothing is contacted.
type Error struct{ Err error }

func (e *Error) Error() string { return e.Err.Error() }
func (e *Error) Unwrap() error { return e.Err }

// IsConfigError reports whether err is, or wraps, a configuration problem.
func IsConfigError(err error) bool {
	var ce *Error
	return errors.As(err, &ce)
}

// Load reads file, applies defaults and the namespace override, validates everything and reads the Job template.
// Every problem is reported, each naming the file and the key.
func Load(file, namespace string) (*Config, error) {
	return LoadContext(context.Background(), file, namespace)
}

// LoadContext is Load under ctx: a file that is not read when ctx ends (a FIFO, a pipe that stays open) is an error
// (not a configuration error: the file may be right).
func LoadContext(ctx context.Context, file, namespace string) (*Config, error) {
	data, err := readFile(ctx, file)
	if err != nil {
		return nil, readError("reading config", err)
	}
	cfg, err := parse(ctx, file, data)
	if err != nil {
		return nil, err
	}
	if namespace != "" {
		cfg.Namespace = namespace
	}
	return cfg, nil
}

// Parse decodes a configuration (unknown keys are errors), applies defaults, validates it and loads its template.
func Parse(file string, data []byte) (*Config, error) { return parse(context.Background(), file, data) }

// readError is err of reading a file the user named: a configuration error, unless the read was cut short by the
// run's context (SIGTERM, --timeout), which says nothing of the file.
func readError(what string, err error) error {
	err = fmt.Errorf("%s: %w", what, err)
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	return &Error{err}
}

func parse(ctx context.Context, file string, data []byte) (*Config, error) {
	cfg := &Config{}
	unknown, err := strictyaml.Decode(data, cfg)
	if err != nil {
		return nil, &Error{fmt.Errorf("%s: %w", file, err)}
	}
	cfg.File = file
	cfg.resolveQueues()
	cfg.setDefaults()
	var errs []error
	if unknown != nil {
		errs = append(errs, unknown)
	}
	for _, e := range cfg.Validate() {
		// A value of the wrong type was left out, and reported: it is not also "required".
		if p, ok := e.(*problem); !ok || !strictyaml.LeftOut(unknown, p.at.path(p.key)) {
			errs = append(errs, e)
		}
	}
	if cfg.Job.Template != "" {
		tpl, err := loadTemplate(ctx, cfg.templatePath(), cfg.KueueMode())
		if err != nil {
			errs = append(errs, templateError(file, "job.template", err))
		} else {
			cfg.Template = tpl
			errs = append(errs, cfg.validateContainer()...)
		}
	}
	errs = append(errs, cfg.loadQueueTemplates(ctx)...)
	if ctx.Err() != nil { // a template not read to its end says nothing of the files
		return nil, fmt.Errorf("%s: reading the job template: %w", file, context.Cause(ctx))
	}
	if len(errs) > 0 {
		for i, e := range errs {
			if _, ok := e.(*lineError); ok {
				continue // a template's: each line already names its file
			}
			// Every line names the file (a template's errors are one per line, after the first).
			lines := strings.Split(e.Error(), "\n")
			for j := 1; j < len(lines); j++ {
				lines[j] = file + ": " + lines[j]
			}
			errs[i] = &lineError{msg: file + ": " + strings.Join(lines, "\n"), err: e}
		}
		return nil, &Error{errors.Join(errs...)}
	}
	if len(cfg.Queues) == 0 {
		cfg.Queues = []Queue{cfg.implicitQueue()}
	}
	return cfg, nil
}

// lineError is an error with its lines rewritten, which still unwraps to it.
type lineError struct {
	msg string
	err error
}

func (e *lineError) Error() string { return e.msg }

// templateError is err of the template that key of file names: each of its lines (one problem a line, each with
// the template's line number) begins with the config's file and key, then the template's file.
func templateError(file, key string, err error) error {
	lines := strings.Split(err.Error(), "\n")
	for i, l := range lines {
		lines[i] = file + ": " + key + ": " + l
	}
	return &lineError{msg: strings.Join(lines, "\n"), err: err}
}
func (e *lineError) Unwrap() error { return e.err }

func (c *Config) setDefaults() {
	if c.Source.DSNEnv == "" && c.Source.DSNFile == "" {
		c.Source.DSNEnv = DefaultDSNEnv
	}
	if c.Source.Timeout.Duration == 0 {
		c.Source.Timeout.Duration = DefaultTimeout
	}
	if c.Job.NamePrefix == "" && len(c.Queues) == 0 {
		c.Job.NamePrefix = c.Name
	}
	if c.Limits.MaxActive == nil {
		c.Limits.MaxActive = ptr.To(DefaultMaxActive)
	}
	if c.Limits.MaxPerTick == nil {
		c.Limits.MaxPerTick = ptr.To(DefaultMaxPerTick)
	}
	if c.Limits.BlockOnUnschedulable == nil {
		c.Limits.BlockOnUnschedulable = ptr.To(true)
	}
	if c.Limits.ReserveForTick == nil {
		c.Limits.ReserveForTick = ptr.To(true)
	}
	if c.Limits.Capacity == "" {
		c.Limits.Capacity = CapacityNodes
	}
	if c.Retry.MaxAttempts == nil {
		c.Retry.MaxAttempts = ptr.To(DefaultMaxAttempts)
	}
	if c.Retry.Backoff == nil {
		c.Retry.Backoff = &metav1.Duration{Duration: DefaultBackoff}
	}
	if c.Retry.MaxBackoff == nil {
		c.Retry.MaxBackoff = &metav1.Duration{Duration: max(DefaultMaxBackoff, c.Retry.Backoff.Duration)}
	}
}

// Validate checks the keys of c after defaulting; it is pure and returns every problem, each naming its key.
func (c *Config) Validate() []error {
	var errs []error
	bad := badAt(&errs, at{})
	if c.Name == "" {
		bad("name", "required")
	} else if msgs := validation.IsDNS1123Label(c.Name); len(msgs) > 0 {
		bad("name", "%q is not a DNS-1123 label: %s", c.Name, strings.Join(msgs, "; "))
	}
	if c.Namespace != "" {
		if msgs := validation.IsDNS1123Label(c.Namespace); len(msgs) > 0 {
			bad("namespace", "%q is not a valid namespace: %s", c.Namespace, strings.Join(msgs, "; "))
		}
	}
	if c.APIVersion != "" && c.APIVersion != APIVersion {
		bad("apiVersion", "%q is not %s (the version this jobsched reads)", c.APIVersion, APIVersion)
	}
	if c.Kind != "" && c.Kind != Kind {
		bad("kind", "%q is not %s", c.Kind, Kind)
	}
	if c.Source.DSNEnv != "" && c.Source.DSNFile != "" {
		bad("source.dsnFile", "set only one of source.dsnEnv and source.dsnFile")
	}
	explicit := c.explicitQueues()
	if !explicit {
		errs = append(errs, validateSource(at{}, c.Source)...)
		errs = append(errs, validateJob(at{}, c.Job)...)
	} else {
		if strings.TrimSpace(c.Source.Query) != "" {
			bad("source.query", "with queues: each queue has its own query: move it into a queue (queues[].source.query)")
		}
		if c.Source.Key != "" {
			bad("source.key", "with queues: each queue has its own key: move it into a queue (queues[].source.key)")
		}
		if c.Source.CancelQuery != "" {
			bad("source.cancelQuery", "with queues: each queue has its own cancel query: move it into a queue (queues[].source.cancelQuery)")
		}
		validTimeout(bad, c.Source.Timeout.Duration)
		if !c.Job.isZero() {
			bad("job", "with queues: each queue has its own job: move it into a queue (queues[].job)")
		}
	}
	validateWake(bad, c.Source)
	errs = append(errs, validateEnv(at{}, c.Env)...)
	count(bad, "limits.maxActive", c.Limits.MaxActive, 0)
	count(bad, "limits.maxPerTick", c.Limits.MaxPerTick, 0)
	if !slices.Contains(Capacities(), c.Limits.Capacity) {
		bad("limits.capacity", "%q is not one of %s", c.Limits.Capacity, CapacityNames())
	}
	errs = append(errs, c.validateKueue()...)
	if c.Limits.Capacity != CapacityAutoscale && c.Limits.MaxPending != nil {
		bad("limits.maxPending", "is read only with limits.capacity: autoscale (it is %s)", c.Limits.Capacity)
	}
	count(bad, "limits.maxPending", c.Limits.MaxPending, 0)
	if c.Limits.Capacity != CapacityAutoscale && c.Limits.AutoscalerEvents != nil {
		bad("limits.autoscalerEvents", "is read only with limits.capacity: autoscale (it is %s)", c.Limits.Capacity)
	}
	for i, w := range c.Limits.AutoscalerEvents {
		if w == "" || len(validation.IsQualifiedName(w)) > 0 {
			bad(fmt.Sprintf("limits.autoscalerEvents[%d]", i), "%q is not a component name, e.g. karpenter", w)
		}
	}
	errs = append(errs, c.validateRates()...)
	errs = append(errs, validateGC(at{}, c.GC.SucceededRetention, c.GC.FailedRetention)...)
	errs = append(errs, validateRetry(at{}, c.Retry.MaxAttempts, c.Retry.Backoff, c.Retry.MaxBackoff, c.Retry.DeadRetention.Duration)...)
	if err := pushurl.Validate(c.Metrics.Pushgateway); err != nil {
		bad("metrics.pushgateway", "%v", err)
	}
	if explicit {
		errs = append(errs, c.validateQueues()...)
	}
	return errs
}

// validateSource checks a queue's source keys (path is "" for the implicit queue, else the queue's).
func validateSource(path at, src Source) []error {
	var errs []error
	bad := badAt(&errs, path)
	if strings.TrimSpace(src.Query) == "" {
		bad("source.query", "required")
	}
	for _, f := range []struct{ key, text string }{{"source.query", src.Query}, {"source.key", src.Key}, {"source.cancelQuery", src.CancelQuery}} {
		if i := strings.IndexByte(f.text, 0); i >= 0 {
			bad(f.key, "holds a NUL byte (byte %d), which PostgreSQL cannot take in a statement", i+1)
		}
	}
	if src.Key == "" {
		bad("source.key", "required")
	}
	if src.CancelQuery != "" && strings.TrimSpace(strings.TrimRight(strings.TrimSpace(src.CancelQuery), ";")) == "" {
		bad("source.cancelQuery", "is empty: leave it out, or give the SELECT that returns the keys to cancel")
	}
	validTimeout(bad, src.Timeout.Duration)
	return errs
}

// The range of source.poll. Each poll is a whole pass: the Lease taken and given back (two writes to the API server),
// a SELECT, its deletes; below MinPoll an idle install would cost that several times a second for a pickup that a
// notification (source.notify) gives sooner anyway. MaxPoll: a poll rarer than an hour is no fallback.
const (
	MinPoll = time.Second
	MaxPoll = time.Hour
)

// channelName is what source.notify takes: an unquoted PostgreSQL identifier in lower case, at most 63 bytes
// (NAMEDATALEN − 1), so that NOTIFY name, NOTIFY "name" and pg_notify('name', ...) all reach the same channel.
var channelName = regexp.MustCompile(`^[a-z_][a-z0-9_]{0,62}$`)

// validateWake checks source.notify and source.poll.
func validateWake(bad func(key, format string, args ...any), src Source) {
	if src.Notify != "" && !channelName.MatchString(src.Notify) {
		bad("source.notify", "%q is not a channel name: lower-case letters, digits and _, not starting with a digit, at most 63 (e.g. jobsched_reports)", src.Notify)
	}
	switch d := src.Poll.Duration; {
	case d < 0:
		bad("source.poll", "must not be negative (0 or unset: no poll)")
	case d > 0 && d < MinPoll:
		bad("source.poll", "%s is shorter than %s: each poll is a whole pass (the Lease, a SELECT); for a sooner pickup set source.notify", d, MinPoll)
	case d > MaxPoll:
		bad("source.poll", "%s is longer than %s", d, MaxPoll)
	}
}

// validTimeout checks source.timeout (after defaults: 0 is already the default) against statement_timeout's range.
func validTimeout(bad func(key, format string, args ...any), d time.Duration) {
	switch {
	case d < 0:
		bad("source.timeout", "must not be negative")
	case d < MinTimeout:
		bad("source.timeout", "%s is shorter than %s, the shortest statement_timeout PostgreSQL takes (0 or unset: the default, %s)",
			rate.ShortDuration(d), MinTimeout, rate.ShortDuration(DefaultTimeout))
	case d > MaxTimeout:
		bad("source.timeout", "%s is longer than %s, the longest statement_timeout PostgreSQL takes", rate.ShortDuration(d), MaxTimeout)
	}
}

// count checks the count at key (when set) against [least, MaxCount].
func count(bad func(key, format string, args ...any), key string, n *int, least int) {
	checkCount(bad, key, n, least, false)
}

// checkCount is count; required says the key has no default (a 0 may be a key not written).
func checkCount(bad func(key, format string, args ...any), key string, n *int, least int, required bool) {
	switch {
	case n == nil:
	case *n < 0 && least == 0:
		bad(key, "must not be negative, not %d", *n)
	case *n == 0 && least > 0 && required:
		bad(key, "required: at least %d", least) // not written, or written 0
	case *n < least:
		bad(key, "must be at least %d, not %d", least, *n)
	case *n > MaxCount:
		bad(key, "must be at most %d, not %d", MaxCount, *n)
	}
}

// validateJob checks a queue's job keys.
func validateJob(path at, job Job) []error {
	var errs []error
	bad := badAt(&errs, path)
	if job.Template == "" {
		bad("job.template", "required")
	}
	if job.NamePrefix != "" {
		if msgs := validation.IsDNS1123Label(job.NamePrefix); len(msgs) > 0 {
			bad("job.namePrefix", "%q is not a DNS-1123 label: %s", job.NamePrefix, strings.Join(msgs, "; "))
		} else if len(job.NamePrefix) > maxNamePrefix {
			bad("job.namePrefix", "%q is longer than %d characters (set job.namePrefix to a shorter one)", job.NamePrefix, maxNamePrefix)
		}
	}
	validateSizes(bad, job)
	validateBackfill(bad, job)
	return errs
}

// validateEnv checks env keys.
func validateEnv(path at, env Env) []error {
	var errs []error
	bad := badAt(&errs, path)
	if p := env.Prefix; p != "" && strings.Trim(p, "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_") != "" {
		bad("env.prefix", "%q may only hold A-Z, 0-9 and _", p)
	} else if p != "" && p[0] >= '0' && p[0] <= '9' {
		bad("env.prefix", "%q must begin with a letter or _: a variable name cannot begin with a digit (e.g. TASK_)", p)
	}
	for i, pat := range env.Passthrough {
		if problem := passthroughProblem(pat); problem != "" {
			bad(fmt.Sprintf("env.passthrough[%d]", i), "%q %s", pat, problem)
		}
	}
	return errs
}

// validateGC checks gc keys.
func validateGC(path at, succeeded metav1.Duration, failed *metav1.Duration) []error {
	var errs []error
	bad := badAt(&errs, path)
	if succeeded.Duration < 0 {
		bad("gc.succeededRetention", "must not be negative")
	}
	if failed != nil {
		bad("gc.failedRetention", "was replaced by retry: a failed Job is kept while its task waits to be retried; "+
			"remove gc.failedRetention and write, for example, retry: {maxAttempts: 3, backoff: 1m, maxBackoff: 1h} "+
			"(maxAttempts: 1 never retries)")
	}
	return errs
}

// validateRetry checks retry keys.
func validateRetry(path at, attempts *int, backoff, maxBackoff *metav1.Duration, dead time.Duration) []error {
	var errs []error
	bad := badAt(&errs, path)
	count(bad, "retry.maxAttempts", attempts, 1) // 1 = never retry
	if b := backoff; b != nil && b.Duration < 0 {
		bad("retry.backoff", "must not be negative")
	}
	if b, m := backoff, maxBackoff; b != nil && m != nil && m.Duration < b.Duration {
		bad("retry.maxBackoff", "%s is shorter than retry.backoff (%s)", rate.ShortDuration(m.Duration), rate.ShortDuration(b.Duration))
	}
	if dead < 0 {
		bad("retry.deadRetention", "must not be negative")
	}
	return errs
}

// badAt returns a reporter of problems at keys under path.
func badAt(errs *[]error, path at) func(key, format string, args ...any) {
	return func(key, format string, args ...any) {
		*errs = append(*errs, &problem{at: path, key: key, msg: fmt.Sprintf(format, args...)})
	}
}

// at is where a problem's key is: the top level (the zero value), or a queue of queues:.
type at struct {
	queue int // 1 + the queue's index; 0: the top level
	name  string
}

// String is how a problem names it: "" at the top level, "queues[1] (exports).", or "queues[1]." for a queue whose
// name is not a DNS-1123 label (its own problem shows the name, quoted).
func (a at) String() string {
	switch {
	case a.queue == 0:
		return ""
	case len(validation.IsDNS1123Label(a.name)) == 0:
		return fmt.Sprintf("queues[%d] (%s).", a.queue-1, a.name)
	}
	return fmt.Sprintf("queues[%d].", a.queue-1)
}

// path is key under a as the decoder names it (queues[1].limits.maxActive).
func (a at) path(key string) string {
	if a.queue == 0 {
		return key
	}
	return fmt.Sprintf("queues[%d].%s", a.queue-1, key)
}

// problem is a Validate problem: a key (under at) and what is wrong with its value.
type problem struct {
	at       at
	key, msg string
}

func (p *problem) Error() string { return p.at.String() + p.key + ": " + p.msg }

// validateKueue checks the keys of limits.capacity: kueue: a LocalQueue is required, names must be label values,
// and neither kueue.* nor limits.maxQueued means anything in another mode. With queues:, the top-level kueue is the
// queues' default, and each queue's (inherited or its own) is checked with the queue.
func (c *Config) validateKueue() []error {
	var errs []error
	bad := badAt(&errs, at{})
	if c.Limits.Capacity != CapacityKueue {
		if c.Kueue != nil {
			bad("kueue", "is read only with limits.capacity: kueue (it is %s)", c.Limits.Capacity)
		}
		if c.Limits.MaxQueued != nil {
			bad("limits.maxQueued", "is read only with limits.capacity: kueue (it is %s)", c.Limits.Capacity)
		}
		return errs
	}
	count(bad, "limits.maxQueued", c.Limits.MaxQueued, 0)
	if c.explicitQueues() {
		if c.Kueue != nil {
			errs = append(errs, kueueNames(at{}, *c.Kueue)...)
		}
		return errs
	}
	return append(errs, kueueRequired(at{}, c.Kueue)...)
}

// kueueRequired checks the kueue block a queue resolves to, with limits.capacity: kueue.
func kueueRequired(path at, k *Kueue) []error {
	if k == nil || k.LocalQueue == "" {
		var errs []error
		badAt(&errs, path)("kueue.localQueue", "required with limits.capacity: kueue: the LocalQueue (in the Jobs' namespace) Kueue admits them from")
		return errs
	}
	return kueueNames(path, *k)
}

// kueueNames checks that the names of a kueue block are label values.
func kueueNames(path at, k Kueue) []error {
	var errs []error
	bad := badAt(&errs, path)
	labelValue := func(key, v string) {
		if v == "" {
			return
		}
		if msgs := validation.IsDNS1123Subdomain(v); len(msgs) > 0 {
			bad(key, "%q is not a valid name: %s", v, strings.Join(msgs, "; "))
		} else if msgs := validation.IsValidLabelValue(v); len(msgs) > 0 {
			bad(key, "%q is not a valid label value: %s", v, strings.Join(msgs, "; "))
		}
	}
	labelValue("kueue.localQueue", k.LocalQueue)
	labelValue("kueue.priorityClass", k.PriorityClass)
	return errs
}

// KueueMode reports limits.capacity: kueue.
func (c *Config) KueueMode() bool { return c.Limits.Capacity == CapacityKueue }

// MaxQueued is limits.maxQueued, defaulting to limits.maxPerTick.
func (c *Config) MaxQueued() int {
	if c.Limits.MaxQueued != nil {
		return *c.Limits.MaxQueued
	}
	return c.MaxPerTick()
}

// MaxPending is limits.maxPending, defaulting to limits.maxPerTick: one pass's creates may all wait for the nodes
// the autoscaler adds for them, which it provisions as one batch (Karpenter batches the pods that turn Pending
// within a second or so of each other).
func (c *Config) MaxPending() int {
	if c.Limits.MaxPending != nil {
		return *c.Limits.MaxPending
	}
	return c.MaxPerTick()
}

// DefaultAutoscalerEvents are the names Karpenter's and the cluster-autoscaler's event recorders write their Events
// with (both source.component and reportingController).
var DefaultAutoscalerEvents = []string{"karpenter", "cluster-autoscaler"}

// AutoscalerEvents is limits.autoscalerEvents, defaulting to DefaultAutoscalerEvents.
func (c *Config) AutoscalerEvents() []string {
	if c.Limits.AutoscalerEvents != nil {
		return c.Limits.AutoscalerEvents
	}
	return DefaultAutoscalerEvents
}

func (c *Config) validateContainer() []error {
	if c.Job.Container == "" {
		if n := len(c.Template.Spec.Template.Spec.Containers); len(c.Job.RequestsFrom) > 0 && n > 1 {
			return []error{fmt.Errorf("job.requestsFrom: the template has %d containers: set job.container to the one whose requests the rows set", n)}
		}
		return nil
	}
	for _, ctr := range c.Template.Spec.Template.Spec.Containers {
		if ctr.Name == c.Job.Container {
			return nil
		}
	}
	return []error{fmt.Errorf("job.container: the template has no container named %q", c.Job.Container)}
}

func (c *Config) templatePath() string {
	if filepath.IsAbs(c.Job.Template) {
		return c.Job.Template
	}
	return filepath.Join(filepath.Dir(c.File), c.Job.Template)
}

// MaxAttempts is the defaulted retry.maxAttempts.
func (c *Config) MaxAttempts() int { return *c.Retry.MaxAttempts }

// BackoffAfter is how long a task waits after its attempt n failed: retry.backoff·2^(n-1), at most retry.maxBackoff.
func (c *Config) BackoffAfter(n int) time.Duration {
	d, limit := c.Retry.Backoff.Duration, c.Retry.MaxBackoff.Duration
	for i := 1; i < n && d < limit; i++ {
		if d > limit/2 { // twice d is past the limit, and may be past the largest duration
			return limit
		}
		d *= 2
	}
	return min(d, limit)
}

// MaxActive, MaxPerTick and BlockOnUnschedulable read the defaulted limits.
func (c *Config) MaxActive() int             { return *c.Limits.MaxActive }
func (c *Config) MaxPerTick() int            { return *c.Limits.MaxPerTick }
func (c *Config) BlockOnUnschedulable() bool { return *c.Limits.BlockOnUnschedulable }

// ReserveForTick is the defaulted limits.reserveForTick.
func (c *Config) ReserveForTick() bool { return *c.Limits.ReserveForTick }

// readFile reads a configuration or template file of at most strictyaml.MaxBytes, what either may decode to: a
// larger one (or a device that never ends) is refused before more of it is read, and a FIFO or pipe is abandoned
// when ctx ends.
func readFile(ctx context.Context, file string) ([]byte, error) {
	return input.ReadFile(ctx, file, strictyaml.MaxBytes)
}

// LoadTemplate reads a batch/v1 Job manifest and checks what jobsched relies on; the API server checks the rest
// (see dry-run --server).
func LoadTemplate(file string) (*batchv1.Job, error) {
	return loadTemplate(context.Background(), file, false)
}

// loadTemplate is LoadTemplate; with kueue (limits.capacity: kueue) a suspended template and MultiKueue's managedBy
// are accepted, since Kueue unsuspends the Jobs it admits and MultiKueue mirrors a worker's Job status back.
func loadTemplate(ctx context.Context, file string, kueueMode bool) (*batchv1.Job, error) {
	data, err := readFile(ctx, file)
	if err != nil {
		return nil, err
	}
	job := &batchv1.Job{}
	unknown, err := strictyaml.Decode(data, job)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	var errs []error
	bad := func(field, msg string) { errs = append(errs, fmt.Errorf("%s: %s: %s", file, field, msg)) }
	if unknown != nil {
		// One problem a line: each names the template's file.
		lines := strings.Split(unknown.Error(), "\n")
		for i, l := range lines {
			lines[i] = file + ": " + l
		}
		errs = append(errs, &lineError{msg: strings.Join(lines, "\n"), err: unknown})
	}
	if job.APIVersion != "batch/v1" || job.Kind != "Job" {
		bad("apiVersion/kind", fmt.Sprintf("must be batch/v1 Job, not %s %s", job.APIVersion, job.Kind))
	}
	if job.Name != "" || job.GenerateName != "" {
		bad("metadata.name", "must be empty: jobsched names each Job after its task key")
	}
	if job.Spec.Selector != nil || job.Spec.ManualSelector != nil {
		bad("spec.selector", "must be empty: the Job controller generates it")
	}
	if job.Spec.Suspend != nil && *job.Spec.Suspend && !kueueMode {
		bad("spec.suspend", "must not be true: a suspended Job never runs, and holds its task's slot and capacity until it is deleted")
	}
	if job.Spec.Parallelism != nil && *job.Spec.Parallelism == 0 {
		bad("spec.parallelism", "must not be 0: such a Job runs no pod, and holds its task's slot and capacity until it is deleted")
	}
	if job.Spec.Completions != nil && *job.Spec.Completions == 0 {
		bad("spec.completions", "must not be 0: such a Job does none of the task's work, and holds its task's slot until it is deleted")
	}
	if m := job.Spec.ManagedBy; m != nil && *m != "" && *m != batchv1.JobControllerName && !(kueueMode && *m == kueue.MultiKueue) {
		bad("spec.managedBy", fmt.Sprintf("must be empty or %s, not %q: jobsched counts and retires Jobs as the Job "+
			"controller runs them, and a Job another controller manages may never finish", batchv1.JobControllerName, *m))
	}
	for _, labels := range []map[string]string{job.Labels, job.Spec.Template.Labels} {
		if _, ok := labels[kueue.QueueLabel]; ok {
			bad("metadata.labels", fmt.Sprintf("must not set %s: with limits.capacity: kueue jobsched sets it from "+
				"kueue.localQueue; in another mode Kueue would hold the Jobs while jobsched counts them as starting", kueue.QueueLabel))
			break
		}
	}
	if job.Spec.TTLSecondsAfterFinished != nil {
		bad("spec.ttlSecondsAfterFinished", "must be empty: gc.succeededRetention and retry.deadRetention decide when finished Jobs go (a Job deleted early lets its row be retried)")
	}
	pod := job.Spec.Template.Spec
	if len(pod.Containers) == 0 {
		bad("spec.template.spec.containers", "at least one container is required")
	}
	if rp := pod.RestartPolicy; rp != corev1.RestartPolicyNever && rp != corev1.RestartPolicyOnFailure {
		bad("spec.template.spec.restartPolicy", fmt.Sprintf("must be Never or OnFailure, not %q", rp))
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return job, nil
}
