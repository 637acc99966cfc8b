//go:build integration

package e2e

import (
	"bytes"
	"cmp"
	"context"
	crand "crypto/rand"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"maps"
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
	"k8s.io/utils/ptr"

	"github.com/jobsched/jobsched/pkg/jobmeta"
	"github.com/jobsched/jobsched/pkg/testkit"
	"github.com/jobsched/jobsched/pkg/testkit/kwokkit"
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

// env is one scenario's world: its own namespace, node pool and table, so scenarios can run side by side. Every
// scenario is one: on the test run's shared control plane and PostgreSQL (newEnv), or on ones of the test's own
// (newEnvWith: TestChaos; newEnvOn: TestKueue).
type env struct {
	t     *testing.T
	ctx   context.Context
	kube  kubernetes.Interface
	db    *sql.DB
	dsn   string // the database's admin DSN, jobsched's DATABASE_URL unless a test gives another
	ns    string
	pool  string // value of the node label jobsched.io/e2e-pool of this scenario's nodes
	table string
	dir   string
	kcfg  string // kubeconfig jobsched runs with (admin unless changed)
}

// envOptions place a scenario elsewhere than the test run's shared control plane, database and temporary files.
type envOptions struct {
	kubeconfig string // default: the test run's (KUBECONFIG)
	dsn        string // admin DSN of the database; default: the test run's (JOBSCHED_TEST_DSN)
	namespace  string // default: e2e-<test name>-<random>
	dir        string // the scenario's files (configs, kubeconfigs); default: a temporary directory of the test
}

func newEnv(t *testing.T) *env {
	t.Helper()
	return newEnvWith(t, envOptions{})
}

// newEnvOn is newEnv on the cluster of kubeconfig kcfg (a test's own control plane).
func newEnvOn(t *testing.T, kcfg string) *env {
	t.Helper()
	return newEnvWith(t, envOptions{kubeconfig: kcfg})
}

// newEnvWith is newEnv placed by o. What the scenario made is removed when the test ends: its namespace, the nodes
// of its pool, its tables.
func newEnvWith(t *testing.T, o envOptions) *env {
	t.Helper()
	if o.kubeconfig == "" {
		o.kubeconfig = kubeconfig
	}
	if o.dsn == "" {
		o.dsn = dsn
	}
	if o.dir == "" {
		o.dir = t.TempDir()
	} else if err := os.MkdirAll(o.dir, 0o700); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	cfg, err := clientcmd.BuildConfigFromFlags("", o.kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	cfg.QPS, cfg.Burst = 100, 200
	kube := kubernetes.NewForConfigOrDie(cfg)
	db, err := sql.Open("postgres", o.dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	id := fmt.Sprintf("%s-%04x", strings.ToLower(strings.NewReplacer("_", "-", "/", "-").Replace(t.Name())), rand.IntN(0xffff))
	if len(id) > 50 {
		id = id[len(id)-50:]
	}
	id = strings.Trim(id, "-")
	if o.namespace == "" {
		o.namespace = "e2e-" + id
	}
	e := &env{t: t, ctx: ctx, kube: kube, db: db, dsn: o.dsn, ns: o.namespace, pool: id, dir: o.dir, kcfg: o.kubeconfig}
	if _, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: e.ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			e.dump()
		}
		bg := context.Background()
		_ = kube.CoreV1().Namespaces().Delete(bg, e.ns, metav1.DeleteOptions{})
		_ = kube.CoreV1().Nodes().DeleteCollection(bg, metav1.DeleteOptions{}, metav1.ListOptions{LabelSelector: "jobsched.io/e2e-pool=" + e.pool})
	})
	e.table = e.addTable("tasks_" + strings.ReplaceAll(id, "-", "_"))
	// Pods need the namespace's default ServiceAccount, which the controller-manager makes.
	e.eventually("the default ServiceAccount", 30*time.Second, func() bool {
		_, err := kube.CoreV1().ServiceAccounts(e.ns).Get(ctx, "default", metav1.GetOptions{})
		return err == nil
	})
	return e
}

