//go:build integration

// Integration tests of the PostgreSQL source against a real server. scripts/test.sh starts a throwaway server and
// exports JOBSCHED_TEST_DSN (a superuser DSN with password auth over TCP); without it these tests fail, they never
// skip. Each test works in its own schema, dropped afterwards, so they can share the database with other packages.
package rows

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"net"
	"net/url"
	"os"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lib/pq"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/jobsched/jobsched/pkg/config"
	"github.com/jobsched/jobsched/pkg/testkit/tcpkit"
)

const dsnEnv = "JOBSCHED_TEST_DSN"

var (
	testDSN string
	adminDB *sql.DB // the test's own connections, for setting up and checking tables
)

func TestMain(m *testing.M) {
	testDSN = os.Getenv(dsnEnv)
	if testDSN == "" {
		fmt.Fprintf(os.Stderr, "FAIL: %s is empty: the PostgreSQL integration tests need a database.\n"+
			"Run scripts/test.sh (it starts a throwaway PostgreSQL), or start one (scripts/postgres.sh up) and set\n"+
			"%s to its superuser DSN, e.g. postgres://postgres:postgres@127.0.0.1:PORT/postgres?sslmode=disable\n",
			dsnEnv, dsnEnv)
		os.Exit(1)
	}
	var err error
	adminDB, err = sql.Open("postgres", testDSN)
	if err == nil {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		err = adminDB.PingContext(ctx)
		cancel()
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "FAIL: cannot reach the database in %s: %v\n", dsnEnv, err)
		os.Exit(1)
	}
	code := m.Run()
	adminDB.Close()
	os.Exit(code)
}

// newSchema creates a schema of its own for t, dropped with everything in it when t ends.
func newSchema(t *testing.T) string {
	t.Helper()
	b := make([]byte, 6)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	name := strings.ToLower(regexp.MustCompile(`[^A-Za-z0-9]+`).ReplaceAllString(t.Name(), "_"))
	if len(name) > 40 {
		name = name[:40]
	}
	schema := "jobsched_" + name + "_" + hex.EncodeToString(b)
	exec(t, "CREATE SCHEMA "+pq.QuoteIdentifier(schema))
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if _, err := adminDB.ExecContext(ctx, "DROP SCHEMA "+pq.QuoteIdentifier(schema)+" CASCADE"); err != nil {
			t.Errorf("dropping schema %s: %v", schema, err)
		}
	})
	return pq.QuoteIdentifier(schema)
}

// exec runs statements on the test's own connection.
func exec(t *testing.T, stmts ...string) {
	t.Helper()
	for _, s := range stmts {
		if _, err := adminDB.ExecContext(t.Context(), s); err != nil {
			t.Fatalf("%s: %v", s, err)
		}
	}
}

