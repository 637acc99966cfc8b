//go:build integration

package e2e

import (
	"bufio"
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	mathrand "math/rand/v2"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"

	"github.com/jobsched/jobsched/pkg/jobmeta"
	"github.com/jobsched/jobsched/pkg/render"
	"github.com/jobsched/jobsched/pkg/testkit"
	"github.com/jobsched/jobsched/pkg/testkit/tcpkit"
)

// TestChaos runs jobsched's passes under faults and checks its invariants from the API server and the database,
// never from jobsched's own logs (issue 13):
//
//   - three schedulers (two in one namespace, one with the same name in another), each with its own ServiceAccount
//     and table; a stand-in worker closes a row once its Job succeeded; one scheduler's tasks fail once, another's
//     always (they die after retry.maxAttempts);
//   - passes back to back and up to three at once, most of them SIGKILLed at a random moment of their run; the
//     kube-apiserver SIGKILLed and restarted, PostgreSQL SIGKILLed and restarted, sometimes with a listener that never
//     answers in its place for a while;
//   - checked on every Job event (a watch from before the first pass, re-listed after each API server restart):
//     never two unfinished Jobs for one key, never two Jobs for one (key, attempt), never more Jobs for a key than
//     maxAttempts, never more unfinished Jobs than maxActive at any observation, however many passes of that
//     scheduler overlap (the Lease serialises their creates), Jobs deleted only when finished, created by the field
//     manager jobsched with their own scheduler's label and name;
//   - at the end, after clean passes: every row done or dead, no finished Job past its retention, no write by
//     jobsched's database role (a statement trigger, and pg_stat_user_tables over the clean phase), every pass not
//     killed ended with its `pass done` line and exit 0 or 1 (1 when it ran entirely while the API server or the
//     database was down, 0 when no fault touched it), the API server's audit log shows each ServiceAccount only
//     listing with its own scheduler's selector in its own namespace and creating/deleting only its own Jobs, and no
//     output of jobsched holds the DSN's password or a token.
//
// It starts its own control plane (scripts/cluster.sh with its own JOBSCHED_CLUSTER_DIR) and its own PostgreSQL
// (scripts/postgres.sh with its own JOBSCHED_PG_DIR), since it kills both; the shared ones of the test run are never
// touched. scripts/chaos.sh runs it at full size; sizes come from the environment (JOBSCHED_CHAOS_*).
func TestChaos(t *testing.T) {
	t.Parallel() // its own control plane and PostgreSQL: what it kills no other test uses
	p := chaosParams{
		kills:             envInt("JOBSCHED_CHAOS_KILLS", 60),
		apiserverRestarts: envInt("JOBSCHED_CHAOS_APISERVER_RESTARTS", 2),
		dbRestarts:        envInt("JOBSCHED_CHAOS_DB_RESTARTS", 3),
		clusterDir:        os.Getenv("JOBSCHED_CHAOS_CLUSTER_DIR"),
		pgDir:             os.Getenv("JOBSCHED_CHAOS_PG_DIR"),
		out:               os.Getenv("JOBSCHED_CHAOS_OUT"),
		report:            os.Getenv("JOBSCHED_CHAOS_REPORT"),
	}
	c := newChaos(t, p)
	c.run()
}

type chaosParams struct {
	kills, apiserverRestarts, dbRestarts int
	clusterDir, pgDir, out, report       string
}

const (
	chaosMaxActive   = 12
	chaosMaxPerTick  = 6
	chaosMaxAttempts = 3
	chaosRetention   = 30 * time.Second // succeeded Jobs; longer than any database outage, so the worker closes the row first
	chaosLease       = 5 * time.Second  // the ticks' --lease-duration
)

// chaosSched is one scheduler of the run.
type chaosSched struct {
	name, ns, table, fail  string // fail: "" (tasks succeed), "first" or "true" (kwok-fail)
	cfg, kcfg, token, user string
	env                    *env // its namespace's scenario

	alive int // its ticks running now (under chaos.mu)
}

func (s *chaosSched) id() string { return s.ns + "/" + s.name }

type chaos struct {
	t       *testing.T
	p       chaosParams
	ctx     context.Context
	dir     string // this run's files: configs and kubeconfigs (a directory a namespace), every output of jobsched
	cluster string // JOBSCHED_CLUSTER_DIR
	pgdir   string // JOBSCHED_PG_DIR
	kcfg    string
	kube    kubernetes.Interface
	admin   *sql.DB
	adminDS string
	dsn     string // jobsched's: its own role, with a password
	pw      string
	role    string
	pgPort  string
	scheds  []*chaosSched
	envs    []*env // a scenario a namespace
	suffix  string
	secrets map[string]string // what must never be printed → what it is

	mu          sync.Mutex
	jobs        map[types.UID]*chaosJob
	markers     map[string]bool               // marker Jobs the watches delivered (see sync)
	byAttempt   map[string]types.UID          // ns/sched/key/attempt → the Job's UID
	byKey       map[string]map[types.UID]bool // ns/sched/key → every Job ever seen for it
	checks      map[string]int
	violByCheck map[string]int
	violations  []string
	nviol       int
	faultUntil  time.Time // a fault is in progress (or settling) until then
	faultSeq    int       // fault episodes so far
	apiDown     bool
	dbDown      bool
	passes      []*chaosPass
	gaps        int
	finishes    int // Jobs seen finished so far
	workerUpd   atomic.Int64
	producerIn  atomic.Int64
	keyN        atomic.Int64
	passN       atomic.Int64 // numbers each pass's output file
	figures     map[string]int
}

type chaosJob struct {
	uid                  types.UID
	ns, sched, name, key string
	attempt              int
	finished, failed     bool
	finishedAt           time.Time
	deleted              bool
	dead                 bool // failed at the last attempt
	addedByGap, complete bool
}

type chaosPass struct {
	sched        *chaosSched
	cmd          string
	start, end   time.Time
	killed       bool
	code         int
	out          string // file with stdout and stderr
	apiDownAll   bool   // the API server was down for the whole pass
	dbDownAll    bool
	faultTouched bool
	faultSeq     int
}