// newTaskScenario is how most scenarios begin: newEnv, one node n0 of cpu and memory (110 pods), rows waiting rows
// task-0 … task-(rows-1) (their keys), and the config c written (its path).
func newTaskScenario(t *testing.T, cpu, memory string, rows int, c config) (e *env, keys []string, cfg string) {
	t.Helper()
	e = newNodeEnv(t, cpu, memory)
	keys = e.insert("task", rows)
	return e, keys, e.writeConfig(c)
}

// newNodeEnv is a scenario with one node n0 of cpu and memory (110 pods) in a pool of its own. A test that uses it
// runs in parallel with the others (t.Parallel, at the top of the test where a reader sees it).
func newNodeEnv(t *testing.T, cpu, memory string) *env {
	t.Helper()
	e := newEnv(t)
	e.addNode("n0", cpu, memory, 110, nil)
	return e
}

// addTable creates a task table named name, dropped when the test ends, and returns its name: a serial n (the
// order of the rows), id, url, status ('waiting' until the worker sets 'done') and created_at.
func (e *env) addTable(name string) string {
	e.t.Helper()
	e.exec(`CREATE TABLE ` + name + ` (n serial, id text PRIMARY KEY, url text, status text NOT NULL DEFAULT 'waiting', created_at timestamptz NOT NULL DEFAULT now())`)
	e.t.Cleanup(func() { _, _ = e.db.Exec(`DROP TABLE IF EXISTS ` + name) })
	return name
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
	return e.statusesOf(e.table)
}

// statusesOf returns the status of each row of table.
func (e *env) statusesOf(table string) map[string]string {
	e.t.Helper()
	rs, err := e.db.QueryContext(e.ctx, `SELECT id, status FROM `+table)
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
		return err == nil && kwokkit.NodeUsable(n)
	})
	return name
}

// config is what a scenario varies in jobsched.yaml and its template.
type config struct {
	name        string // scheduler name; default "e2e"
	extra       string // YAML appended to jobsched.yaml (limits:, gc:, env: …)
	cpu         string // each task pod's CPU request; default 100m (taskPodSpec)
	memory      string // each task pod's memory request; default 64Mi (taskPodSpec)
	duration    string // how long a task pod runs (kwok); default 2s
	fail        bool   // task pods fail
	failFirst   bool   // only attempt 1 of a task fails (kwok-fail: "first")
	containerNm string // the container's name; default worker
	anyNode     bool   // the task pods may run on any node, not only on this scenario's pool
	table       string // the task table; default the scenario's
	where       string // extra condition of the query's WHERE, e.g. "id LIKE 'fail-%'"
	order       string // the query's ORDER BY; default n (the rows' order)
	query       string // replaces the whole query
	timeout     string // source.timeout; default 10s
	cancel      string // source.cancelQuery; default none
	notify      string // source.notify; default none
	poll        string // source.poll; default none
}

// writeConfig writes NAME.yaml and its template NAME-job.yaml (NAME: c.name) in the scenario's directory and
// returns the config's path.
func (e *env) writeConfig(c config) string {
	e.t.Helper()
	if c.name == "" {
		c.name = "e2e"
	}
	if c.table == "" {
		c.table = e.table
	}
	if c.where != "" {
		c.where = " AND " + c.where
	}
	if c.query == "" {
		c.query = fmt.Sprintf("SELECT id, url, created_at FROM %s WHERE status = 'waiting'%s ORDER BY %s", c.table, c.where, cmp.Or(c.order, "n"))
	}
	if c.timeout == "" {
		c.timeout = "10s"
	}
	cfg := fmt.Sprintf(`name: %s
namespace: %s
source:
  query: %s
  key: id
  timeout: %s
job:
  template: %s-job.yaml
env:
  prefix: TASK_
%s`, c.name, e.ns, c.query, c.timeout, c.name, c.extra)
	if c.cancel != "" {
		cfg = strings.Replace(cfg, "\nsource:\n", "\nsource:\n  cancelQuery: "+c.cancel+"\n", 1)
	}
	if c.notify != "" {
		cfg = strings.Replace(cfg, "\nsource:\n", "\nsource:\n  notify: "+c.notify+"\n", 1)
	}
	if c.poll != "" {
		cfg = strings.Replace(cfg, "\nsource:\n", "\nsource:\n  poll: "+c.poll+"\n", 1)
	}
	tpl := jobTemplate{duration: c.duration}
	switch {
	case c.failFirst:
		tpl.fail = "first"
	case c.fail:
		tpl.fail = "true"
	}
	pool := e.pool
	if c.anyNode {
		pool = ""
	}
	tpl.podSpec = taskPodSpec(pool, c.containerNm, c.cpu, c.memory)
	path := filepath.Join(e.dir, c.name+".yaml")
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		e.t.Fatal(err)
	}
	e.writeTemplate(c.name, tpl)
	return path
}

