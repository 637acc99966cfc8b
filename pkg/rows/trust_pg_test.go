//go:build integration

package rows

import (
	"bufio"
	"database/sql"
	"encoding/binary"
	"fmt"
	"io"
	"net/url"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lib/pq"

	"github.com/jobsched/jobsched/pkg/config"
	"github.com/jobsched/jobsched/pkg/testkit/pgkit"
	"github.com/jobsched/jobsched/pkg/testkit/tcpkit"
)

// TestQueryCannotWrite runs every call of the source with queries that try to end the READ ONLY transaction and
// write, as a role that may write (the test's superuser): each call fails as a configuration error, and the table
// is untouched.
func TestQueryCannotWrite(t *testing.T) {
	s := newSchema(t)
	exec(t, "CREATE TABLE "+s+".tasks (id int8 PRIMARY KEY)", "INSERT INTO "+s+".tasks VALUES (1), (2)",
		"CREATE TABLE "+s+".audit (note text)")
	calls := map[string]func(p *Postgres) error{
		"Select": func(p *Postgres) error {
			_, err := p.Select(t.Context(), Selection{Exclude: []string{"1"}, Limit: 10})
			return err
		},
		"Count":    func(p *Postgres) error { _, err := p.Count(t.Context(), nil, 10); return err },
		"Selected": func(p *Postgres) error { _, err := p.Selected(t.Context(), []string{"1"}); return err },
		"Lookup":   func(p *Postgres) error { _, err := p.Lookup(t.Context(), []string{"1"}); return err },
	}
	explain := func(p *Postgres) error { p.Explain(t.Context(), nil, 10); return nil } // never fails: only no write
	calls["Explain"] = explain
	for name, query := range pgkit.EscapingQueries(s) {
		t.Run(name, func(t *testing.T) {
			for call, fn := range calls {
				exec(t, "TRUNCATE "+s+".audit")
				p := open(t, testDSN, query, "id", 10*time.Second)
				err := fn(p)
				switch {
				case call == "Explain":
				case err == nil:
					t.Errorf("%s succeeded, want an error", call)
				case !config.IsConfigError(err):
					t.Errorf("%s: %v is not a configuration error", call, err)
				}
				var n int
				if err := adminDB.QueryRowContext(t.Context(), "SELECT count(*) FROM "+s+".audit").Scan(&n); err != nil {
					t.Fatal(err)
				}
				if n != 0 {
					t.Fatalf("%s wrote %d row(s) to the audit table (error: %v)", call, n, err)
				}
			}
		})
	}
}

// TestQueryCannotWritePerGroup runs the per-group reads (Select with held groups, Lookup) with the queries of
// TestQueryCannotWrite: each fails as a configuration error, and the table is untouched.
func TestQueryCannotWritePerGroup(t *testing.T) {
	s := newSchema(t)
	exec(t, "CREATE TABLE "+s+".tasks (id int8 PRIMARY KEY)", "INSERT INTO "+s+".tasks VALUES (1), (2)",
		"CREATE TABLE "+s+".audit (note text)")
	for name, query := range pgkit.EscapingQueries(s) {
		t.Run(name, func(t *testing.T) {
			p := openGroup(t, testDSN, query, "id", PerGroup{Column: "id", Max: 2})
			_, selErr := p.Select(t.Context(), Selection{Exclude: []string{"1"}, Limit: 10, Held: map[string]int{"2": 1}})
			_, lookErr := p.Lookup(t.Context(), []string{"1"})
			for call, err := range map[string]error{"Select": selErr, "Lookup": lookErr} {
				if err == nil || !config.IsConfigError(err) {
					t.Errorf("%s: %v; want a configuration error", call, err)
				}
			}
			auditEmpty(t, s)
		})
	}
}

