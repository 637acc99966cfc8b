package config

import (
	"cmp"
	"context"
	"fmt"
	"path/filepath"
	"strings"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/utils/ptr"
)

// The file's version: a file without apiVersion and kind is read as this one (the status document's group/version).
const (
	APIVersion = "jobsched.io/v1alpha1"
	Kind       = "Config"
)

// DefaultWeight is a queue's weight when it sets none.
const DefaultWeight = 1

// Queue is one entry of queues: a kind of work with its own rows, Job template and limits, inside the install. The
// keys it leaves out are the top level's (env, retry, gc, kueue: key by key; limits.maxActive and maxPerTick: the
// install's). After Parse every field is resolved: Env, Retry, GC are set, Weight and the limits too.
type Queue struct {
	Name string `json:"name"`
	// Priority orders queues: a higher one gets slots first (default 0).
	Priority int `json:"priority,omitempty"`
	// Weight shares slots among queues of equal priority (default 1).
	Weight *int        `json:"weight,omitempty"`
	Source Source      `json:"source"` // query, key, timeout (the connection is the install's)
	Job    Job         `json:"job"`
	Env    *Env        `json:"env,omitempty"`
	Retry  *QueueRetry `json:"retry,omitempty"`
	GC     *QueueGC    `json:"gc,omitempty"`
	Kueue  *Kueue      `json:"kueue,omitempty"`
	Limits QueueLimits `json:"limits"`

	// Template is the parsed job.template; Implicit says the queue is the one of a file without queues:.
	Template *batchv1.Job `json:"-"`
	Implicit bool         `json:"-"`
}

// QueueRetry is a queue's retry block: each key it sets replaces the top level's.
type QueueRetry struct {
	MaxAttempts   *int             `json:"maxAttempts,omitempty"`
	Backoff       *metav1.Duration `json:"backoff,omitempty"`
	MaxBackoff    *metav1.Duration `json:"maxBackoff,omitempty"`
	DeadRetention *metav1.Duration `json:"deadRetention,omitempty"`
}

// QueueGC is a queue's gc block. FailedRetention is only read to say what replaced it.
type QueueGC struct {
	SucceededRetention *metav1.Duration `json:"succeededRetention,omitempty"`
	FailedRetention    *metav1.Duration `json:"failedRetention,omitempty"`
}

// QueueLimits bound one queue inside the install's limits.
type QueueLimits struct {
	MaxActive  *int `json:"maxActive,omitempty"`
	MaxPerTick *int `json:"maxPerTick,omitempty"`
	// PerGroup caps the unfinished Jobs per value of a column (a tenant).
	PerGroup *PerGroup `json:"perGroup,omitempty"`
	// Rate bounds the queue's creates in any window (rate.go).
	Rate *Rate `json:"rate,omitempty"`
}

// PerGroup is limits.perGroup: at most MaxActive unfinished Jobs per value of Column.
type PerGroup struct {
	Column    string `json:"column"`
	MaxActive int    `json:"maxActive"`
	// MaxRequests bounds, per resource, what each group's unfinished Jobs request in all (their pods' requests):
	// a share of resources per tenant where Jobs differ in size (job.requestsFrom).
	MaxRequests map[corev1.ResourceName]resource.Quantity `json:"maxRequests,omitempty"`
	// Rate bounds each group's creates in any window (rate.go).
	Rate *Rate `json:"rate,omitempty"`
}

// explicitQueues says the file has queues: (not the one implicit queue).
func (c *Config) explicitQueues() bool { return len(c.Queues) > 0 && !c.Queues[0].Implicit }

// DefaultQueue is the index of the queue a Job without the queue label belongs to: the queue named after the install
// if there is one, else the first. (A Job of today's single-queue config so stays its queue's after an upgrade to
// queues: with a queue named after the install.)
func (c *Config) DefaultQueue() int {
	for i, q := range c.Queues {
		if q.Name == c.Name {
			return i
		}
	}
	return 0
}

