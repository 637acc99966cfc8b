package config

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// twoQueues is the shape: install limits, a queue with tenants and one with a weight, and top-level env,
// retry and gc that the queues inherit.
const twoQueues = `
apiVersion: jobsched.io/v1alpha1
kind: Config
name: batch
namespace: work
source: {dsnEnv: PG, timeout: 5s}
limits: {maxActive: 20, maxPerTick: 10, capacity: off}
env: {prefix: T_, columns: [id]}
retry: {maxAttempts: 5, backoff: 2m}
gc: {succeededRetention: 1h}
queues:
- name: reports
  priority: 10
  source: {query: "SELECT id, tenant FROM reports ORDER BY id", key: id}
  job: {template: job.yaml}
  env: {columns: [id, tenant]}
  retry: {backoff: 2h}
  limits: {maxActive: 8, maxPerTick: 5, perGroup: {column: tenant, maxActive: 2}}
- name: exports
  weight: 3
  source: {query: "SELECT id FROM exports ORDER BY id", key: id, timeout: 1m}
  job: {template: job.yaml, namePrefix: exp}
  gc: {succeededRetention: 0s}
`

func TestQueuesResolved(t *testing.T) {
	cfg, err := Load(write(t, map[string]string{"jobsched.yaml": twoQueues}), "")
	if err != nil {
		t.Fatal(err)
	}
	v := cfg.QueueConfig(0)
	for i := range cfg.Queues {
		if cfg.Queues[i].Template == nil {
			t.Fatalf("queue %d: no template", i)
		}
	}
	cfg = &Config{Queues: cfg.Queues[:2:2], Limits: cfg.Limits}
	cfg.Queues = append([]Queue(nil), cfg.Queues...)
	for i := range cfg.Queues {
		cfg.Queues[i].Template = nil
	}
	d := func(x time.Duration) *metav1.Duration { return &metav1.Duration{Duration: x} }
	want := []Queue{
		{Name: "reports", Priority: 10, Weight: ptr.To(1),
			Source: Source{Query: "SELECT id, tenant FROM reports ORDER BY id", Key: "id", Timeout: *d(5 * time.Second)},
			Job:    Job{Template: "job.yaml", NamePrefix: "batch-reports"},
			Env:    &Env{Prefix: "T_", Columns: []string{"id", "tenant"}}, // replaced, not appended
			// backoff is the queue's; maxBackoff defaults from it (not from the top's default), maxAttempts inherited.
			Retry:  &QueueRetry{MaxAttempts: ptr.To(5), Backoff: d(2 * time.Hour), MaxBackoff: d(2 * time.Hour), DeadRetention: d(0)},
			GC:     &QueueGC{SucceededRetention: d(time.Hour)},
			Limits: QueueLimits{MaxActive: ptr.To(8), MaxPerTick: ptr.To(5), PerGroup: &PerGroup{Column: "tenant", MaxActive: 2}}},
		{Name: "exports", Weight: ptr.To(3),
			Source: Source{Query: "SELECT id FROM exports ORDER BY id", Key: "id", Timeout: *d(time.Minute)},
			Job:    Job{Template: "job.yaml", NamePrefix: "exp"},
			Env:    &Env{Prefix: "T_", Columns: []string{"id"}},
			Retry:  &QueueRetry{MaxAttempts: ptr.To(5), Backoff: d(2 * time.Minute), MaxBackoff: d(time.Hour), DeadRetention: d(0)},
			GC:     &QueueGC{SucceededRetention: d(0)}, // a queue's explicit 0 replaces the top's 1h
			Limits: QueueLimits{MaxActive: ptr.To(20), MaxPerTick: ptr.To(10)}},
	}
	if diff := cmp.Diff(want, cfg.Queues); diff != "" {
		t.Errorf("queues (-want +got):\n%s", diff)
	}
	if cfg.MaxActive() != 20 || cfg.MaxPerTick() != 10 {
		t.Errorf("install limits %d/%d, want 20/10", cfg.MaxActive(), cfg.MaxPerTick())
	}
	if v.QueueName != "reports" || v.Source.DSNEnv != "PG" || v.Source.Query != want[0].Source.Query || v.MaxActive() != 8 ||
		v.MaxPerTick() != 5 || v.BackoffAfter(1) != 2*time.Hour || v.GC.SucceededRetention.Duration != time.Hour ||
		v.Job.NamePrefix != "batch-reports" || v.Template == nil || v.Limits.Capacity != CapacityOff {
		t.Errorf("QueueConfig(0) = %+v", v)
	}
	cfg.Name = "batch"
	if cfg.QueueIndex("exports") != 1 || cfg.QueueIndex("") != 0 || cfg.QueueIndex("gone") != 0 {
		t.Error("QueueIndex: a labelled Job is its queue's; others the first queue's (no queue is named batch)")
	}
}

