//go:build integration

package e2e

import (
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/jobsched/jobsched/pkg/jobmeta"
	"github.com/jobsched/jobsched/pkg/testkit/apicalls"
	"github.com/jobsched/jobsched/pkg/testkit/runinfo"
)

// The tests of several queues in one install (issue 20): one observation of the cluster for all queues, the
// install's caps across them, priorities and weights between them, heterogeneous fit and tenants (perGroup).
// Each scenario's queues read their rows from the scenario's table, told apart by the column queue; the column
// tenant is the group of limits.perGroup.

// Labels and annotations of the contract (issue 20): a Job of an explicit queue carries its queue, a Job of a
// queue with limits.perGroup its group.
const (
	labelQueue      = "jobsched.io/queue"
	annotationGroup = "jobsched.io/group"
	labelGroup      = "jobsched.io/group"
)

// queueSpec is one queue of a scenario's multi-queue config.
type queueSpec struct {
	name     string
	priority int    // 0: not written (the default)
	weight   int    // 0: not written (the default 1)
	cpu      string // each pod's CPU request; default 100m (taskPodSpec)
	duration string // how long a pod runs (kwok); default 2s (jobTemplate)
	limits   string // the queue's limits as a YAML flow mapping, e.g. "{maxActive: 2}"; "" for none
	columns  string // the query's columns; default "id, url, tenant"
	fail     string // its pods fail (jobTemplate.fail: "true", or "first" for attempt 1 only); "": they succeed
	job      string // more keys of its job block (YAML indented by four spaces), e.g. requestsFrom
}

// queuesConfig is a scenario's install with several queues.
type queuesConfig struct {
	name   string // the install; default "e2e"
	limits string // the install's limits as a YAML flow mapping
	extra  string // more top-level keys (YAML: gc:, retry: …), which the queues inherit
	queues []queueSpec
}

// addQueueColumns adds the columns queue and tenant to the scenario's table.
func (e *env) addQueueColumns() {
	e.t.Helper()
	e.exec(`ALTER TABLE ` + e.table + ` ADD COLUMN IF NOT EXISTS queue text, ADD COLUMN IF NOT EXISTS tenant text`)
}

// newQueuesEnv is newNodeEnv whose table has the queue columns.
func newQueuesEnv(t *testing.T, cpu, memory string) *env {
	t.Helper()
	e := newNodeEnv(t, cpu, memory)
	e.addQueueColumns()
	return e
}

// insertQueue adds n waiting rows of queue with keys prefix-0 … prefix-(n-1), in that order, of tenant ("" = NULL).
func (e *env) insertQueue(queue, prefix, tenant string, n int) []string {
	e.t.Helper()
	var t any
	if tenant != "" {
		t = tenant
	}
	e.exec(`INSERT INTO `+e.table+` (id, url, queue, tenant) SELECT $1 || '-' || i, 'https://example.com/' || $1 || '-' || i, $2, $3
		FROM generate_series(0, $4::int - 1) i ORDER BY i`, prefix, queue, t, n)
	keys := make([]string, n)
	for i := range keys {
		keys[i] = fmt.Sprintf("%s-%d", prefix, i)
	}
	return keys
}

// writeQueues writes the install's jobsched.yaml and one template per queue, and returns the config's path.
func (e *env) writeQueues(c queuesConfig) string {
	e.t.Helper()
	if c.name == "" {
		c.name = "e2e"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "apiVersion: jobsched.io/v1alpha1\nkind: Config\nname: %s\nnamespace: %s\nsource:\n  dsnEnv: DATABASE_URL\nenv:\n  prefix: TASK_\n", c.name, e.ns)
	if c.limits != "" {
		fmt.Fprintf(&b, "limits: %s\n", c.limits)
	}
	b.WriteString(c.extra)
	b.WriteString("queues:\n")
	for _, q := range c.queues {
		if q.columns == "" {
			q.columns = "id, url, tenant"
		}
		tpl := c.name + "-" + q.name
		fmt.Fprintf(&b, "- name: %s\n", q.name)
		if q.priority != 0 {
			fmt.Fprintf(&b, "  priority: %d\n", q.priority)
		}
		if q.weight != 0 {
			fmt.Fprintf(&b, "  weight: %d\n", q.weight)
		}
		fmt.Fprintf(&b, "  source:\n    query: SELECT %s FROM %s WHERE status = 'waiting' AND queue = '%s' ORDER BY n\n    key: id\n    timeout: 10s\n",
			q.columns, e.table, q.name)
		fmt.Fprintf(&b, "  job:\n    template: %s-job.yaml\n%s", tpl, q.job)
		if q.limits != "" {
			fmt.Fprintf(&b, "  limits: %s\n", q.limits)
		}
		e.writeTemplate(tpl, jobTemplate{duration: q.duration, fail: q.fail, podSpec: taskPodSpec(e.pool, "", q.cpu, "")})
	}
	path := filepath.Join(e.dir, c.name+".yaml")
	if err := os.WriteFile(path, []byte(b.String()), 0o600); err != nil {
		e.t.Fatal(err)
	}
	return path
}