// QueueIndex is the index of the queue a Job with queue label value label belongs to: that queue, else (no label,
// or a queue no longer in the file) DefaultQueue.
func (c *Config) QueueIndex(label string) int {
	if label != "" {
		for i, q := range c.Queues {
			if !q.Implicit && q.Name == label {
				return i
			}
		}
	}
	return c.DefaultQueue()
}

// AllQueues is Queues, or for a configuration built without Parse (no Queues) its one implicit queue.
func (c *Config) AllQueues() []Queue {
	if len(c.Queues) == 0 {
		return []Queue{c.implicitQueue()}
	}
	return c.Queues
}

// QueueConfig is queue i seen as a whole configuration, for the parts that render, decide and read one queue: the
// top level with the queue's source, job, template, env, retry, gc, kueue and limits.maxActive/maxPerTick. For the
// implicit queue it is c itself.
func (c *Config) QueueConfig(i int) *Config {
	if len(c.Queues) == 0 || c.Queues[i].Implicit {
		return c
	}
	q := c.Queues[i]
	v := *c
	v.Source = Source{DSNEnv: c.Source.DSNEnv, DSNFile: c.Source.DSNFile, Query: q.Source.Query, Key: q.Source.Key, Timeout: q.Source.Timeout,
		CancelQuery: q.Source.CancelQuery}
	v.Job, v.Template, v.Env, v.Kueue = q.Job, q.Template, *q.Env, q.Kueue
	v.Retry = Retry{MaxAttempts: q.Retry.MaxAttempts, Backoff: q.Retry.Backoff, MaxBackoff: q.Retry.MaxBackoff, DeadRetention: *q.Retry.DeadRetention}
	v.GC = GC{SucceededRetention: *q.GC.SucceededRetention}
	v.Limits.MaxActive, v.Limits.MaxPerTick = q.Limits.MaxActive, q.Limits.MaxPerTick
	v.Queues = c.Queues[i : i+1 : i+1]
	v.QueueName = q.Name
	return &v
}

// PerGroup is the limits.perGroup of a queue's view (QueueConfig), nil when it has none (or c is not one queue's).
func (c *Config) PerGroup() *PerGroup {
	if len(c.Queues) != 1 {
		return nil
	}
	return c.Queues[0].Limits.PerGroup
}

// implicitQueue is the one queue of a file without queues:, after defaults.
func (c *Config) implicitQueue() Queue {
	env := c.Env
	dead := c.Retry.DeadRetention
	succeeded := c.GC.SucceededRetention
	return Queue{Name: c.Name, Weight: ptr.To(DefaultWeight), Source: Source{Query: c.Source.Query, Key: c.Source.Key, Timeout: c.Source.Timeout, CancelQuery: c.Source.CancelQuery},
		Job: c.Job, Env: &env, Kueue: c.Kueue,
		Retry:    &QueueRetry{MaxAttempts: c.Retry.MaxAttempts, Backoff: c.Retry.Backoff, MaxBackoff: c.Retry.MaxBackoff, DeadRetention: &dead},
		GC:       &QueueGC{SucceededRetention: &succeeded},
		Limits:   QueueLimits{MaxActive: c.Limits.MaxActive, MaxPerTick: c.Limits.MaxPerTick},
		Template: c.Template, Implicit: true}
}