func newChaos(t *testing.T, p chaosParams) *chaos {
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	c := &chaos{t: t, p: p, ctx: ctx, suffix: randHex(3),
		jobs: map[types.UID]*chaosJob{}, markers: map[string]bool{}, byAttempt: map[string]types.UID{}, byKey: map[string]map[types.UID]bool{},
		checks: map[string]int{}, violByCheck: map[string]int{}, figures: map[string]int{}, secrets: map[string]string{}}
	c.dir = p.out
	if c.dir == "" {
		c.dir = t.TempDir()
	}
	if err := os.MkdirAll(filepath.Join(c.dir, "passes"), 0o700); err != nil {
		t.Fatal(err)
	}

	// Our own control plane and PostgreSQL: we kill them.
	cache := cacheDir()
	if p.clusterDir == filepath.Join(cache, "cluster") || p.pgDir == filepath.Join(cache, "postgres") {
		t.Fatalf("TestChaos kills its control plane and PostgreSQL: it needs its own, not the shared %s or %s", p.clusterDir, p.pgDir)
	}
	c.kcfg, c.cluster = ownCluster(t, p.clusterDir, "cluster-chaos-test-", map[string]string{"JOBSCHED_AUDIT": "1", "NODES": "2"})
	c.adminDS, c.pgdir = ownPostgres(t, p.pgDir, "postgres-chaos-test-")
	if _, err := os.Stat(filepath.Join(c.cluster, "audit-policy.yaml")); err != nil {
		t.Fatalf("the chaos cluster in %s was started without JOBSCHED_AUDIT=1: run scripts/cluster.sh down for it first", c.cluster)
	}
	u, err := url.Parse(c.adminDS)
	if err != nil {
		t.Fatal(err)
	}
	c.pgPort = u.Port()
	if tok, err := os.ReadFile(filepath.Join(c.cluster, "certs", "admin.token")); err == nil {
		c.secrets[strings.TrimSpace(string(tok))] = "the admin token"
	}

	c.admin, err = sql.Open("postgres", c.writerDSN())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.admin.Close() })
	c.setupDatabase()
	for _, ns := range []string{"chaos-a-" + c.suffix, "chaos-b-" + c.suffix} {
		c.envs = append(c.envs, newEnvWith(t, envOptions{kubeconfig: c.kcfg, dsn: c.adminDS + "&connect_timeout=3", namespace: ns,
			dir: filepath.Join(c.dir, ns)}))
	}
	c.kube = c.envs[0].kube
	c.scheds = []*chaosSched{
		{name: "alpha", env: c.envs[0], fail: "first"},
		{name: "beta", env: c.envs[0]},
		{name: "alpha", env: c.envs[1], fail: "true"},
	}
	role, _ := shippedRules(t)
	for i, s := range c.scheds {
		s.ns = s.env.ns
		s.table = fmt.Sprintf("chaos_%s_%d_%s", c.suffix, i, s.name)
		c.setupTable(s.env, s.table)
		c.setupScheduler(s, role)
	}
	return c
}

// setupDatabase makes jobsched's own role (LOGIN, with a password, and write rights on the task tables: a write must
// reach the table to be seen, not fail on a missing grant) and a log of every write statement with its session user.
func (c *chaos) setupDatabase() {
	c.pw = "ChaosPw" + randHex(8)
	c.role = "jobsched_chaos_" + c.suffix
	c.secrets[c.pw] = "the DSN's password"
	c.sql(`CREATE ROLE ` + c.role + ` LOGIN PASSWORD '` + c.pw + `'`)
	c.sql(`CREATE TABLE IF NOT EXISTS chaos_writes (at timestamptz NOT NULL DEFAULT clock_timestamp(), usr text, op text, tbl text)`)
	c.sql(`CREATE OR REPLACE FUNCTION chaos_log_write() RETURNS trigger LANGUAGE plpgsql SECURITY DEFINER AS $$
BEGIN INSERT INTO chaos_writes (usr, op, tbl) VALUES (session_user, TG_OP, TG_TABLE_NAME); RETURN NULL; END $$`)
	u, _ := url.Parse(c.adminDS)
	u.User = url.UserPassword(c.role, c.pw)
	q := u.Query()
	q.Set("connect_timeout", "3")
	u.RawQuery = q.Encode()
	c.dsn = u.String()
}

// setupTable: a task table of e, whose every write statement is logged with its session user, and that jobsched's
// role may write.
func (c *chaos) setupTable(e *env, table string) {
	e.addTable(table)
	c.sql(`CREATE TRIGGER log_writes AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON ` + table +
		` FOR EACH STATEMENT EXECUTE FUNCTION chaos_log_write()`)
	c.sql(`GRANT SELECT, INSERT, UPDATE, DELETE, TRUNCATE ON ` + table + ` TO ` + c.role)
}

func (c *chaos) sql(q string, args ...any) {
	c.t.Helper()
	if _, err := c.admin.ExecContext(c.ctx, q, args...); err != nil {
		c.t.Fatalf("%s: %v", q, err)
	}
}

// setupScheduler: a ServiceAccount with the shipped Role, a kubeconfig with its token, jobsched.yaml and job.yaml.
func (c *chaos) setupScheduler(s *chaosSched, rules []rbacv1.PolicyRule) {
	sa := "jobsched-" + s.name
	s.user = "system:serviceaccount:" + s.ns + ":" + sa
	s.kcfg, s.token = s.env.serviceAccount(sa, rules, nil, 6*time.Hour)
	c.secrets[s.token] = "the token of " + s.user
	s.cfg = s.env.writeConfig(config{name: s.name, query: "SELECT id, url FROM " + s.table + " WHERE status = 'waiting' ORDER BY n",
		timeout: "3s", duration: "1s", cpu: "50m", memory: "32Mi", anyNode: true, fail: s.fail == "true", failFirst: s.fail == "first",
		extra: fmt.Sprintf(`limits:
  maxActive: %d
  maxPerTick: %d
  capacity: quota
gc:
  succeededRetention: %s
retry:
  maxAttempts: %d
  backoff: 2s
  maxBackoff: 4s
`, chaosMaxActive, chaosMaxPerTick, chaosRetention, chaosMaxAttempts)})
	c.t.Logf("scheduler %s: ServiceAccount %s, table %s, tasks fail: %q", s.id(), s.user, s.table, s.fail)
}

// violate records a broken invariant (the first 50 are kept in full).
func (c *chaos) violate(format string, args ...any) {
	c.nviol++
	if len(c.violations) < 50 {
		c.violations = append(c.violations, time.Now().UTC().Format("15:04:05.000")+" "+fmt.Sprintf(format, args...))
	}
}

func (c *chaos) check(name string, ok bool, format string, args ...any) {
	c.checks[name]++
	if !ok {
		c.violByCheck[name]++
		c.violate(name+": "+format, args...)
	}
}

func (c *chaos) sched(ns, name string) *chaosSched {
	for _, s := range c.scheds {
		if s.ns == ns && s.name == name {
			return s
		}
	}
	return nil
}

func chaosFinished(j *batchv1.Job) (finished, failed bool, at time.Time, reason string) {
	for _, cond := range j.Status.Conditions {
		if cond.Status != corev1.ConditionTrue {
			continue
		}
		switch cond.Type {
		case batchv1.JobComplete:
			return true, false, cond.LastTransitionTime.Time, ""
		case batchv1.JobFailed:
			return true, true, cond.LastTransitionTime.Time, cond.Reason
		}
	}
	return false, false, time.Time{}, ""
}