// open opens the source under test on dsn and closes it when t ends.
func open(t *testing.T, dsn, query, key string, timeout time.Duration) *Postgres {
	t.Helper()
	p, err := OpenPostgres(dsn, config.Source{Query: query, Key: key, Timeout: metav1.Duration{Duration: timeout}})
	if err != nil {
		t.Fatalf("OpenPostgres: %v", err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

// withSetting returns dsn with one more connection setting (a URL query parameter, or a key=value pair).
func withSetting(t *testing.T, dsn, key, value string) string {
	t.Helper()
	if strings.HasPrefix(dsn, "postgres://") || strings.HasPrefix(dsn, "postgresql://") {
		u, err := url.Parse(dsn)
		if err != nil {
			t.Fatalf("%s is not a valid URL", dsnEnv)
		}
		q := u.Query()
		q.Set(key, value)
		u.RawQuery = q.Encode()
		return u.String()
	}
	return dsn + " " + key + "='" + strings.NewReplacer(`\`, `\\`, `'`, `\'`).Replace(value) + "'"
}

func keys(rs []Row) []string {
	out := []string{}
	for _, r := range rs {
		out = append(out, r.Key)
	}
	return out
}

// TestSelectRendersColumnTypes checks the exact Row of every column type the README names, in several session time
// zones: numbers and booleans in PostgreSQL's own ::text form, timestamps RFC 3339 in UTC, bytea standard base64,
// json/jsonb as the database's JSON text, NULL as Null, column names as the query spells them.
func TestSelectRendersColumnTypes(t *testing.T) {
	s := newSchema(t)
	columns := []string{"id", "txt", "i2", "i4", "i8", "num", "f4", "f8", "b", "tstz", "ts", "d", "js", "jsb", "by",
		"ia", "ta", "u", "Created At", "ümlaut", "1st", "nothing"}
	exec(t, `CREATE TABLE `+s+`.types (id int4 PRIMARY KEY, txt text, i2 int2, i4 int4, i8 int8, num numeric,
		f4 float4, f8 float8, b bool, tstz timestamptz, ts timestamp, d date, js json, jsb jsonb, by bytea, ia int4[],
		ta text[], u uuid, "Created At" timestamptz, "ümlaut" text, "1st" int4, nothing text)`)

	// Each row: column → {SQL literal, rendered value}; a column not named is NULL; id is the row's number. The timestamptz literals without
	// an offset are read in Europe/Berlin (CET +01 in winter, CEST +02 in summer, LMT +00:53:28 before 1893).
	type lit = [2]string
	rows := []struct {
		name string
		vals map[string]lit
	}{
		{"typical values", map[string]lit{
			"txt":        {`E'plain text, "quoted", tab\there\nnew line'`, "plain text, \"quoted\", tab\there\nnew line"},
			"i2":         {"-32768", "-32768"},
			"i4":         {"2147483647", "2147483647"},
			"i8":         {"-9223372036854775808", "-9223372036854775808"},
			"num":        {"12345678901234567890.1234567890", "12345678901234567890.1234567890"},
			"f4":         {"0.1", "0.1"},
			"f8":         {"0.1", "0.1"},
			"b":          {"true", "true"},
			"tstz":       {"'2024-07-01 12:00:00.123456'", "2024-07-01T10:00:00.123456Z"},
			"ts":         {"'2024-07-01 12:00:00.5'", "2024-07-01T12:00:00.5Z"},
			"d":          {"'2024-02-29'", "2024-02-29"},
			"js":         {`'{"b": 1,  "a":[1, 2]}'`, `{"b": 1,  "a":[1, 2]}`},
			"jsb":        {`'{"b": 1,  "a":[1, 2], "s": "é\"x"}'`, `{"a": [1, 2], "b": 1, "s": "é\"x"}`},
			"by":         {`'\x000102ff'::bytea`, "AAEC/w=="},
			"ia":         {"'{1,2,3}'", "{1,2,3}"},
			"ta":         {`ARRAY['a', 'b c', NULL, '"q"', '{x}']`, `{a,"b c",NULL,"\"q\"","{x}"}`},
			"u":          {"'A0EEBC99-9C0B-4EF8-BB6D-6BB9BD380A11'", "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11"},
			"Created At": {"'2024-01-15 08:30:00'", "2024-01-15T07:30:00Z"},
			"ümlaut":     {"'grüße'", "grüße"},
			"1st":        {"1", "1"},
		}},
		{"1e20", map[string]lit{
			"num": {"1e20", "100000000000000000000"}, "f4": {"1e20", "1e+20"}, "f8": {"1e20", "1e+20"},
			"b": {"false", "false"}, "i2": {"0", "0"},
			"tstz": {"'1970-01-01 00:00:00+00'", "1970-01-01T00:00:00Z"}, "ts": {"'1969-12-31 23:59:59'", "1969-12-31T23:59:59Z"},
			"js": {"'null'", "null"}, "jsb": {`'"text"'`, `"text"`}, "by": {`''::bytea`, ""}, "ia": {"'{}'", "{}"},
			"txt": {"''", ""},
		}},
		{"123456789012", map[string]lit{
			"i8": {"123456789012", "123456789012"}, "num": {"123456789012", "123456789012"},
			"f4": {"123456789012", "1.2345679e+11"}, "f8": {"123456789012", "123456789012"},
			// Berlin's local mean time before 1893: an offset with seconds.
			"tstz": {"'1850-06-01 12:00:00'", "1850-06-01T11:06:32Z"},
		}},
		{"1.5e-5", map[string]lit{
			"num": {"0.000015", "0.000015"}, "f4": {"1.5e-5", "1.5e-05"}, "f8": {"1.5e-5", "1.5e-05"},
		}},
		{"NaN", map[string]lit{"num": {"'NaN'", "NaN"}, "f4": {"'NaN'", "NaN"}, "f8": {"'NaN'", "NaN"}}},
		{"Infinity", map[string]lit{
			"num": {"'Infinity'", "Infinity"}, "f4": {"'Infinity'", "Infinity"}, "f8": {"'Infinity'", "Infinity"},
		}},
		{"-Infinity", map[string]lit{
			"num": {"'-Infinity'", "-Infinity"}, "f4": {"'-Infinity'", "-Infinity"},
			"f8": {"'-Infinity'", "-Infinity"},
		}},
		{"exponent form from 1e15 (1e6 for real)", map[string]lit{
			"f4": {"1e6", "1e+06"}, "f8": {"1e15", "1e+15"}, "num": {"1e15", "1000000000000000"},
		}},
		{"plain form with 15 digits (6 for real)", map[string]lit{
			"f4": {"123456", "123456"}, "f8": {"999999999999999", "999999999999999"},
		}},
		{"plain form just below 1e15 (1e6 for real)", map[string]lit{
			"f4": {"'999999.9'", "999999.9"}, "f8": {"'999999999999999.9'", "999999999999999.9"},
		}},
		{"powers of ten", map[string]lit{"f4": {"1e7", "1e+07"}, "f8": {"1e16", "1e+16"}}},
		{"just below 1e-4", map[string]lit{
			"f4": {"'0.000099999'", "9.9999e-05"}, "f8": {"'0.00009999999999999999'", "9.999999999999999e-05"},
		}},
		{"1e-4", map[string]lit{"f4": {"'1e-4'", "0.0001"}, "f8": {"'1e-4'", "0.0001"}}},
		{"small numbers", map[string]lit{
			"f4": {"0.00001", "1e-05"}, "f8": {"0.00001", "1e-05"}, "num": {"-0.00001", "-0.00001"},
		}},
		{"shortest exact digits", map[string]lit{
			"f4": {"'-0'", "-0"}, "f8": {"0.1::float8 + 0.2::float8", "0.30000000000000004"},
		}},
		{"extremes", map[string]lit{
			"f4": {"'3.4028235e38'", "3.4028235e+38"}, "f8": {"'1.7976931348623157e308'", "1.7976931348623157e+308"},
			"i2": {"32767", "32767"}, "i4": {"-2147483648", "-2147483648"}, "i8": {"9223372036854775807", "9223372036854775807"},
		}},
		{"denormals", map[string]lit{"f4": {"'1.4e-45'", "1e-45"}, "f8": {"'5e-324'", "5e-324"}}},
		{"all NULL", map[string]lit{}},
	}

	// Insert the data in Europe/Berlin, so a timestamptz written without an offset is not UTC.
	tx, err := adminDB.BeginTx(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback() //nolint:errcheck // after Commit it only says the transaction is done
	if _, err := tx.ExecContext(t.Context(), "SET LOCAL TIME ZONE 'Europe/Berlin'"); err != nil {
		t.Fatal(err)
	}
	quoted := make([]string, len(columns))
	for i, c := range columns {
		quoted[i] = pq.QuoteIdentifier(c)
	}
	var want []Row
	for _, r := range rows {
		id := strconv.Itoa(len(want) + 1)
		r.vals["id"] = lit{id, id}
		vals := make([]string, len(columns))
		row := Row{Key: id}
		for i, c := range columns {
			v, ok := r.vals[c]
			if !ok {
				vals[i] = "NULL"
				row.Columns = append(row.Columns, Column{Name: c, Null: true})
				continue
			}
			vals[i] = v[0]
			row.Columns = append(row.Columns, Column{Name: c, Value: v[1]})
		}
		stmt := "INSERT INTO " + s + ".types (" + strings.Join(quoted, ", ") + ") VALUES (" + strings.Join(vals, ", ") + ")"
		if _, err := tx.ExecContext(t.Context(), stmt); err != nil {
			t.Fatalf("row %q: %s: %v", r.name, stmt, err)
		}
		want = append(want, row)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}

	// PostgreSQL's own text form of the number and boolean columns, row by row.
	textCols := []string{"id", "i2", "i4", "i8", "num", "f4", "f8", "b", "1st"}
	textSel := make([]string, len(textCols))
	for i, c := range textCols {
		textSel[i] = pq.QuoteIdentifier(c) + "::text"
	}
	sqlText := map[string]map[string]sql.NullString{} // id → column → ::text
	rs, err := adminDB.QueryContext(t.Context(), "SELECT "+strings.Join(textSel, ", ")+" FROM "+s+".types ORDER BY id")
	if err != nil {
		t.Fatal(err)
	}
	for rs.Next() {
		v := make([]sql.NullString, len(textCols))
		ptrs := make([]any, len(v))
		for i := range v {
			ptrs[i] = &v[i]
		}
		if err := rs.Scan(ptrs...); err != nil {
			t.Fatal(err)
		}
		sqlText[v[0].String] = map[string]sql.NullString{}
		for i, c := range textCols {
			sqlText[v[0].String][c] = v[i]
		}
	}
	if err := rs.Err(); err != nil {
		t.Fatal(err)
	}
	rs.Close()

	query := "SELECT * FROM " + s + ".types ORDER BY id"
	for _, tz := range []string{"", "UTC", "America/New_York", "Asia/Kathmandu"} {
		name := "session time zone " + tz
		dsn := testDSN
		if tz == "" {
			name = "server's time zone"
		} else {
			dsn = withSetting(t, testDSN, "TimeZone", tz)
		}
		t.Run(name, func(t *testing.T) {
			if tz != "" { // the session really is in that zone
				sess := open(t, dsn, "SELECT current_setting('TimeZone') AS tz", "tz", 10*time.Second)
				if got, err := sess.Select(t.Context(), Selection{Limit: 1}); err != nil || len(got) != 1 || got[0].Key != tz {
					t.Fatalf("session time zone: %+v, %v; want %s", got, err, tz)
				}
			}
			p := open(t, dsn, query, "id", 10*time.Second)
			got, err := p.Select(t.Context(), Selection{Limit: 100})
			if err != nil {
				t.Fatalf("Select: %v", err)
			}
			if len(got) != len(want) {
				t.Fatalf("Select returned %d rows, want %d: %+v", len(got), len(want), got)
			}
			for i := range want {
				t.Run(rows[i].name, func(t *testing.T) {
					if !reflect.DeepEqual(got[i], want[i]) {
						t.Errorf("row differs\n got: %+v\nwant: %+v", got[i], want[i])
						for j := range want[i].Columns {
							if j < len(got[i].Columns) && got[i].Columns[j] != want[i].Columns[j] {
								t.Errorf("column %q: got %+v, want %+v", want[i].Columns[j].Name, got[i].Columns[j], want[i].Columns[j])
							}
						}
					}
					pgText := sqlText[want[i].Key]
					for _, c := range got[i].Columns {
						txt, ok := pgText[c.Name]
						if !ok {
							continue
						}
						if c.Null != !txt.Valid || c.Value != txt.String {
							t.Errorf("column %q: Select gave {Value:%q Null:%v}, PostgreSQL's ::text is %q (valid %v)",
								c.Name, c.Value, c.Null, txt.String, txt.Valid)
						}
					}
				})
			}
		})
	}
}

// TestSelectOrderAndLimit checks that Select keeps the query's ORDER BY order and returns at most limit rows.
func TestSelectOrderAndLimit(t *testing.T) {
	s := newSchema(t)
	exec(t, "CREATE TABLE "+s+".tasks (id int4 PRIMARY KEY, priority int4 NOT NULL, name text NOT NULL)",
		"INSERT INTO "+s+".tasks VALUES (1, 5, 'e'), (2, 9, 'c'), (3, 1, 'a'), (4, 9, 'b'), (5, 3, 'd'), (6, 7, 'f')")
	byPriority := "SELECT id, name FROM " + s + ".tasks ORDER BY priority DESC, id"
	tests := []struct {
		name  string
		query string
		limit int
		want  []string
	}{
		{"all rows in the query's order", byPriority, 100, []string{"2", "4", "6", "1", "5", "3"}},
		{"limit 3 keeps the first 3", byPriority, 3, []string{"2", "4", "6"}},
		{"limit 1", byPriority, 1, []string{"2"}},
		{"limit equal to the row count", byPriority, 6, []string{"2", "4", "6", "1", "5", "3"}},
		{"limit 0 returns nothing", byPriority, 0, []string{}},
		{"order by a text column", "SELECT id, name FROM " + s + ".tasks ORDER BY name", 4, []string{"3", "4", "2", "5"}},
		{"trailing semicolons and blank", byPriority + " ;;\n\t", 2, []string{"2", "4"}},
		{"trailing line comment", byPriority + " -- highest first", 2, []string{"2", "4"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := open(t, testDSN, tt.query, "id", 10*time.Second)
			got, err := p.Select(t.Context(), Selection{Limit: tt.limit})
			if err != nil {
				t.Fatalf("Select: %v", err)
			}
			if !reflect.DeepEqual(keys(got), tt.want) {
				t.Errorf("keys = %q, want %q", keys(got), tt.want)
			}
		})
	}
	t.Run("whole rows", func(t *testing.T) {
		p := open(t, testDSN, byPriority, "id", 10*time.Second)
		got, err := p.Select(t.Context(), Selection{Limit: 2})
		if err != nil {
			t.Fatalf("Select: %v", err)
		}
		want := []Row{
			{Key: "2", Columns: []Column{{Name: "id", Value: "2"}, {Name: "name", Value: "c"}}},
			{Key: "4", Columns: []Column{{Name: "id", Value: "4"}, {Name: "name", Value: "b"}}},
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("Select = %+v, want %+v", got, want)
		}
	})
}

// TestSelectExcludes checks that excluded keys and NULL keys never come back, for int, text and uuid keys.
func TestSelectExcludes(t *testing.T) {
	s := newSchema(t)
	exec(t,
		"CREATE TABLE "+s+".by_int (seq int4, k int8)",
		"INSERT INTO "+s+".by_int VALUES (1, 10), (2, NULL), (3, 30), (4, 40), (5, NULL), (6, 60), (7, 70)",
		"CREATE TABLE "+s+".by_text (seq int4, k text)",
		`INSERT INTO `+s+`.by_text VALUES (1, 'plain'), (2, NULL), (3, 'NULL'), (4, ''), (5, 'a,b'), (6, '"quoted"'),
			(7, '{brace}'), (8, 'back\slash'), (9, ' spaced '), (10, 'ümlaut'), (11, 'last')`,
		"CREATE TABLE "+s+".by_uuid (seq int4, k uuid)",
		`INSERT INTO `+s+`.by_uuid VALUES (1, '00000000-0000-0000-0000-000000000001'), (2, NULL),
			(3, '00000000-0000-0000-0000-000000000003'), (4, '00000000-0000-0000-0000-000000000004')`,
	)
	tests := []struct {
		name    string
		table   string
		exclude []string
		limit   int
		want    []string
	}{
		{"int: nothing excluded, NULL keys left out", "by_int", nil, 100, []string{"10", "30", "40", "60", "70"}},
		{"int: empty exclude", "by_int", []string{}, 100, []string{"10", "30", "40", "60", "70"}},
		{"int: some excluded", "by_int", []string{"30", "60", "99"}, 100, []string{"10", "40", "70"}},
		{"int: limit counts after exclusion", "by_int", []string{"10", "30"}, 2, []string{"40", "60"}},
		{"int: all excluded", "by_int", []string{"70", "60", "40", "30", "10"}, 100, []string{}},
		{"text: nothing excluded", "by_text", nil, 100,
			[]string{"plain", "NULL", "", "a,b", `"quoted"`, "{brace}", `back\slash`, " spaced ", "ümlaut", "last"}},
		{"text: odd keys excluded", "by_text", []string{"NULL", "", "a,b", `"quoted"`, "{brace}", `back\slash`, " spaced ", "ümlaut"},
			100, []string{"plain", "last"}},
		{"text: near misses are not excluded", "by_text", []string{"null", " ", "a", "b", "spaced", "PLAIN"}, 100,
			[]string{"plain", "NULL", "", "a,b", `"quoted"`, "{brace}", `back\slash`, " spaced ", "ümlaut", "last"}},
		{"uuid: some excluded", "by_uuid", []string{"00000000-0000-0000-0000-000000000003"}, 100,
			[]string{"00000000-0000-0000-0000-000000000001", "00000000-0000-0000-0000-000000000004"}},
		// Keys that are no value of the column's type (a Job made by hand, a changed column type) exclude nothing
		// and fail nothing.
		{"int: foreign keys", "by_int", []string{"not-a-number", "30", "", "1e3", "99999999999999999999", "4O", " 40"}, 100,
			[]string{"10", "40", "60", "70"}},
		{"uuid: foreign keys", "by_uuid", []string{"not-a-number", "00000000-0000-0000-0000-000000000003", "{}", "0000"}, 100,
			[]string{"00000000-0000-0000-0000-000000000001", "00000000-0000-0000-0000-000000000004"}},
		{"text: foreign keys", "by_text", []string{"not-a-number", "plain"}, 100,
			[]string{"NULL", "", "a,b", `"quoted"`, "{brace}", `back\slash`, " spaced ", "ümlaut", "last"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := open(t, testDSN, "SELECT k, seq FROM "+s+"."+tt.table+" ORDER BY seq", "k", 10*time.Second)
			got, err := p.Select(t.Context(), Selection{Exclude: tt.exclude, Limit: tt.limit})
			if err != nil {
				t.Fatalf("Select: %v", err)
			}
			if !reflect.DeepEqual(keys(got), tt.want) {
				t.Errorf("keys = %q, want %q", keys(got), tt.want)
			}
			n, err := p.Count(t.Context(), tt.exclude, tt.limit)
			if err != nil {
				t.Fatalf("Count: %v", err)
			}
			if n != len(tt.want) {
				t.Errorf("Count = %d, want %d", n, len(tt.want))
			}
			for _, r := range got {
				if r.Columns[0].Null {
					t.Errorf("a row with a NULL key came back: %+v", r)
				}
			}
		})
	}
}

// planNode is the part of EXPLAIN (FORMAT JSON)'s plan the pushdown test reads.
type planNode struct {
	NodeType            string     `json:"Node Type"`
	RelationName        string     `json:"Relation Name"`
	ActualRows          float64    `json:"Actual Rows"`
	ActualLoops         float64    `json:"Actual Loops"`
	RowsRemovedByFilter float64    `json:"Rows Removed by Filter"`
	Plans               []planNode `json:"Plans"`
}

// TestSelectPushdownAtScale checks that, with 200,000 waiting rows and 1,000 of them excluded, Select returns the 5
// rows after the excluded ones and the database reads about limit + excluded rows, not the backlog: the exclusion and
// the LIMIT are in the statement, so an index on (status, created_at) serves it.
func TestSelectPushdownAtScale(t *testing.T) {
	const (
		backlog  = 200000
		excluded = 1000
		limit    = 5
		step     = 7919 // prime, coprime with backlog: row g is at position g*step mod backlog in created_at order
	)
	s := newSchema(t)
	start := time.Now()
	exec(t,
		"CREATE TABLE "+s+".tasks (id int8 PRIMARY KEY, status text NOT NULL, payload text, created_at timestamptz NOT NULL)",
		fmt.Sprintf(`INSERT INTO %s.tasks SELECT g, 'waiting', 'payload-' || g,
			'2024-01-01 00:00:00+00'::timestamptz + ((g * %d) %% %d) * interval '1 second'
			FROM generate_series(1, %d) AS g`, s, step, backlog, backlog),
		// Rows in another state, older than every waiting one: the WHERE must keep them out.
		fmt.Sprintf(`INSERT INTO %s.tasks SELECT g, 'done', 'done-' || g,
			'2023-01-01 00:00:00+00'::timestamptz + g * interval '1 second' FROM generate_series(%d, %d) AS g`,
			s, backlog+1, backlog+20000),
		"CREATE INDEX ON "+s+".tasks (status, created_at)",
		"ANALYZE "+s+".tasks",
	)
	t.Logf("loaded %d rows in %v", backlog+20000, time.Since(start).Round(time.Millisecond))

	// The row at position k of created_at order is g = k * step⁻¹ mod backlog (0 meaning backlog).
	inv := new(big.Int).ModInverse(big.NewInt(step), big.NewInt(backlog)).Int64()
	at := func(k int64) int64 {
		g := k * inv % backlog
		if g == 0 {
			g = backlog
		}
		return g
	}
	var exclude []string
	for k := range int64(excluded) {
		exclude = append(exclude, strconv.FormatInt(at(k), 10))
	}
	base := time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)
	var want []Row
	for k := int64(excluded); k < excluded+limit; k++ {
		id := strconv.FormatInt(at(k), 10)
		want = append(want, Row{Key: id, Columns: []Column{
			{Name: "id", Value: id},
			{Name: "payload", Value: "payload-" + id},
			{Name: "created_at", Value: base.Add(time.Duration(k) * time.Second).Format(time.RFC3339)},
		}})
	}

	query := "SELECT id, payload, created_at FROM " + s + ".tasks WHERE status = 'waiting' ORDER BY created_at"
	p := open(t, testDSN, query, "id", 30*time.Second)
	start = time.Now()
	got, err := p.Select(t.Context(), Selection{Exclude: exclude, Limit: limit})
	if err != nil {
		t.Fatalf("Select: %v", err)
	}
	t.Logf("Select took %v", time.Since(start).Round(time.Millisecond))
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Select =\n%+v\nwant\n%+v", got, want)
	}

	n, err := p.Count(t.Context(), exclude, 10000)
	if err != nil {
		t.Fatalf("Count: %v", err)
	}
	if n != 10000 {
		t.Errorf("Count(max 10000) = %d, want 10000", n)
	}

	// The plan of the very statement Select runs, with the same parameters, in the same READ ONLY transaction.
	var plan string
	err = p.readOnly(t.Context(), func(tx *sql.Tx) error {
		excluded, arg := p.keyExcluded(exclude)
		return tx.QueryRowContext(t.Context(), "EXPLAIN (ANALYZE, FORMAT JSON) "+p.selectSQL(excluded), arg, limit).Scan(&plan)
	})
	if err != nil {
		t.Fatalf("EXPLAIN: %v", err)
	}
	var explained []struct {
		Plan planNode `json:"Plan"`
	}
	if err := json.Unmarshal([]byte(plan), &explained); err != nil || len(explained) != 1 {
		t.Fatalf("EXPLAIN output is not one JSON plan (%v): %s", err, plan)
	}
	top := explained[0].Plan
	if top.NodeType != "Limit" {
		t.Errorf("top plan node is %q, want Limit; plan: %s", top.NodeType, plan)
	}
	if top.ActualRows != limit {
		t.Errorf("Limit produced %v rows, want %d", top.ActualRows, limit)
	}
	// Every row any scan of the table looked at: the rows it produced plus the rows its filter removed, all loops.
	var read float64
	scans := 0
	var walk func(n planNode)
	walk = func(n planNode) {
		if strings.Contains(n.NodeType, "Scan") && n.RelationName == "tasks" {
			scans++
			read += (n.ActualRows + n.RowsRemovedByFilter) * max(n.ActualLoops, 1)
		}
		for _, c := range n.Plans {
			walk(c)
		}
	}
	walk(top)
	if scans == 0 {
		t.Fatalf("no scan of tasks in the plan: %s", plan)
	}
	if read > limit+excluded {
		t.Errorf("the scans read %v rows of tasks, want at most %d (limit + excluded) of the %d-row backlog; plan: %s",
			read, limit+excluded, backlog, plan)
	}
	t.Logf("plan: %s over %d scan(s), %v rows read", top.NodeType, scans, read)
}

// TestSelectReadOnly checks that a query that writes fails as a configuration error with the database's message,
// and that nothing was written.
func TestSelectReadOnly(t *testing.T) {
	s := newSchema(t)
	exec(t,
		"CREATE TABLE "+s+".t (id int4 PRIMARY KEY, status text NOT NULL)",
		"INSERT INTO "+s+".t VALUES (1, 'waiting'), (2, 'waiting'), (3, 'done')",
		"CREATE SEQUENCE "+s+".some_seq",
		"SELECT nextval('"+s+".some_seq')", // last_value 1, is_called true
	)
	snapshot := func() string {
		var rows, seq string
		err := adminDB.QueryRowContext(t.Context(),
			"SELECT string_agg(id || '=' || status, ',' ORDER BY id) FROM "+s+".t").Scan(&rows)
		if err == nil {
			err = adminDB.QueryRowContext(t.Context(),
				"SELECT last_value || '/' || is_called FROM "+s+".some_seq").Scan(&seq)
		}
		if err != nil {
			t.Fatal(err)
		}
		return rows + " seq " + seq
	}
	before := snapshot()
	if before != "1=waiting,2=waiting,3=done seq 1/true" {
		t.Fatalf("unexpected starting state %q", before)
	}
	tests := []struct {
		name  string
		query string
		msg   string // part of the database's message
	}{
		{"UPDATE as the whole query", "UPDATE " + s + ".t SET status = 'x' RETURNING id", "syntax error"},
		{"writable CTE", "WITH u AS (UPDATE " + s + ".t SET status = 'x' RETURNING id) SELECT id FROM u",
			"data-modifying statement"},
		{"nextval", "SELECT nextval('" + s + ".some_seq') AS id", "read-only transaction"},
		{"SELECT FOR UPDATE", "SELECT id FROM " + s + ".t FOR UPDATE", "read-only transaction"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := open(t, testDSN, tt.query, "id", 10*time.Second)
			for _, call := range []string{"Select", "Count"} {
				var err error
				if call == "Select" {
					var got []Row
					got, err = p.Select(t.Context(), Selection{Limit: 10})
					if err == nil {
						t.Errorf("Select succeeded with %+v, want an error", got)
						continue
					}
				} else {
					var n int
					n, err = p.Count(t.Context(), nil, 10)
					if err == nil {
						t.Errorf("Count succeeded with %d, want an error", n)
						continue
					}
				}
				if !config.IsConfigError(err) {
					t.Errorf("%s: %v is not a configuration error", call, err)
				}
				var pqErr *pq.Error
				if !errors.As(err, &pqErr) {
					t.Errorf("%s: %v does not carry the database's error", call, err)
				} else if !strings.Contains(err.Error(), pqErr.Message) || !strings.Contains(pqErr.Message, tt.msg) {
					t.Errorf("%s: error %q, want the database's message containing %q", call, err, tt.msg)
				}
			}
		})
	}
	if after := snapshot(); after != before {
		t.Errorf("the database changed: before %q, after %q", before, after)
	}
}

// TestSelectStatementTimeout checks that source.timeout bounds the statement, as a run-time error.
func TestSelectStatementTimeout(t *testing.T) {
	p := open(t, testDSN, "SELECT pg_sleep(2)::text AS id", "id", 100*time.Millisecond)
	start := time.Now()
	got, err := p.Select(t.Context(), Selection{Limit: 10})
	elapsed := time.Since(start)
	if err == nil {
		t.Fatalf("Select returned %+v after %v, want a statement timeout", got, elapsed)
	}
	if !strings.Contains(err.Error(), "canceling statement due to statement timeout") {
		t.Errorf("error %q does not say the statement timed out", err)
	}
	if config.IsConfigError(err) {
		t.Errorf("a statement timeout is a run-time error, not a configuration error: %v", err)
	}
	t.Logf("timed out after %v", elapsed.Round(time.Millisecond))

	// The timeout is local to that transaction: a quick query on the same pool still works.
	q := open(t, testDSN, "SELECT 1 AS id", "id", 100*time.Millisecond)
	if got, err := q.Select(t.Context(), Selection{Limit: 10}); err != nil || !reflect.DeepEqual(keys(got), []string{"1"}) {
		t.Errorf("a quick query after the timeout: %+v, %v", got, err)
	}
}

// TestSelectUnknownKey checks that a query without the key column is a configuration error naming the key.
func TestSelectUnknownKey(t *testing.T) {
	s := newSchema(t)
	exec(t, "CREATE TABLE "+s+".t (id int4, taskid text)", "INSERT INTO "+s+".t VALUES (1, 'a')")
	tests := []struct {
		name, query, key string
	}{
		{"no such column", "SELECT id, taskid FROM " + s + ".t", "task_id"},
		{"key differs in case", "SELECT id, taskid FROM " + s + ".t", "TaskID"},
		{"column renamed away", "SELECT taskid AS other FROM " + s + ".t", "taskid"},
		{"no rows at all", "SELECT id FROM " + s + ".t WHERE false", "task_id"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := open(t, testDSN, tt.query, tt.key, 10*time.Second)
			_, selErr := p.Select(t.Context(), Selection{Limit: 10})
			_, cntErr := p.Count(t.Context(), nil, 10)
			for call, err := range map[string]error{"Select": selErr, "Count": cntErr} {
				if err == nil {
					t.Errorf("%s: no error, want one naming the key %q", call, tt.key)
					continue
				}
				if !config.IsConfigError(err) {
					t.Errorf("%s: %v is not a configuration error", call, err)
				}
				if !strings.Contains(err.Error(), tt.key) {
					t.Errorf("%s: error %q does not name the key %q", call, err, tt.key)
				}
			}
		})
	}
}

// TestOpenWrongPassword checks that a wrong password fails at run time saying so, and that no error shows the
// password, nor the password of a DSN that cannot be parsed.
func TestOpenWrongPassword(t *testing.T) {
	const password = "s3cr3t-WRONG-pw"
	t.Run("wrong password", func(t *testing.T) {
		dsn := withSetting(t, testDSN, "password", password)
		if u, err := url.Parse(testDSN); err == nil && u.User != nil {
			u.User = url.UserPassword(u.User.Username(), password)
			dsn = u.String()
		}
		p := open(t, dsn, "SELECT 1 AS id", "id", 10*time.Second)
		_, selErr := p.Select(t.Context(), Selection{Limit: 10})
		_, cntErr := p.Count(t.Context(), nil, 10)
		for call, err := range map[string]error{"Select": selErr, "Count": cntErr} {
			if err == nil {
				t.Fatalf("%s with a wrong password succeeded (is the server's TCP auth trust?)", call)
			}
			if !strings.Contains(err.Error(), "authentication") {
				t.Errorf("%s: error %q does not mention authentication", call, err)
			}
			if strings.Contains(err.Error(), password) {
				t.Errorf("%s: error %q shows the password", call, err)
			}
			if config.IsConfigError(err) {
				t.Errorf("%s: %v: a refused login is a run-time error, not a configuration error", call, err)
			}
		}
	})
	for _, tt := range []struct{ name, dsn string }{
		{"URL with a bad port", "postgres://postgres:" + password + "@127.0.0.1:notaport/postgres"},
		{"URL with a bad escape", "postgres://postgres:" + password + "@127.0.0.1:5432/post%zzgres"},
		{"URL with an unclosed bracket", "postgres://postgres:" + password + "@[::1/postgres"},
		{"URL with a mistyped scheme", "postgress://postgres:" + password + "@127.0.0.1:5432/postgres"},
		{"URL with a bad sslmode", "postgres://postgres:" + password + "@127.0.0.1:5432/postgres?sslmode=bogus"},
		{"key=value, unterminated quote", "host=127.0.0.1 password='" + password},
		{"key=value, bad port", "host=127.0.0.1 password=" + password + " port=abc"},
		{"key=value, a word without =", "host=127.0.0.1 password=" + password + " " + password},
	} {
		t.Run(tt.name, func(t *testing.T) {
			p, err := OpenPostgres(tt.dsn, config.Source{Query: "SELECT 1 AS id", Key: "id"})
			if err == nil {
				p.Close()
				t.Fatalf("OpenPostgres(%q) succeeded, want an error", tt.dsn)
			}
			if !config.IsConfigError(err) {
				t.Errorf("%v is not a configuration error", err)
			}
			if strings.Contains(err.Error(), password) {
				t.Errorf("error %q shows the password", err)
			}
			if !strings.Contains(err.Error(), "DSN is not valid") {
				t.Errorf("error %q does not say the DSN is not valid", err)
			}
			t.Logf("%v", err)
		})
	}
}

// TestCount checks that Count counts the rows Select would return, excluded and NULL keys left out, up to max.
func TestCount(t *testing.T) {
	s := newSchema(t)
	exec(t, "CREATE TABLE "+s+".t (id text, n int4)",
		"INSERT INTO "+s+".t SELECT 'k' || g, g FROM generate_series(1, 7) AS g",
		"INSERT INTO "+s+".t VALUES (NULL, 8), (NULL, 9)")
	p := open(t, testDSN, "SELECT id, n FROM "+s+".t ORDER BY n", "id", 10*time.Second)
	tests := []struct {
		name    string
		exclude []string
		max     int
		want    int
	}{
		{"stops at max", nil, 5, 5},
		{"all when max is larger", nil, 100, 7},
		{"max equal to the count", nil, 7, 7},
		{"max 0", nil, 0, 0},
		{"with exclusion", []string{"k2", "k5", "k99"}, 100, 5},
		{"with exclusion, stops at max", []string{"k2", "k5"}, 3, 3},
		{"everything excluded", []string{"k1", "k2", "k3", "k4", "k5", "k6", "k7"}, 100, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := p.Count(t.Context(), tt.exclude, tt.max)
			if err != nil {
				t.Fatalf("Count: %v", err)
			}
			if got != tt.want {
				t.Errorf("Count(%q, %d) = %d, want %d", tt.exclude, tt.max, got, tt.want)
			}
		})
	}
}