// resolveQueues fills each queue of queues: with what it inherits and the defaults, before the top level's own
// defaults are applied (a queue's retry.backoff, say, decides its default maxBackoff, not the top's default).
func (c *Config) resolveQueues() {
	for i := range c.Queues {
		q := &c.Queues[i]
		if q.Weight == nil {
			q.Weight = ptr.To(DefaultWeight)
		}
		if q.Source.Timeout.Duration == 0 {
			q.Source.Timeout = c.Source.Timeout
		}
		if q.Source.Timeout.Duration == 0 {
			q.Source.Timeout.Duration = DefaultTimeout
		}
		if q.Job.NamePrefix == "" && q.Name != "" {
			q.Job.NamePrefix = c.Name + "-" + q.Name
		}
		env := c.Env
		if o := q.Env; o != nil {
			if o.Prefix != "" {
				env.Prefix = o.Prefix
			}
			if o.Columns != nil {
				env.Columns = o.Columns
			}
			if o.Passthrough != nil {
				env.Passthrough = o.Passthrough
			}
		}
		q.Env = &env
		r := QueueRetry{MaxAttempts: c.Retry.MaxAttempts, Backoff: c.Retry.Backoff, MaxBackoff: c.Retry.MaxBackoff,
			DeadRetention: &metav1.Duration{Duration: c.Retry.DeadRetention.Duration}}
		if o := q.Retry; o != nil {
			r.MaxAttempts = cmp.Or(o.MaxAttempts, r.MaxAttempts)
			r.Backoff = cmp.Or(o.Backoff, r.Backoff)
			r.MaxBackoff = cmp.Or(o.MaxBackoff, r.MaxBackoff)
			r.DeadRetention = cmp.Or(o.DeadRetention, r.DeadRetention)
		}
		if r.MaxAttempts == nil {
			r.MaxAttempts = ptr.To(DefaultMaxAttempts)
		}
		if r.Backoff == nil {
			r.Backoff = &metav1.Duration{Duration: DefaultBackoff}
		}
		if r.MaxBackoff == nil {
			r.MaxBackoff = &metav1.Duration{Duration: max(DefaultMaxBackoff, r.Backoff.Duration)}
		}
		q.Retry = &r
		g := QueueGC{SucceededRetention: &metav1.Duration{Duration: c.GC.SucceededRetention.Duration}}
		if o := q.GC; o != nil {
			g.SucceededRetention = cmp.Or(o.SucceededRetention, g.SucceededRetention)
			g.FailedRetention = o.FailedRetention // the top's is reported at the top
		}
		q.GC = &g
		if c.Kueue != nil || q.Kueue != nil {
			k := Kueue{}
			if c.Kueue != nil {
				k = *c.Kueue
			}
			if o := q.Kueue; o != nil {
				k.LocalQueue = cmp.Or(o.LocalQueue, k.LocalQueue)
				k.PriorityClass = cmp.Or(o.PriorityClass, k.PriorityClass)
				k.PriorityColumn = cmp.Or(o.PriorityColumn, k.PriorityColumn)
			}
			q.Kueue = &k
		}
		q.Limits.MaxActive = cmp.Or(q.Limits.MaxActive, c.Limits.MaxActive)
		q.Limits.MaxPerTick = cmp.Or(q.Limits.MaxPerTick, c.Limits.MaxPerTick)
		if q.Limits.MaxActive == nil {
			q.Limits.MaxActive = ptr.To(DefaultMaxActive)
		}
		if q.Limits.MaxPerTick == nil {
			q.Limits.MaxPerTick = ptr.To(DefaultMaxPerTick)
		}
	}
}

// queueAt is where queue i's problems are.
func (c *Config) queueAt(i int) at { return at{queue: i + 1, name: c.Queues[i].Name} }