// observe applies one Job event to the model and checks the invariants it touches. Called with c.mu held.
func (c *chaos) observe(typ watch.EventType, j *batchv1.Job, gap bool) {
	now := time.Now()
	sched := j.Labels[jobmeta.LabelScheduler]
	s := c.sched(j.Namespace, sched)
	rec := c.jobs[j.UID]
	if typ == watch.Deleted {
		if rec != nil && !rec.deleted {
			if finished, failed, at, _ := chaosFinished(j); finished && !rec.finished {
				rec.finished, rec.failed, rec.finishedAt, rec.complete = true, failed, at, !failed
				c.finishes++
			}
			rec.deleted = true
			// Only jobsched deletes Jobs (no TTL, no owner): it may delete only finished ones.
			c.check("deleted only when finished", rec.finished, "%s/%s (key %q, attempt %d) deleted while unfinished", j.Namespace, j.Name, rec.key, rec.attempt)
			if rec.complete && !gap {
				c.check("succeeded Job kept for its retention", now.Sub(rec.finishedAt) >= chaosRetention-2*time.Second,
					"%s/%s deleted %s after it succeeded, retention %s", j.Namespace, j.Name, now.Sub(rec.finishedAt).Round(time.Millisecond), chaosRetention)
			}
		}
		return
	}
	if rec == nil {
		key := j.Annotations[jobmeta.AnnotationTaskKey]
		attempt, _ := strconv.Atoi(j.Labels[jobmeta.LabelAttempt])
		rec = &chaosJob{uid: j.UID, ns: j.Namespace, sched: sched, name: j.Name, key: key, attempt: attempt, addedByGap: gap}
		c.jobs[j.UID] = rec
		if gap {
			c.figures["Jobs first seen in a re-list after a watch gap"]++
		}
		c.check("Job belongs to a known scheduler", s != nil, "%s/%s has scheduler label %q", j.Namespace, j.Name, sched)
		if s == nil {
			return
		}
		c.check("created by field manager jobsched", slices.ContainsFunc(j.ManagedFields, func(m metav1.ManagedFieldsEntry) bool {
			return m.Manager == "jobsched" && m.Subresource == ""
		}), "%s/%s managed fields %v", j.Namespace, j.Name, managers(j))
		c.check("name of its own scheduler", j.Name == render.AttemptName(s.name, key, attempt),
			"%s/%s is not AttemptName(%q, %q, %d)", j.Namespace, j.Name, s.name, key, attempt)
		c.check("pod template labelled with its scheduler", j.Spec.Template.Labels[jobmeta.LabelScheduler] == sched,
			"%s/%s pod template scheduler label %q", j.Namespace, j.Name, j.Spec.Template.Labels[jobmeta.LabelScheduler])
		ka := fmt.Sprintf("%s/%s/%s/%d", j.Namespace, sched, key, attempt)
		if other, ok := c.byAttempt[ka]; ok {
			c.check("one Job per (key, attempt)", false, "%s: %s and %s", ka, other, j.UID)
		} else {
			c.byAttempt[ka] = j.UID
			c.check("one Job per (key, attempt)", true, "")
		}
		kk := j.Namespace + "/" + sched + "/" + key
		if c.byKey[kk] == nil {
			c.byKey[kk] = map[types.UID]bool{}
		}
		c.byKey[kk][j.UID] = true
		c.check("at most maxAttempts Jobs per key", len(c.byKey[kk]) <= chaosMaxAttempts && attempt >= 1 && attempt <= chaosMaxAttempts,
			"%s has %d Jobs (this one attempt %d)", kk, len(c.byKey[kk]), attempt)
	}
	if s == nil {
		return
	}
	finished, failed, at, reason := chaosFinished(j)
	if finished && !rec.finished {
		c.finishes++
		rec.finished, rec.failed, rec.finishedAt = true, failed, at
		rec.complete = !failed
		rec.dead = failed && (rec.attempt >= chaosMaxAttempts || reason == "PodFailurePolicy")
	}
	// never two unfinished Jobs for one key
	unfinished := 0
	for uid := range c.byKey[j.Namespace+"/"+sched+"/"+rec.key] {
		if r := c.jobs[uid]; !r.deleted && !r.finished {
			unfinished++
		}
	}
	c.check("at most one unfinished Job per key", unfinished <= 1, "%s/%s key %q has %d unfinished Jobs", j.Namespace, sched, rec.key, unfinished)
}

// checkActive checks, at every observation (each watch event, and a re-list once it is applied whole), that no
// scheduler has more unfinished Jobs than maxActive: with the Lease a pass observes only after the creates of the
// one before it, so racing passes never add up. Called with c.mu held.
func (c *chaos) checkActive(ns string) {
	for _, s := range c.scheds {
		if s.ns != ns {
			continue
		}
		total := 0
		for _, r := range c.jobs {
			if r.sched == s.name && r.ns == ns && !r.deleted && !r.finished {
				total++
			}
		}
		c.check("unfinished ≤ maxActive at every observation", total <= chaosMaxActive,
			"%s: %d unfinished Jobs, maxActive %d (%d passes running)", s.id(), total, chaosMaxActive, s.alive)
		if s.alive > 1 {
			c.figures["observations while 2-3 passes of one scheduler ran at once"]++
		}
		c.figures["most unfinished Jobs of one scheduler at an observation"] = max(c.figures["most unfinished Jobs of one scheduler at an observation"], total)
	}
}

func managers(j *batchv1.Job) []string {
	var out []string
	for _, m := range j.ManagedFields {
		out = append(out, m.Manager+"/"+string(m.Operation)+"/"+m.Subresource)
	}
	return out
}

// watchJobs keeps the model up to date from a watch of one namespace's Jobs, started before the first pass; after a
// broken watch it resumes from the last resourceVersion, and when that is gone (an API server restart) it re-lists
// and compares by UID: Jobs it had not seen are added (counted as seen after a gap), Jobs gone are deleted.
func (c *chaos) watchJobs(ns string, ready chan<- struct{}) {
	rv := ""
	relist := func() bool {
		l, err := c.kube.BatchV1().Jobs(ns).List(c.ctx, metav1.ListOptions{})
		if err != nil {
			return false
		}
		c.mu.Lock()
		defer c.mu.Unlock()
		present := map[types.UID]bool{}
		for i := range l.Items {
			j := &l.Items[i]
			if isMarker(j) {
				c.markers[j.Name] = true
				continue
			}
			present[j.UID] = true
			typ := watch.Modified
			if c.jobs[j.UID] == nil {
				typ = watch.Added
			}
			c.observe(typ, j, rv != "")
		}
		for uid, r := range c.jobs {
			if !r.deleted && !present[uid] && r.ns == ns {
				c.observe(watch.Deleted, &batchv1.Job{ObjectMeta: metav1.ObjectMeta{UID: uid, Namespace: ns, Name: r.name,
					Labels: map[string]string{jobmeta.LabelScheduler: r.sched}}}, true)
			}
		}
		c.checkActive(ns)
		if rv != "" {
			c.gaps++
		}
		rv = l.ResourceVersion
		return true
	}
	// Until the API server answers (it may be restarting): a re-list that fails is tried again 50ms later.
	relistOK := func(interval time.Duration) {
		_ = wait.PollUntilContextCancel(c.ctx, interval, true, func(context.Context) (bool, error) { return relist(), nil })
	}
	relistOK(100 * time.Millisecond)
	close(ready)
	// A watch that could not start, or that ended, is opened again 50ms later.
	wait.UntilWithContext(c.ctx, func(context.Context) {
		w, err := c.kube.BatchV1().Jobs(ns).Watch(c.ctx, metav1.ListOptions{ResourceVersion: rv, AllowWatchBookmarks: true})
		if err != nil {
			if apierrors.IsResourceExpired(err) || apierrors.IsGone(err) {
				relistOK(50 * time.Millisecond)
			}
			return
		}
		expired := false
		for ev := range w.ResultChan() {
			if ev.Type == watch.Error {
				if st, ok := ev.Object.(*metav1.Status); ok && (st.Code == 410 || st.Reason == metav1.StatusReasonExpired || st.Reason == metav1.StatusReasonGone) {
					expired = true
				}
				break
			}
			j, ok := ev.Object.(*batchv1.Job)
			if !ok {
				continue
			}
			rv = j.ResourceVersion
			if ev.Type == watch.Bookmark {
				continue
			}
			c.mu.Lock()
			if isMarker(j) {
				c.markers[j.Name] = true
				c.mu.Unlock()
				continue
			}
			c.observe(ev.Type, j, false)
			c.checkActive(ns)
			c.mu.Unlock()
		}
		w.Stop()
		if expired {
			relistOK(50 * time.Millisecond)
		}
	}, 50*time.Millisecond)
}

