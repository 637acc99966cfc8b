//go:build integration

package rows

import (
	"database/sql"
	"encoding/json"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/jobsched/jobsched/pkg/config"
)

// openCancel opens the source under test with a cancel query.
func openCancel(t *testing.T, query, cancel string) *Postgres {
	t.Helper()
	p, err := OpenPostgres(testDSN, config.Source{Query: query, Key: "id", CancelQuery: cancel,
		Timeout: metav1.Duration{Duration: 10 * time.Second}})
	if err != nil {
		t.Fatalf("OpenPostgres: %v", err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

// TestCancelled: the cancel query is asked about given keys only, returns those it selects (in the order asked,
// each once), and marks the rows Select returns in the read's own transaction.
func TestCancelled(t *testing.T) {
	s := newSchema(t)
	exec(t, "CREATE TABLE "+s+".tasks (id int8 PRIMARY KEY, status text NOT NULL)",
		"INSERT INTO "+s+".tasks VALUES (1, 'running'), (2, 'cancelled'), (3, 'waiting'), (4, 'waiting'), (5, 'cancelled')")
	// Row 4 is waiting and cancelled at once: the main query selects it, the cancel query too.
	p := openCancel(t, "SELECT id, status FROM "+s+".tasks WHERE status IN ('waiting', 'cancelled') ORDER BY id",
		"SELECT id FROM "+s+".tasks WHERE status = 'cancelled' OR id = 4")
	got, err := p.Cancelled(t.Context(), []string{"5", "1", "2", "not-a-number", "5", "99"})
	if err != nil {
		t.Fatalf("Cancelled: %v", err)
	}
	if want := []string{"5", "2"}; !reflect.DeepEqual(got, want) {
		t.Errorf("Cancelled = %v, want %v", got, want)
	}
	if got, err := p.Cancelled(t.Context(), nil); got != nil || err != nil {
		t.Errorf("Cancelled(no keys) = %v, %v; want nil, nil", got, err)
	}
	rs, err := p.Select(t.Context(), Selection{Exclude: []string{"2"}, Limit: 10})
	if err != nil {
		t.Fatalf("Select: %v", err)
	}
	var marked []string
	for _, r := range rs {
		marked = append(marked, r.Key+"="+strconv.FormatBool(r.Cancelled))
	}
	if want := "3=false,4=true,5=true"; strings.Join(marked, ",") != want {
		t.Errorf("Select's rows %v, want %s", marked, want)
	}
	// Without a cancel query nothing is asked and nothing is marked.
	plain := open(t, testDSN, "SELECT id FROM "+s+".tasks ORDER BY id", "id", 10*time.Second)
	if got, err := plain.Cancelled(t.Context(), []string{"2"}); got != nil || err != nil {
		t.Errorf("Cancelled without a cancel query = %v, %v; want nil, nil", got, err)
	}
}

// TestCancelQueryErrors: a wrong cancel query is a configuration error that names source.cancelQuery (and where in
// it), and one that tries to write fails in the READ ONLY transaction, leaving the table as it was.
func TestCancelQueryErrors(t *testing.T) {
	s := newSchema(t)
	exec(t, "CREATE TABLE "+s+".tasks (id int8 PRIMARY KEY, name text, status text NOT NULL)",
		"INSERT INTO "+s+".tasks VALUES (1, 'a', 'running')")
	tests := []struct {
		name, cancel, want string
	}{
		{"syntax", "SELECT id FROM " + s + ".tasks WHERE", "source.cancelQuery: running source.cancelQuery: pq: syntax error at or near \")\" at the end of source.cancelQuery"},
		{"no key column", "SELECT name FROM " + s + ".tasks", `source.cancelQuery: the query returns no column "id" (it returns "name")`},
		{"another key type", "SELECT name AS id FROM " + s + ".tasks", `source.cancelQuery: its column "id" is TEXT and source.query's is INT8`},
		{"a write", "WITH u AS (UPDATE " + s + ".tasks SET status = 'x' RETURNING id) SELECT id FROM u", "data-modifying statement"},
		{"a lock", "SELECT id FROM " + s + ".tasks FOR UPDATE", "read-only transaction"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := openCancel(t, "SELECT id FROM "+s+".tasks", tt.cancel)
			_, err := p.Cancelled(t.Context(), []string{"1"})
			if !config.IsConfigError(err) || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Cancelled: %v (configuration error: %v), want a configuration error containing %q", err, config.IsConfigError(err), tt.want)
			}
			if !strings.Contains(err.Error(), "source.cancelQuery") {
				t.Errorf("the error %q does not name source.cancelQuery", err)
			}
		})
	}
	var status string
	if err := adminDB.QueryRowContext(t.Context(), "SELECT status FROM "+s+".tasks WHERE id = 1").Scan(&status); err != nil || status != "running" {
		t.Errorf("the row is %q (%v), want it untouched: running", status, err)
	}
}

// TestCancelCost: the cancel read costs the keys it is asked about, whatever the rows the cancel query could
// return. With 10,000 waiting rows marked cancelled (no Job, so never asked about) the read that asks about a pass's
// 20 unfinished keys reads as many rows of tasks as without them: no more than 100. Measured on the very statement
// Cancelled sends, with EXPLAIN (ANALYZE, BUFFERS): the rows each scan of tasks looked at, and its buffers.
func TestCancelCost(t *testing.T) {
	const unfinished, cancelledRows, limit = 20, 10000, 100
	s := newSchema(t)
	exec(t, "CREATE TABLE "+s+".tasks (id int8 PRIMARY KEY, status text NOT NULL, payload text)",
		fmt.Sprintf("INSERT INTO %s.tasks SELECT g, 'running', repeat('x', 200) FROM generate_series(1, %d) AS g", s, unfinished),
		fmt.Sprintf("INSERT INTO %s.tasks SELECT g, 'waiting', repeat('x', 200) FROM generate_series(%d, %d) AS g", s, unfinished+1, unfinished+1000))
	p := openCancel(t, "SELECT id FROM "+s+".tasks WHERE status = 'waiting' ORDER BY id",
		"SELECT id FROM "+s+".tasks WHERE status = 'cancelled'")
	var asked []string
	for i := 1; i <= unfinished; i++ {
		asked = append(asked, strconv.Itoa(i))
	}
	measure := func() (read, buffers float64, took time.Duration, returned int) {
		t.Helper()
		exec(t, "ANALYZE "+s+".tasks")
		got, err := p.Cancelled(t.Context(), asked) // the read itself (and, the first time, its key check)
		if err != nil {
			t.Fatalf("Cancelled: %v", err)
		}
		var doc string
		err = p.readOnly(t.Context(), func(tx *sql.Tx) error {
			stmt, args := p.CancelStatement(asked)
			return tx.QueryRowContext(t.Context(), "EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) "+stmt, args...).Scan(&doc)
		})
		if err != nil {
			t.Fatalf("EXPLAIN: %v", err)
		}
		var plans []struct {
			Plan          costNode `json:"Plan"`
			ExecutionTime float64  `json:"Execution Time"`
		}
		if err := json.Unmarshal([]byte(doc), &plans); err != nil || len(plans) != 1 {
			t.Fatalf("EXPLAIN is not one JSON plan (%v): %s", err, doc)
		}
		var walk func(n costNode)
		walk = func(n costNode) {
			if strings.Contains(n.NodeType, "Scan") && n.RelationName == "tasks" {
				read += (n.ActualRows + n.RowsRemovedByFilter) * max(n.ActualLoops, 1)
			}
			for _, c := range n.Plans {
				walk(c)
			}
		}
		walk(plans[0].Plan)
		return read, plans[0].Plan.SharedHitBlocks + plans[0].Plan.SharedReadBlocks,
			time.Duration(plans[0].ExecutionTime * float64(time.Millisecond)), len(got)
	}
	read0, buf0, took0, n0 := measure()
	exec(t, fmt.Sprintf("INSERT INTO %s.tasks SELECT g, 'cancelled', repeat('x', 200) FROM generate_series(%d, %d) AS g",
		s, unfinished+1001, unfinished+1000+cancelledRows))
	read1, buf1, took1, n1 := measure()
	t.Logf("without the %d cancelled rows: %v rows read, %v buffers, %v; with them: %v rows read, %v buffers, %v",
		cancelledRows, read0, buf0, took0, read1, buf1, took1)
	if n0 != 0 || n1 != 0 {
		t.Errorf("the cancel read returned %d and %d keys, want none: no unfinished task is cancelled", n0, n1)
	}
	if read1 > limit || read1 != read0 {
		t.Errorf("with %d cancelled rows the read looked at %v rows of tasks (%v without them), want the same, at most %d",
			cancelledRows, read1, read0, limit)
	}
}

// costNode is a node of EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON).
type costNode struct {
	NodeType            string     `json:"Node Type"`
	RelationName        string     `json:"Relation Name"`
	ActualRows          float64    `json:"Actual Rows"`
	ActualLoops         float64    `json:"Actual Loops"`
	RowsRemovedByFilter float64    `json:"Rows Removed by Filter"`
	SharedHitBlocks     float64    `json:"Shared Hit Blocks"`
	SharedReadBlocks    float64    `json:"Shared Read Blocks"`
	Plans               []costNode `json:"Plans"`
}
