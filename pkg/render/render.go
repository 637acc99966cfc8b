package render

import (
	"errors"
	"fmt"
	"net/url"
	"path"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/jobsched/jobsched/pkg/capacity/labeler"
	"github.com/jobsched/jobsched/pkg/config"
	"github.com/jobsched/jobsched/pkg/jobmeta"
	"github.com/jobsched/jobsched/pkg/rows"
)

// Environment variables every Job gets.
const (
	EnvTaskKey   = "JOBSCHED_TASK_KEY"
	EnvScheduler = "JOBSCHED_SCHEDULER"
	EnvAttempt   = "JOBSCHED_ATTEMPT"
)

// Limits on what one row may put into a Job, well inside the API server's object size limit (about 1.5 MiB in etcd).
// MaxEnvBytes is Linux's MAX_ARG_STRLEN: an environment string NAME=value longer than that (with its NUL) makes the
// container fail to start.
const (
	MaxKeyBytes = 4096
	MaxJobBytes = 1 << 20
	MaxEnvBytes = 128 << 10
)

// Renderer builds Jobs from rows for one configuration, or one queue of it (config.QueueConfig): an explicit queue's
// Jobs carry its jobmeta.LabelQueue.
type Renderer struct {
	cfg         *config.Config
	passthrough []corev1.EnvVar
	// badPassthrough is a passthrough variable whose value is not valid UTF-8: every Job would be invalid.
	badPassthrough string
}

// New prepares a Renderer. environ is the scheduler's own environment (os.Environ()); only the variables that
// env.passthrough names are copied, and never the cluster's or the shell's own (KUBERNETES_*, HOSTNAME, HOME, PATH),
// jobsched's own (JOBSCHED_*), nor the one that holds the DSN.
func New(cfg *config.Config, environ []string) *Renderer {
	r := &Renderer{cfg: cfg}
	for _, kv := range environ {
		name, value, ok := strings.Cut(kv, "=")
		if !ok || !portableName(name) || neverPassed(name, cfg.Source.DSNEnv) {
			continue
		}
		for _, pat := range cfg.Env.Passthrough {
			if ok, _ := path.Match(pat, name); ok {
				if !utf8.ValidString(value) && r.badPassthrough == "" {
					r.badPassthrough = name
				}
				r.passthrough = append(r.passthrough, envVar(name, value))
				break
			}
		}
	}
	sort.Slice(r.passthrough, func(i, j int) bool { return r.passthrough[i].Name < r.passthrough[j].Name })
	return r
}

// Carrying is the first env.passthrough variable whose value holds secret, as written or percent-encoded (a DSN in
// URL form), or "" (also for an empty secret): the caller refuses to copy it into a Job.
func (r *Renderer) Carrying(secret string) string {
	if secret == "" {
		return ""
	}
	for _, e := range r.passthrough {
		value := strings.ReplaceAll(e.Value, "$$", "$") // as jobsched's environment holds it
		for _, form := range []string{secret, url.PathEscape(secret), url.QueryEscape(secret), url.UserPassword("", secret).String()[1:]} {
			if strings.Contains(value, form) {
				return e.Name
			}
		}
	}
	return ""
}

// neverPassed: the cluster's and the shell's own variables, jobsched's own, and every database credential: the DSN's
// variable, DATABASE_URL (the default one) and the PG* variables lib/pq reads (PGPASSWORD, PGSERVICEFILE, …).
// The list ignores letter case: lib/pq reads only PGPASSWORD, but a Job's process may read pgpassword.
func neverPassed(name, dsnEnv string) bool {
	name = strings.ToUpper(name)
	switch name {
	case "HOSTNAME", "HOME", "PATH", "DATABASE_URL", strings.ToUpper(dsnEnv):
		return true
	}
	for _, prefix := range []string{"KUBERNETES_", "JOBSCHED_", "PG"} {
		if strings.HasPrefix(name, prefix) {
			return true
		}
	}
	return false
}

// portableName says whether name is a portable variable name, as a column's variable is: letters, digits and _,
// not beginning with a digit.
func portableName(name string) bool {
	for i, r := range name {
		if !(r == '_' || r >= 'A' && r <= 'Z' || r >= 'a' && r <= 'z' || i > 0 && r >= '0' && r <= '9') {
			return false
		}
	}
	return name != ""
}

// envVar is a variable whose value reaches the process exactly as given: the kubelet expands $(NAME) in env values
// (with the variables defined before it, secrets among them) and turns $$ into $, so every $ is written as $$.
// Every value jobsched writes into env goes through here; the template's own values are the user's and stay as is.
func envVar(name, value string) corev1.EnvVar {
	return corev1.EnvVar{Name: name, Value: strings.ReplaceAll(value, "$", "$$")}
}

// EnvName maps a column name to its variable: prefix + the name upper-cased, each character outside [A-Z0-9_]
// replaced by "_".
func EnvName(prefix, column string) string {
	var b strings.Builder
	b.WriteString(prefix)
	for _, r := range strings.ToUpper(column) {
		if r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' {
			b.WriteRune(r)
		} else {
			b.WriteByte('_')
		}
	}
	return b.String()
}