// TestExcludeRenderedKeys checks that a key is excluded by the very text Select renders for it, for the key types
// whose rendered text is not PostgreSQL's ::text (timestamps, bytea) and for the common ones.
func TestExcludeRenderedKeys(t *testing.T) {
	s := newSchema(t)
	exec(t, "CREATE TABLE "+s+".k (seq int4, i2 int2, i4 int4, i8 int8, u uuid, t text, tstz timestamptz, ts timestamp, "+
		"d date, ttz timetz, by bytea, num numeric, f8 float8, b bool)",
		`INSERT INTO `+s+`.k VALUES
		 (1, 1, 1, 1, '00000000-0000-0000-0000-000000000001', 'a', '2024-07-01 12:00:00.5+02', '2024-07-01 12:00:00.5',
		  '2024-02-29', '12:00:00+01', '\x00ff', 1.50, 0.1, true),
		 (2, 2, 2, 2, '00000000-0000-0000-0000-000000000002', 'b', '2024-07-02 00:00:00+00', '2024-07-02 00:00:00',
		  '2024-03-01', '13:30:00.25-05', '\x01', 2, 1e20, false)`)
	for _, col := range []string{"i2", "i4", "i8", "u", "t", "tstz", "ts", "d", "ttz", "by", "num", "f8", "b"} {
		t.Run(col, func(t *testing.T) {
			p := open(t, testDSN, "SELECT "+col+", seq FROM "+s+".k ORDER BY seq", col, 10*time.Second)
			all, err := p.Select(t.Context(), Selection{Limit: 10})
			if err != nil || len(all) != 2 {
				t.Fatalf("Select: %+v, %v", all, err)
			}
			first, second := all[0].Key, all[1].Key
			got, err := p.Select(t.Context(), Selection{Exclude: []string{first, "not-a-number"}, Limit: 10})
			if err != nil {
				t.Fatalf("Select excluding %q: %v", first, err)
			}
			if !reflect.DeepEqual(keys(got), []string{second}) {
				t.Errorf("Select excluding %q = %q, want [%q]", first, keys(got), second)
			}
			sel, err := p.Selected(t.Context(), []string{"not-a-number", second, first})
			if err != nil {
				t.Fatalf("Selected: %v", err)
			}
			if !reflect.DeepEqual(sel, []string{second, first}) {
				t.Errorf("Selected = %q, want [%q %q]", sel, second, first)
			}
		})
	}
}

