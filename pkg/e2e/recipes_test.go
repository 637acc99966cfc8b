//go:build integration

package e2e

import (
	"maps"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jobsched/jobsched/pkg/jobmeta"
)

// recipe is a README recipe (the ```sql block after `<!-- tested: recipe-NAME`) for the scenario's table: the
// statements before its `-- ` line (run once, as the recipe says, on the table), and the statement after it (the
// query, or what the worker or the producer sends). The README's table is `tasks`; the scenario's replaces it.
func (e *env) recipe(name string) (setup []string, stmt string) {
	e.t.Helper()
	block := readmeBlock(e.t, "README.md", "recipe-"+name)
	block = regexp.MustCompile(`\btasks\b`).ReplaceAllString(block, e.table)
	before, after, ok := strings.Cut(block, "\n-- ")
	if !ok {
		if !strings.HasPrefix(block, "-- ") {
			e.t.Fatalf("the README's recipe %s has no `-- ` line before its statement:\n%s", name, block)
		}
		before, after = "", strings.TrimPrefix(block, "-- ")
	}
	_, stmt, _ = strings.Cut(after, "\n") // the rest of the `-- ` line says what the statement is
	for _, s := range strings.Split(before, ";\n") {
		if s = strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(s), ";")); s != "" {
			setup = append(setup, s)
			e.exec(s)
		}
	}
	return setup, strings.Join(strings.Fields(stmt), " ")
}

// recipeConfig writes the scenario's config with query as source.query.
func (e *env) recipeConfig(query string) string {
	return e.writeConfig(config{query: strconv.Quote(query), duration: "1s", extra: "limits:\n  maxActive: 10\n  maxPerTick: 10\n"})
}

// createdKeys are the task keys of the Jobs a tick created.
func (e *env) createdKeys(r result) []string {
	e.t.Helper()
	var keys []string
	for _, line := range strings.Split(r.stderr, "\n") {
		if m := regexp.MustCompile(`"task":"([^"]+)".*"message":"created Job"`).FindStringSubmatch(line); m != nil {
			keys = append(keys, m[1])
		}
	}
	slices.Sort(keys)
	return keys
}

// tickCreates runs a tick and fails the test unless it created Jobs for exactly keys.
func (e *env) tickCreates(cfg string, keys ...string) {
	e.t.Helper()
	slices.Sort(keys)
	if got := e.createdKeys(e.tick(cfg)); !slices.Equal(got, keys) {
		e.t.Fatalf("the tick created Jobs for %v, want %v", got, keys)
	}
}

// rowsDone waits until the worker has marked keys done.
func (e *env) rowsDone(keys ...string) {
	e.t.Helper()
	e.eventually("rows "+strings.Join(keys, ", ")+" done", time.Minute, func() bool {
		st := e.statuses()
		for _, k := range keys {
			if st[k] != "done" {
				return false
			}
		}
		return true
	})
}

// TestRecipeDelayed: a row whose run_at is still to come gets no Job; once its time has come, the next tick creates it.
func TestRecipeDelayed(t *testing.T) {
	t.Parallel()
	e := newNodeEnv(t, "8", "16Gi")
	_, query := e.recipe("delayed")
	e.insert("task", 2)
	e.exec(`UPDATE ` + e.table + ` SET run_at = now() + interval '1 hour' WHERE id = 'task-1'`)
	cfg := e.recipeConfig(query)
	e.tickCreates(cfg, "task-0")
	e.tickCreates(cfg)
	e.exec(`UPDATE ` + e.table + ` SET run_at = now() - interval '1 second' WHERE id = 'task-1'`)
	e.tickCreates(cfg, "task-1")
}

// TestRecipeDependencies: task-1 needs task-0, task-2 needs both: each gets its Job only once what it needs is done.
func TestRecipeDependencies(t *testing.T) {
	t.Parallel()
	e := newNodeEnv(t, "8", "16Gi")
	_, query := e.recipe("dependencies")
	e.insert("task", 3)
	e.exec(`UPDATE ` + e.table + ` SET needs = '{task-0}' WHERE id = 'task-1'`)
	e.exec(`UPDATE ` + e.table + ` SET needs = '{task-0,task-1}' WHERE id = 'task-2'`)
	cfg := e.recipeConfig(query)
	e.worker()
	e.tickCreates(cfg, "task-0")
	e.rowsDone("task-0")
	e.tickCreates(cfg, "task-1")
	e.rowsDone("task-1")
	e.tickCreates(cfg, "task-2")
}

// TestRecipeUnique: while a row for a url waits, the producer's insert of another row for that url is refused
// without an error, so one Job runs; once the row is done, a new row for that url is a new task.
func TestRecipeUnique(t *testing.T) {
	t.Parallel()
	e := newNodeEnv(t, "8", "16Gi")
	_, insert := e.recipe("unique")
	for _, id := range []string{"task-0", "task-1"} {
		e.exec(insert, id, "https://example.com/report")
	}
	if st := e.statuses(); !maps.Equal(st, map[string]string{"task-0": "waiting"}) {
		t.Fatalf("rows after two inserts for one url: %v, want task-0 alone", st)
	}
	cfg := e.writeConfig(config{duration: "1s"})
	e.worker()
	e.tickCreates(cfg, "task-0")
	e.rowsDone("task-0")
	for _, id := range []string{"task-2", "task-3"} {
		e.exec(insert, id, "https://example.com/report")
	}
	e.tickCreates(cfg, "task-2")
}

// TestRecipeResult: the worker writes its result back with the key jobsched gave it (TASK_ID), once: a second write
// (a late attempt) changes nothing, and the row, done, gets no further Job.
func TestRecipeResult(t *testing.T) {
	t.Parallel()
	e := newNodeEnv(t, "8", "16Gi")
	_, update := e.recipe("result")
	e.insert("task", 1)
	cfg := e.writeConfig(config{duration: "1s"})
	e.tickCreates(cfg, "task-0")
	jobs := e.jobs()
	if len(jobs) != 1 {
		t.Fatalf("%d Jobs, want 1", len(jobs))
	}
	var key string
	for _, v := range jobs[0].Spec.Template.Spec.Containers[0].Env {
		if v.Name == "TASK_ID" {
			key = v.Value
		}
	}
	if key != jobs[0].Annotations[jobmeta.AnnotationTaskKey] {
		t.Fatalf("the Job's TASK_ID is %q, want its task key %q", key, jobs[0].Annotations[jobmeta.AnnotationTaskKey])
	}
	e.waitJobs("Complete", 1)
	e.exec(update, key, `{"pages": 3}`)
	e.exec(update, key, `{"pages": 0}`)
	var status, res string
	if err := e.db.QueryRowContext(e.ctx, `SELECT status, result::text FROM `+e.table+` WHERE id = $1`, key).Scan(&status, &res); err != nil {
		t.Fatal(err)
	}
	if status != "done" || res != `{"pages": 3}` {
		t.Errorf("the row after the worker's two writes: status %q, result %s; want done and the first result", status, res)
	}
	e.tickCreates(cfg)
}