// validateQueues checks every queue of queues:, each problem naming the queue by index and name.
func (c *Config) validateQueues() []error {
	var errs []error
	names := map[string]int{}
	prefixes := map[string]int{}
	for i, q := range c.Queues {
		path := c.queueAt(i)
		bad := badAt(&errs, path)
		switch msgs := validation.IsDNS1123Label(q.Name); {
		case q.Name == "":
			bad("name", "required")
		case len(msgs) > 0:
			bad("name", "%q is not a DNS-1123 label: %s", q.Name, strings.Join(msgs, "; "))
		}
		if j, ok := names[q.Name]; ok && q.Name != "" {
			bad("name", "%q is also the name of queues[%d]: each queue needs its own", q.Name, j)
		} else {
			names[q.Name] = i
		}
		count(bad, "weight", q.Weight, 1)
		if q.Source.DSNEnv != "" || q.Source.DSNFile != "" {
			bad("source", "dsnEnv and dsnFile are the install's: one connection for every queue, in the top-level source")
		}
		if q.Source.Notify != "" || q.Source.Poll.Duration != 0 {
			bad("source", "notify and poll are the install's: one wake for every queue, in the top-level source")
		}
		errs = append(errs, validateSource(path, q.Source)...)
		errs = append(errs, validateJob(path, q.Job)...)
		if p := q.Job.NamePrefix; p != "" {
			if j, ok := prefixes[p]; ok {
				bad("job.namePrefix", "%q is also the name prefix of %s: the queues' Job names would collide (set job.namePrefix)",
					p, strings.TrimSuffix(c.queueAt(j).String(), "."))
			} else {
				prefixes[p] = i
			}
			// A Job's name is the prefix, "-", then the key's readable part: "r-" + "b-…" is "r-b-" + "…".
			for j := range i {
				other := c.Queues[j].Job.NamePrefix
				switch of := strings.TrimSuffix(c.queueAt(j).String(), "."); {
				case other == "":
				case strings.HasPrefix(p, other+"-"):
					bad("job.namePrefix", "%q begins with %q, the name prefix of %s: the queues' Job names could collide (set job.namePrefix so that neither begins with the other and a dash)",
						p, other+"-", of)
				case strings.HasPrefix(other, p+"-"):
					bad("job.namePrefix", "%q is how %q, the name prefix of %s, begins: the queues' Job names could collide (set job.namePrefix so that neither begins with the other and a dash)",
						p+"-", other, of)
				}
			}
		}
		errs = append(errs, validateEnv(path, *q.Env)...)
		errs = append(errs, validateGC(path, *q.GC.SucceededRetention, q.GC.FailedRetention)...)
		errs = append(errs, validateRetry(path, q.Retry.MaxAttempts, q.Retry.Backoff, q.Retry.MaxBackoff, q.Retry.DeadRetention.Duration)...)
		if c.KueueMode() {
			errs = append(errs, kueueRequired(path, q.Kueue)...)
		} else if c.Queues[i].Kueue != nil && c.Kueue == nil {
			bad("kueue", "is read only with limits.capacity: kueue (it is %s)", c.Limits.Capacity)
		}
		count(bad, "limits.maxActive", q.Limits.MaxActive, 1)
		count(bad, "limits.maxPerTick", q.Limits.MaxPerTick, 1)
		if g := q.Limits.PerGroup; g != nil {
			if g.Column == "" {
				bad("limits.perGroup.column", "required: the column whose value is the group (a tenant)")
			}
			checkCount(bad, "limits.perGroup.maxActive", &g.MaxActive, 1, true)
			validateGroupRequests(bad, g.MaxRequests)
		}
	}
	return errs
}

// loadQueueTemplates reads each queue's job.template (relative to the file) and checks its job.container.
func (c *Config) loadQueueTemplates(ctx context.Context) []error {
	if !c.explicitQueues() {
		return nil
	}
	var errs []error
	for i := range c.Queues {
		q := &c.Queues[i]
		if q.Job.Template == "" {
			continue
		}
		file := q.Job.Template
		if !filepath.IsAbs(file) {
			file = filepath.Join(filepath.Dir(c.File), file)
		}
		tpl, err := loadTemplate(ctx, file, c.KueueMode())
		if err != nil {
			errs = append(errs, templateError(c.File, c.queueAt(i).String()+"job.template", err))
			continue
		}
		q.Template = tpl
		for _, e := range c.QueueConfig(i).validateContainer() {
			errs = append(errs, fmt.Errorf("%s%w", c.queueAt(i), e))
		}
	}
	return errs
}
