//go:build integration

package e2e

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	_ "github.com/lib/pq"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/jobsched/jobsched/pkg/render"
)

// The environment scripts/test.sh provides.
var (
	kubeconfig = os.Getenv("KUBECONFIG")
	dsn        = os.Getenv("JOBSCHED_TEST_DSN")
	binary     string // the jobsched binary, built once by TestMain
)

func TestMain(m *testing.M) {
	if kubeconfig == "" || dsn == "" {
		fmt.Fprintln(os.Stderr, "e2e: KUBECONFIG and JOBSCHED_TEST_DSN must be set: run scripts/test.sh, which starts the local cluster and PostgreSQL")
		os.Exit(1)
	}
	dir, err := os.MkdirTemp("", "jobsched-e2e-")
	if err != nil {
		panic(err)
	}
	binary = filepath.Join(dir, "jobsched")
	build := exec.Command("go", "build", "-o", binary, "github.com/jobsched/jobsched")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "e2e: building jobsched:", err)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// env is one scenario's world: its own namespace, node pool and table, so scenarios can run side by side.
type env struct {
	t     *testing.T
	ctx   context.Context
	kube  kubernetes.Interface
	db    *sql.DB
	ns    string
	pool  string // value of the node label jobsched.io/e2e-pool of this scenario's nodes
	table string
	dir   string
	kcfg  string // kubeconfig jobsched runs with (admin unless changed)
}

func newEnv(t *testing.T) *env {
	t.Helper()
	return newEnvOn(t, kubeconfig)
}

// newEnvOn is newEnv on the cluster of kubeconfig kcfg (a test's own control plane).
func newEnvOn(t *testing.T, kcfg string) *env {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	cfg, err := clientcmd.BuildConfigFromFlags("", kcfg)
	if err != nil {
		t.Fatal(err)
	}
	cfg.QPS, cfg.Burst = 100, 200
	kube := kubernetes.NewForConfigOrDie(cfg)
	db, err := sql.Open("postgres", dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	id := fmt.Sprintf("%s-%04x", strings.ToLower(strings.NewReplacer("_", "-", "/", "-").Replace(t.Name())), rand.IntN(0xffff))
	if len(id) > 50 {
		id = id[len(id)-50:]
	}
	id = strings.Trim(id, "-")
	e := &env{t: t, ctx: ctx, kube: kube, db: db, ns: "e2e-" + id, pool: id, table: "tasks_" + strings.ReplaceAll(id, "-", "_"), dir: t.TempDir(), kcfg: kcfg}
	if _, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: e.ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	e.exec(`CREATE TABLE ` + e.table + ` (n serial, id text PRIMARY KEY, url text, status text NOT NULL DEFAULT 'waiting', created_at timestamptz NOT NULL DEFAULT now())`)
	t.Cleanup(func() {
		if t.Failed() {
			e.dump()
		}
		bg := context.Background()
		_ = kube.CoreV1().Namespaces().Delete(bg, e.ns, metav1.DeleteOptions{})
		_ = kube.CoreV1().Nodes().DeleteCollection(bg, metav1.DeleteOptions{}, metav1.ListOptions{LabelSelector: "jobsched.io/e2e-pool=" + e.pool})
		_, _ = db.Exec(`DROP TABLE IF EXISTS ` + e.table)
	})
	// Pods need the namespace's default ServiceAccount, which the controller-manager makes.
	e.eventually("the default ServiceAccount", 30*time.Second, func() bool {
		_, err := kube.CoreV1().ServiceAccounts(e.ns).Get(ctx, "default", metav1.GetOptions{})
		return err == nil
	})
	return e
}

func (e *env) exec(query string, args ...any) {
	e.t.Helper()
	if _, err := e.db.ExecContext(e.ctx, query, args...); err != nil {
		e.t.Fatalf("%s: %v", query, err)
	}
}

// insert adds n waiting rows with keys prefix-0 … prefix-(n-1), in that order.
func (e *env) insert(prefix string, n int) []string {
	e.t.Helper()
	var keys []string
	for i := range n {
		key := fmt.Sprintf("%s-%d", prefix, i)
		e.exec(`INSERT INTO `+e.table+` (id, url) VALUES ($1, $2)`, key, "https://example.com/"+key)
		keys = append(keys, key)
	}
	return keys
}

// statuses returns each row's status.
func (e *env) statuses() map[string]string {
	e.t.Helper()
	rs, err := e.db.QueryContext(e.ctx, `SELECT id, status FROM `+e.table)
	if err != nil {
		e.t.Fatal(err)
	}
	defer rs.Close()
	out := map[string]string{}
	for rs.Next() {
		var id, st string
		if err := rs.Scan(&id, &st); err != nil {
			e.t.Fatal(err)
		}
		out[id] = st
	}
	return out
}

// addNode creates a kwok node in this scenario's pool and waits until it is Ready.
func (e *env) addNode(name, cpu, memory string, pods int, mutate func(*corev1.Node)) string {
	e.t.Helper()
	name = e.pool + "-" + name
	rl := corev1.ResourceList{
		corev1.ResourceCPU:    resource.MustParse(cpu),
		corev1.ResourceMemory: resource.MustParse(memory),
		corev1.ResourcePods:   *resource.NewQuantity(int64(pods), resource.DecimalSI),
	}
	node := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name,
			Labels:      map[string]string{"jobsched.io/e2e-pool": e.pool, "type": "kwok"},
			Annotations: map[string]string{"kwok.x-k8s.io/node": "fake"}},
		Status: corev1.NodeStatus{Capacity: rl, Allocatable: rl},
	}
	if mutate != nil {
		mutate(node)
	}
	if _, err := e.kube.CoreV1().Nodes().Create(e.ctx, node, metav1.CreateOptions{}); err != nil {
		e.t.Fatal(err)
	}
	// Ready, and the node lifecycle controller has lifted the not-ready taint it puts on a new node (until then
	// neither kube-scheduler nor jobsched's capacity would place a pod there).
	e.eventually("node "+name+" Ready and untainted", time.Minute, func() bool {
		n, err := e.kube.CoreV1().Nodes().Get(e.ctx, name, metav1.GetOptions{})
		if err != nil {
			return false
		}
		for _, t := range n.Spec.Taints {
			if t.Key == corev1.TaintNodeNotReady || t.Key == corev1.TaintNodeUnreachable {
				return false
			}
		}
		for _, c := range n.Status.Conditions {
			if c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue {
				return true
			}
		}
		return false
	})
	return name
}