// TestSelected checks which of the keys asked the query returns now: NULL keys never, foreign keys never fail it,
// each key once in the order asked, and the key is compared in the query's result (a row its WHERE leaves out is not
// selected).
func TestSelected(t *testing.T) {
	s := newSchema(t)
	exec(t, "CREATE TABLE "+s+".t (id int8, status text)",
		"INSERT INTO "+s+".t VALUES (1, 'waiting'), (2, 'done'), (3, 'waiting'), (NULL, 'waiting'), (3, 'waiting')")
	p := open(t, testDSN, "SELECT id, status FROM "+s+".t WHERE status = 'waiting' ORDER BY id", "id", 10*time.Second)
	tests := []struct {
		name string
		keys []string
		want []string
	}{
		{"none asked", nil, nil},
		{"the waiting ones", []string{"3", "2", "1"}, []string{"3", "1"}},
		{"twice asked, twice returned", []string{"3", "3"}, []string{"3"}},
		{"foreign keys", []string{"not-a-number", "", "NULL", "1"}, []string{"1"}},
		{"none there", []string{"4", "2"}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := p.Selected(t.Context(), tt.keys)
			if err != nil {
				t.Fatalf("Selected: %v", err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("Selected(%q) = %q, want %q", tt.keys, got, tt.want)
			}
		})
	}
	t.Run("text keys", func(t *testing.T) {
		p := open(t, testDSN, "SELECT status AS k FROM "+s+".t", "k", 10*time.Second)
		got, err := p.Selected(t.Context(), []string{"done", "gone", "waiting"})
		if err != nil || !reflect.DeepEqual(got, []string{"done", "waiting"}) {
			t.Errorf("Selected = %q, %v; want [done waiting]", got, err)
		}
	})
}

