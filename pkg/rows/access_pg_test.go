//go:build integration

package rows

import (
	"fmt"
	"net/url"
	"reflect"
	"testing"
	"time"
)

// TestRoleWarnings: the query doctor says what the connected role may do that READ ONLY does not cover, in a
// database of its own with dblink installed (an extension is the whole database's): the superuser, a member of
// pg_write_all_data (and the table privileges it grants) and a role with INSERT on the query's table each get their warning, and dblink while they may
// call its functions; a role that may only SELECT gets none once dblink's functions are revoked from PUBLIC (the fix
// the warning gives).
func TestRoleWarnings(t *testing.T) {
	u, db := newDatabase(t, "jobsched_roles", "")
	suffix := time.Now().UnixNano()
	reader, writer, member := fmt.Sprintf("jobsched_ro_%d", suffix), fmt.Sprintf("jobsched_rw_%d", suffix), fmt.Sprintf("jobsched_wad_%d", suffix)
	for _, r := range []string{reader, writer, member} {
		exec(t, "CREATE ROLE "+r+" LOGIN PASSWORD 'pw'")
		t.Cleanup(func() { _, _ = adminDB.Exec("DROP ROLE " + r) })
	}
	for _, stmt := range []string{
		"CREATE EXTENSION dblink",
		"CREATE TABLE tasks (id int8 PRIMARY KEY)",
		"GRANT SELECT ON tasks TO " + reader + ", " + member,
		"GRANT SELECT, INSERT ON tasks TO " + writer,
		"GRANT pg_write_all_data TO " + member,
	} {
		if _, err := db.Exec(stmt); err != nil {
			t.Fatalf("%s: %v", stmt, err)
		}
	}
	kinds := func(user string) []string {
		t.Helper()
		v := *u
		if user != "" {
			v.User = url.UserPassword(user, "pw")
		}
		f := open(t, v.String(), "SELECT id FROM public.tasks ORDER BY id", "id", 10*time.Second).Explain(t.Context(), nil, 10)
		if f.Unchecked != "" {
			t.Fatalf("%s: %s", user, f.Unchecked)
		}
		var out []string
		for _, w := range f.Warnings {
			out = append(out, w.Kind)
		}
		t.Logf("%s: %s", user, f)
		return out
	}
	for _, tc := range []struct {
		user string
		want []string
	}{
		{"", []string{"superuser", "extension"}},
		{member, []string{"member", "privilege", "extension"}}, // pg_write_all_data grants INSERT, UPDATE, DELETE
		{writer, []string{"privilege", "extension"}},
		{reader, []string{"extension"}},
	} {
		if got := kinds(tc.user); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("warnings of %q: %v, want %v", tc.user, got, tc.want)
		}
	}
	if _, err := db.Exec("REVOKE EXECUTE ON ALL FUNCTIONS IN SCHEMA public FROM PUBLIC"); err != nil {
		t.Fatal(err)
	}
	if got := kinds(reader); got != nil {
		t.Errorf("warnings of a role that may only SELECT, dblink revoked: %v, want none", got)
	}
}