// config is what a scenario varies in jobsched.yaml and its template.
type config struct {
	name        string // scheduler name; default "e2e"
	extra       string // YAML appended to jobsched.yaml (limits:, gc:, env: …)
	cpu         string // each task pod's CPU request; default 100m
	duration    string // how long a task pod runs (kwok); default 2s
	fail        bool   // task pods fail
	failFirst   bool   // only attempt 1 of a task fails (kwok-fail: "first")
	containerNm string // the container's name; default worker
	where       string // extra condition of the query's WHERE, e.g. "id LIKE 'fail-%'"
	query       string // replaces the whole query
}

// writeConfig writes jobsched.yaml and job.yaml and returns the config's path.
func (e *env) writeConfig(c config) string {
	e.t.Helper()
	if c.name == "" {
		c.name = "e2e"
	}
	if c.cpu == "" {
		c.cpu = "100m"
	}
	if c.duration == "" {
		c.duration = "2s"
	}
	if c.containerNm == "" {
		c.containerNm = "worker"
	}
	if c.where != "" {
		c.where = " AND " + c.where
	}
	if c.query == "" {
		c.query = fmt.Sprintf("SELECT id, url, created_at FROM %s WHERE status = 'waiting'%s ORDER BY n", e.table, c.where)
	}
	cfg := fmt.Sprintf(`name: %s
namespace: %s
source:
  query: %s
  key: id
  timeout: 10s
job:
  template: job.yaml
env:
  prefix: TASK_
%s`, c.name, e.ns, c.query, c.extra)
	fail := ""
	if c.fail {
		fail = `
        jobsched.io/kwok-fail: "true"`
	}
	if c.failFirst {
		fail = `
        jobsched.io/kwok-fail: "first"`
	}
	tpl := fmt.Sprintf(`apiVersion: batch/v1
kind: Job
spec:
  backoffLimit: 0
  template:
    metadata:
      annotations:
        jobsched.io/kwok-duration: %q%s
    spec:
      restartPolicy: Never
      nodeSelector:
        jobsched.io/e2e-pool: %s
      containers:
      - name: %s
        image: worker:1
        resources:
          requests:
            cpu: %s
            memory: 64Mi
`, c.duration, fail, e.pool, c.containerNm, c.cpu)
	path := filepath.Join(e.dir, c.name+".yaml")
	if err := os.WriteFile(path, []byte(strings.Replace(cfg, "job.yaml", c.name+"-job.yaml", 1)), 0o600); err != nil {
		e.t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(e.dir, c.name+"-job.yaml"), []byte(tpl), 0o600); err != nil {
		e.t.Fatal(err)
	}
	return path
}

// result is one run of the jobsched binary.
type result struct {
	code           int
	stdout, stderr string
}

// jobsched runs the binary with the scenario's kubeconfig and the DSN in DATABASE_URL.
func (e *env) jobsched(args ...string) result {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(e.ctx, 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, binary, append([]string{"--kubeconfig", e.kcfg, "--log-format", "json"}, args...)...)
	cmd.Env = append(os.Environ(), "DATABASE_URL="+dsn)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	r := result{stdout: out.String(), stderr: withErrors(errOut.String())}
	if ee, ok := err.(*exec.ExitError); ok {
		r.code = ee.ExitCode()
	} else if err != nil {
		e.t.Fatalf("running jobsched: %v", err)
	}
	return r
}