// prefixOf is the part of a task key before its last "-": the queue or tenant the scenario gave its rows.
func prefixOf(key string) string {
	if i := strings.LastIndex(key, "-"); i > 0 {
		return key[:i]
	}
	return key
}

// byPrefix counts the Jobs ever created per key prefix (see prefixOf).
func byPrefix(created map[string]int) map[string]int {
	out := map[string]int{}
	for k, n := range created {
		out[prefixOf(k)] += n
	}
	return out
}

// groupWatch watches the namespace's Jobs from now on and keeps, per group (groupOf of a Job), the Jobs unfinished
// now and the most that were unfinished at once.
type groupWatch struct {
	mu         sync.Mutex
	unfinished map[string]map[string]bool // group → names of its unfinished Jobs
	peak       map[string]int
}

func (e *env) watchGroups(groupOf func(*batchv1.Job) string) *groupWatch {
	e.t.Helper()
	g := &groupWatch{unfinished: map[string]map[string]bool{}, peak: map[string]int{}}
	e.followJobs(func(ev watch.Event) {
		job, ok := ev.Object.(*batchv1.Job)
		if !ok {
			return
		}
		group := groupOf(job)
		g.mu.Lock()
		defer g.mu.Unlock()
		if g.unfinished[group] == nil {
			g.unfinished[group] = map[string]bool{}
		}
		if ev.Type == watch.Deleted || jobFinished(job) {
			delete(g.unfinished[group], job.Name)
		} else if ev.Type == watch.Added || ev.Type == watch.Modified {
			g.unfinished[group][job.Name] = true
			g.peak[group] = max(g.peak[group], len(g.unfinished[group]))
		}
	})
	return g
}

func (g *groupWatch) peaks() map[string]int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return maps.Clone(g.peak)
}

// jobsOfQueue counts the namespace's Jobs per value of the label jobsched.io/queue ("" for none).
func jobsOfQueue(jobs []batchv1.Job) map[string]int {
	out := map[string]int{}
	for _, j := range jobs {
		out[j.Labels[labelQueue]]++
	}
	return out
}

// checkQueueLabels fails for each Job whose jobsched.io/queue label (on the Job and its pod template) is not the
// queue its key's prefix names.
func checkQueueLabels(t *testing.T, jobs []batchv1.Job, queueOf func(key string) string) {
	t.Helper()
	for _, j := range jobs {
		want := queueOf(j.Annotations[jobmeta.AnnotationTaskKey])
		if got, pod := j.Labels[labelQueue], j.Spec.Template.Labels[labelQueue]; got != want || pod != want {
			t.Errorf("Job %s: label %s %q, on its pod template %q; want %q", j.Name, labelQueue, got, pod, want)
		}
	}
}

// drain runs passes of cfg (see passUntil) until every key has a Job and no Job is left, or fails after timeout.
// after is called after each pass with its number (0, 1, …).
func (e *env) drain(cfg string, keys []string, l *ledger, timeout time.Duration, after func(tick int)) {
	e.t.Helper()
	ticks, done := 0, 0
	if !e.passUntil(cfg, l, timeout, func(tick int) bool {
		if after != nil {
			after(tick)
		}
		ticks = tick + 1
		created := l.created()
		done = 0
		for _, k := range keys {
			if created[k] > 0 {
				done++
			}
		}
		return done == len(keys) && len(e.jobs()) == 0
	}) {
		e.t.Fatalf("not drained after %d ticks: %d of %d rows got a Job, %d Jobs left", ticks, done, len(keys), len(e.jobs()))
	}
}

