//go:build integration

package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/jobsched/jobsched/pkg/jobmeta"
)

// sizedJob are the job keys that take each worker's cpu from the column cpus, at most 4.
const sizedJob = "  requestsFrom: {cpu: cpus}\n  maxRequests: {cpu: 4}\n"

// withJobKeys adds keys (YAML at the job block's indent) to the job block of the config at path.
func (e *env) withJobKeys(path, keys string) {
	e.t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		e.t.Fatal(err)
	}
	s := strings.Replace(string(data), "\njob:\n", "\njob:\n"+keys, 1)
	if s == string(data) {
		e.t.Fatalf("%s has no job block", path)
	}
	if err := os.WriteFile(path, []byte(s), 0o600); err != nil {
		e.t.Fatal(err)
	}
}

// TestSizedRowsFillANode: on a 4-CPU node of its own, rows asking 1500m, 1, 500m and 1 CPU fill it exactly, each
// Job asking its row's cpu, and kube-scheduler agrees (all four bound, none Unschedulable); a row whose value is no
// quantity and one over job.maxRequests are skipped with their keys and why, counted apart, and the rows behind
// them are created; the next row (1 CPU) does not fit and waits, in the query's order, for room.
func TestSizedRowsFillANode(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	node := e.addNode("n0", "4", "8Gi", 110, nil)
	e.exec(`ALTER TABLE ` + e.table + ` ADD COLUMN cpus text`)
	rows := [][2]string{{"a", "1500m"}, {"bad", "lots\x1b[2J"}, {"b", "1"}, {"big", "9"}, {"c", "500m"}, {"d", "1"}, {"e", "1"}}
	for _, r := range rows {
		e.exec(`INSERT INTO `+e.table+` (id, url, cpus) VALUES ($1, 'https://example.com/'||$1, $2)`, r[0], r[1])
	}
	cfg := e.writeConfig(config{name: "sized", duration: "10m",
		query: "SELECT id, url, cpus FROM " + e.table + " WHERE status = 'waiting' ORDER BY n",
		extra: "limits:\n  maxActive: 20\n  maxPerTick: 20\n  capacity: nodes\n"})
	e.withJobKeys(cfg, sizedJob)

	r := e.tick(cfg)
	s := r.summary(t)
	if s.Created != 4 || s.Skipped != 2 || s.SkippedSize != 2 || s.ReadAhead != 1 || s.Failed != 0 {
		t.Fatalf("pass done %+v: want created 4, skipped 2 (skippedSize 2), readAhead 1", s)
	}
	for key, why := range map[string]string{
		"bad": `the cpu request (column \"cpus\") \"lots\\x1b[2J\" is not a quantity`,
		"big": `the cpu request (column \"cpus\") 9 is over job.maxRequests.cpu (4)`,
	} {
		if !strings.Contains(r.stderr, `"task":"`+key+`"`) || !strings.Contains(r.stderr, why) {
			t.Errorf("no log line skipping %s with %s:\n%s", key, why, r.stderr)
		}
	}
	if strings.Contains(r.stderr, "\x1b") {
		t.Error("a row's control byte reached the log")
	}
	if byNode := e.bound("sized", 4); byNode[node] != 4 {
		t.Errorf("pods per node %v, want 4 on %s", byNode, node)
	}
	want := map[string]string{"a": "1500m", "b": "1", "c": "500m", "d": "1"}
	total := resource.Quantity{}
	for _, p := range e.ours("sized") {
		key := p.Annotations["jobsched.io/task-key"]
		got := p.Spec.Containers[0].Resources.Requests[corev1.ResourceCPU]
		if w, ok := want[key]; !ok || got.Cmp(resource.MustParse(w)) != 0 {
			t.Errorf("the pod of %q asks cpu %s, want %s", key, got.String(), w)
		}
		total.Add(got)
	}
	if total.Cmp(resource.MustParse("4")) != 0 {
		t.Errorf("the pods ask %s cpu in all, want the node's 4", total.String())
	}

	// status shows what the queue's unfinished Jobs hold: the sum of their rows' cpu; and what its rows may ask.
	st := e.jobsched("status", "--config", cfg, "-o", "json")
	var doc struct {
		Holds       corev1.ResourceList `json:"holds"`
		RowRequests struct {
			Max corev1.ResourceList `json:"max"`
		} `json:"rowRequests"`
	}
	if err := json.Unmarshal([]byte(st.stdout), &doc); st.code != 0 || err != nil {
		t.Fatalf("status exited %d (%v):\n%s%s", st.code, err, st.stdout, st.stderr)
	}
	if held, most := doc.Holds[corev1.ResourceCPU], doc.RowRequests.Max[corev1.ResourceCPU]; held.Cmp(total) != 0 || most.Cmp(resource.MustParse("4")) != 0 {
		t.Errorf("status: holds cpu %s, rows ask at most %s; want %s (the rows' a, b, c, d) and 4", held.String(), most.String(), total.String())
	}

	// Full: nothing fits, not even the smallest row a row may ask for; nothing is read.
	if s = e.tick(cfg).summary(t); s.Created != 0 || !strings.Contains(s.Blocked, "capacity") {
		t.Errorf("with the node full: %+v; want nothing created, blocked by capacity", s)
	}
}