func TestLookup(t *testing.T) {
	s := newSchema(t)
	exec(t, "CREATE TABLE "+s+".t (id int8, url text, status text)",
		"INSERT INTO "+s+".t VALUES (1, 'u1', 'waiting'), (2, 'u2', 'done'), (3, NULL, 'waiting')")
	p := open(t, testDSN, "SELECT id, url FROM "+s+".t WHERE status = 'waiting' ORDER BY id DESC", "id", 10*time.Second)
	got, err := p.Lookup(t.Context(), []string{"1", "2", "3", "not-a-number"})
	if err != nil {
		t.Fatal(err)
	}
	want := []Row{
		{Key: "3", Columns: []Column{{Name: "id", Value: "3"}, {Name: "url", Null: true}}},
		{Key: "1", Columns: []Column{{Name: "id", Value: "1"}, {Name: "url", Value: "u1"}}},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Lookup = %+v, want %+v (the query's rows of those keys, in its order)", got, want)
	}
	if got, err := p.Lookup(t.Context(), nil); err != nil || got != nil {
		t.Errorf("Lookup(nil) = %v, %v; want nothing asked", got, err)
	}
}

// TestSilentServer checks that a database that accepts the connection and never answers cannot hold a read past its
// context's deadline, with or without a connect_timeout in the DSN, and that the error shows no password.
func TestSilentServer(t *testing.T) {
	const password = "s3cr3t-SILENT-pw"
	addr := tcpkit.NewSilent(t).Addr()
	for _, dsn := range []string{
		"postgres://app:" + password + "@" + addr + "/app?sslmode=disable",
		"postgres://app:" + password + "@" + addr + "/app?sslmode=disable&connect_timeout=600",
		"host=127.0.0.1 port=" + addr[strings.LastIndex(addr, ":")+1:] + " password=" + password + " sslmode=disable connect_timeout=0",
	} {
		for _, call := range []string{"Select", "Count", "Selected"} {
			t.Run(call, func(t *testing.T) {
				p := open(t, dsn, "SELECT 1 AS id", "id", 10*time.Second)
				ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
				defer cancel()
				start := time.Now()
				var err error
				switch call {
				case "Select":
					_, err = p.Select(ctx, Selection{Limit: 10})
				case "Count":
					_, err = p.Count(ctx, nil, 10)
				case "Selected":
					_, err = p.Selected(ctx, []string{"1"})
				}
				elapsed := time.Since(start)
				if err == nil {
					t.Fatal("no error from a server that never answers")
				}
				if elapsed > 5*time.Second {
					t.Errorf("%s took %v with a 2s deadline", call, elapsed)
				}
				if strings.Contains(err.Error(), password) {
					t.Errorf("error %q shows the password", err)
				}
				if config.IsConfigError(err) {
					t.Errorf("%v: a database that does not answer is a run-time error", err)
				}
				t.Logf("%s: %v after %v", call, err, elapsed.Round(time.Millisecond))
			})
		}
	}
}

// TestConnectTimeout checks that without a context deadline a silent server costs DefaultConnectTimeout, not for ever.
func TestConnectTimeout(t *testing.T) {
	addr := tcpkit.NewSilent(t).Addr()
	p := open(t, "postgres://app:pw@"+addr+"/app?sslmode=disable", "SELECT 1 AS id", "id", 10*time.Second)
	start := time.Now()
	done := make(chan error, 1)
	go func() {
		_, err := p.Select(context.Background(), Selection{Limit: 1})
		done <- err
	}()
	select {
	case err := <-done:
		if err == nil {
			t.Fatal("no error from a server that never answers")
		}
		t.Logf("%v after %v", err, time.Since(start).Round(time.Millisecond))
	case <-time.After(DefaultConnectTimeout + 20*time.Second):
		t.Fatalf("Select still waits after %v", time.Since(start))
	}
}

// freezingProxy forwards TCP connections to target until freeze is called; from then on it holds every byte and
// every new connection, as a database host that stops answering in the middle of a session would.
func freezingProxy(t *testing.T, target string) (addr string, freeze func()) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	frozen := make(chan struct{})
	var once sync.Once
	var mu sync.Mutex
	var conns []net.Conn
	keep := func(c net.Conn) {
		mu.Lock()
		conns = append(conns, c)
		mu.Unlock()
	}
	pipe := func(dst, src net.Conn) {
		buf := make([]byte, 32*1024)
		for {
			n, err := src.Read(buf)
			select {
			case <-frozen:
				return // hold it: the bytes never arrive
			default:
			}
			if n > 0 {
				if _, err := dst.Write(buf[:n]); err != nil {
					return
				}
			}
			if err != nil {
				return
			}
		}
	}
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			keep(c)
			select {
			case <-frozen:
				continue
			default:
			}
			up, err := net.Dial("tcp", target)
			if err != nil {
				c.Close()
				continue
			}
			keep(up)
			go pipe(up, c)
			go pipe(c, up)
		}
	}()
	t.Cleanup(func() {
		l.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			c.Close()
		}
	})
	return l.Addr().String(), func() { once.Do(func() { close(frozen) }) }
}