// sync returns once the watches have delivered every Job event up to now: a marker Job in each namespace, delivered
// by its watch (in the order of the writes), then deleted (see writeMarker).
func (c *chaos) sync() {
	for _, e := range c.envs {
		name, err := writeMarker(c.ctx, c.kube, e.ns)
		if err != nil {
			c.t.Fatal(err)
		}
		e.eventually("the Jobs watch delivering marker "+name, time.Minute, func() bool {
			c.mu.Lock()
			defer c.mu.Unlock()
			return c.markers[name]
		})
		if err := deleteMarker(c.ctx, c.kube, e.ns, name); err != nil {
			c.t.Fatal(err)
		}
	}
}

// worker stands in for the task pods: it closes a row (UPDATE status='done') once its Job succeeded, read from the
// API server, on its own database connection. It is the only writer besides the setup. It polls, every 300ms
// (wait.UntilWithContext), rather than following a watch: a row it could not close while the database or the API
// server was down is closed by a later round.
func (c *chaos) worker(ctx context.Context, db *sql.DB) {
	closed := map[string]bool{}
	wait.UntilWithContext(ctx, func(ctx context.Context) {
		for _, s := range c.scheds {
			l, err := c.kube.BatchV1().Jobs(s.ns).List(ctx, metav1.ListOptions{LabelSelector: jobmeta.LabelScheduler + "=" + s.name})
			if err != nil {
				continue
			}
			for _, j := range l.Items {
				key := j.Annotations[jobmeta.AnnotationTaskKey]
				if f, failed, _, _ := chaosFinished(&j); !f || failed || closed[s.id()+"/"+key] {
					continue
				}
				qctx, cancel := context.WithTimeout(ctx, 3*time.Second)
				r, err := db.ExecContext(qctx, `UPDATE `+s.table+` SET status = 'done' WHERE id = $1 AND status = 'waiting'`, key)
				cancel()
				if err == nil {
					n, _ := r.RowsAffected()
					c.workerUpd.Add(n)
					closed[s.id()+"/"+key] = true
				}
			}
		}
	}, 300*time.Millisecond)
}

// produce adds n rows to random tables (the test setup is the other writer). With backlog > 0 a table gets a row only
// while it has fewer than backlog rows waiting that are not dead: the queues stay short enough to drain at the end.
func (c *chaos) produce(ctx context.Context, n, backlog int) {
	for range n {
		s := c.scheds[mathrand.IntN(len(c.scheds))]
		if backlog > 0 {
			var waiting int
			if err := c.admin.QueryRowContext(ctx, `SELECT count(*) FROM `+s.table+` WHERE status = 'waiting'`).Scan(&waiting); err != nil {
				continue
			}
			c.mu.Lock()
			dead := 0
			for _, r := range c.jobs {
				if r.dead && !r.deleted && r.ns == s.ns && r.sched == s.name {
					dead++
				}
			}
			c.mu.Unlock()
			if waiting-dead >= backlog {
				continue
			}
		}
		key := fmt.Sprintf("k-%d", c.keyN.Add(1))
		qctx, cancel := context.WithTimeout(ctx, 3*time.Second)
		if _, err := c.admin.ExecContext(qctx, `INSERT INTO `+s.table+` (id, url) VALUES ($1, $2)`, key, "https://example.com/$(SECRET)/"+key); err == nil {
			c.producerIn.Add(1)
		}
		cancel()
	}
}

// runPass runs one jobsched command of s; killAfter > 0 SIGKILLs it after that long (if it still runs), atFirstWrite
// SIGKILLs it the moment it logs its first created or deleted Job (the others of its 16 in flight then).
func (c *chaos) runPass(s *chaosSched, killAfter time.Duration, atFirstWrite bool, args ...string) *chaosPass {
	p := &chaosPass{sched: s, cmd: args[0]}
	p.out = filepath.Join(c.dir, "passes", fmt.Sprintf("%06d-%s-%s-%s.log", c.passN.Add(1), s.ns, s.name, args[0]))
	f, err := os.Create(p.out)
	if err != nil {
		c.t.Fatal(err)
	}
	defer f.Close()
	if args[0] == "tick" { // a killed holder blocks the others for its Lease's duration: 5s, not 15s, in this run of kills
		args = append(args, "--lease-duration", chaosLease.String())
	}
	cmd := jobschedCommand(c.ctx, s.kcfg, c.dsn, nil, append([]string{"--config", s.cfg, "--timeout", "15s"}, args...)...)
	// Nothing of the test's environment but what a pass needs: every secret it sees is one the test knows of.
	cmd.Env = []string{"DATABASE_URL=" + c.dsn, "PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME")}
	var killed atomic.Bool
	var out io.Writer = f
	if atFirstWrite {
		out = &killOnWrite{w: f, kill: func() {
			killed.Store(true)
			_ = cmd.Process.Signal(syscall.SIGKILL)
		}}
	}
	cmd.Stdout, cmd.Stderr = out, out
	c.mu.Lock()
	p.start = time.Now()
	p.apiDownAll, p.dbDownAll, p.faultSeq = c.apiDown, c.dbDown, c.faultSeq
	if args[0] == "tick" {
		s.alive++
	}
	c.passes = append(c.passes, p)
	c.mu.Unlock()
	if err := cmd.Start(); err != nil {
		c.t.Fatal(err)
	}
	var timer *time.Timer
	if killAfter > 0 {
		timer = time.AfterFunc(killAfter, func() {
			killed.Store(true)
			_ = cmd.Process.Signal(syscall.SIGKILL)
		})
	}
	err = cmd.Wait()
	if timer != nil {
		timer.Stop()
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	p.end = time.Now()
	p.code = exitCode(err)
	p.killed = killed.Load() && p.code == -1
	p.apiDownAll = p.apiDownAll && c.apiDown && p.faultSeq == c.faultSeq
	p.dbDownAll = p.dbDownAll && c.dbDown && p.faultSeq == c.faultSeq
	if c.faultUntil.After(p.start) || c.apiDown || c.dbDown {
		p.faultTouched = true
	}
	if args[0] == "tick" {
		s.alive--
	}
	return p
}

// killOnWrite passes a pass's output through and calls kill once, at its first created or deleted Job.
type killOnWrite struct {
	w    io.Writer
	once sync.Once
	kill func()
}