// TestSizedBackfill: with job.backfill, against PostgreSQL's timestamps and a 4-CPU node of its own: a 4-CPU row
// that has waited over maxWait (11 minutes of 10) stops its queue, and the 1-CPU row behind it waits although it
// would fit (strict order, read ahead, as dry-run says); once that row is young again, the same 1-CPU row passes it
// and is created while it waits, read again by the next pass; kube-scheduler binds every pod.
func TestSizedBackfill(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	node := e.addNode("n0", "4", "8Gi", 110, nil)
	e.exec(`ALTER TABLE ` + e.table + ` ADD COLUMN cpus text, ADD COLUMN since timestamptz NOT NULL DEFAULT now()`)
	for _, r := range [][2]string{{"a", "2"}, {"big", "4"}, {"b", "1"}} {
		e.exec(`INSERT INTO `+e.table+` (id, url, cpus) VALUES ($1, 'https://example.com/'||$1, $2)`, r[0], r[1])
	}
	e.exec(`UPDATE ` + e.table + ` SET since = now() - interval '11 minutes' WHERE id = 'big'`)
	cfg := e.writeConfig(config{name: "backfill", duration: "10m",
		query: "SELECT id, url, cpus, since FROM " + e.table + " WHERE status = 'waiting' ORDER BY n",
		extra: "limits:\n  maxActive: 20\n  maxPerTick: 20\n  capacity: nodes\n"})
	e.withJobKeys(cfg, sizedJob+"  backfill: {since: since, maxWait: 10m}\n")

	r := e.jobsched("dry-run", "--config", cfg, "-o", "json")
	var plan struct {
		Limit             string
		ReadAhead, Passed int
	}
	if err := json.Unmarshal([]byte(r.stdout), &plan); err != nil || r.code != 0 {
		t.Fatalf("dry-run exited %d (%v): %s", r.code, err, r.stderr)
	}
	if want := "more than is free now; it has waited 11m"; !strings.Contains(plan.Limit, "asks for cpu=4 ") || !strings.Contains(plan.Limit, want) ||
		!strings.HasSuffix(plan.Limit, "(job.backfill.maxWait: 10m): the rows behind it wait for it") || plan.ReadAhead != 2 || plan.Passed != 0 {
		t.Errorf("dry-run: limit %q, readAhead %d, passed %d; want %q…, readAhead 2 (big, b), passed 0", plan.Limit, plan.ReadAhead, plan.Passed, want)
	}
	if s := e.tick(cfg).summary(t); s.Created != 1 || s.ReadAhead != 2 || s.Passed != 0 {
		t.Fatalf("with big over maxWait: %+v; want a created, big and b read ahead, none passed", s)
	}
	if e.jobOf("b") != "" {
		t.Error("b got a Job behind a row that waited over maxWait")
	}
	// a's pod bound before the next tick, as ticks minutes apart find it: one that binds between a pass's read of
	// its pods and of the nodes counts twice in that pass (help capacity), and b would not fit.
	e.bound("backfill", 1)

	e.exec(`UPDATE ` + e.table + ` SET since = now() WHERE id = 'big'`)
	if s := e.tick(cfg).summary(t); s.Created != 1 || s.ReadAhead != 1 || s.Passed != 1 {
		t.Fatalf("with big young: %+v; want b created past big (passed 1, read ahead 1)", s)
	}
	if e.jobOf("b") == "" || e.jobOf("big") != "" {
		t.Errorf("b's Job %q, big's %q: want b's only", e.jobOf("b"), e.jobOf("big"))
	}
	if byNode := e.bound("backfill", 2); byNode[node] != 2 {
		t.Errorf("pods per node %v, want 2 on %s", byNode, node)
	}
}