// TestGroupCannotWrite: a group column's name and its values are never SQL (the tasks and audit tables stay). A name that tries to close the statement
// is one column's name (here one the query returns, so the read works); values and held groups that look like SQL
// are data; the table is untouched.
func TestGroupCannotWrite(t *testing.T) {
	s := newSchema(t)
	evil := "'); COMMIT; INSERT INTO " + s + ".audit VALUES ('escaped'); --"
	exec(t, "CREATE TABLE "+s+".tasks (id int8 PRIMARY KEY, tenant text)", "CREATE TABLE "+s+".audit (note text)",
		"INSERT INTO "+s+".tasks VALUES (1, "+pq.QuoteLiteral(evil)+"), (2, "+pq.QuoteLiteral(evil)+"), (3, 'a')")
	column := `x")) AS z; COMMIT; DROP TABLE tasks; SELECT (("` // under 64 bytes: the longest name PostgreSQL keeps
	query := "SELECT id, tenant AS " + pq.QuoteIdentifier(column) + " FROM " + s + ".tasks ORDER BY id"
	dsn := withSetting(t, testDSN, "options", "-c search_path="+strings.Trim(s, `"`)) // the name's tasks is ours
	p := openGroup(t, dsn, query, "id", PerGroup{Column: column, Max: 1})
	got, err := p.Select(t.Context(), Selection{Limit: 10, Held: map[string]int{evil + "x": 1, `"; COMMIT; --`: 1}})
	if err != nil || !reflect.DeepEqual(keyGroups(got), []keyGroup{{"1", evil}, {"3", "a"}}) {
		t.Errorf("Select = %v, %v; want rows 1 and 3, the value as the group", keyGroups(got), err)
	}
	if got, err := p.Select(t.Context(), Selection{Limit: 10, Held: map[string]int{evil: 1}}); err != nil ||
		!reflect.DeepEqual(keys(got), []string{"3"}) {
		t.Errorf("Select with the value held = %v, %v; want row 3 only", keys(got), err)
	}
	if _, err := p.Lookup(t.Context(), []string{"1"}); err != nil {
		t.Errorf("Lookup: %v", err)
	}
	q := openGroup(t, dsn, "SELECT id, tenant FROM "+s+".tasks ORDER BY id", "id", PerGroup{Column: column, Max: 1})
	if _, err := q.Select(t.Context(), Selection{Limit: 10}); err == nil || !config.IsConfigError(err) {
		t.Errorf("Select with a group column the query does not return: %v; want a configuration error", err)
	}
	auditEmpty(t, s)
	exec(t, "SELECT 1 FROM "+s+".tasks")
}

// auditEmpty fails t if the audit table of schema s has a row.
func auditEmpty(t *testing.T, s string) {
	t.Helper()
	var n int
	if err := adminDB.QueryRowContext(t.Context(), "SELECT count(*) FROM "+s+".audit").Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 0 {
		t.Fatalf("%d row(s) written to the audit table", n)
	}
}

// TestOneStatementErrorSaysWhy checks the error of a query of several statements: it says so, in the user's words.
func TestOneStatementErrorSaysWhy(t *testing.T) {
	for _, query := range []string{
		"SELECT 1 AS id; SELECT 2 AS id",
		"SELECT 1 AS id) AS x; SELECT * FROM (SELECT 2 AS id",
	} {
		p := open(t, testDSN, query, "id", 10*time.Second)
		_, err := p.Select(t.Context(), Selection{Limit: 10})
		if err == nil || !config.IsConfigError(err) || !strings.Contains(err.Error(), "one SELECT statement") {
			t.Errorf("Select of %q: %v; want a configuration error saying the query must be one SELECT statement", query, err)
		}
	}
}

// simpleQueryProxy forwards TCP connections to target and records the text of every simple-query ('Q') message the
// client sends: the protocol that runs each statement of a text.
func simpleQueryProxy(t *testing.T, target string) (addr string, simple func() []string) {
	t.Helper()
	var mu sync.Mutex
	var seen []string
	record := func(client io.Reader) {
		r := bufio.NewReader(client)
		head := make([]byte, 4) // the startup message: length, then payload, no type byte
		if _, err := io.ReadFull(r, head); err != nil {
			return
		}
		if _, err := io.CopyN(io.Discard, r, int64(binary.BigEndian.Uint32(head))-4); err != nil {
			return
		}
		for {
			typ, err := r.ReadByte()
			if err != nil {
				return
			}
			if _, err := io.ReadFull(r, head); err != nil {
				return
			}
			body := make([]byte, int(binary.BigEndian.Uint32(head))-4)
			if _, err := io.ReadFull(r, body); err != nil {
				return
			}
			if typ == 'Q' {
				mu.Lock()
				seen = append(seen, strings.TrimRight(string(body), "\x00"))
				mu.Unlock()
			}
		}
	}
	return tcpkit.NewProxy(t, target, record).Addr(), func() []string {
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), seen...)
	}
}