// TestImplicitQueue: today's file is one implicit queue, and its view is the config itself.
func TestImplicitQueue(t *testing.T) {
	cfg, err := Load(write(t, map[string]string{"jobsched.yaml": minimal}), "")
	if err != nil {
		t.Fatal(err)
	}
	if len(cfg.Queues) != 1 || !cfg.Queues[0].Implicit || cfg.QueueConfig(0) != cfg || cfg.QueueConfig(0).QueueName != "" {
		t.Errorf("queues %+v: want one implicit queue whose view is the config", cfg.Queues)
	}
}

// TestDefaultQueueNamedAfterInstall: a Job without the label belongs to the queue named after the install.
func TestDefaultQueueNamedAfterInstall(t *testing.T) {
	file := strings.Replace(twoQueues, "- name: exports", "- name: batch", 1)
	cfg, err := Load(write(t, map[string]string{"jobsched.yaml": file}), "")
	if err != nil {
		t.Fatal(err)
	}
	if cfg.DefaultQueue() != 1 || cfg.QueueIndex("") != 1 {
		t.Errorf("DefaultQueue = %d, want 1 (the queue named batch)", cfg.DefaultQueue())
	}
}

func TestQueuesErrors(t *testing.T) {
	base := "name: batch\nqueues:\n"
	q := func(name, rest string) string {
		return "- name: " + name + "\n  source: {query: q, key: id}\n  job: {template: job.yaml}\n" + rest
	}
	tests := []struct {
		name, config string
		want         []string
	}{
		{"apiVersion and kind", "apiVersion: jobsched.io/v2\nkind: Cfg\n" + base + q("a", ""),
			[]string{`apiVersion: "jobsched.io/v2" is not jobsched.io/v1alpha1`, `kind: "Cfg" is not Config`}},
		{"query, key and job at the top", "name: batch\nsource: {query: q, key: id}\njob: {template: job.yaml}\nqueues:\n" + q("a", ""),
			[]string{"source.query: with queues: each queue has its own query: move it into a queue",
				"source.key: with queues:", "job: with queues: each queue has its own job: move it into a queue"}},
		{"queue limits", base + q("a", "") + q("exports", "  limits: {maxActive: 0, maxPerTick: 0, perGroup: {maxActive: 0}}\n"),
			[]string{"queues[1] (exports).limits.maxActive: must be at least 1", "queues[1] (exports).limits.maxPerTick: must be at least 1",
				"queues[1] (exports).limits.perGroup.column: required", "queues[1] (exports).limits.perGroup.maxActive: required: at least 1"}},
		{"a group's request cap", base + q("a", "  limits: {perGroup: {column: t, maxActive: 2, maxRequests: {cpu: 0, memory: 2E, gpu: 1}}}\n"),
			[]string{"queues[0] (a).limits.perGroup.maxRequests.cpu: must be more than 0, not 0",
				"queues[0] (a).limits.perGroup.maxRequests.memory: 2E is more than 1E",
				`queues[0] (a).limits.perGroup.maxRequests: "gpu" is not a resource a container requests`}},
		{"names", base + q("A_1", "") + q("b", "") + q("b", "") + "- source: {query: q, key: id}\n  job: {template: job.yaml}\n",
			[]string{`queues[0].name: "A_1" is not a DNS-1123 label`, `queues[2] (b).name: "b" is also the name of queues[1]`,
				"queues[3].name: required"}},
		{"weight", base + q("a", "  weight: 0\n"), []string{"queues[0] (a).weight: must be at least 1, not 0"}},
		{"a cancel query at the top, an empty one in a queue", "name: batch\nsource: {cancelQuery: c}\nqueues:\n" +
			"- name: a\n  source: {query: q, key: id, cancelQuery: \" ; \"}\n  job: {template: job.yaml}\n",
			[]string{"source.cancelQuery: with queues: each queue has its own cancel query: move it into a queue (queues[].source.cancelQuery)",
				"queues[0] (a).source.cancelQuery: is empty: leave it out, or give the SELECT that returns the keys to cancel"}},
		{"prefixes collide", base + q("a", "") + "- name: b\n  source: {query: q, key: id}\n  job: {template: job.yaml, namePrefix: batch-a}\n",
			[]string{`queues[1] (b).job.namePrefix: "batch-a" is also the name prefix of queues[0] (a)`}},
		{"a prefix begins with another and a dash (issue 29.9)", base + "- name: one\n  source: {query: q, key: id}\n  job: {template: job.yaml, namePrefix: r}\n" +
			"- name: two\n  source: {query: q, key: id}\n  job: {template: job.yaml, namePrefix: r-b}\n",
			[]string{`queues[1] (two).job.namePrefix: "r-b" begins with "r-", the name prefix of queues[0] (one): the queues' Job names could collide (set job.namePrefix`}},
		{"default prefix too long", base + q(strings.Repeat("q", 40), ""),
			[]string{"job.namePrefix:", "longer than 40 characters (set job.namePrefix to a shorter one)"}},
		{"a queue's own keys", base + "- name: a\n  source: {dsnEnv: X}\n  job: {container: nope}\n  retry: {maxAttempts: 0}\n  env: {prefix: x-}\n  gc: {failedRetention: 1h}\n",
			[]string{"queues[0] (a).source: dsnEnv and dsnFile are the install's", "queues[0] (a).source.query: required",
				"queues[0] (a).source.key: required", "queues[0] (a).job.template: required", "queues[0] (a).retry.maxAttempts: must be at least 1",
				`queues[0] (a).env.prefix: "x-" may only hold`, "queues[0] (a).gc.failedRetention: was replaced by retry"}},
		{"notify and poll in a queue", base + "- name: a\n  source: {query: q, key: id, notify: chan, poll: 5s}\n  job: {template: job.yaml}\n",
			[]string{"queues[0] (a).source: notify and poll are the install's: one wake for every queue, in the top-level source"}},
		{"template and container", base + q("a", "") + "- name: b\n  source: {query: q, key: id}\n  job: {template: nope.yaml}\n" +
			"- name: c\n  source: {query: q, key: id}\n  job: {template: job.yaml, container: nope}\n",
			[]string{"queues[1] (b).job.template:", "nope.yaml", `queues[2] (c).job.container: the template has no container named "nope"`}},
		{"a wrong type in a queue is one problem", base + "- name: a\n  source: {query: q, key: [1]}\n  job: {template: job.yaml}\n",
			[]string{"queues[0].source.key"}},
		{"unknown key in a queue", base + q("a", "  limits: {capacity: nodes}\n"), []string{"unknown key(s): queues[0].limits.capacity"}},
		{"kueue without the mode", base + q("a", "  kueue: {localQueue: lq}\n"), []string{"queues[0] (a).kueue: is read only with limits.capacity: kueue"}},
		{"kueue localQueue per queue", "name: batch\nlimits: {capacity: kueue}\nqueues:\n" + q("a", "") + q("b", "  kueue: {localQueue: lq}\n"),
			[]string{"queues[0] (a).kueue.localQueue: required with limits.capacity: kueue"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Load(write(t, map[string]string{"jobsched.yaml": tc.config}), "")
			if err == nil || !IsConfigError(err) {
				t.Fatalf("error %v, want a config error", err)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not mention %q", err, w)
				}
			}
			if tc.name == "a wrong type in a queue is one problem" && strings.Contains(err.Error(), "source.key: required") {
				t.Errorf("error %q: a key of the wrong type is not also required", err)
			}
		})
	}
}

// TestQueuesKueueInherited: a queue inherits the top's kueue block key by key.
func TestQueuesKueueInherited(t *testing.T) {
	file := "name: batch\nlimits: {capacity: kueue}\nkueue: {localQueue: lq, priorityClass: low}\nqueues:\n" +
		"- name: a\n  source: {query: q, key: id}\n  job: {template: job.yaml}\n  kueue: {priorityClass: high}\n"
	cfg, err := Load(write(t, map[string]string{"jobsched.yaml": file}), "")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(&Kueue{LocalQueue: "lq", PriorityClass: "high"}, cfg.QueueConfig(0).Kueue); diff != "" {
		t.Errorf("kueue (-want +got):\n%s", diff)
	}
}