// withErrors is stderr with the error of each error-level JSON line (a failed pass's `pass done`, or "jobsched
// failed": the command prints its error once, as JSON) appended as it reads, unescaped, so that a test can look for
// a message with quotes in it.
func withErrors(stderr string) string {
	out := stderr
	for _, line := range strings.Split(stderr, "\n") {
		var l struct{ Level, Error string }
		if json.Unmarshal([]byte(line), &l) == nil && l.Level == "error" && l.Error != "" {
			out += "\nError: " + l.Error
		}
	}
	return out
}

// tick runs one pass and fails the test unless it exits 0.
func (e *env) tick(config string) result {
	e.t.Helper()
	r := e.jobsched("tick", "--config", config)
	if r.code != 0 {
		e.t.Fatalf("tick exited %d:\n%s", r.code, r.stderr)
	}
	return r
}

// eventually polls cond every 200ms until it holds or timeout passes.
func (e *env) eventually(what string, timeout time.Duration, cond func() bool) {
	e.t.Helper()
	err := wait.PollUntilContextTimeout(e.ctx, 200*time.Millisecond, timeout, true, func(context.Context) (bool, error) {
		return cond(), nil
	})
	if err != nil {
		e.t.Fatalf("waiting for %s: %v", what, err)
	}
}

func (e *env) jobs() []batchv1.Job {
	e.t.Helper()
	l, err := e.kube.BatchV1().Jobs(e.ns).List(e.ctx, metav1.ListOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	return l.Items
}

func (e *env) pods() []corev1.Pod {
	e.t.Helper()
	l, err := e.kube.CoreV1().Pods(e.ns).List(e.ctx, metav1.ListOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	return l.Items
}

func unschedulable(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable {
			return true
		}
	}
	return false
}

// ledger records every Job ever created in the namespace, from a watch started before the first tick, and the
// most Jobs that were unfinished at once.
type ledger struct {
	mu         sync.Mutex
	byKey      map[string][]*batchv1.Job // task key → every Job created for it
	unfinished map[string]bool           // Job names without a Complete or Failed condition, now
	peak       int                       // the most unfinished Jobs at once
}

func (e *env) ledger() *ledger {
	e.t.Helper()
	l := &ledger{byKey: map[string][]*batchv1.Job{}, unfinished: map[string]bool{}}
	list, err := e.kube.BatchV1().Jobs(e.ns).List(e.ctx, metav1.ListOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	rv := list.ResourceVersion
	go func() {
		for e.ctx.Err() == nil {
			w, err := e.kube.BatchV1().Jobs(e.ns).Watch(e.ctx, metav1.ListOptions{ResourceVersion: rv, AllowWatchBookmarks: true})
			if err != nil {
				time.Sleep(100 * time.Millisecond)
				continue
			}
			for ev := range w.ResultChan() {
				job, ok := ev.Object.(*batchv1.Job)
				if !ok {
					continue
				}
				rv = job.ResourceVersion
				l.mu.Lock()
				if ev.Type == watch.Added {
					key := job.Annotations[render.AnnotationTaskKey]
					l.byKey[key] = append(l.byKey[key], job)
				}
				if ev.Type == watch.Deleted || jobFinished(job) {
					delete(l.unfinished, job.Name)
				} else if ev.Type == watch.Added || ev.Type == watch.Modified {
					l.unfinished[job.Name] = true
					l.peak = max(l.peak, len(l.unfinished))
				}
				l.mu.Unlock()
			}
		}
	}()
	return l
}

// created returns how many Jobs were ever created per key.
func (l *ledger) created() map[string]int {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := map[string]int{}
	for k, jobs := range l.byKey {
		out[k] = len(jobs)
	}
	return out
}

// peakUnfinished is the most Jobs that were unfinished at once.
func (l *ledger) peakUnfinished() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.peak
}

// unschedulableEver watches the namespace's pods from now on and returns how many were ever Unschedulable so far.
func (e *env) unschedulableEver() func() int {
	e.t.Helper()
	list, err := e.kube.CoreV1().Pods(e.ns).List(e.ctx, metav1.ListOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	var mu sync.Mutex
	seen := map[string]bool{}
	rv := list.ResourceVersion
	go func() {
		for e.ctx.Err() == nil {
			w, err := e.kube.CoreV1().Pods(e.ns).Watch(e.ctx, metav1.ListOptions{ResourceVersion: rv, AllowWatchBookmarks: true})
			if err != nil {
				time.Sleep(100 * time.Millisecond)
				continue
			}
			for ev := range w.ResultChan() {
				pod, ok := ev.Object.(*corev1.Pod)
				if !ok {
					continue
				}
				rv = pod.ResourceVersion
				if unschedulable(pod) {
					mu.Lock()
					seen[pod.Name] = true
					mu.Unlock()
				}
			}
		}
	}()
	return func() int {
		mu.Lock()
		defer mu.Unlock()
		return len(seen)
	}
}

func (l *ledger) first(key string) *batchv1.Job {
	l.mu.Lock()
	defer l.mu.Unlock()
	if jobs := l.byKey[key]; len(jobs) > 0 {
		return jobs[0]
	}
	return nil
}

// worker stands in for the task's pod: as soon as a task pod runs, it marks the row done, as a real worker does
// before it exits. It stops with the test.
func (e *env) worker() { e.workerOn(corev1.PodRunning, corev1.PodSucceeded) }

// workerOn marks a task's row done once one of its pods reaches one of phases.
func (e *env) workerOn(phases ...corev1.PodPhase) {
	go func() {
		for e.ctx.Err() == nil {
			pods, err := e.kube.CoreV1().Pods(e.ns).List(e.ctx, metav1.ListOptions{})
			if err == nil {
				for _, p := range pods.Items {
					if slices.Contains(phases, p.Status.Phase) {
						_, _ = e.db.ExecContext(e.ctx, `UPDATE `+e.table+` SET status = 'done' WHERE id = $1 AND status = 'waiting'`,
							p.Annotations[render.AnnotationTaskKey])
					}
				}
			}
			time.Sleep(100 * time.Millisecond)
		}
	}()
}

// dump logs the namespace's Jobs and pods when a scenario failed.
func (e *env) dump() {
	ctx := context.Background()
	jobs, _ := e.kube.BatchV1().Jobs(e.ns).List(ctx, metav1.ListOptions{})
	for _, j := range jobs.Items {
		e.t.Logf("job %s active=%d succeeded=%d failed=%d conditions=%v", j.Name, j.Status.Active, j.Status.Succeeded, j.Status.Failed, j.Status.Conditions)
	}
	pods, _ := e.kube.CoreV1().Pods(e.ns).List(ctx, metav1.ListOptions{})
	for _, p := range pods.Items {
		e.t.Logf("pod %s phase=%s node=%s conditions=%v", p.Name, p.Status.Phase, p.Spec.NodeName, p.Status.Conditions)
	}
}

// summary is the pass's closing log line.
type summary struct {
	Refill         int    `json:"refill"` // tick --fill-for: 0 for the first pass, then 1, 2, …
	Selected       int    `json:"selected"`
	Created        int    `json:"created"`
	AlreadyPresent int    `json:"alreadyPresent"`
	Skipped        int    `json:"skipped"`
	Blocked        string `json:"blocked"`
	Deleted        int    `json:"deleted"`
	Failed         int    `json:"failed"`
}

func (r result) summary(t *testing.T) summary {
	t.Helper()
	for _, line := range strings.Split(r.stderr, "\n") {
		if strings.Contains(line, `"message":"pass done"`) {
			var s summary
			if err := json.Unmarshal([]byte(line), &s); err != nil {
				t.Fatal(err)
			}
			return s
		}
	}
	t.Fatalf("no summary line in:\n%s", r.stderr)
	return summary{}
}

// summaries are all the pass done lines, in order.
func (r result) summaries(t *testing.T) []summary {
	t.Helper()
	var out []summary
	for _, line := range strings.Split(r.stderr, "\n") {
		if strings.Contains(line, `"message":"pass done"`) {
			var s summary
			if err := json.Unmarshal([]byte(line), &s); err != nil {
				t.Fatal(err)
			}
			out = append(out, s)
		}
	}
	return out
}

// logLine is the first log line with message msg, decoded, or nil.
func (r result) logLine(t *testing.T, msg string) map[string]any {
	t.Helper()
	for _, line := range strings.Split(r.stderr, "\n") {
		if strings.Contains(line, `"message":`+strconvQuote(msg)) {
			var m map[string]any
			if err := json.Unmarshal([]byte(line), &m); err != nil {
				t.Fatal(err)
			}
			return m
		}
	}
	return nil
}

func strconvQuote(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// lockedBuffer is a process's stderr that a test may read while the process still writes it.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// waitJobs waits until n of the namespace's Jobs have condition cond (Complete or Failed).
func (e *env) waitJobs(cond batchv1.JobConditionType, n int) {
	e.t.Helper()
	e.eventually(fmt.Sprintf("%d Jobs %s", n, cond), 2*time.Minute, func() bool {
		got := 0
		for _, j := range e.jobs() {
			for _, c := range j.Status.Conditions {
				if c.Type == cond && c.Status == corev1.ConditionTrue {
					got++
				}
			}
		}
		return got >= n
	})
}