// TestOnlyFixedSimpleQueries watches the wire: the only statements jobsched sends in the simple-query protocol are
// the driver's own BEGIN READ ONLY and ROLLBACK, and the DISCARD ALL after them (see clean); every statement with the user's text, and the statement timeout, go
// as one statement with bound parameters.
func TestOnlyFixedSimpleQueries(t *testing.T) {
	s := newSchema(t)
	exec(t, "CREATE TABLE "+s+".tasks (id int8 PRIMARY KEY)", "INSERT INTO "+s+".tasks VALUES (1), (2)")
	u, err := url.Parse(testDSN)
	if err != nil || u.Host == "" {
		t.Fatalf("%s is not a URL with a host", dsnEnv)
	}
	addr, simple := simpleQueryProxy(t, u.Host)
	u.Host = addr
	p := open(t, u.String(), "SELECT id FROM "+s+".tasks ORDER BY id", "id", 10*time.Second)
	if _, err := p.Select(t.Context(), Selection{Exclude: []string{"1"}, Limit: 10}); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Count(t.Context(), nil, 10); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Selected(t.Context(), []string{"1"}); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Lookup(t.Context(), []string{"1"}); err != nil {
		t.Fatal(err)
	}
	if f := p.Explain(t.Context(), nil, 10); f.Unchecked != "" {
		t.Fatal(f.Unchecked)
	}
	g := openGroup(t, u.String(), "SELECT id, id % 2 AS tenant FROM "+s+".tasks ORDER BY id", "id", PerGroup{Column: "tenant", Max: 1})
	if got, err := g.Select(t.Context(), Selection{Exclude: []string{"9"}, Limit: 10, Held: map[string]int{"0": 1}}); err != nil ||
		!reflect.DeepEqual(keyGroups(got), []keyGroup{{"1", "1"}}) {
		t.Fatalf("Select per group = %v, %v; want row 1 (group 1) only", keyGroups(got), err)
	}
	if _, err := g.Lookup(t.Context(), []string{"1"}); err != nil {
		t.Fatal(err)
	}
	got := simple()
	if len(got) == 0 {
		t.Fatal("the proxy saw no simple query at all (not even BEGIN): is it in the path?")
	}
	for _, q := range got {
		if q != "BEGIN READ ONLY" && q != "ROLLBACK" && q != "DISCARD ALL" {
			t.Errorf("sent in the simple-query protocol: %q", q)
		}
	}
}

// TestPermissionDenied checks that the database's refusal, for a role that may only SELECT some tables, is reported
// as a configuration error with the database's words, not swallowed or taken as no rows.
func TestPermissionDenied(t *testing.T) {
	role := fmt.Sprintf("jobsched_reader_%d", time.Now().UnixNano())
	exec(t, "CREATE ROLE "+role+" LOGIN PASSWORD 'reader-pw'")
	t.Cleanup(func() { _, _ = adminDB.Exec("DROP ROLE " + role) })
	s := newSchema(t)
	exec(t, "CREATE TABLE "+s+".tasks (id int8)", "CREATE TABLE "+s+".secret (id int8)",
		"GRANT USAGE ON SCHEMA "+s+" TO "+role, "GRANT SELECT ON "+s+".tasks TO "+role)
	u, err := url.Parse(testDSN)
	if err != nil {
		t.Fatal(err)
	}
	u.User = url.UserPassword(role, "reader-pw")
	for _, query := range []string{
		"SELECT id FROM " + s + ".secret",
		"SELECT id FROM " + s + ".tasks) AS x; COMMIT; INSERT INTO " + s + ".tasks VALUES (1); SELECT * FROM (SELECT 1 AS id",
	} {
		p := open(t, u.String(), query, "id", 10*time.Second)
		_, err := p.Select(t.Context(), Selection{Limit: 10})
		if err == nil || !config.IsConfigError(err) {
			t.Errorf("Select of %q: %v; want a configuration error", query, err)
		}
		t.Logf("%v", err)
	}
	p := open(t, u.String(), "SELECT id FROM "+s+".secret", "id", 10*time.Second)
	if _, err := p.Select(t.Context(), Selection{Limit: 10}); err == nil || !strings.Contains(err.Error(), "permission denied for table secret") {
		t.Errorf("Select: %v; want the database's permission denied", err)
	}
}

// TestPasswordEqualToUserName: when the password is also the user name, the server's "password authentication
// failed for user" keeps the user name: it never held the DSN, and hiding it would tell the reader the password.
func TestPasswordEqualToUserName(t *testing.T) {
	u, err := url.Parse(testDSN)
	if err != nil {
		t.Fatal(err)
	}
	const same = "jobsched_same_name"
	u.User = url.UserPassword(same, same)
	p := open(t, u.String(), "SELECT 1 AS id", "id", 10*time.Second)
	_, err = p.Select(t.Context(), Selection{Limit: 1})
	if err == nil || !strings.Contains(err.Error(), `password authentication failed for user "`+same+`"`) {
		t.Errorf("Select: %v; want the server's message with the user name", err)
	}
}

