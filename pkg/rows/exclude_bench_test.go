//go:build integration

package rows

import (
	"fmt"
	"strconv"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/jobsched/jobsched/pkg/config"
)

// BenchmarkSelectExcluded measures the read of a pass (Select, its whole READ ONLY transaction) with 10 and with
// 5,000 keys excluded (maxActive: 5000 excludes up to that many), side by side, for a typed (int8) and a text key,
// over a backlog of 200,000 waiting rows with an index matching the query. The excluded keys are the oldest waiting
// rows, as they are when their Jobs run: the read walks past them in the index. scripts/bench.sh prints the ratio.
func BenchmarkSelectExcluded(b *testing.B) {
	const backlog, limit = 200000, 100
	for _, kt := range []struct{ name, typ, expr string }{
		{name: "int8", typ: "int8", expr: "g"},
		{name: "text", typ: "text", expr: "'task-' || g"},
	} {
		s := benchSchema(b)
		benchExec(b,
			"CREATE TABLE "+s+".tasks (id "+kt.typ+" PRIMARY KEY, status text NOT NULL, created_at timestamptz NOT NULL)",
			fmt.Sprintf(`INSERT INTO %s.tasks SELECT %s, 'waiting', '2024-01-01'::timestamptz + g * interval '1 second'
				FROM generate_series(1, %d) AS g`, s, kt.expr, backlog),
			"CREATE INDEX ON "+s+".tasks (created_at) WHERE status = 'waiting'",
			"ANALYZE "+s+".tasks",
		)
		query := "SELECT id, created_at FROM " + s + ".tasks WHERE status = 'waiting' ORDER BY created_at"
		for _, n := range []int{10, 5000} {
			exclude := make([]string, n)
			for i := range exclude {
				if kt.typ == "text" {
					exclude[i] = "task-" + strconv.Itoa(i+1)
				} else {
					exclude[i] = strconv.Itoa(i + 1)
				}
			}
			b.Run(fmt.Sprintf("key=%s/excluded=%d", kt.name, n), func(b *testing.B) {
				p, err := openBench(s, query)
				if err != nil {
					b.Fatal(err)
				}
				defer p.Close()
				if _, err := p.Select(b.Context(), Selection{Exclude: exclude, Limit: limit}); err != nil { // connect, learn the key type
					b.Fatal(err)
				}
				b.ResetTimer()
				for b.Loop() {
					got, err := p.Select(b.Context(), Selection{Exclude: exclude, Limit: limit})
					if err != nil {
						b.Fatal(err)
					}
					if len(got) != limit || got[0].Key != exclude[0][:len(exclude[0])-1]+strconv.Itoa(n+1) {
						b.Fatalf("Select returned %d rows starting at %q, want %d starting after the excluded", len(got), got[0].Key, limit)
					}
				}
			})
		}
	}
}

func benchSchema(b *testing.B) string {
	b.Helper()
	schema := fmt.Sprintf("jobsched_bench_%d", time.Now().UnixNano())
	benchExec(b, "CREATE SCHEMA "+schema)
	b.Cleanup(func() { _, _ = adminDB.Exec("DROP SCHEMA " + schema + " CASCADE") })
	return schema
}

func benchExec(b *testing.B, stmts ...string) {
	b.Helper()
	for _, s := range stmts {
		if _, err := adminDB.ExecContext(b.Context(), s); err != nil {
			b.Fatalf("%s: %v", s, err)
		}
	}
}

func openBench(schema, query string) (*Postgres, error) {
	return OpenPostgres(testDSN, config.Source{Query: query, Key: "id", Timeout: metav1.Duration{Duration: 30 * time.Second}})
}
