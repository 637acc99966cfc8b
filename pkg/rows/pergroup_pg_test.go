//go:build integration

package rows

import (
	"database/sql"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/jobsched/jobsched/pkg/config"
)

// openGroup opens the source under test with a PerGroup and closes it when t ends.
func openGroup(t *testing.T, dsn, query, key string, g PerGroup) *Postgres {
	t.Helper()
	p, err := OpenPostgres(dsn, config.Source{Query: query, Key: key, Timeout: metav1.Duration{Duration: 10 * time.Second}}, g)
	if err != nil {
		t.Fatalf("OpenPostgres: %v", err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

// keyGroup is a row as the per-group tests compare it: its key and its group.
type keyGroup struct{ Key, Group string }

func keyGroups(rs []Row) []keyGroup {
	out := []keyGroup{}
	for _, r := range rs {
		out = append(out, keyGroup{r.Key, r.Group})
	}
	return out
}

// perGroupWant is the rule applied to the query's own rows (read with its own ORDER BY, on the test's connection,
// the first column the key and the second the group, NULL as ""): in the query's order, skip excluded keys and rows
// of a group that has max − held rows already, up to limit.
func perGroupWant(t *testing.T, query string, sel Selection, max int) []keyGroup {
	t.Helper()
	rs, err := adminDB.QueryContext(t.Context(), query)
	if err != nil {
		t.Fatal(err)
	}
	defer rs.Close()
	out := []keyGroup{}
	taken := map[string]int{}
	for rs.Next() && len(out) < sel.Limit {
		var key string
		var group sql.NullString
		if err := rs.Scan(&key, &group); err != nil {
			t.Fatal(err)
		}
		if slices.Contains(sel.Exclude, key) {
			continue
		}
		if sel.Held[group.String]+taken[group.String] >= max {
			continue
		}
		taken[group.String]++
		out = append(out, keyGroup{key, group.String})
	}
	if err := rs.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// tenants makes table t: tenant big with 100 rows (ids 1-100), a and b with 5 each (101-105, 106-110), and a rank
// column that interleaves them (id modulo 7, then id).
func tenants(t *testing.T) string {
	s := newSchema(t)
	exec(t, "CREATE TABLE "+s+".t (id int8 PRIMARY KEY, tenant text, rank int4)",
		"INSERT INTO "+s+".t SELECT i, 'big', i % 7 FROM generate_series(1, 100) i",
		"INSERT INTO "+s+".t SELECT i, 'a', i % 7 FROM generate_series(101, 105) i",
		"INSERT INTO "+s+".t SELECT i, 'b', i % 7 FROM generate_series(106, 110) i")
	return s
}

// TestSelectPerGroup: tenant big with 100 waiting rows does not starve a and b with 5 each: one read returns at most
// Max − held rows of each tenant, none of a tenant at its cap, in the query's order.
func TestSelectPerGroup(t *testing.T) {
	s := tenants(t)
	byID := "SELECT id, tenant FROM " + s + ".t ORDER BY id"
	interleaved := "SELECT id, tenant FROM " + s + ".t ORDER BY rank, id DESC"
	tests := []struct {
		name  string
		query string
		sel   Selection
		want  []keyGroup
	}{
		{"two of each, in the query's order", byID, Selection{Limit: 100},
			[]keyGroup{{"1", "big"}, {"2", "big"}, {"101", "a"}, {"102", "a"}, {"106", "b"}, {"107", "b"}}},
		{"big at its cap: none of big", byID, Selection{Limit: 100, Held: map[string]int{"big": 2}},
			[]keyGroup{{"101", "a"}, {"102", "a"}, {"106", "b"}, {"107", "b"}}},
		{"big over its cap: none of big", byID, Selection{Limit: 100, Held: map[string]int{"big": 7}},
			[]keyGroup{{"101", "a"}, {"102", "a"}, {"106", "b"}, {"107", "b"}}},
		{"a holds one: one of a", byID, Selection{Limit: 100, Held: map[string]int{"a": 1, "nobody": 1}},
			[]keyGroup{{"1", "big"}, {"2", "big"}, {"101", "a"}, {"106", "b"}, {"107", "b"}}},
		{"the limit takes the first in the query's order", byID, Selection{Limit: 3},
			[]keyGroup{{"1", "big"}, {"2", "big"}, {"101", "a"}}},
		{"excluded keys are not counted", byID, Selection{Exclude: []string{"1", "101"}, Limit: 100},
			[]keyGroup{{"2", "big"}, {"3", "big"}, {"102", "a"}, {"103", "a"}, {"106", "b"}, {"107", "b"}}},
		{"every group at its cap", byID, Selection{Limit: 100, Held: map[string]int{"big": 2, "a": 2, "b": 3}}, []keyGroup{}},
		{"interleaved order", interleaved, Selection{Limit: 100},
			[]keyGroup{{"105", "a"}, {"98", "big"}, {"91", "big"}, {"106", "b"}, {"107", "b"}, {"101", "a"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := openGroup(t, testDSN, tt.query, "id", PerGroup{Column: "tenant", Max: 2})
			got, err := p.Select(t.Context(), tt.sel)
			if err != nil {
				t.Fatal(err)
			}
			if want := perGroupWant(t, tt.query, tt.sel, 2); !reflect.DeepEqual(want, tt.want) {
				t.Fatalf("the case's want %v is not the rule applied to the query's rows, %v", tt.want, want)
			}
			if !reflect.DeepEqual(keyGroups(got), tt.want) {
				t.Errorf("Select = %v, want %v", keyGroups(got), tt.want)
			}
			for _, r := range got {
				if len(r.Columns) < 2 || r.Columns[0].Name != "id" || r.Columns[1].Name != "tenant" ||
					r.Columns[len(r.Columns)-1].Name == "jobsched_n" {
					t.Fatalf("row %+v: want the query's columns only", r)
				}
			}
		})
	}
}

// TestSelectPerGroupRows checks whole rows: the query's columns, nothing of the statement's own; the group is the
// column's text (an int column's ::text), and NULL and ” are one group, "".
func TestSelectPerGroupRows(t *testing.T) {
	s := newSchema(t)
	exec(t, "CREATE TABLE "+s+".t (id int8, tenant text, n int4)",
		"INSERT INTO "+s+".t VALUES (1, NULL, 10), (2, '', 10), (3, NULL, 20), (4, 'x', 20), (5, 'x', 30)")
	p := openGroup(t, testDSN, "SELECT id, tenant FROM "+s+".t ORDER BY id", "id", PerGroup{Column: "tenant", Max: 2})
	got, err := p.Select(t.Context(), Selection{Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	want := []Row{
		{Key: "1", Group: "", Columns: []Column{{Name: "id", Value: "1"}, {Name: "tenant", Null: true}}},
		{Key: "2", Group: "", Columns: []Column{{Name: "id", Value: "2"}, {Name: "tenant", Value: ""}}},
		{Key: "4", Group: "x", Columns: []Column{{Name: "id", Value: "4"}, {Name: "tenant", Value: "x"}}},
		{Key: "5", Group: "x", Columns: []Column{{Name: "id", Value: "5"}, {Name: "tenant", Value: "x"}}},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Select = %+v\nwant %+v", got, want)
	}
	if got, err := p.Select(t.Context(), Selection{Limit: 10, Held: map[string]int{"": 1}}); err != nil ||
		!reflect.DeepEqual(keys(got), []string{"1", "4", "5"}) {
		t.Errorf("Select with Held {\"\": 1} = %v, %v; want 1, 4, 5 (NULL and '' are group \"\")", keys(got), err)
	}
	got, err = p.Lookup(t.Context(), []string{"3", "4"})
	if err != nil || !reflect.DeepEqual(got, []Row{
		{Key: "3", Group: "", Columns: []Column{{Name: "id", Value: "3"}, {Name: "tenant", Null: true}}},
		{Key: "4", Group: "x", Columns: []Column{{Name: "id", Value: "4"}, {Name: "tenant", Value: "x"}}},
	}) {
		t.Errorf("Lookup = %+v, %v; want rows 3 and 4 with their groups", got, err)
	}

	q := openGroup(t, testDSN, "SELECT id, n FROM "+s+".t ORDER BY id", "id", PerGroup{Column: "n", Max: 1})
	got, err = q.Select(t.Context(), Selection{Limit: 10, Held: map[string]int{"20": 1}})
	if err != nil || !reflect.DeepEqual(keyGroups(got), []keyGroup{{"1", "10"}, {"5", "30"}}) {
		t.Errorf("Select grouped by an int column = %v, %v; want 1 (10) and 5 (30): 20 is at its cap", keyGroups(got), err)
	}
}

// TestSelectPerGroupNoColumn: a group column the query does not return is a configuration error naming it, from
// every read; a name that differs only in case gets the hint the key gets. So are a column of a name the read adds
// itself, and a Max below 1.
func TestSelectPerGroupNoColumn(t *testing.T) {
	s := tenants(t)
	for _, tt := range []struct{ name, query, column, hint string }{
		{"not selected", "SELECT id FROM " + s + ".t ORDER BY id", "tenant", `(it returns "id")`},
		{"differs in case", "SELECT id, tenant FROM " + s + ".t ORDER BY id", "Tenant", "set column: tenant"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			p := openGroup(t, testDSN, tt.query, "id", PerGroup{Column: tt.column, Max: 2})
			_, selErr := p.Select(t.Context(), Selection{Limit: 10})
			_, lookErr := p.Lookup(t.Context(), []string{"1"})
			_, cntErr := p.Count(t.Context(), nil, 10)
			for call, err := range map[string]error{"Select": selErr, "Lookup": lookErr, "Count": cntErr} {
				want := fmt.Sprintf("limits.perGroup.column: the query returns no column %q", tt.column)
				if err == nil || !config.IsConfigError(err) || !strings.Contains(err.Error(), want) ||
					!strings.Contains(err.Error(), tt.hint) {
					t.Errorf("%s: %v; want a configuration error %q ... %q", call, err, want, tt.hint)
				}
			}
		})
	}
	p := openGroup(t, testDSN, "SELECT id, tenant, 1 AS jobsched_ord FROM "+s+".t ORDER BY id", "id", PerGroup{Column: "tenant", Max: 2})
	if _, err := p.Select(t.Context(), Selection{Limit: 10}); err == nil || !config.IsConfigError(err) ||
		!strings.Contains(err.Error(), `source.query: the query returns a column named "jobsched_ord"`) {
		t.Errorf("Select of a query with a column of the read's own name: %v; want a configuration error naming it", err)
	}
	if _, err := OpenPostgres(testDSN, config.Source{Query: "SELECT 1 AS id", Key: "id"}, PerGroup{Column: "id"}); err == nil ||
		!config.IsConfigError(err) || !strings.Contains(err.Error(), "limits.perGroup.maxActive") {
		t.Errorf("OpenPostgres with Max 0: %v; want a configuration error naming limits.perGroup.maxActive", err)
	}
}

// TestSelectPerGroupSQL: without a PerGroup the statement is the read's of before, under the row-size bound (the
// bench relies on it); with one, everything the caller gives is a parameter, the bound too.
func TestSelectPerGroupSQL(t *testing.T) {
	p, err := OpenPostgres("host=127.0.0.1 dbname=none", config.Source{Query: "SELECT id FROM t ORDER BY id;", Key: "id"})
	if err != nil {
		t.Fatal(err)
	}
	stmt, args := p.SelectStatement(Selection{Exclude: []string{"a"}, Limit: 10, Held: map[string]int{"x": 1}})
	if want := "SELECT jobsched_r.*, jobsched_b.\"id\", jobsched_s.n FROM (SELECT * FROM (\nSELECT id FROM t ORDER BY id\n) " +
		"AS jobsched_q WHERE jobsched_q.\"id\" IS NOT NULL AND jobsched_q.\"id\"::text NOT IN (SELECT unnest($1::text[])) " +
		"LIMIT $2) AS jobsched_b CROSS JOIN LATERAL (SELECT octet_length(jobsched_b.*::text) AS n) AS jobsched_s " +
		"LEFT JOIN LATERAL (SELECT jobsched_b.*) AS jobsched_r ON jobsched_s.n <= $3"; stmt != want ||
		!reflect.DeepEqual(args[1:], []any{10, MaxRowBytes}) {
		t.Errorf("statement without a PerGroup = %q (%d args), want %q", stmt, len(args), want)
	}
	g, err := OpenPostgres("host=127.0.0.1 dbname=none", config.Source{Query: "SELECT id, tenant FROM t ORDER BY id", Key: "id"},
		PerGroup{Column: `ten"ant`, Max: 3})
	if err != nil {
		t.Fatal(err)
	}
	stmt, args = g.SelectStatement(Selection{Exclude: []string{"a"}, Limit: 10, Held: map[string]int{"x'); COMMIT; --": 1, "y": 2}})
	for _, part := range []string{`"ten""ant"`, "$3::text[]", "$4::int8[]", "$5", "LIMIT $2", "jobsched_s.n <= $6"} {
		if !strings.Contains(stmt, part) {
			t.Errorf("statement %q has no %s", stmt, part)
		}
	}
	if strings.Contains(stmt, "COMMIT") || strings.Contains(stmt, "'x") || len(args) != 6 || args[4] != 3 || args[5] != MaxRowBytes {
		t.Errorf("statement %q, args %v: want the held groups and Max as parameters only", stmt, args)
	}
}

// TestSelectPerGroupKeepsOrder checks what the per-group read relies on (see selectGroupSQL): its rows come in the
// query's order whatever plan serves the query's ORDER BY: an explicit sort of 20,000 rows, an index scan, an
// expression, and a parallel plan (Gather Merge). Each is compared with the query's own result on the test's
// connection, and the plans are checked to be what the case says.
func TestSelectPerGroupKeepsOrder(t *testing.T) {
	s := newSchema(t)
	exec(t, "CREATE TABLE "+s+".t (id int8 PRIMARY KEY, tenant text, score float8, created timestamptz)",
		"INSERT INTO "+s+".t SELECT i, 'g' || (i % 13), (i * 7919) % 10007, timestamptz '2026-01-01' + (i * 37 % 20011) * interval '1 s' "+
			"FROM generate_series(1, 20000) i",
		"CREATE INDEX ON "+s+".t (created)", "ANALYZE "+s+".t")
	parallel := withSetting(t, testDSN, "options", "-c max_parallel_workers_per_gather=2 -c parallel_setup_cost=0 "+
		"-c parallel_tuple_cost=0 -c min_parallel_table_scan_size=0 -c enable_indexscan=off")
	for _, tt := range []struct {
		name, dsn, query, plan string
	}{
		{"sort", testDSN, "SELECT id, tenant FROM " + s + ".t ORDER BY score DESC, id", "Sort"},
		{"index", testDSN, "SELECT id, tenant FROM " + s + ".t WHERE created > '2026-01-01' ORDER BY created, id LIMIT 5000", "Index"},
		{"expression", testDSN, "SELECT id, tenant FROM " + s + ".t ORDER BY md5(id::text)", "Sort"},
		{"parallel", parallel, "SELECT id, tenant FROM " + s + ".t ORDER BY score, id", "Gather Merge"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			p := openGroup(t, tt.dsn, tt.query, "id", PerGroup{Column: "tenant", Max: 40})
			sel := Selection{Limit: 400, Held: map[string]int{"g1": 39, "g2": 40, "g5": 10}, Exclude: []string{"7", "8"}}
			got, err := p.Select(t.Context(), sel)
			if err != nil {
				t.Fatal(err)
			}
			if want := perGroupWant(t, tt.query, sel, 40); !reflect.DeepEqual(keyGroups(got), want) {
				t.Errorf("Select = %v\nwant %v", keyGroups(got), want)
			}
			stmt, args := p.SelectStatement(sel)
			if plan := explainOn(t, tt.dsn, stmt, args); !strings.Contains(plan, tt.plan) {
				t.Errorf("the plan has no %s: the case does not test what it says\n%s", tt.plan, plan)
			}
		})
	}
}

// explainOn is the text plan of stmt, on a connection of its own to dsn.
func explainOn(t *testing.T, dsn, stmt string, args []any) string {
	t.Helper()
	db, err := sql.Open("postgres", dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	rs, err := db.QueryContext(t.Context(), "EXPLAIN "+stmt, args...)
	if err != nil {
		t.Fatal(err)
	}
	defer rs.Close()
	var b strings.Builder
	for rs.Next() {
		var line string
		if err := rs.Scan(&line); err != nil {
			t.Fatal(err)
		}
		b.WriteString(line + "\n")
	}
	return b.String()
}