func (k *killOnWrite) Write(p []byte) (int, error) {
	n, err := k.w.Write(p)
	if bytes.Contains(p, []byte(`"message":"created Job"`)) || bytes.Contains(p, []byte(`"message":"deleted finished Job"`)) {
		k.once.Do(k.kill)
	}
	return n, err
}

// Faults: the API server and PostgreSQL, SIGKILLed and restarted. beginFault, before the kill, marks every pass
// that runs from then until clearFault (the server is back, plus 2 s for clients to reconnect) as touched by a fault;
// setDown marks the window in which the server is surely down: from the moment the kill has returned (the process
// is gone) to the moment its restart is invoked.
func (c *chaos) setDown(api, db bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.apiDown, c.dbDown = api, db
}

func (c *chaos) beginFault() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.faultUntil = time.Now().Add(time.Hour)
	c.faultSeq++
	for _, p := range c.passes {
		if p.end.IsZero() {
			p.faultTouched = true
		}
	}
}

func (c *chaos) clearFault() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.apiDown, c.dbDown = false, false
	c.faultUntil = time.Now().Add(2 * time.Second) // settling: clients reconnect
}

func (c *chaos) restartAPIServer() error {
	c.beginFault()
	cluster := map[string]string{"JOBSCHED_CLUSTER_DIR": c.cluster}
	if _, err := runScript(cluster, "cluster.sh", "kill", "kube-apiserver"); err != nil {
		return err
	}
	c.setDown(true, false)
	_ = testkit.Pause(c.ctx, time.Duration(mathrand.IntN(3000))*time.Millisecond) // the outage's length: the scenario's schedule
	c.setDown(false, false)
	_, err := runScript(cluster, "cluster.sh", "start", "kube-apiserver")
	c.clearFault()
	return err
}

// pgRun is where scripts/postgres.sh keeps the server's files.
func (c *chaos) pgRun() string {
	b, err := os.ReadFile(filepath.Join(c.pgdir, "rundir"))
	if err != nil {
		c.t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}

// killPostgres SIGKILLs the postmaster and every backend (a crash: no shutdown, crash recovery on the next start).
func (c *chaos) killPostgres() error {
	run := c.pgRun()
	b, err := os.ReadFile(filepath.Join(run, "data", "postmaster.pid"))
	if err != nil {
		return err
	}
	pid, err := strconv.Atoi(strings.TrimSpace(strings.SplitN(string(b), "\n", 2)[0]))
	if err != nil {
		return err
	}
	pids := append(childrenOf(pid), pid)
	for _, p := range pids {
		_ = syscall.Kill(p, syscall.SIGKILL)
	}
	// Dead (gone, or a zombie): they are not our children, so there is no exit to wait for.
	err = wait.PollUntilContextTimeout(c.ctx, 50*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		for _, p := range pids {
			if _, err := os.Stat(fmt.Sprintf("/proc/%d", p)); err == nil {
				if st, _ := os.ReadFile(fmt.Sprintf("/proc/%d/stat", p)); !strings.Contains(string(st), ") Z ") {
					return false, nil
				}
			}
		}
		return true, nil
	})
	if err != nil {
		return fmt.Errorf("postgres %d did not die: %w", pid, err)
	}
	return nil
}

func childrenOf(pid int) []int {
	var out []int
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		n, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		st, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", n))
		if err != nil {
			continue
		}
		s := string(st)
		fields := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
		if len(fields) > 1 && fields[1] == strconv.Itoa(pid) {
			out = append(out, n)
		}
	}
	return out
}

// startPostgres starts the killed server again on its data directory, port and socket, as scripts/postgres.sh does.
func (c *chaos) startPostgres() error {
	run := c.pgRun()
	pgctl := ""
	for _, d := range []string{"17", "16", "15", "14"} {
		if p := "/usr/lib/postgresql/" + d + "/bin/pg_ctl"; fileExists(p) {
			pgctl = p
			break
		}
	}
	args := []string{pgctl, "-D", filepath.Join(run, "data"), "-l", filepath.Join(run, "postgres.log"), "-w", "-t", "60",
		"-o", "-p " + c.pgPort + " -k " + filepath.Join(run, "sock") + " -c listen_addresses=127.0.0.1 -c fsync=off", "start"}
	if os.Geteuid() == 0 {
		args = append([]string{"runuser", "-u", "postgres", "--"}, args...)
	}
	cmd := exec.Command(args[0], args[1:]...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	// no pipes: the postmaster would inherit them and Run would wait for it
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("pg_ctl start: %w: %s", err, out)
	}
	return nil
}

func fileExists(p string) bool { _, err := os.Stat(p); return err == nil }

// restartPostgres: SIGKILL, then after a pause (or, with blackhole, a while with a listener on its port that
// accepts connections and never answers) start it again.
func (c *chaos) restartPostgres(blackholeFor time.Duration) error {
	c.beginFault()
	defer c.clearFault()
	if err := c.killPostgres(); err != nil {
		return err
	}
	c.setDown(false, true)
	if blackholeFor > 0 {
		silent, err := tcpkit.ListenSilent("127.0.0.1:" + c.pgPort)
		if err != nil {
			return fmt.Errorf("the never-answering listener: %w", err)
		}
		_ = testkit.Pause(c.ctx, blackholeFor) // the outage's length: the scenario's schedule
		silent.Close()
	} else {
		_ = testkit.Pause(c.ctx, time.Duration(mathrand.IntN(3000))*time.Millisecond) // likewise
	}
	c.setDown(false, false)
	// Five tries, a second apart: the port may not be free yet.
	var err error
	if werr := wait.ExponentialBackoffWithContext(c.ctx, wait.Backoff{Duration: time.Second, Steps: 5}, func(context.Context) (bool, error) {
		err = c.startPostgres()
		return err == nil, nil
	}); werr != nil && err == nil {
		err = werr
	}
	return err
}