// checkOneJobEach fails for every key that got no Job or more than one.
func checkOneJobEach(t *testing.T, keys []string, created map[string]int) {
	t.Helper()
	for _, k := range keys {
		if created[k] != 1 {
			t.Errorf("row %s got %d Jobs, want 1", k, created[k])
		}
	}
}

// TestQueuesMixedFit: two queues of equal priority and weight, one with 2-CPU pods and one with 500m pods, on one
// 4-CPU node. The first pass fills the node exactly (its creates request 4 CPU in all, placed one by one: a 2-CPU
// pod, then 500m pods into the rest); no pod is ever Unschedulable; both queues drain, one Job per row, every Job
// labelled with its queue.
func TestQueuesMixedFit(t *testing.T) {
	t.Parallel()
	e := newQueuesEnv(t, "4", "8Gi")
	keys := append(e.insertQueue("big", "big", "", 4), e.insertQueue("small", "small", "", 8)...)
	cfg := e.writeQueues(queuesConfig{limits: "{maxActive: 20, maxPerTick: 20, capacity: nodes}", queues: []queueSpec{
		{name: "big", cpu: "2", duration: "3s"},
		{name: "small", cpu: "500m", duration: "3s"},
	}})
	l := e.ledger()
	unsched := e.unschedulableEver()
	e.worker()

	var first map[string]int
	e.drain(cfg, keys, l, 4*time.Minute, func(tick int) {
		if tick == 0 {
			first = byPrefix(l.created())
		}
	})
	if got := first["big"]*2000 + first["small"]*500; got != 4000 {
		t.Errorf("the first pass created %v: %dm CPU requested, want exactly the node's 4000m", first, got)
	}
	if first["big"] == 0 || first["small"] == 0 {
		t.Errorf("the first pass created %v: both queues should have Jobs on the node", first)
	}
	if n := unsched(); n != 0 {
		t.Errorf("%d pods were Unschedulable, want 0", n)
	}
	checkOneJobEach(t, keys, l.created())
	var all []batchv1.Job
	for _, k := range keys {
		if j := l.first(k); j != nil {
			all = append(all, *j)
		}
	}
	checkQueueLabels(t, all, prefixOf)
}

// TestQueuesPriority: queue a (priority 10) and queue b (priority 0), 6 rows each, the install's maxActive 2: b gets
// no slot while a has a row without a Job; both drain.
func TestQueuesPriority(t *testing.T) {
	t.Parallel()
	e := newQueuesEnv(t, "8", "16Gi")
	// b's rows first in the table: the order between queues is their priority, not the rows' order.
	keys := append(e.insertQueue("b", "b", "", 6), e.insertQueue("a", "a", "", 6)...)
	cfg := e.writeQueues(queuesConfig{limits: "{maxActive: 2, maxPerTick: 2, capacity: nodes}", queues: []queueSpec{
		{name: "b", duration: "2s"},
		{name: "a", priority: 10, duration: "2s"},
	}})
	l := e.ledger()
	e.worker()
	bFirst := -1
	e.drain(cfg, keys, l, 4*time.Minute, func(tick int) {
		n := byPrefix(l.created())
		t.Logf("tick %d: Jobs created so far %v", tick, n)
		if n["b"] > 0 && bFirst < 0 {
			bFirst = tick
			if n["a"] != 6 {
				t.Errorf("tick %d: b got a Job while %d of a's 6 rows had none", tick, 6-n["a"])
			}
		}
	})
	if bFirst < 0 {
		t.Error("b never got a Job")
	}
	checkOneJobEach(t, keys, l.created())
}