// RowError is a row that cannot make a valid Job; the pass skips it and goes on with the others.
type RowError struct {
	Key    string
	Reason string
	// Size says the row asks for requests it cannot have (job.requestsFrom): counted apart from the other skips.
	Size bool
}

func (e *RowError) Error() string { return fmt.Sprintf("task %q: %s", e.Key, e.Reason) }

// Job renders attempt n of the Job for row. A row that cannot make a valid Job is a *RowError; columns that map to
// one variable, or env.columns naming a column the row lacks, are a *config.Error (every row would have it).
func (r *Renderer) Job(row rows.Row, attempt int) (*batchv1.Job, error) {
	attempt = max(attempt, 1)
	env, err := r.rowEnv(row, attempt)
	if err != nil {
		return nil, err
	}
	if row.Key == "" {
		return nil, &RowError{Key: row.Key, Reason: "the key is empty"}
	}
	if len(row.Key) > MaxKeyBytes {
		return nil, &RowError{Key: strings.ToValidUTF8(row.Key[:64], "") + "…", Reason: fmt.Sprintf("the key is longer than %d bytes", MaxKeyBytes)}
	}
	if !utf8.ValidString(row.Key) {
		return nil, &RowError{Key: strings.ToValidUTF8(row.Key, "\uFFFD"), Reason: "the key is not valid UTF-8"}
	}
	group := r.cfg.PerGroup()
	if group != nil {
		if !utf8.ValidString(row.Group) {
			return nil, &RowError{Key: row.Key, Reason: fmt.Sprintf("the group (column %s) is not valid UTF-8", group.Column)}
		}
		if len(row.Group) > MaxGroupBytes {
			return nil, &RowError{Key: row.Key, Reason: fmt.Sprintf("the group (column %s) is %d bytes; it may hold at most %d", group.Column, len(row.Group), MaxGroupBytes)}
		}
	}
	for _, e := range env {
		if !utf8.ValidString(e.Value) {
			return nil, &RowError{Key: row.Key, Reason: fmt.Sprintf("the value of %s is not valid UTF-8", e.Name)}
		}
		if strings.IndexByte(e.Value, 0) >= 0 { // PostgreSQL text cannot hold one; a rows file can
			return nil, &RowError{Key: row.Key, Reason: fmt.Sprintf("the value of %s holds a NUL byte, which no process environment can carry", e.Name)}
		}
		// The process gets the unescaped value: "NAME=value" and its NUL must fit in MAX_ARG_STRLEN.
		if n := len(e.Name) + 1 + len(strings.ReplaceAll(e.Value, "$$", "$")) + 1; n > MaxEnvBytes {
			return nil, &RowError{Key: row.Key, Reason: fmt.Sprintf("the value of %s is %d bytes; a variable may hold at most 128 KiB (Linux MAX_ARG_STRLEN), or the container cannot start", e.Name, n)}
		}
	}

	cfg := r.cfg
	job := cfg.Template.DeepCopy()
	job.Name = AttemptName(cfg.Job.NamePrefix, row.Key, attempt)
	job.Namespace = cfg.Namespace
	for _, meta := range []*map[string]string{&job.Labels, &job.Spec.Template.Labels} {
		if *meta == nil {
			*meta = map[string]string{}
		}
		(*meta)[jobmeta.LabelScheduler] = cfg.Name
		(*meta)[jobmeta.LabelTask] = TaskLabel(row.Key)
		(*meta)[jobmeta.LabelAttempt] = strconv.Itoa(attempt)
		if cfg.QueueName != "" {
			(*meta)[jobmeta.LabelQueue] = cfg.QueueName
		}
		if group != nil {
			(*meta)[jobmeta.LabelGroup] = GroupLabel(row.Group)
		}
	}
	if err := modeLabels(cfg, row, job); err != nil {
		return nil, err
	}
	for _, meta := range []*map[string]string{&job.Annotations, &job.Spec.Template.Annotations} {
		if *meta == nil {
			*meta = map[string]string{}
		}
		(*meta)[jobmeta.AnnotationTaskKey] = row.Key
		if group != nil {
			(*meta)[jobmeta.AnnotationGroup] = row.Group
		}
	}
	containers := job.Spec.Template.Spec.Containers
	for i := range containers {
		if cfg.Job.Container == "" || containers[i].Name == cfg.Job.Container {
			containers[i].Env = merge(containers[i].Env, env)
		}
	}
	if err := r.sizeJob(row, job); err != nil {
		return nil, err
	}
	// Its size as etcd stores it (protobuf), computed without encoding it: a tick renders thousands of Jobs.
	if size := job.Size(); size > MaxJobBytes {
		return nil, &RowError{Key: row.Key, Reason: fmt.Sprintf("the Job would be %d bytes; etcd takes at most about %d", size, MaxJobBytes)}
	}
	return job, nil
}

