//go:build integration

package cmd

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/jobsched/jobsched/pkg/kube"
	"github.com/jobsched/jobsched/pkg/testkit"
	"github.com/jobsched/jobsched/pkg/testkit/pgkit"
	"github.com/jobsched/jobsched/pkg/testkit/tcpkit"
)

// testDB is the database of scripts/test.sh (JOBSCHED_TEST_DSN, a superuser: a role that may write), with a
// schema of the test's own, dropped when it ends.
func testDB(t *testing.T) (dsn string, db *sql.DB, schema string) {
	t.Helper()
	dsn = os.Getenv("JOBSCHED_TEST_DSN")
	if dsn == "" {
		t.Fatal("JOBSCHED_TEST_DSN is empty: run scripts/test.sh, or scripts/postgres.sh up and export its DSN")
	}
	db, err := sql.Open("postgres", dsn)
	if err != nil {
		t.Fatal(err)
	}
	schema = fmt.Sprintf("jobsched_cmd_%d", time.Now().UnixNano())
	if _, err := db.Exec("CREATE SCHEMA " + schema); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if _, err := db.Exec("DROP SCHEMA " + schema + " CASCADE"); err != nil {
			t.Errorf("dropping %s: %v", schema, err)
		}
		db.Close()
	})
	return dsn, db, schema
}

// TestCommandsCannotWrite runs dry-run, status and tick with queries that end jobsched's READ ONLY transaction
// inside their text and then write: each command fails as a configuration error (exit 2), and the table is
// untouched.
func TestCommandsCannotWrite(t *testing.T) {
	dsn, db, s := testDB(t)
	for _, stmt := range []string{"CREATE TABLE " + s + ".tasks (id int8 PRIMARY KEY)", "INSERT INTO " + s + ".tasks VALUES (1)",
		"CREATE TABLE " + s + ".audit (note text)"} {
		if _, err := db.Exec(stmt); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv("DATABASE_URL", dsn)
	dir := t.TempDir()
	tpl, err := os.ReadFile("testdata/job.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "job.yaml"), tpl, 0o600); err != nil {
		t.Fatal(err)
	}
	for name, query := range pgkit.EscapingQueries(s) {
		t.Run(name, func(t *testing.T) {
			cfg := filepath.Join(dir, "jobsched.yaml")
			body := fmt.Sprintf("name: reports\nnamespace: batch\nsource:\n  key: id\n  query: %q\njob:\n  template: job.yaml\n", query)
			if err := os.WriteFile(cfg, []byte(body), 0o600); err != nil {
				t.Fatal(err)
			}
			for _, args := range [][]string{{"dry-run", "--offline"}, {"status"}, {"tick"}} {
				node := testkit.MakeNode("node-0").Allocatable(corev1.ResourcePods, "10").Obj()
				newKube := func(kube.Options) (kube.Interface, string, error) { return testkit.NewFake(node), "batch", nil }
				var out, errOut bytes.Buffer
				code := runWith(context.Background(), append(args, "--config", cfg, "--log-format", "json"), &out, &errOut, newKube)
				if code != exitUsage {
					t.Errorf("%s: exit %d, want %d; stderr:\n%s", args[0], code, exitUsage, errOut.String())
				}
				if !strings.Contains(errOut.String(), `"error":"source.query: `) {
					t.Errorf("%s: the error does not name source.query:\n%s", args[0], errOut.String())
				}
				var n int
				if err := db.QueryRow("SELECT count(*) FROM " + s + ".audit").Scan(&n); err != nil {
					t.Fatal(err)
				}
				if n != 0 {
					t.Fatalf("%s wrote %d row(s) to the audit table; stderr:\n%s", args[0], n, errOut.String())
				}
			}
		})
	}
}

// TestDryRunSkipsOversizedRow: a row of 20 MB, first in the query's order, is skipped with its key and why (the
// database sent its key only), and the rows after it get their Jobs: the pass reads past it, with its key left out
// of the next read, as it does every skipped row.
func TestDryRunSkipsOversizedRow(t *testing.T) {
	dsn, db, s := testDB(t)
	for _, stmt := range []string{"CREATE TABLE " + s + ".tasks (id int8 PRIMARY KEY, payload text)",
		"INSERT INTO " + s + ".tasks VALUES (1, repeat('x', 20 << 20)), (2, 'a'), (3, 'b')"} {
		if _, err := db.Exec(stmt); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv("DATABASE_URL", dsn)
	cfg := writeConfig(t, "maxPerTick: 2, capacity: off", "SELECT id, payload FROM "+s+".tasks ORDER BY id")
	var out, errOut bytes.Buffer
	if code := runWith(context.Background(), []string{"dry-run", "--offline", "-o", "json", "--config", cfg}, &out, &errOut, nil); code != 0 {
		t.Fatalf("dry-run: exit %d; stderr:\n%s", code, errOut.String())
	}
	var plan struct {
		Creates []struct{ Key string }
		Skipped []struct{ Key, Reason string }
	}
	if err := json.Unmarshal(out.Bytes(), &plan); err != nil {
		t.Fatalf("%v:\n%.2000s", err, out.String())
	}
	var creates []string
	for _, c := range plan.Creates {
		creates = append(creates, c.Key)
	}
	if !reflect.DeepEqual(creates, []string{"2", "3"}) || len(plan.Skipped) != 1 || plan.Skipped[0].Key != "1" ||
		!strings.Contains(plan.Skipped[0].Reason, "bytes as text; PostgreSQL sends at most 1048576 a row") {
		t.Errorf("creates %v, skipped %+v; want creates 2 and 3, row 1 skipped as too large", creates, plan.Skipped)
	}
}

// TestFullQueueSeesLostDatabase: a tick whose queue is full (limits.maxActive reached) reads no row, and still
// proves the database answers: against PostgreSQL it exits 0, blocked by maxActive; against a stopped database it
// exits 1 with the connect error in its pass done line, as a failed read does.
func TestFullQueueSeesLostDatabase(t *testing.T) {
	dsn, db, s := testDB(t)
	if _, err := db.Exec("CREATE TABLE " + s + ".tasks (id text PRIMARY KEY); INSERT INTO " + s + ".tasks VALUES ('a'), ('b')"); err != nil {
		t.Fatal(err)
	}
	cfg := writeConfig(t, "maxActive: 1, capacity: off", "SELECT id FROM "+s+".tasks ORDER BY id")
	stopped := "postgres://app:pw@" + tcpkit.ClosedPort(t) + "/app?sslmode=disable"
	for _, tc := range []struct {
		name, dsn string
		code      int
		err       string
	}{{"database answers", dsn, 0, ""}, {"database stopped", stopped, 1, "connecting to PostgreSQL"}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("DATABASE_URL", tc.dsn)
			newKube := func(kube.Options) (kube.Interface, string, error) {
				return testkit.NewFake(testkit.MakeJob("a").Obj()), "batch", nil
			}
			var out, errOut bytes.Buffer
			code := runWith(context.Background(), []string{"tick", "--config", cfg, "--log-format", "json"}, &out, &errOut, newKube)
			sum := testkit.PassDone(t, errOut.String())
			if code != tc.code || !strings.Contains(sum.Error, tc.err) || (tc.err == "") != (sum.Error == "") {
				t.Errorf("exit %d, pass done error %q; want exit %d and an error with %q:\n%s", code, sum.Error, tc.code, tc.err, errOut.String())
			}
		})
	}
}