// TestQueuesWeights: queues x (weight 3) and y (weight 1) of equal priority, both with more rows than the passes
// take, Jobs that outlive the test, 4 slots a pass: after each pass x holds 3/4 of the Jobs created so far, ±1.
func TestQueuesWeights(t *testing.T) {
	t.Parallel()
	e := newQueuesEnv(t, "32", "64Gi")
	keys := append(e.insertQueue("x", "x", "", 40), e.insertQueue("y", "y", "", 40)...)
	cfg := e.writeQueues(queuesConfig{limits: "{maxActive: 100, maxPerTick: 4, capacity: nodes}", queues: []queueSpec{
		{name: "x", weight: 3, duration: "10m"},
		{name: "y", weight: 1, duration: "10m"},
	}})
	l := e.ledger()
	for pass := range 6 {
		r := e.tick(cfg)
		if s := r.summary(t); s.Created != 4 {
			t.Errorf("pass %d created %d, want 4 (maxPerTick)", pass, s.Created)
		}
		e.eventually("the watch sees the pass's creates", 30*time.Second, func() bool {
			n := 0
			for _, c := range l.created() {
				n += c
			}
			return n == 4*(pass+1)
		})
		n := byPrefix(l.created())
		total := n["x"] + n["y"]
		t.Logf("after pass %d: x %d, y %d", pass, n["x"], n["y"])
		if d := 4*n["x"] - 3*total; d < -4 || d > 4 { // |x - 3/4 total| <= 1
			t.Errorf("after pass %d: x %d and y %d of %d, want x = 3/4 of them ±1", pass, n["x"], n["y"], total)
		}
	}
	for _, k := range keys {
		if c := l.created()[k]; c > 1 {
			t.Errorf("row %s got %d Jobs", k, c)
		}
	}
	checkQueueLabels(t, e.jobs(), prefixOf)
}

// TestQueuesInstallMaxActive: three queues whose own maxActive (4 each) add up to more than the install's (5):
// five ticks racing at once (the install's Lease serialises them) leave exactly 5 unfinished Jobs, never more at
// once, and a further tick creates nothing.
func TestQueuesInstallMaxActive(t *testing.T) {
	t.Parallel()
	e := newQueuesEnv(t, "32", "64Gi")
	for _, q := range []string{"q1", "q2", "q3"} {
		e.insertQueue(q, q, "", 10)
	}
	var qs []queueSpec
	for _, q := range []string{"q1", "q2", "q3"} {
		qs = append(qs, queueSpec{name: q, duration: "10m", limits: "{maxActive: 4}"})
	}
	cfg := e.writeQueues(queuesConfig{limits: "{maxActive: 5, maxPerTick: 10, capacity: nodes}", queues: qs})
	l := e.ledger()
	created := e.racingHeldTicks(t, 5, cfg)
	if n, all := e.unfinished(), len(e.jobs()); n != 5 || all != 5 || created != 5 {
		t.Errorf("%d unfinished Jobs (%d in all), %d created by the passes; want exactly 5", n, all, created)
	}
	if s := e.tick(cfg).summary(t); s.Created != 0 {
		t.Errorf("a further tick created %d, want 0 (the install's maxActive 5 is reached)", s.Created)
	}
	if p := l.peakUnfinished(); p > 5 {
		t.Errorf("%d Jobs were unfinished at once, want at most 5", p)
	}
	for q, n := range jobsOfQueue(e.jobs()) {
		if n > 4 {
			t.Errorf("queue %q holds %d Jobs, over its maxActive 4", q, n)
		}
	}
	checkQueueLabels(t, e.jobs(), prefixOf)
}

// TestQueuesTenants: one queue with limits.perGroup {column: tenant, maxActive: 2}, tenant big with 100 rows first
// in the query's order, then tenants a and b with 5 each: a and b get Jobs in the first pass, no tenant ever has
// more than 2 unfinished Jobs, each Job carries its tenant (annotation and label), and a and b drain.
func TestQueuesTenants(t *testing.T) {
	t.Parallel()
	e := newQueuesEnv(t, "32", "64Gi")
	e.insertQueue("work", "big", "big", 100)
	small := append(e.insertQueue("work", "a", "a", 5), e.insertQueue("work", "b", "b", 5)...)
	cfg := e.writeQueues(queuesConfig{limits: "{maxActive: 20, maxPerTick: 10, capacity: nodes}", queues: []queueSpec{
		{name: "work", duration: "2s", limits: "{maxActive: 10, perGroup: {column: tenant, maxActive: 2}}"},
	}})
	l := e.ledger()
	groups := e.watchGroups(func(j *batchv1.Job) string { return prefixOf(j.Annotations[jobmeta.AnnotationTaskKey]) })
	e.worker()
	var n map[string]int
	if !e.passUntil(cfg, l, 4*time.Minute, func(tick int) bool {
		n = byPrefix(l.created())
		t.Logf("tick %d: Jobs created so far %v, most unfinished at once %v", tick, n, groups.peaks())
		if tick == 0 && (n["a"] == 0 || n["b"] == 0) {
			t.Errorf("the first pass created %v: a and b should get Jobs in it", n)
		}
		return n["a"] == 5 && n["b"] == 5
	}) {
		t.Fatalf("a and b not drained: %v", n)
	}
	for g, p := range groups.peaks() {
		if p > 2 {
			t.Errorf("tenant %s had %d unfinished Jobs at once, want at most 2", g, p)
		}
	}
	checkOneJobEach(t, small, l.created())
	for _, j := range e.jobs() {
		tenant := prefixOf(j.Annotations[jobmeta.AnnotationTaskKey])
		if j.Annotations[annotationGroup] != tenant || j.Labels[labelGroup] != tenant {
			t.Errorf("Job %s: group annotation %q and label %q, want %q", j.Name, j.Annotations[annotationGroup], j.Labels[labelGroup], tenant)
		}
	}
}