func (c *chaos) run() {
	t := c.t
	began := time.Now()
	// The watches start before the first pass.
	for _, ns := range []string{c.scheds[0].ns, c.scheds[2].ns} {
		ready := make(chan struct{})
		go c.watchJobs(ns, ready)
		<-ready
	}
	workerDB, err := sql.Open("postgres", c.writerDSN())
	if err != nil {
		t.Fatal(err)
	}
	wctx, stopWorker := context.WithCancel(c.ctx)
	workerDone := make(chan struct{})
	go func() { c.worker(wctx, workerDB); close(workerDone) }()
	c.produce(c.ctx, 60, 0)
	pctx, stopProducer := context.WithCancel(c.ctx)
	producerDone := make(chan struct{})
	go func() {
		defer close(producerDone)
		for pctx.Err() == nil {
			c.produce(pctx, 2+mathrand.IntN(3), 40)
			_ = testkit.Pause(pctx, time.Second) // new rows arrive about every second: the scenario's schedule
		}
	}()

	// The chaos: waves of 1-3 passes, most SIGKILLed at a random moment; faults spread over the run.
	faults := c.p.apiserverRestarts + c.p.dbRestarts
	plan := make([]string, 0, faults)
	for i := range c.p.apiserverRestarts {
		_ = i
		plan = append(plan, "apiserver")
	}
	for i := range c.p.dbRestarts {
		if i%3 == 2 {
			plan = append(plan, "db-blackhole")
		} else {
			plan = append(plan, "db")
		}
	}
	mathrand.Shuffle(len(plan), func(i, j int) { plan[i], plan[j] = plan[j], plan[i] })
	var faultMu sync.Mutex
	faultBusy := false
	var faultErrs []error
	var faultWG sync.WaitGroup
	est := map[*chaosSched]time.Duration{}
	for _, s := range c.scheds {
		est[s] = time.Second
	}
	kills, done, wave := 0, 0, 0
	lastLog := time.Now()
	for kills < c.p.kills || done < len(plan) {
		wave++
		// the next fault is due once the kills have reached its share of the run
		faultMu.Lock()
		busy := faultBusy
		faultMu.Unlock()
		if done < len(plan) && !busy && (kills >= (done+1)*c.p.kills/(len(plan)+1) || kills >= c.p.kills) {
			kind := plan[done]
			done++
			faultMu.Lock()
			faultBusy = true
			faultMu.Unlock()
			faultWG.Add(1)
			go func() {
				defer faultWG.Done()
				var err error
				var figs []string
				switch kind {
				case "apiserver":
					err = c.restartAPIServer()
					figs = []string{"API server restarts (SIGKILL)"}
				case "db":
					err = c.restartPostgres(0)
					figs = []string{"database restarts (SIGKILL)"}
				case "db-blackhole":
					err = c.restartPostgres(time.Duration(3000+mathrand.IntN(5000)) * time.Millisecond)
					figs = []string{"database restarts (SIGKILL)", "database restarts with a never-answering listener for 3-8 s"}
				}
				c.mu.Lock()
				for _, f := range figs {
					c.figures[f]++
				}
				c.mu.Unlock()
				faultMu.Lock()
				faultBusy = false
				if err != nil {
					faultErrs = append(faultErrs, fmt.Errorf("%s: %w", kind, err))
				}
				faultMu.Unlock()
			}()
		}
		n := 1 + mathrand.IntN(3)
		var wg sync.WaitGroup
		var waveMu sync.Mutex
		for i := range n {
			s := c.scheds[mathrand.IntN(len(c.scheds))]
			// three in five passes are SIGKILLed at a random moment of their expected run, one in five at its first
			// create or delete (or, if it makes none, not at all), one in five not
			kill, atFirstWrite := time.Duration(0), false
			switch r := mathrand.IntN(5); {
			case r < 3:
				kill = time.Duration(mathrand.Int64N(int64(est[s])*13/10 + 1))
			case r == 3:
				atFirstWrite = true
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				_ = testkit.Pause(c.ctx, time.Duration(i*mathrand.IntN(150))*time.Millisecond) // the wave's passes start apart: the scenario's schedule
				p := c.runPass(s, kill, atFirstWrite, "tick")
				waveMu.Lock()
				defer waveMu.Unlock()
				if p.killed {
					kills++
				} else if kill > 0 || atFirstWrite {
					c.mu.Lock()
					c.figures["passes meant to be killed that ended first"]++
					c.mu.Unlock()
				}
				if !p.killed && !p.faultTouched && p.code == 0 {
					est[s] = (est[s]*3 + p.end.Sub(p.start)) / 4
				}
			}()
		}
		wg.Wait()
		if wave%15 == 0 { // the read-only commands, for the secrets scan
			s := c.scheds[mathrand.IntN(len(c.scheds))]
			c.runPass(s, 0, false, "status", "-o", "json")
			c.runPass(s, 0, false, "status")
			c.runPass(s, 0, false, "dry-run", "-o", "yaml")
			c.runPass(s, 0, false, "gc")
		}
		if time.Since(lastLog) > 30*time.Second {
			lastLog = time.Now()
			c.mu.Lock()
			t.Logf("%s: %d passes, %d killed, faults %d/%d, %d Jobs seen, %d violations", time.Since(began).Round(time.Second), len(c.passes), kills, done, len(plan), len(c.jobs), c.nviol)
			c.mu.Unlock()
		}
	}
	faultWG.Wait()
	for _, err := range faultErrs {
		t.Errorf("fault injection: %v", err)
	}
	c.figures["passes SIGKILLed"] = kills
	chaosDur := time.Since(began)

	// After the faults: clean passes until every row is done or dead, then past the retention.
	stopProducer()
	<-producerDone
	t.Logf("faults over after %s; clean passes", chaosDur.Round(time.Second))
	// pg_stat_user_tables from here on: the backends of the setup and the worker exit (their counts flushed) before
	// each reading.
	c.admin.Close()
	if c.admin, err = sql.Open("postgres", c.adminDS+"&connect_timeout=3"); err != nil {
		t.Fatal(err)
	}
	stopWorker()
	<-workerDone
	workerDB.Close()
	c.writersGone()
	base := c.tupleWrites()
	updBefore := c.workerUpd.Load()
	workerDB, err = sql.Open("postgres", c.writerDSN())
	if err != nil {
		t.Fatal(err)
	}
	wctx, stopWorker = context.WithCancel(c.ctx)
	workerDone = make(chan struct{})
	go func() { c.worker(wctx, workerDB); close(workerDone) }()
	deadline := time.Now().Add(6 * time.Minute)
	settled := time.Time{}
	for time.Now().Before(deadline) {
		c.mu.Lock()
		before := c.finishes
		c.mu.Unlock()
		for _, s := range c.scheds {
			p := c.runPass(s, 0, false, "tick")
			if p.code != 0 {
				t.Logf("clean pass %s exited %d: %s", s.id(), p.code, tail(p.out))
			}
		}
		if c.allSettled() {
			if settled.IsZero() {
				settled = time.Now()
			}
			if time.Since(settled) > chaosRetention+3*time.Second {
				break
			}
		}
		// The next round acts on a Job that finished since this one began (its row done, or retried); failing that,
		// on what is due by time alone, which no event shows: a retry after its backoff (2s), a succeeded Job past
		// its retention. So: until a Job finishes, for at most 2s.
		err := wait.PollUntilContextTimeout(c.ctx, 100*time.Millisecond, 2*time.Second, true, func(context.Context) (bool, error) {
			c.mu.Lock()
			defer c.mu.Unlock()
			return c.finishes > before, nil
		})
		if c.ctx.Err() != nil {
			t.Fatalf("clean passes: %v", err)
		}
	}
	lastPass := time.Now()
	for _, s := range c.scheds {
		c.runPass(s, 0, false, "tick")
	}
	c.sync()
	stopWorker()
	<-workerDone
	workerDB.Close()
	c.writersGone()
	after := c.tupleWrites()
	upd := c.workerUpd.Load() - updBefore

	c.mu.Lock()
	defer c.mu.Unlock()
	c.finalChecks(lastPass)
	c.check("pg_stat_user_tables: only the worker's updates in the clean phase",
		after[0]-base[0] == 0 && after[2]-base[2] == 0 && after[1]-base[1] == upd,
		"inserts %d, updates %d (worker %d), deletes %d", after[0]-base[0], after[1]-base[1], upd, after[2]-base[2])
	c.checkWrites()
	c.checkPasses()
	c.checkAudit()
	c.checkSecrets()
	c.report(chaosDur, time.Since(began))
}