// modeLabels puts the capacity mode's labels on the Job (a capacity.Labeler's, pkg/capacity/labeler), with the
// row's columns: an error of the mode's is the row's (a RowError) unless it is the configuration's.
func modeLabels(cfg *config.Config, row rows.Row, job *batchv1.Job) error {
	l, ok := labeler.Of(cfg.Limits.Capacity)
	if !ok {
		return nil
	}
	col := func(name string) (string, bool, bool) {
		i := columnIndex(row.Columns, name)
		if i < 0 {
			return "", false, false
		}
		return row.Columns[i].Value, row.Columns[i].Null, true
	}
	err := l.Label(cfg, col, job)
	if cerr := (*config.Error)(nil); err == nil || errors.As(err, &cerr) {
		return err
	}
	return &RowError{Key: row.Key, Reason: err.Error()}
}

// Env is the environment a Job for attempt n of row gets from jobsched (as written into the Job: every $ doubled).
func (r *Renderer) Env(row rows.Row, attempt int) ([]corev1.EnvVar, error) {
	return r.rowEnv(row, max(attempt, 1))
}

// rowEnv is the environment the row adds, in order: passthrough, the columns, then JOBSCHED_TASK_KEY,
// JOBSCHED_SCHEDULER and JOBSCHED_ATTEMPT. NULL columns set nothing.
func (r *Renderer) rowEnv(row rows.Row, attempt int) ([]corev1.EnvVar, error) {
	cfg := r.cfg
	if r.badPassthrough != "" {
		return nil, &config.Error{Err: fmt.Errorf("env.passthrough: the value of %s is not valid UTF-8, which no Job's variable "+
			"may hold: fix the variable in jobsched's environment, or leave it out of env.passthrough", r.badPassthrough)}
	}
	if row.Oversize > 0 {
		return nil, &RowError{Key: row.Key, Reason: fmt.Sprintf("the row is %d bytes as text; PostgreSQL sends at most %d "+
			"a row (its key only, when larger): select the large column's part a Job needs, or leave it out", row.Oversize, rows.MaxRowBytes)}
	}
	var env []corev1.EnvVar
	from := map[string]string{EnvTaskKey: EnvTaskKey, EnvScheduler: EnvScheduler, EnvAttempt: EnvAttempt} // variable → column that set it
	add := func(col rows.Column) error {
		name := EnvName(cfg.Env.Prefix, col.Name)
		if msgs := validation.IsEnvVarName(name); len(msgs) > 0 {
			return &config.Error{Err: fmt.Errorf("%s: env: column %q maps to %q, not a valid environment variable name (%s): rename it in source.query or set env.prefix", cfg.File, col.Name, name, strings.Join(msgs, "; "))}
		}
		if other, taken := from[name]; taken && other == name && (name == EnvTaskKey || name == EnvScheduler || name == EnvAttempt) {
			return &config.Error{Err: fmt.Errorf("%s: env: column %q maps to %s, which jobsched sets itself: rename it in source.query (AS) or set env.prefix", cfg.File, col.Name, name)}
		} else if taken {
			return &config.Error{Err: fmt.Errorf("%s: env: columns %q and %q both map to %s (rename one in source.query or use env.columns)", cfg.File, other, col.Name, name)}
		}
		from[name] = col.Name
		if !col.Null {
			env = append(env, envVar(name, col.Value))
		}
		return nil
	}
	if len(cfg.Env.Columns) == 0 {
		for _, col := range row.Columns {
			if err := add(col); err != nil {
				return nil, err
			}
		}
	} else {
		for _, want := range cfg.Env.Columns {
			i := columnIndex(row.Columns, want)
			if i < 0 {
				return nil, &config.Error{Err: fmt.Errorf("%s: env.columns: the query returns no column %q", cfg.File, want)}
			}
			if err := add(row.Columns[i]); err != nil {
				return nil, err
			}
		}
	}
	var out []corev1.EnvVar
	for _, e := range r.passthrough {
		if _, taken := from[e.Name]; !taken { // a column of the same name wins
			out = append(out, e)
		}
	}
	return append(append(out, env...), envVar(EnvTaskKey, row.Key), envVar(EnvScheduler, cfg.Name),
		envVar(EnvAttempt, strconv.Itoa(attempt))), nil
}

func columnIndex(cols []rows.Column, name string) int {
	for i, c := range cols {
		if c.Name == name {
			return i
		}
	}
	return -1
}

// merge appends add to base; a variable of base that add sets again is dropped, so each name appears once and the
// row's value wins.
func merge(base, add []corev1.EnvVar) []corev1.EnvVar {
	set := make(map[string]bool, len(add))
	for _, e := range add {
		set[e.Name] = true
	}
	out := make([]corev1.EnvVar, 0, len(base)+len(add))
	for _, e := range base {
		if !set[e.Name] {
			out = append(out, e)
		}
	}
	return append(out, add...)
}