// jobTemplate is the tests' Job template (see kwokkit.Job): a task pod that kwok runs for duration (default 2s)
// and then fails when fail says so ("true"; "first": attempt 1 only), with podSpec (YAML at column 0).
type jobTemplate struct {
	duration, fail, podSpec string
}

func (j jobTemplate) yaml() string {
	return kwokkit.Job{Duration: j.duration, Fail: j.fail, PodSpec: j.podSpec}.YAML()
}

// taskPodSpec is the pod spec of a plain task: on the nodes of pool (any node when ""), one container named
// container (default worker) with cpu (default 100m) and memory (default 64Mi) requests.
func taskPodSpec(pool, container, cpu, memory string) string {
	return kwokkit.Task{PoolLabel: "jobsched.io/e2e-pool", Pool: pool, Container: container, CPU: cpu, Memory: memory}.PodSpec()
}

// writeTemplate writes j as the Job template of scheduler name's config (NAME-job.yaml).
func (e *env) writeTemplate(name string, j jobTemplate) {
	e.t.Helper()
	if err := os.WriteFile(filepath.Join(e.dir, name+"-job.yaml"), []byte(j.yaml()), 0o600); err != nil {
		e.t.Fatal(err)
	}
}

func indent(s, prefix string) string { return kwokkit.Indent(s, prefix) }

// result is one run of the jobsched binary.
type result struct {
	code           int
	stdout, stderr string // stderr with the errors of its error-level lines appended (testkit.WithErrors)
}

// jobschedCommand is the one way the tests run the jobsched binary: --log-format json and --kubeconfig kcfg (none
// when "") before args; the test's environment without DATABASE_URL, then DATABASE_URL=dbDSN (none when ""), then
// env (NAME=value), so that env overrides. The end of ctx kills it.
func jobschedCommand(ctx context.Context, kcfg, dbDSN string, env []string, args ...string) *exec.Cmd {
	flags := []string{"--log-format", "json"}
	if kcfg != "" {
		flags = append([]string{"--kubeconfig", kcfg}, flags...)
	}
	cmd := exec.CommandContext(ctx, binary, append(flags, args...)...)
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "DATABASE_URL=") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	if dbDSN != "" {
		cmd.Env = append(cmd.Env, "DATABASE_URL="+dbDSN)
	}
	cmd.Env = append(cmd.Env, env...)
	return cmd
}

// runCommand runs cmd (from jobschedCommand) to its end, killing it after 2 minutes, and returns its result whatever
// its exit code; the test fails only when it could not run.
func runCommand(t testing.TB, cmd *exec.Cmd) result {
	t.Helper()
	startCommand(t, cmd)
	return waitCommand(t, cmd)
}

// startCommand starts cmd (from jobschedCommand) with its output kept for waitCommand.
func startCommand(t testing.TB, cmd *exec.Cmd) {
	t.Helper()
	cmd.Stdout, cmd.Stderr = &bytes.Buffer{}, &bytes.Buffer{}
	if err := cmd.Start(); err != nil {
		t.Fatalf("running jobsched: %v", err)
	}
}

// waitCommand waits for cmd (from startCommand) to end, killing it after 2 minutes, and returns its result whatever
// its exit code.
func waitCommand(t testing.TB, cmd *exec.Cmd) result {
	t.Helper()
	out, errOut := cmd.Stdout.(*bytes.Buffer), cmd.Stderr.(*bytes.Buffer)
	timer := time.AfterFunc(2*time.Minute, func() { _ = cmd.Process.Kill() })
	err := cmd.Wait()
	timer.Stop()
	r := result{stdout: out.String(), stderr: testkit.WithErrors(errOut.String())}
	if ee, ok := err.(*exec.ExitError); ok {
		r.code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("running jobsched: %v", err)
	}
	return r
}