// TestSizedFillWakesAtBinds: a fill run of rows of two sizes, against kube-scheduler's binds. On two 8-CPU nodes,
// rows of 500m, 500m, 500m and 4 CPU, four times over, in that order, tasks that outlast the test: a pass holds
// back what does not fit wherever kube-scheduler binds our unbound pods of the other size, and the next pass
// starts at a bind (woke: podBound) and creates, until strict order stops at the third 4-CPU row: 11 Jobs, 12.5
// CPU, none Unschedulable. No Job ends meanwhile, so only a bind can start those passes.
func TestSizedFillWakesAtBinds(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.addNode("n0", "8", "16Gi", 110, nil)
	e.addNode("n1", "8", "16Gi", 110, nil)
	e.exec(`ALTER TABLE ` + e.table + ` ADD COLUMN cpus text`)
	for i := range 16 {
		cpu := "500m"
		if i%4 == 3 {
			cpu = "4"
		}
		e.exec(`INSERT INTO `+e.table+` (id, url, cpus) VALUES ($1, 'u', $2)`, fmt.Sprintf("r%02d", i), cpu)
	}
	cfg := e.writeConfig(config{name: "binds", duration: "10m",
		query: "SELECT id, url, cpus FROM " + e.table + " WHERE status = 'waiting' ORDER BY n",
		extra: "limits:\n  maxActive: 20\n  maxPerTick: 20\n  capacity: nodes\n"})
	e.withJobKeys(cfg, sizedJob)
	unsched := e.unschedulableEver()

	r := e.jobsched("tick", "--config", cfg, "--fill-for", "20s")
	if r.code != 0 {
		t.Fatalf("exit %d:\n%s", r.code, r.stderr)
	}
	created, atBind := 0, 0
	for _, s := range r.summaries(t) {
		created += s.Created
		if s.Woke == "podBound" {
			atBind += s.Created
		}
	}
	if created != 11 || atBind == 0 {
		t.Fatalf("%d Jobs created, %d by passes a bind started; want 11 (the third 4-CPU row waits), some at a bind:\n%s",
			created, atBind, r.stderr)
	}
	e.bound("binds", 11)
	if n := unsched(); n != 0 {
		t.Errorf("%d pods were Unschedulable, want none", n)
	}
}

// testKueueSized: with limits.capacity: kueue, each Job asks its row's cpu and the Workload Kueue makes from it
// carries that request (Kueue admits it by its own size), and both Jobs are admitted and complete.
func testKueueSized(t *testing.T, kcfg string) {
	k := newKueueEnv(t, kcfg, 20, false)
	k.exec(`ALTER TABLE ` + k.table + ` ADD COLUMN cpus text`)
	want := map[string]string{"k-0": "300m", "k-1": "700m"}
	for key, cpu := range want {
		k.exec(`INSERT INTO `+k.table+` (id, url, cpus) VALUES ($1, 'u', $2)`, key, cpu)
	}
	cfg := k.config(config{duration: "1s", query: "SELECT id, url, cpus FROM " + k.table + " WHERE status = 'waiting' ORDER BY n"},
		"  maxQueued: 2\n", "")
	k.withJobKeys(cfg, sizedJob)
	k.worker()
	if s := k.tick(cfg).summary(t); s.Created != 2 {
		t.Fatalf("the tick created %d Jobs, want 2", s.Created)
	}
	keyOf := map[string]string{} // Job name → task key
	for _, j := range k.jobs() {
		keyOf[j.Name] = j.Annotations[jobmeta.AnnotationTaskKey]
	}
	got := map[string]string{}
	k.eventually("a Workload for each Job, with its row's cpu", time.Minute, func() bool {
		l, err := k.dyn.Resource(gvrWorkload).Namespace(k.ns).List(k.ctx, metav1.ListOptions{})
		if err != nil {
			return false
		}
		got = map[string]string{}
		for _, w := range l.Items {
			owners := w.GetOwnerReferences()
			sets, _, _ := unstructured.NestedSlice(w.Object, "spec", "podSets")
			if len(owners) == 0 || len(sets) == 0 {
				continue
			}
			ctrs, _, _ := unstructured.NestedSlice(sets[0].(map[string]any), "template", "spec", "containers")
			if len(ctrs) == 0 {
				continue
			}
			cpu, _, _ := unstructured.NestedString(ctrs[0].(map[string]any), "resources", "requests", "cpu")
			got[keyOf[owners[0].Name]] = cpu
		}
		return len(got) == 2
	})
	for key, cpu := range want {
		if q, err := resource.ParseQuantity(got[key]); err != nil || q.Cmp(resource.MustParse(cpu)) != 0 {
			t.Errorf("the Workload of %s asks cpu %q, want %s (its row's)", key, got[key], cpu)
		}
	}
	k.drain(cfg, 2, nil)
}