// TestQueuesCallsPerPass: the API calls of one tick, counted by the API server (apiserver_request_total before and
// after), for an install of today's single-queue shape, one with one queue and one with five, side by side in one
// run, on a control plane of the test's own whose controller-manager is stopped once the node is Ready (so the
// created Jobs make no pods and nothing else writes). Every tick creates 10 Jobs (the five queues share them, 2
// each) and the API calls per pass are the same, verb by resource, for all three: one observation for the install
// (the five queues' reads are SQL, not API calls). Each install's first tick (it creates the install's Lease) is not
// measured; each count is the least of five alternating rounds after it: another client's call in a round (a node
// heartbeat, the API server's own lease) only adds. (With three, under CI's load, every round of one install once
// caught another writer's Lease renewal.) With JOBSCHED_QUEUES_CALLS set to a file (relative to the
// repository), the table is written there.
func TestQueuesCallsPerPass(t *testing.T) {
	t.Parallel() // its own control plane counts the calls: no other test reaches it
	reused := os.Getenv("JOBSCHED_QUEUES_CLUSTER_DIR")
	// Other writers of Leases count as PUT leases too: kwok renews its node's every quarter of
	// nodeLeaseDurationSeconds (40s by default: every 10s), which a round of ticks slowed by a loaded machine often
	// spans; 600s renews it every 150s (kwok's other options: their defaults, which a config must name). The API
	// server's own Lease, every 10s, remains: hence the rounds.
	kwokCfg := filepath.Join(t.TempDir(), "kwok.yaml")
	if err := os.WriteFile(kwokCfg, []byte("apiVersion: config.kwok.x-k8s.io/v1alpha1\nkind: KwokConfiguration\noptions:\n"+
		"  nodeLeaseDurationSeconds: 600\n  nodeLeaseParallelism: 4\n  podPlayStageParallelism: 4\n  nodePlayStageParallelism: 4\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	kcfg, dir := ownCluster(t, reused, "cluster-queues-test-", map[string]string{"NODES": "0", "KWOK_ARGS": "--config " + kwokCfg})
	e := newEnvOn(t, kcfg)
	e.addQueueColumns()
	e.addNode("n0", "1000", "4000Gi", 5000, nil)
	cluster := map[string]string{"JOBSCHED_CLUSTER_DIR": dir}
	if _, err := runScript(cluster, "cluster.sh", "kill", "kube-controller-manager"); err != nil { // from now on the Jobs make no pods
		t.Fatal(err)
	}
	if reused != "" { // a reused cluster gets back the controller-manager the test stops
		t.Cleanup(func() {
			if _, err := runScript(cluster, "cluster.sh", "up"); err != nil {
				t.Error(err)
			}
		})
	}

	const perTick, rounds = 10, 5
	e.insertQueue("today", "today", "", perTick*(rounds+1))
	e.insertQueue("one", "one", "", perTick*(rounds+1))
	var five []queueSpec
	for i := range 5 {
		q := fmt.Sprintf("five%d", i)
		e.insertQueue(q, q, "", perTick*(rounds+1))
		five = append(five, queueSpec{name: q, cpu: fmt.Sprintf("%dm", 100+10*i), duration: "10m"})
	}
	limits := fmt.Sprintf("{maxActive: 1000, maxPerTick: %d, capacity: nodes}", perTick)
	today := e.writeConfig(config{name: "today", duration: "10m", where: "queue = 'today'",
		extra: fmt.Sprintf("limits:\n  maxActive: 1000\n  maxPerTick: %d\n  capacity: nodes\n", perTick)})
	installs := []struct{ name, cfg string }{
		{"today's config (no queues:)", today},
		{"1 queue", e.writeQueues(queuesConfig{name: "one", limits: limits, queues: []queueSpec{{name: "one", duration: "10m"}}})},
		{"5 queues", e.writeQueues(queuesConfig{name: "five", limits: limits, queues: five})},
	}
	for _, in := range installs { // the first tick of an install creates its Lease; the rounds measure the next ones
		if s := e.tick(in.cfg).summary(t); s.Created != perTick {
			t.Fatalf("%s: the first tick created %d, want %d", in.name, s.Created, perTick)
		}
	}
	calls := make([]map[string]int, len(installs)) // the least count per "VERB resource" over the rounds
	for round := range rounds {
		for i, in := range installs {
			before := apiRequests(t, e)
			// The Lease is renewed every third of its duration: a tick slowed past 5 s by a loaded machine would
			// count a renewal that is time's, not the install's. A long Lease leaves the acquire and the release.
			r := e.jobsched("tick", "--config", in.cfg, "--lease-duration", "10m")
			if r.code != 0 {
				t.Fatalf("round %d, %s: tick exited %d:\n%s", round, in.name, r.code, r.stderr)
			}
			s := r.summary(t)
			after := apiRequests(t, e)
			if s.Created != perTick {
				t.Fatalf("round %d, %s: the tick created %d, want %d", round, in.name, s.Created, perTick)
			}
			got := apicalls.Between(before, after)
			if round == 0 {
				calls[i] = got
				continue
			}
			for k := range calls[i] {
				calls[i][k] = min(calls[i][k], got[k]) // a key absent from this round is 0
				if calls[i][k] == 0 {
					delete(calls[i], k)
				}
			}
		}
	}
	table := callsTable(installs[0].name, installs[1].name, installs[2].name, calls)
	t.Logf("API calls per pass (the least of %d rounds):\n%s", rounds, table)
	for i := 1; i < len(installs); i++ {
		if !maps.Equal(calls[0], calls[i]) {
			t.Errorf("the calls per pass of %s differ from those of %s:\n%s", installs[i].name, installs[0].name, table)
		}
	}
	if out := os.Getenv("JOBSCHED_QUEUES_CALLS"); out != "" {
		if !filepath.IsAbs(out) {
			out = filepath.Join("..", "..", out)
		}
		doc := "# API calls per pass with 1 and 5 queues (written by TestQueuesCallsPerPass; do not edit)\n\n" +
			fmt.Sprintf("%s, commit %s; %s.\n\n", time.Now().UTC().Format("2006-01-02"), runinfo.Commit(), machine()) +
			fmt.Sprintf("One tick creating %d Jobs, counted by the API server (apiserver_request_total before and after; every client; "+
				"cluster-wide WATCHes, other clients' informers, left out; a namespaced WATCH is a streaming list), the least of %d "+
				"alternating rounds (each tick with --lease-duration 10m, so that no renewal falls in it), on a control plane whose controller-manager is stopped (the Jobs make no pods). The five "+
				"queues share the %d creates (2 each) and have templates of different CPU requests; every install uses capacity: "+
				"nodes on one node.\n\n", perTick, rounds, perTick) + table
		if err := os.WriteFile(out, []byte(doc), 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("wrote %s", out)
	}
}

// callsTable is the calls per pass of three installs side by side, one line per "VERB resource".
func callsTable(a, b, c string, calls []map[string]int) string {
	var keys []string
	for _, m := range calls {
		for k := range m {
			if !slices.Contains(keys, k) {
				keys = append(keys, k)
			}
		}
	}
	slices.Sort(keys)
	var sb strings.Builder
	fmt.Fprintf(&sb, "| call | %s | %s | %s |\n|---|--:|--:|--:|\n", a, b, c)
	totals := make([]int, len(calls))
	for _, k := range keys {
		fmt.Fprintf(&sb, "| %s |", k)
		for i, m := range calls {
			fmt.Fprintf(&sb, " %d |", m[k])
			totals[i] += m[k]
		}
		sb.WriteString("\n")
	}
	fmt.Fprintf(&sb, "| all | %d | %d | %d |\n", totals[0], totals[1], totals[2])
	return sb.String()
}

// apiRequests is the API server's apiserver_request_total by "VERB resource[/subresource]" (see apicalls.Parse).
func apiRequests(t *testing.T, e *env) map[string]float64 {
	t.Helper()
	out, err := apicalls.Get(e.ctx, e.kube)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// machine says what the figures were measured on: cores, Go, the load average.
func machine() string {
	return fmt.Sprintf("%d cores, %s, load average (1, 5, 15 min) %s", runtime.NumCPU(), runtime.Version(), runinfo.LoadAvg(3))
}

// TestQueuesReports: the reports of an install with two queues after one tick (the install's maxActive 3, Jobs that
// outlive the test): `status -o json` has the install's totals and a queues[] list (each queue's unfinished Jobs and
// backlog, summing to the install's), the table a line per queue, each Created Event names the Job's queue, and the
// push of the next tick has each queue's series (label queue) beside the install's.
func TestQueuesReports(t *testing.T) {
	t.Parallel()
	needPushgateway(t)
	e := newQueuesEnv(t, "8", "16Gi")
	e.insertQueue("daily", "daily", "", 4)
	e.insertQueue("exports", "exports", "", 4)
	cfg := e.writeQueues(queuesConfig{name: "rep", limits: "{maxActive: 3, maxPerTick: 10, capacity: nodes}", queues: []queueSpec{
		{name: "daily", priority: 10, duration: "10m", limits: "{maxActive: 2}"},
		{name: "exports", weight: 3, duration: "10m"},
	}})
	r := e.jobsched("tick", "--config", cfg, "--pushgateway", pushgateway)
	if r.code != 0 {
		t.Fatalf("tick exited %d:\n%s", r.code, r.stderr)
	}
	created := jobsOfQueue(e.jobs())
	if created["daily"] != 2 || created["exports"] != 1 {
		t.Fatalf("Jobs per queue %v, want daily 2 (its maxActive, priority 10) and exports 1 (the install's maxActive 3)", created)
	}

	st := e.jobsched("status", "--config", cfg, "-o", "json")
	if st.code != 0 {
		t.Fatalf("status exited %d:\n%s", st.code, st.stderr)
	}
	var doc struct {
		APIVersion string `json:"apiVersion"`
		Backlog    int    `json:"backlog"`
		Unfinished int    `json:"unfinished"`
		Slots      int    `json:"slots"`
		Queues     []struct {
			Name       string `json:"name"`
			Priority   int    `json:"priority"`
			Weight     int    `json:"weight"`
			Backlog    int    `json:"backlog"`
			Unfinished int    `json:"unfinished"`
			Slots      int    `json:"slots"`
			Limit      string `json:"limit"`
		} `json:"queues"`
	}
	if err := json.Unmarshal([]byte(st.stdout), &doc); err != nil {
		t.Fatalf("status -o json: %v\n%s", err, st.stdout)
	}
	if doc.APIVersion != "jobsched.io/v1alpha1" || doc.Backlog != 5 || doc.Unfinished != 3 || doc.Slots != 0 || len(doc.Queues) != 2 {
		t.Errorf("status: apiVersion %q, backlog %d, unfinished %d, slots %d, %d queues; want jobsched.io/v1alpha1, 5, 3, 0, 2",
			doc.APIVersion, doc.Backlog, doc.Unfinished, doc.Slots, len(doc.Queues))
	}
	for _, q := range doc.Queues {
		if q.Unfinished != created[q.Name] || q.Backlog != 4-created[q.Name] || q.Slots != 0 {
			t.Errorf("status: queue %s: unfinished %d, backlog %d, slots %d (%s); want %d, %d, 0",
				q.Name, q.Unfinished, q.Backlog, q.Slots, q.Limit, created[q.Name], 4-created[q.Name])
		}
	}
	table := e.jobsched("status", "--config", cfg)
	for _, want := range []string{"Queues (the lines above are the install's totals):", "\n  daily    10", "\n  exports  0 "} {
		if !strings.Contains(table.stdout, want) {
			t.Errorf("the status table lacks %q:\n%s", want, table.stdout)
		}
	}

	byName := map[string]string{}
	for _, j := range e.jobs() {
		byName[j.Name] = j.Labels[labelQueue]
	}
	evs := e.eventsWith("Created")
	if len(evs) != 3 {
		t.Errorf("%d Created Events, want 3", len(evs))
	}
	for _, ev := range evs {
		if want := "(queue " + byName[ev.Regarding.Name] + ")"; !strings.Contains(ev.Note, want) {
			t.Errorf("Created Event of %s: note %q lacks %q", ev.Regarding.Name, ev.Note, want)
		}
	}

	// A pass's Jobs by state are those it observed: a second tick (the install is full: it creates nothing) pushes
	// the three.
	if r := e.jobsched("tick", "--config", cfg, "--pushgateway", pushgateway); r.code != 0 {
		t.Fatalf("tick exited %d:\n%s", r.code, r.stderr)
	}
	m := e.pushed("rep")
	for q, n := range map[string]int{"daily": 2, "exports": 1} {
		jobs := 0.0
		for _, s := range []string{"running", "starting"} {
			jobs += m[fmt.Sprintf(`jobsched_queue_jobs{job="jobsched",queue=%q,state=%q}`, q, s)]
		}
		if jobs != float64(n) {
			t.Errorf("pushed: queue %s has %v Jobs running or starting, want %d", q, jobs, n)
		}
		if got := m[fmt.Sprintf(`jobsched_queue_backlog_rows{job="jobsched",queue=%q}`, q)]; got != float64(4-n) {
			t.Errorf("pushed: queue %s backlog %v, want %d", q, got, 4-n)
		}
	}
	if got := m[`jobsched_backlog_rows{job="jobsched"}`]; got != 5 {
		t.Errorf("pushed: the install's backlog %v, want 5 (the queues' sum)", got)
	}
	if got := m[`jobsched_pass_created_jobs{job="jobsched"}`]; got != 0 {
		t.Errorf("pushed: the install's created Jobs %v, want 0 (the second tick)", got)
	}
	for q, v := range map[string]float64{"daily": 1, "exports": 1} { // daily: its maxActive; exports: the install's
		if got := m[fmt.Sprintf(`jobsched_queue_blocked{job="jobsched",queue=%q}`, q)]; got != v {
			t.Errorf("pushed: queue %s blocked %v, want %v", q, got, v)
		}
	}
}

// TestQueuesTenantsByRequests: limits.perGroup.maxRequests {cpu: 2} on a queue whose rows say their cpu, against
// PostgreSQL's per-group read: tenant big's 1-CPU rows get 2 Jobs and tenant a's 500m rows get 2 (1 CPU), in the
// first tick; a second tick creates none for big (its Jobs hold its cap) and reads on for a, whose next row would
// take it past its cap: none either.
func TestQueuesTenantsByRequests(t *testing.T) {
	t.Parallel()
	e := newQueuesEnv(t, "32", "64Gi")
	e.exec(`ALTER TABLE ` + e.table + ` ADD COLUMN cpus text`)
	e.insertQueue("work", "big", "big", 10)
	e.insertQueue("work", "a", "a", 5)
	e.exec(`UPDATE ` + e.table + ` SET cpus = CASE tenant WHEN 'big' THEN '1' ELSE '500m' END`)
	e.exec(`UPDATE ` + e.table + ` SET cpus = '2' WHERE id = 'a-2'`)
	cfg := e.writeQueues(queuesConfig{limits: "{maxActive: 20, maxPerTick: 20, capacity: nodes}", queues: []queueSpec{
		{name: "work", duration: "10m", columns: "id, url, tenant, cpus", job: "    requestsFrom: {cpu: cpus}\n    maxRequests: {cpu: 4}\n",
			limits: "{maxActive: 20, perGroup: {column: tenant, maxActive: 10, maxRequests: {cpu: 2}}}"},
	}})
	count := func() map[string]int {
		n := map[string]int{}
		for _, j := range e.jobs() {
			n[j.Annotations[annotationGroup]]++
		}
		return n
	}
	if s := e.tick(cfg).summary(t); s.Created != 4 {
		t.Errorf("first tick: %+v; want 4 created", s)
	}
	if n := count(); n["big"] != 2 || n["a"] != 2 {
		t.Errorf("Jobs per tenant %v, want big 2 (1 CPU each, cap 2), a 2 (500m each; a-2 asks 2 and waits)", n)
	}
	if s := e.tick(cfg).summary(t); s.Created != 0 {
		t.Errorf("second tick: %+v; want none created: big holds its cap, a's next row would pass it", s)
	}
}