// TestServerStopsAnswering checks that a read on a connection that worked, to a server that then stops answering
// (lib/pq's cancel request goes unanswered too), ends at its context's deadline.
func TestServerStopsAnswering(t *testing.T) {
	u, err := url.Parse(testDSN)
	if err != nil || u.Host == "" {
		t.Fatalf("%s is not a URL with a host", dsnEnv)
	}
	addr, freeze := freezingProxy(t, u.Host)
	u.Host = addr
	p := open(t, u.String(), "SELECT 1 AS id", "id", 10*time.Second)
	if got, err := p.Select(t.Context(), Selection{Limit: 1}); err != nil || len(got) != 1 {
		t.Fatalf("Select through the proxy: %+v, %v", got, err)
	}
	freeze()
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
	defer cancel()
	start := time.Now()
	_, err = p.Select(ctx, Selection{Limit: 1})
	elapsed := time.Since(start)
	if err == nil {
		t.Fatal("no error from a server that stopped answering")
	}
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("error %q does not say the deadline passed", err)
	}
	if elapsed > 5*time.Second {
		t.Errorf("Select took %v with a 2s deadline", elapsed)
	}
	t.Logf("%v after %v", err, elapsed.Round(time.Millisecond))
}

// TestReadAfterDeadline checks that a read cut by its context's deadline leaves the source usable (the next read gets
// a working connection), and that the server was told to cancel the statement (lib/pq's cancel request still goes
// out), so the query does not run on until its statement timeout.
func TestReadAfterDeadline(t *testing.T) {
	marker := fmt.Sprintf("jobsched-deadline-%d", time.Now().UnixNano())
	p := open(t, testDSN, "SELECT pg_sleep(20)::text AS id, '"+marker+"' AS m", "id", 60*time.Second)
	ctx, cancel := context.WithTimeout(t.Context(), 500*time.Millisecond)
	defer cancel()
	start := time.Now()
	if _, err := p.Select(ctx, Selection{Limit: 1}); err == nil {
		t.Fatal("Select of pg_sleep(20) with a 500ms deadline succeeded")
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("Select took %v with a 500ms deadline", d)
	}
	// The statement is cancelled on the server: it does not run on.
	if err := wait.PollUntilContextTimeout(t.Context(), 100*time.Millisecond, 10*time.Second, true, func(ctx context.Context) (bool, error) {
		var n int
		err := adminDB.QueryRowContext(ctx, "SELECT count(*) FROM pg_stat_activity WHERE state = 'active' "+
			"AND query LIKE '%'||$1||'%' AND pid <> pg_backend_pid()", marker).Scan(&n)
		return n == 0, err
	}); err != nil {
		t.Errorf("the statement still runs on the server %v after its read ended: %v", time.Since(start), err)
	}
	// The next read on the pool, with a fresh context, works.
	q, err := p.Share(config.Source{Query: "SELECT 1 AS id", Key: "id"})
	if err != nil {
		t.Fatal(err)
	}
	got, err := q.Select(t.Context(), Selection{Limit: 1})
	if err != nil || !reflect.DeepEqual(keys(got), []string{"1"}) {
		t.Errorf("the read after the cut one: %+v, %v", got, err)
	}
}