// run runs the binary with the scenario's kubeconfig, its DSN in DATABASE_URL and env added last (so it
// overrides), and returns whatever exit code.
func (e *env) run(env []string, args ...string) result {
	e.t.Helper()
	return runCommand(e.t, jobschedCommand(e.ctx, e.kcfg, e.dsn, env, args...))
}

// jobsched is run without extra environment.
func (e *env) jobsched(args ...string) result {
	e.t.Helper()
	return e.run(nil, args...)
}

// start runs jobsched with DATABASE_URL set to dsn, in the background; it is killed when the test ends.
func (e *env) start(dsn string, args ...string) (*exec.Cmd, *lockedBuffer) {
	e.t.Helper()
	return e.startWith(e.kcfg, dsn, nil, args...)
}

// startWith is start with kubeconfig kcfg and, when wrap is not nil, stderr passed through the writer wrap returns
// for the command and the buffer.
func (e *env) startWith(kcfg, dsn string, wrap func(*exec.Cmd, io.Writer) io.Writer, args ...string) (*exec.Cmd, *lockedBuffer) {
	e.t.Helper()
	cmd := jobschedCommand(e.ctx, kcfg, dsn, nil, args...)
	buf := &lockedBuffer{}
	cmd.Stderr = buf
	if wrap != nil {
		cmd.Stderr = wrap(cmd, buf)
	}
	if err := cmd.Start(); err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { _ = cmd.Process.Kill() })
	return cmd, buf
}

// exited waits for cmd (from start, writing stderr) to exit and returns its result; if it is still running after
// within, the test fails, saying what it should have ended by.
func (e *env) exited(cmd *exec.Cmd, stderr *lockedBuffer, within time.Duration, by string) result {
	e.t.Helper()
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		return result{code: exitCode(err), stderr: stderr.String()}
	case <-time.After(within):
		e.t.Fatalf("still running %s %s:\n%s", within, by, stderr)
		return result{}
	}
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

func unschedulable(p *corev1.Pod) bool { return kwokkit.Unschedulable(p) }

// ledger records every Job ever created in the namespace, from a watch started before the first tick, and the
// most Jobs that were unfinished at once.
type ledger struct {
	mu         sync.Mutex
	byKey      map[string][]*batchv1.Job // task key → every Job created for it
	unfinished map[string]bool           // Job names without a Complete or Failed condition, now
	peak       int                       // the most unfinished Jobs at once
	finished   map[string]bool           // Job names seen with a Complete or Failed condition
	live       map[string]string         // unfinished Jobs not being deleted, now: name → task key
	overlap    map[string]bool           // task keys that had two live Jobs at once
	markers    map[string]bool           // marker Jobs delivered (see sync); not counted as Jobs
}

func (e *env) ledger() *ledger {
	e.t.Helper()
	l := &ledger{byKey: map[string][]*batchv1.Job{}, unfinished: map[string]bool{}, finished: map[string]bool{},
		live: map[string]string{}, overlap: map[string]bool{}, markers: map[string]bool{}}
	e.followJobs(func(ev watch.Event) {
		job, ok := ev.Object.(*batchv1.Job)
		if !ok {
			return
		}
		l.mu.Lock()
		defer l.mu.Unlock()
		if isMarker(job) {
			l.markers[job.Name] = true
			return
		}
		key := job.Annotations[jobmeta.AnnotationTaskKey]
		if ev.Type == watch.Added {
			l.byKey[key] = append(l.byKey[key], job)
		}
		if ev.Type == watch.Deleted || jobFinished(job) || job.DeletionTimestamp != nil {
			delete(l.live, job.Name)
		} else if ev.Type == watch.Added || ev.Type == watch.Modified {
			l.live[job.Name] = key
			n := 0
			for _, k := range l.live {
				if k == key {
					n++
				}
			}
			if n > 1 {
				l.overlap[key] = true
			}
		}
		if jobFinished(job) {
			l.finished[job.Name] = true
		}
		if ev.Type == watch.Deleted || jobFinished(job) {
			delete(l.unfinished, job.Name)
		} else if ev.Type == watch.Added || ev.Type == watch.Modified {
			l.unfinished[job.Name] = true
			l.peak = max(l.peak, len(l.unfinished))
		}
	})
	return l
}