func tail(path string) string {
	b, _ := os.ReadFile(path)
	if len(b) > 1500 {
		b = b[len(b)-1500:]
	}
	return string(b)
}

// writerApp is the application_name of the test's connections that write task rows: the setup's and the worker's.
const writerApp = "chaos-writer"

func (c *chaos) writerDSN() string {
	return c.adminDS + "&connect_timeout=3&application_name=" + writerApp
}

// writersGone waits until no backend of a writer is left: a backend flushes its counts to pg_stat_user_tables as it
// exits, before it leaves pg_stat_activity.
func (c *chaos) writersGone() {
	c.envs[0].eventually("the writers' backends gone", 30*time.Second, func() bool {
		var n int
		err := c.admin.QueryRowContext(c.ctx, `SELECT count(*) FROM pg_stat_activity WHERE application_name = $1`, writerApp).Scan(&n)
		return err == nil && n == 0
	})
}

// tupleWrites: inserted, updated and deleted tuples of the task tables (pg_stat_user_tables).
func (c *chaos) tupleWrites() [3]int64 {
	var out [3]int64
	var tables []string
	for _, s := range c.scheds {
		tables = append(tables, s.table)
	}
	_, _ = c.admin.ExecContext(c.ctx, `SELECT pg_stat_clear_snapshot()`)
	err := c.admin.QueryRowContext(c.ctx, `SELECT coalesce(sum(n_tup_ins),0), coalesce(sum(n_tup_upd),0), coalesce(sum(n_tup_del),0)
		FROM pg_stat_user_tables WHERE relname = ANY($1)`, pqArray(tables)).Scan(&out[0], &out[1], &out[2])
	if err != nil {
		c.t.Fatal(err)
	}
	return out
}

func pqArray(s []string) string { return "{" + strings.Join(s, ",") + "}" }

// allSettled: every row is done, or its task is dead (its last attempt failed and is kept).
func (c *chaos) allSettled() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, s := range c.scheds {
		for key, st := range c.rowStatus(s) {
			if st != "done" && !c.deadKey(s, key) {
				return false
			}
		}
	}
	return true
}

func (c *chaos) rowStatus(s *chaosSched) map[string]string { return s.env.statusesOf(s.table) }

func (c *chaos) deadKey(s *chaosSched, key string) bool {
	for uid := range c.byKey[s.ns+"/"+s.name+"/"+key] {
		if r := c.jobs[uid]; !r.deleted && r.dead {
			return true
		}
	}
	return false
}

// finalChecks, after the clean passes: rows done or dead; what is left in the cluster is what should be.
func (c *chaos) finalChecks(lastPass time.Time) {
	rows := 0
	for _, s := range c.scheds {
		for key, st := range c.rowStatus(s) {
			rows++
			c.check("every row done or dead", st == "done" || c.deadKey(s, key), "%s row %q is %s and not dead", s.id(), key, st)
		}
	}
	c.figures["rows"] = rows
	for _, r := range c.jobs {
		if r.deleted {
			continue
		}
		switch {
		case !r.finished:
			c.check("no unfinished Job left", false, "%s %s (key %q) unfinished", r.sched, r.name, r.key)
		case r.complete:
			c.check("no succeeded Job past its retention", r.finishedAt.After(lastPass.Add(-chaosRetention-time.Second)),
				"%s %s succeeded at %s, last pass at %s", r.sched, r.name, r.finishedAt.Format(time.RFC3339), lastPass.Format(time.RFC3339))
		default:
			c.check("failed Jobs left are dead tasks' records", r.dead, "%s %s (key %q, attempt %d) failed and kept", r.sched, r.name, r.key, r.attempt)
		}
	}
	c.figures["Jobs created"] = len(c.jobs)
	dead := 0
	for _, r := range c.jobs {
		if r.dead {
			dead++
		}
	}
	c.figures["dead tasks"] = dead
}

// checkWrites: every write statement on the task tables, by session user: none by jobsched's role.
func (c *chaos) checkWrites() {
	rs, err := c.admin.QueryContext(c.ctx, `SELECT usr, op, count(*) FROM chaos_writes WHERE tbl LIKE $1 GROUP BY 1, 2`, "chaos_"+c.suffix+"_%")
	if err != nil {
		c.t.Fatal(err)
	}
	defer rs.Close()
	for rs.Next() {
		var usr, op string
		var n int
		if err := rs.Scan(&usr, &op, &n); err != nil {
			c.t.Fatal(err)
		}
		c.check("no write by jobsched's database role", usr != c.role, "%d %s statements by %s", n, op, usr)
		c.figures["write statements by the worker and setup"] += n
	}
}

// checkPasses: every pass not killed ended with its `pass done` line (tick, gc, dry-run) and a run-time exit code.
func (c *chaos) checkPasses() {
	for _, p := range c.passes {
		if p.killed {
			// where the SIGKILL hit it, by what it had printed
			out, _ := os.ReadFile(p.out)
			switch {
			case bytes.Contains(out, []byte(`"message":"pass done"`)):
				c.figures["passes SIGKILLed after their pass done line"]++
			case bytes.Contains(out, []byte(`"message":"created Job"`)) || bytes.Contains(out, []byte(`"message":"deleted finished Job"`)):
				c.figures["passes SIGKILLed amid their creates/deletes"]++
			default:
				c.figures["passes SIGKILLed before any create/delete"]++
			}
			continue
		}
		out, _ := os.ReadFile(p.out)
		c.figures["passes run to the end"]++
		c.check("exit 0 or 1, never 2", p.code == 0 || p.code == 1, "%s %s exited %d: %s", p.sched.id(), p.cmd, p.code, tail(p.out))
		if p.cmd == "tick" || p.cmd == "gc" || p.cmd == "dry-run" {
			c.check("pass done line", bytes.Contains(out, []byte(`"message":"pass done"`)), "%s %s (exit %d) has no pass done line: %s", p.sched.id(), p.cmd, p.code, tail(p.out))
		}
		if p.cmd == "tick" && p.apiDownAll {
			c.check("exit 1 when the API server was down", p.code == 1, "%s tick exited %d while the API server was down: %s", p.sched.id(), p.code, tail(p.out))
		}
		if p.cmd == "tick" && p.dbDownAll {
			// exit 0 is right only for a pass that had no reason to read (no slot, no succeeded, dead or due task)
			sum := passSummary(out)
			c.check("exit 1 when the database was down (and it had to read)", p.code == 1 || (p.code == 0 && sum.Selected == 0 && sum.Created == 0),
				"%s tick exited %d while the database was down: %s", p.sched.id(), p.code, tail(p.out))
		}
		if !p.faultTouched {
			c.check("exit 0 when no fault touched the pass", p.code == 0, "%s %s exited %d with no fault: %s", p.sched.id(), p.cmd, p.code, tail(p.out))
		}
	}
}

// passSummary is the last pass done line of a pass's output (none: zero).
func passSummary(out []byte) summary {
	all, _ := testkit.PassDones(string(out))
	if len(all) == 0 {
		return summary{}
	}
	return all[len(all)-1]
}