// TestSQLASCIIInvalidByte: in a SQL_ASCII database a value that is not valid UTF-8 fails the read (SQLSTATE 22021,
// every pass, whatever the row): the error says what it is and how to fix the query.
func TestSQLASCIIInvalidByte(t *testing.T) {
	u, conn := newDatabase(t, "jobsched_ascii", "ENCODING 'SQL_ASCII' LC_COLLATE 'C' LC_CTYPE 'C' TEMPLATE template0")
	for _, s := range []string{"CREATE TABLE t (id int8, name text)", `INSERT INTO t VALUES (1, 'ok'), (2, E'caf\xe9')`} {
		if _, err := conn.Exec(s); err != nil {
			t.Fatalf("%s: %v", s, err)
		}
	}
	p := open(t, u.String(), "SELECT id, name FROM t ORDER BY id", "id", 10*time.Second)
	_, err := p.Select(t.Context(), Selection{Limit: 10})
	if err == nil {
		t.Fatal("Select of a value that is not valid UTF-8 succeeded")
	}
	for _, want := range []string{"22021", "not valid UTF-8", "convert_from(", "encode("} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
}

// newDatabase creates a database of the test's own (name: prefix and a number; options follow CREATE DATABASE), dropped
// when the test ends, and returns the test DSN pointing at it and a connection pool to it, closed then too.
func newDatabase(t *testing.T, prefix, options string) (*url.URL, *sql.DB) {
	t.Helper()
	name := fmt.Sprintf("%s_%d", prefix, time.Now().UnixNano())
	exec(t, "CREATE DATABASE "+name+" "+options)
	t.Cleanup(func() { _, _ = adminDB.Exec("DROP DATABASE " + name + " WITH (FORCE)") })
	u, err := url.Parse(testDSN)
	if err != nil {
		t.Fatal(err)
	}
	u.Path = "/" + name
	db, err := sql.Open("postgres", u.String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return u, db
}

// TestConnectTimeoutIsTheBound: a pass pays the connect timeout once. It reads, then asks the query doctor (another
// read): each connected again, so a silent server cost a pass twice the documented 10 s. The server here counts the
// connections it accepts: a read within the timeout after a failed connect fails at once with the same error.
func TestConnectTimeoutIsTheBound(t *testing.T) {
	l := tcpkit.NewSilent(t)
	p := open(t, "postgres://app:pw@"+l.Addr()+"/app?sslmode=disable&connect_timeout=1", "SELECT 1 AS id", "id", 10*time.Second)
	_, selErr := p.Select(t.Context(), Selection{Limit: 1})
	f := p.Explain(t.Context(), nil, 1)
	if selErr == nil || f.Unchecked == "" || !strings.Contains(f.Unchecked, "i/o timeout") {
		t.Fatalf("Select: %v; Explain: %+v; want both to fail connecting", selErr, f)
	}
	if n := l.Accepted(); n != 1 {
		t.Errorf("the two reads connected %d times, each bounded by connect_timeout; want once", n)
	}
}

// TestSharedSourcesConnectOnce: the queues of an install share one pool, so a database that does not answer
// costs a pass the connect timeout once, not once per queue: after the first queue's read failed connecting, the
// second's fails at once with that error.
func TestSharedSourcesConnectOnce(t *testing.T) {
	l := tcpkit.NewSilent(t)
	p := open(t, "postgres://app:pw@"+l.Addr()+"/app?sslmode=disable&connect_timeout=1", "SELECT 1 AS id", "id", 10*time.Second)
	q, err := p.Share(config.Source{Query: "SELECT 2 AS id", Key: "id"})
	if err != nil {
		t.Fatal(err)
	}
	_, pErr := p.Select(t.Context(), Selection{Limit: 1})
	_, qErr := q.Select(t.Context(), Selection{Limit: 1})
	if pErr == nil || qErr == nil || !strings.Contains(qErr.Error(), "i/o timeout") {
		t.Fatalf("Select: %v, then the other queue's: %v; want both to fail connecting", pErr, qErr)
	}
	if n := l.Accepted(); n != 1 {
		t.Errorf("the two queues' reads connected %d times, each bounded by connect_timeout; want once", n)
	}
}

// TestQueryErrorsInTheUsersWords: a syntax error's position is in the user's query (line and column), never in
// jobsched's wrapper; an unclosed comment, quote or parenthesis is "at the end of source.query"; a key that differs
// from the column in case says PostgreSQL folds unquoted names.
func TestQueryErrorsInTheUsersWords(t *testing.T) {
	for _, tc := range []struct {
		name, query, key string
		want             []string
	}{
		{"one line", "SELECT id,, 2 AS x", "id", []string{`syntax error at or near ","`, "at line 1, column 11 of source.query"}},
		{"second line", "SELECT 1 AS id\nFROM nowhere_at_all", "id", []string{"nowhere_at_all", "at line 2, column 6 of source.query"}},
		{"unclosed comment", "SELECT 1 AS id /* more", "id", []string{`unterminated /* comment at or near "/* more"`, "line 1, column 16"}},
		{"unclosed parenthesis", "SELECT 1 AS id WHERE (true", "id", []string{"at the end of source.query", "left open"}},
		{"key in another case", "SELECT 1 AS id", "ID", []string{`no column "ID"`, "folds unquoted names to lower case", "key: id"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := open(t, testDSN, tc.query, tc.key, 10*time.Second)
			_, err := p.Select(t.Context(), Selection{Limit: 1})
			if err == nil || !config.IsConfigError(err) {
				t.Fatalf("Select: %v; want a configuration error", err)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
			if strings.Contains(err.Error(), "jobsched_q") || strings.Contains(err.Error(), "position") {
				t.Errorf("error %q shows jobsched's wrapper", err)
			}
		})
	}
}

// TestSessionLeftClean: what a query takes for its session (a session-level advisory lock, a temporary table, a
// setting) does not outlive the read. The pool keeps its one connection between reads and passes (status -w, tick
// --fill-for), so without a reset the lock would be held until the process ends, by a read-only role too.
func TestSessionLeftClean(t *testing.T) {
	s := newSchema(t)
	exec(t, "CREATE TABLE "+s+".tasks (id int8 PRIMARY KEY)", "INSERT INTO "+s+".tasks VALUES (1), (2)")
	lock := time.Now().UnixNano()
	query := fmt.Sprintf("SELECT id, pg_advisory_lock(%d)::text AS l, set_config('application_name', 'dirty', false) AS a "+
		"FROM %s.tasks ORDER BY id", lock, s)
	p := open(t, testDSN, query, "id", 10*time.Second)
	other, err := adminDB.Conn(t.Context()) // one session: the lock it takes it must release itself
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	for _, read := range []func() error{
		func() error { _, err := p.Select(t.Context(), Selection{Limit: 10}); return err },
		func() error { _, err := p.Count(t.Context(), nil, 10); return err },
	} {
		if err := read(); err != nil {
			t.Fatal(err)
		}
		var free bool
		if err := other.QueryRowContext(t.Context(), "SELECT pg_try_advisory_lock($1)", lock).Scan(&free); err != nil {
			t.Fatal(err)
		}
		if !free {
			t.Fatal("after the read, another session cannot take the advisory lock the query took: the session kept it")
		}
		if err := other.QueryRowContext(t.Context(), "SELECT pg_advisory_unlock($1)", lock).Scan(&free); err != nil || !free {
			t.Fatalf("unlocking: %v, %v", free, err)
		}
	}
	var dirty int
	if err := adminDB.QueryRowContext(t.Context(), "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'dirty'").Scan(&dirty); err != nil {
		t.Fatal(err)
	}
	if dirty != 0 {
		t.Errorf("%d session(s) kept the setting a query made", dirty)
	}
}

// TestPing: Ping answers through the real server, and fails as a run-time error (not a configuration one) on a
// stopped database (nothing listens) and on a host that never answers (within the connect timeout).
func TestPing(t *testing.T) {
	if err := open(t, testDSN, "SELECT 1 AS id", "id", 10*time.Second).Ping(t.Context()); err != nil {
		t.Errorf("Ping of the test database: %v", err)
	}
	for name, addr := range map[string]string{"stopped": tcpkit.ClosedPort(t), "silent": tcpkit.NewSilent(t).Addr()} {
		p := open(t, "postgres://app:pw@"+addr+"/app?sslmode=disable&connect_timeout=1", "SELECT 1 AS id", "id", 10*time.Second)
		if err := p.Ping(t.Context()); err == nil || config.IsConfigError(err) {
			t.Errorf("Ping of a %s database: %v; want a run-time error", name, err)
		}
	}
}