// follow lists (list returns the list's resourceVersion) and hands on every event of the watch that start opens
// from there, in order, resuming from the last resourceVersion seen when a watch ends, until the test ends.
func (e *env) follow(list func() (string, error), start func(rv string) (watch.Interface, error), on func(watch.Event)) {
	e.t.Helper()
	rv, err := list()
	if err != nil {
		e.t.Fatal(err)
	}
	// A watch that could not start, or that ended, is opened again from rv 100ms later.
	go wait.UntilWithContext(e.ctx, func(context.Context) {
		w, err := start(rv)
		if err != nil {
			return
		}
		defer w.Stop()
		for ev := range w.ResultChan() {
			if m, ok := ev.Object.(metav1.Object); ok {
				rv = m.GetResourceVersion()
			}
			on(ev)
		}
	}, 100*time.Millisecond)
}

// followJobs follows the namespace's Jobs from now on (see follow).
func (e *env) followJobs(on func(watch.Event)) {
	e.t.Helper()
	e.follow(func() (string, error) {
		l, err := e.kube.BatchV1().Jobs(e.ns).List(e.ctx, metav1.ListOptions{})
		if err != nil {
			return "", err
		}
		return l.ResourceVersion, nil
	}, func(rv string) (watch.Interface, error) {
		return e.kube.BatchV1().Jobs(e.ns).Watch(e.ctx, metav1.ListOptions{ResourceVersion: rv, AllowWatchBookmarks: true})
	}, on)
}

// followPods follows the namespace's pods from now on (see follow).
func (e *env) followPods(on func(watch.Event)) {
	e.t.Helper()
	e.follow(func() (string, error) {
		l, err := e.kube.CoreV1().Pods(e.ns).List(e.ctx, metav1.ListOptions{})
		if err != nil {
			return "", err
		}
		return l.ResourceVersion, nil
	}, func(rv string) (watch.Interface, error) {
		return e.kube.CoreV1().Pods(e.ns).Watch(e.ctx, metav1.ListOptions{ResourceVersion: rv, AllowWatchBookmarks: true})
	}, on)
}

// writesOf runs fn and returns the writes on the namespace's Jobs the API server made meanwhile, as its watch shows
// them: "create NAME" and "delete NAME" in order, and each Job created as it was added.
func (e *env) writesOf(fn func()) (writes []string, added map[string]*batchv1.Job) {
	e.t.Helper()
	var mu sync.Mutex
	added = map[string]*batchv1.Job{}
	markers := map[string]bool{}
	e.followJobs(func(ev watch.Event) {
		j, ok := ev.Object.(*batchv1.Job)
		if !ok {
			return
		}
		mu.Lock()
		defer mu.Unlock()
		switch {
		case isMarker(j):
			markers[j.Name] = true
		case ev.Type == watch.Added:
			writes = append(writes, "create "+j.Name)
			added[j.Name] = j
		case ev.Type == watch.Deleted:
			writes = append(writes, "delete "+j.Name)
		}
	})
	fn()
	marker, err := writeMarker(e.ctx, e.kube, e.ns)
	if err != nil {
		e.t.Fatal(err)
	}
	e.eventually("the Jobs watch delivering the writes", 30*time.Second, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return markers[marker]
	})
	mu.Lock()
	defer mu.Unlock()
	return slices.Clone(writes), added
}

// markerLabel marks the Jobs a test writes only to see a watch deliver them (see sync).
const markerLabel = "jobsched.io/e2e-marker"

// markerJob is a Job that nothing acts on: suspended (no pod) and without jobsched's labels (no pass sees it).
func markerJob(name string) *batchv1.Job {
	return &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{markerLabel: "true"}},
		Spec: batchv1.JobSpec{Suspend: ptr.To(true), Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
			RestartPolicy: corev1.RestartPolicyNever, Containers: []corev1.Container{{Name: "marker", Image: "marker:1"}}}}},
	}
}