// auditEvent is the part of an audit.k8s.io/v1 Event the isolation check reads.
type auditEvent struct {
	Stage      string `json:"stage"`
	RequestURI string `json:"requestURI"`
	Verb       string `json:"verb"`
	User       struct {
		Username string `json:"username"`
	} `json:"user"`
	ObjectRef *struct {
		Resource  string `json:"resource"`
		Namespace string `json:"namespace"`
		Name      string `json:"name"`
	} `json:"objectRef"`
	ResponseStatus *struct {
		Code int `json:"code"`
	} `json:"responseStatus"`
}

// checkAudit: from the API server's audit log, each scheduler's ServiceAccount touched only its own Jobs: lists
// with its own scheduler selector in its own namespace, creates, gets and deletes of names of its own prefix.
func (c *chaos) checkAudit() {
	f, err := os.Open(filepath.Join(c.cluster, "logs", "audit.log"))
	if err != nil {
		c.t.Fatal(err)
	}
	defer f.Close()
	users := map[string]*chaosSched{}
	for _, s := range c.scheds {
		users[s.user] = s
	}
	created := map[string]int{} // ns/name → successful creates
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var ev auditEvent
		if json.Unmarshal(sc.Bytes(), &ev) != nil || ev.Stage != "ResponseComplete" || ev.ObjectRef == nil || ev.ObjectRef.Resource != "jobs" {
			continue
		}
		s := users[ev.User.Username]
		if s == nil && strings.HasPrefix(ev.ObjectRef.Name, markerPrefix) {
			continue // the test's own marker Jobs (see sync)
		}
		if s == nil {
			if strings.HasPrefix(ev.User.Username, "system:serviceaccount:chaos-") && strings.Contains(ev.User.Username, c.suffix) {
				c.check("audit: only the schedulers' ServiceAccounts", false, "%s %s by %s", ev.Verb, ev.RequestURI, ev.User.Username)
			}
			if (ev.Verb == "create" || ev.Verb == "delete") && (ev.ObjectRef.Namespace == c.scheds[0].ns || ev.ObjectRef.Namespace == c.scheds[2].ns) {
				c.check("audit: Jobs created and deleted only by their scheduler", false, "%s %s/%s by %s", ev.Verb, ev.ObjectRef.Namespace, ev.ObjectRef.Name, ev.User.Username)
			}
			continue
		}
		c.figures["audit events of the schedulers on Jobs"]++
		c.check("audit: own namespace only", ev.ObjectRef.Namespace == s.ns, "%s %s by %s", ev.Verb, ev.RequestURI, s.user)
		switch ev.Verb {
		case "list", "watch":
			u, _ := url.Parse(ev.RequestURI)
			sel := u.Query().Get("labelSelector")
			c.check("audit: lists only its own scheduler's Jobs", slices.Contains(strings.Split(sel, ","), jobmeta.LabelScheduler+"="+s.name),
				"%s %s by %s", ev.Verb, ev.RequestURI, s.user)
		case "create", "delete", "get", "update", "patch":
			if ev.ObjectRef.Name == "" && ev.Verb == "create" && ev.ResponseStatus != nil && ev.ResponseStatus.Code != 201 {
				// a create whose client was SIGKILLed before its body was read: no name, nothing created
				c.figures["audit: creates cut off before their body was read"]++
				continue
			}
			c.check("audit: writes only its own Jobs", strings.HasPrefix(ev.ObjectRef.Name, s.name+"-"), "%s %s/%s by %s", ev.Verb, ev.ObjectRef.Namespace, ev.ObjectRef.Name, s.user)
			if ev.Verb == "create" && ev.ResponseStatus != nil && ev.ResponseStatus.Code == 201 {
				created[ev.ObjectRef.Namespace+"/"+ev.ObjectRef.Name]++
				c.figures["audit: Jobs created"]++
			}
			if ev.Verb == "delete" && ev.ResponseStatus != nil && ev.ResponseStatus.Code == 200 {
				c.figures["audit: Jobs deleted"]++
			}
		}
	}
	seen := map[string]bool{}
	for _, r := range c.jobs {
		seen[r.ns+"/"+r.name] = true
	}
	for name, n := range created {
		c.check("audit: no Job name created twice", n == 1, "%s created %d times", name, n)
		// the watch (with its re-lists) missed no Job; the other way round does not hold: the audit events of
		// requests in flight when the API server is SIGKILLed are lost
		c.check("audit: every Job created was seen by the watch", seen[name], "%s created but never seen", name)
	}
}

// checkSecrets: no output of jobsched holds the DSN's password or a token.
func (c *chaos) checkSecrets() {
	files, _ := filepath.Glob(filepath.Join(c.dir, "passes", "*.log"))
	lines := 0
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			c.t.Fatal(err)
		}
		lines += bytes.Count(b, []byte("\n"))
		for secret, what := range c.secrets {
			c.check("no secret in any output", !bytes.Contains(b, []byte(secret)), "%s shows %s", f, what)
		}
	}
	c.figures["output lines scanned for secrets"] = lines
}

func (c *chaos) report(chaosDur, total time.Duration) {
	passes := map[string]int{}
	for _, p := range c.passes {
		passes[p.cmd]++
	}
	var b strings.Builder
	fmt.Fprintf(&b, "chaos run: %s of faults, %s in all\n", chaosDur.Round(time.Second), total.Round(time.Second))
	fmt.Fprintf(&b, "  %-58s %d (tick %d, status %d, dry-run %d, gc %d)\n", "jobsched runs", len(c.passes), passes["tick"], passes["status"], passes["dry-run"], passes["gc"])
	keys := make([]string, 0, len(c.figures))
	for k := range c.figures {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		fmt.Fprintf(&b, "  %-58s %d\n", k, c.figures[k])
	}
	fmt.Fprintf(&b, "  %-58s %d\n", "watch re-lists after a gap", c.gaps)
	fmt.Fprintf(&b, "invariant checks:\n")
	names := make([]string, 0, len(c.checks))
	total2 := 0
	for k, n := range c.checks {
		names = append(names, k)
		total2 += n
	}
	sort.Strings(names)
	for _, k := range names {
		if v := c.violByCheck[k]; v > 0 {
			fmt.Fprintf(&b, "  %-58s %d  (%d VIOLATED)\n", k, c.checks[k], v)
		} else {
			fmt.Fprintf(&b, "  %-58s %d\n", k, c.checks[k])
		}
	}
	fmt.Fprintf(&b, "  %-58s %d\n", "all checks", total2)
	fmt.Fprintf(&b, "violations: %d\n", c.nviol)
	for _, v := range c.violations {
		fmt.Fprintf(&b, "  %s\n", v)
	}
	c.t.Log("\n" + b.String())
	if c.p.report != "" {
		_ = os.WriteFile(c.p.report, []byte(b.String()), 0o644)
	}
	if c.nviol > 0 {
		c.t.Errorf("%d invariant violations (outputs of every pass in %s)", c.nviol, c.dir)
	}
	if c.figures["passes SIGKILLed"] < c.p.kills {
		c.t.Errorf("only %d passes killed, want %d", c.figures["passes SIGKILLed"], c.p.kills)
	}
}
