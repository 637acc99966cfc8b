//go:build integration

package rows

import (
	"fmt"
	"net/url"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/jobsched/jobsched/pkg/querydoctor"
)

// TestRoleWarnings: the query doctor says what the connected role may do that READ ONLY does not cover, in a
// database of its own with dblink installed (an extension, and a function's grants, are the whole database's): the
// superuser, a member of pg_write_all_data (and the table privileges it grants) and a role with INSERT on the query's
// table each get their warning, dblink while they may call its functions, and the built-in functions PUBLIC may
// execute whose effect outlives the transaction (pg_logical_emit_message first: a query that calls it with false
// writes a WAL message from the READ ONLY transaction); a role that may only SELECT gets none once dblink's
// functions and those are revoked from PUBLIC (the fixes the warnings give).
func TestRoleWarnings(t *testing.T) {
	u, db := newDatabase(t, "jobsched_roles", "")
	suffix := time.Now().UnixNano()
	reader, writer, member := fmt.Sprintf("jobsched_ro_%d", suffix), fmt.Sprintf("jobsched_rw_%d", suffix), fmt.Sprintf("jobsched_wad_%d", suffix)
	replicator := fmt.Sprintf("jobsched_repl_%d", suffix)
	for _, r := range []string{reader, writer, member, replicator} {
		exec(t, "CREATE ROLE "+r+" LOGIN PASSWORD 'pw'")
		t.Cleanup(func() { _, _ = adminDB.Exec("DROP ROLE " + r) })
	}
	for _, stmt := range []string{
		"CREATE EXTENSION dblink",
		"CREATE TABLE tasks (id int8 PRIMARY KEY)",
		"GRANT SELECT ON tasks TO " + reader + ", " + member + ", " + replicator,
		"ALTER ROLE " + replicator + " REPLICATION",
		"GRANT SELECT, INSERT ON tasks TO " + writer,
		"GRANT pg_write_all_data TO " + member,
	} {
		if _, err := db.Exec(stmt); err != nil {
			t.Fatalf("%s: %v", stmt, err)
		}
	}
	warnings := func(user string) []querydoctor.Warning {
		t.Helper()
		v := *u
		if user != "" {
			v.User = url.UserPassword(user, "pw")
		}
		f := open(t, v.String(), "SELECT id FROM public.tasks ORDER BY id", "id", 10*time.Second).Explain(t.Context(), nil, 10)
		if f.Unchecked != "" {
			t.Fatalf("%s: %s", user, f.Unchecked)
		}
		t.Logf("%s: %s", user, f)
		return f.Warnings
	}
	kinds := func(user string) []string {
		t.Helper()
		var out []string
		for _, w := range warnings(user) {
			out = append(out, w.Kind)
		}
		return out
	}
	for _, tc := range []struct {
		user string
		want []string
	}{
		{"", []string{"superuser", "extension"}},
		{member, []string{"member", "privilege", "function", "function", "extension"}}, // pg_write_all_data grants INSERT, UPDATE, DELETE
		{writer, []string{"privilege", "function", "function", "extension"}},
		{reader, []string{"function", "function", "extension"}},
		{replicator, []string{"function", "function", "function", "extension"}}, // and the replication slots
	} {
		if got := kinds(tc.user); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("warnings of %q: %v, want %v", tc.user, got, tc.want)
		}
	}
	if _, err := db.Exec("REVOKE EXECUTE ON ALL FUNCTIONS IN SCHEMA public FROM PUBLIC"); err != nil {
		t.Fatal(err)
	}
	if got, want := kinds(reader), []string{"function", "function"}; !reflect.DeepEqual(got, want) {
		t.Errorf("warnings of %q, dblink revoked: %v, want %v", reader, got, want)
	}
	for _, w := range warnings(reader) {
		fix, _, _ := strings.Cut(w.Fix, " (and from") // the statement, without the note
		if _, err := db.Exec(fix); err != nil {
			t.Fatalf("the fix %q: %v", w.Fix, err)
		}
	}
	if got := kinds(reader); got != nil {
		t.Errorf("warnings of a role that may only SELECT, dblink revoked: %v, want none", got)
	}
}

// TestOutsideFunctionsExist checks querydoctor.OutsideFunctions against pg_proc of the tests' PostgreSQL: each symbol
// is a built-in function there that PUBLIC may execute (its default grant), so the list names no function this
// PostgreSQL lacks or already keeps from PUBLIC.
func TestOutsideFunctionsExist(t *testing.T) {
	for _, f := range querydoctor.OutsideFunctions {
		var n int
		err := adminDB.QueryRowContext(t.Context(), `SELECT count(*) FROM pg_catalog.pg_proc p
			JOIN pg_catalog.pg_language l ON l.oid = p.prolang
			WHERE l.lanname = 'internal' AND p.prosrc = $1 AND p.pronamespace = 'pg_catalog'::regnamespace
				AND pg_catalog.has_function_privilege('public', p.oid, 'EXECUTE')`, f.Symbol).Scan(&n)
		if err != nil || n != 1 {
			t.Errorf("%s: %d built-in functions PUBLIC may execute (%v), want 1", f.Symbol, n, err)
		}
	}
}