func isMarker(j *batchv1.Job) bool { return j.Labels[markerLabel] != "" }

// markerPrefix begins the name of every marker Job.
const markerPrefix = "marker-"

// writeMarker creates a marker Job in namespace ns and returns its name. A watch of ns's Jobs delivers its events
// in the order of the writes: once it has delivered the marker, it has delivered every Job event before it.
func writeMarker(ctx context.Context, kube kubernetes.Interface, ns string) (string, error) {
	j, err := kube.BatchV1().Jobs(ns).Create(ctx, markerJob(markerPrefix+randHex(4)), metav1.CreateOptions{})
	if err != nil {
		return "", err
	}
	return j.Name, nil
}

// deleteMarker deletes marker Job name of namespace ns.
func deleteMarker(ctx context.Context, kube kubernetes.Interface, ns, name string) error {
	return kube.BatchV1().Jobs(ns).Delete(ctx, name, metav1.DeleteOptions{PropagationPolicy: ptr.To(metav1.DeletePropagationBackground)})
}

// sync returns once l has seen every Job event up to now: it writes a marker Job, waits until l's watch has
// delivered it, and deletes it again. A test that checks that something did not happen syncs first.
func (e *env) sync(l *ledger) {
	e.t.Helper()
	name, err := writeMarker(e.ctx, e.kube, e.ns)
	if err != nil {
		e.t.Fatal(err)
	}
	e.eventually("the Jobs watch delivering marker "+name, 30*time.Second, func() bool {
		l.mu.Lock()
		defer l.mu.Unlock()
		return l.markers[name]
	})
	if err := deleteMarker(e.ctx, e.kube, e.ns, name); err != nil {
		e.t.Fatal(err)
	}
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

// overlapping are the task keys that had two unfinished Jobs (not being deleted) at once, sorted.
func (l *ledger) overlapping() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Sorted(maps.Keys(l.overlap))
}

// progress is how many Jobs have finished so far, and how many are unfinished now.
func (l *ledger) progress() (finished, unfinished int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.finished), len(l.unfinished)
}