// TestStatusWarnsOfRole: status, and dry-run's table as well as its JSON, say what the configured role may do that
// READ ONLY does not cover, with the fix: the tests' superuser gets the superuser warning; a role that may only
// SELECT the query's table does not, but gets the one of pg_logical_emit_message, which PUBLIC may execute until
// the database revokes it (the tests' database is shared: it keeps the default).
func TestStatusWarnsOfRole(t *testing.T) {
	dsn, db, s := testDB(t)
	role := s + "_ro"
	for _, stmt := range []string{"CREATE TABLE " + s + ".tasks (id text PRIMARY KEY)", "CREATE ROLE " + role + " LOGIN PASSWORD 'pw'",
		"GRANT USAGE ON SCHEMA " + s + " TO " + role, "GRANT SELECT ON " + s + ".tasks TO " + role} {
		if _, err := db.Exec(stmt); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() { _, _ = db.Exec("DROP OWNED BY " + role + "; DROP ROLE " + role) })
	reader, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	reader.User = url.UserPassword(role, "pw")
	cfg := writeConfig(t, "capacity: off", "SELECT id FROM "+s+".tasks ORDER BY id")
	for _, tc := range []struct {
		name, dsn string
		warns     bool
	}{{"superuser", dsn, true}, {"SELECT only", reader.String(), false}} {
		for _, args := range [][]string{{"status"}, {"dry-run", "--offline"}, {"dry-run", "--offline", "-o", "json"}} {
			t.Run(tc.name+"/"+strings.Join(args, " "), func(t *testing.T) {
				t.Setenv("DATABASE_URL", tc.dsn)
				newKube := func(kube.Options) (kube.Interface, string, error) { return testkit.NewFake(), "batch", nil }
				var out, errOut bytes.Buffer
				if code := runWith(context.Background(), append(args, "--config", cfg), &out, &errOut, newKube); code != 0 {
					t.Fatalf("exit %d\n%s", code, errOut.String())
				}
				superuser := strings.Contains(out.String(), "is a superuser: READ ONLY stops writes") &&
					strings.Contains(out.String(), "connect as a role that may only SELECT")
				emit := strings.Contains(out.String(), "may execute pg_logical_emit_message(boolean,text,bytea), "+
					"pg_logical_emit_message(boolean,text,text), which writes a WAL message")
				if superuser != tc.warns || emit == tc.warns {
					t.Errorf("output (want the superuser warning: %v, else pg_logical_emit_message's):\n%s", tc.warns, out.String())
				}
			})
		}
	}
}

// writeConfig writes, in a directory of the test's own, jobsched.yaml (scheduler reports in namespace batch, key id,
// the limits and the query given) and the Job template it names, and returns the config's path.
func writeConfig(t *testing.T, limits, query string) string {
	t.Helper()
	dir := t.TempDir()
	tpl, err := os.ReadFile("testdata/job.yaml")
	if err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(dir, "jobsched.yaml")
	body := fmt.Sprintf("name: reports\nnamespace: batch\nlimits: {%s}\nsource:\n  key: id\n  query: %q\njob:\n  template: job.yaml\n",
		limits, query)
	for name, data := range map[string][]byte{cfg: []byte(body), filepath.Join(dir, "job.yaml"): tpl} {
		if err := os.WriteFile(name, data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return cfg
}