// TestStatementTimeoutRange: the ends of source.timeout's range (config.MinTimeout, MaxTimeout) are statement
// timeouts PostgreSQL takes, and one millisecond more than MaxTimeout is one it refuses (22023): Validate's range
// is PostgreSQL's.
func TestStatementTimeoutRange(t *testing.T) {
	for _, d := range []time.Duration{config.MinTimeout, config.MaxTimeout} {
		p := open(t, testDSN, "SELECT 1 AS id", "id", d)
		got, err := p.Select(t.Context(), Selection{Limit: 10})
		// A statement cancelled by its 1 ms timeout (57014: a loaded machine) shows PostgreSQL took the setting too.
		if timedOut := d == config.MinTimeout && err != nil && strings.Contains(err.Error(), "57014"); timedOut {
			continue
		}
		if err != nil || !reflect.DeepEqual(keys(got), []string{"1"}) {
			t.Errorf("source.timeout %v: %+v, %v", d, got, err)
		}
	}
	p := open(t, testDSN, "SELECT 1 AS id", "id", config.MaxTimeout+time.Millisecond)
	if _, err := p.Select(t.Context(), Selection{Limit: 10}); err == nil || !strings.Contains(err.Error(), "22023") {
		t.Errorf("source.timeout %v: %v, want PostgreSQL's 22023", config.MaxTimeout+time.Millisecond, err)
	}
}