// passUntil runs passes of config until done says the scenario is over (it is called after each pass with the
// pass's number: 0, 1, …, once l has seen every Job event of that pass: sync) and returns true, or returns false once timeout has passed. Between two passes it waits
// for what the next one acts on, as the ledger l's watch shows it: a Job that finished since the pass before began
// (its slot, its room on a node, its row); with no Job unfinished there is nothing to wait for, and it passes again.
func (e *env) passUntil(config string, l *ledger, timeout time.Duration, done func(pass int) bool) bool {
	e.t.Helper()
	deadline := time.Now().Add(timeout)
	for pass := 0; ; pass++ {
		before, _ := l.progress()
		e.tick(config)
		e.sync(l)
		if done(pass) {
			return true
		}
		if !time.Now().Before(deadline) {
			return false
		}
		err := wait.PollUntilContextTimeout(e.ctx, 100*time.Millisecond, time.Until(deadline), true, func(context.Context) (bool, error) {
			finished, unfinished := l.progress()
			return finished > before || unfinished == 0, nil
		})
		if err != nil {
			return false
		}
	}
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
	var mu sync.Mutex
	seen := map[string]bool{}
	e.followPods(func(ev watch.Event) {
		if pod, ok := ev.Object.(*corev1.Pod); ok && unschedulable(pod) {
			mu.Lock()
			seen[pod.Name] = true
			mu.Unlock()
		}
	})
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

// workerOn marks a task's row done once one of its pods reaches one of phases: the pods there now, then each pod
// event of the namespace's watch.
func (e *env) workerOn(phases ...corev1.PodPhase) {
	e.t.Helper()
	mark := func(p *corev1.Pod) {
		if slices.Contains(phases, p.Status.Phase) {
			_, _ = e.db.ExecContext(e.ctx, `UPDATE `+e.table+` SET status = 'done' WHERE id = $1 AND status = 'waiting'`,
				p.Annotations[jobmeta.AnnotationTaskKey])
		}
	}
	e.follow(func() (string, error) {
		l, err := e.kube.CoreV1().Pods(e.ns).List(e.ctx, metav1.ListOptions{})
		if err != nil {
			return "", err
		}
		for i := range l.Items {
			mark(&l.Items[i])
		}
		return l.ResourceVersion, nil
	}, func(rv string) (watch.Interface, error) {
		return e.kube.CoreV1().Pods(e.ns).Watch(e.ctx, metav1.ListOptions{ResourceVersion: rv, AllowWatchBookmarks: true})
	}, func(ev watch.Event) {
		if p, ok := ev.Object.(*corev1.Pod); ok && ev.Type != watch.Deleted {
			mark(p)
		}
	})
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

// summary is the pass's closing log line, `pass done`.
type summary = testkit.Summary

// summary is the first pass done line; the test fails without one.
func (r result) summary(t *testing.T) summary {
	t.Helper()
	return testkit.PassDone(t, r.stderr)
}

// summaries are all the pass done lines, in order.
func (r result) summaries(t *testing.T) []summary {
	t.Helper()
	all, err := testkit.PassDones(r.stderr)
	if err != nil {
		t.Fatal(err)
	}
	return all
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
type lockedBuffer = testkit.Buffer

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

// runScript runs scripts/NAME of the repository with env added to the test's environment, and returns its stdout
// (its stderr with the error).
func runScript(env map[string]string, name string, args ...string) (string, error) {
	cmd := exec.Command(filepath.Join(repoRoot, "scripts", name), args...)
	cmd.Env = os.Environ()
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Run(); err != nil {
		return out.String(), fmt.Errorf("%w:\n%s", err, errOut.String())
	}
	return out.String(), nil
}

// cacheDir is the scripts' cache root: JOBSCHED_CACHE, else jobsched in the user's cache directory.
func cacheDir() string {
	if cache := os.Getenv("JOBSCHED_CACHE"); cache != "" {
		return cache
	}
	base, _ := os.UserCacheDir()
	return filepath.Join(base, "jobsched")
}

// ownServer starts a server of the test's own with scripts/SCRIPT up, its state directory in variable dirVar: dir,
// or when dir is "" a new directory prefix… of the cache, never reused and so always taken down when the test ends
// (KEEP=1 or not). env is added to the script's environment. It returns the last line up prints (the server's
// kubeconfig or DSN) and the state directory.
func ownServer(t *testing.T, script, dirVar, dir, prefix string, env map[string]string) (last, stateDir string) {
	t.Helper()
	own := dir == ""
	if own {
		dir = filepath.Join(cacheDir(), prefix+randHex(3))
	}
	run := func(args ...string) string {
		t.Helper()
		e := map[string]string{dirVar: dir}
		for k, v := range env {
			e[k] = v
		}
		out, err := runScript(e, script, args...)
		if err != nil {
			t.Fatalf("scripts/%s %s: %v", script, strings.Join(args, " "), err)
		}
		return out
	}
	start := time.Now()
	last = strings.TrimSpace(lastLine(run("up")))
	if own {
		t.Cleanup(func() { run("down") })
	}
	t.Logf("own %s up in %s (%s)", strings.TrimSuffix(script, ".sh"), time.Since(start).Round(time.Second), dir)
	return last, dir
}

// ownCluster is a control plane of the test's own (scripts/cluster.sh, see ownServer): its kubeconfig and state
// directory.
func ownCluster(t *testing.T, dir, prefix string, env map[string]string) (kcfg, stateDir string) {
	t.Helper()
	return ownServer(t, "cluster.sh", "JOBSCHED_CLUSTER_DIR", dir, prefix, env)
}

// ownPostgres is a PostgreSQL of the test's own (scripts/postgres.sh, see ownServer): its admin DSN and state
// directory.
func ownPostgres(t *testing.T, dir, prefix string) (adminDSN, stateDir string) {
	t.Helper()
	return ownServer(t, "postgres.sh", "JOBSCHED_PG_DIR", dir, prefix, nil)
}

func randHex(n int) string {
	b := make([]byte, n)
	_, _ = crand.Read(b)
	return hex.EncodeToString(b)
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return lines[len(lines)-1]
}
