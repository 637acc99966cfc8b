//go:build integration

package rows

import (
	"fmt"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/jobsched/jobsched/pkg/config"
)

// BenchmarkSelectPerGroup measures the read of a pass without and with a PerGroup (Max 2) over the same backlog,
// side by side: 200,000 waiting rows of tenant big and 5 each of tenants a and b, an index matching the query's
// ORDER BY, limit 100. Without a PerGroup the read stops after the first 100 rows of the index; with one it numbers
// every waiting row of the groups not at their cap (the window needs them all), so its cost grows with the backlog
// of those groups: with big at its cap (held 2) big's rows are left out before the window.
func BenchmarkSelectPerGroup(b *testing.B) {
	const backlog, limit = 200000, 100
	s := benchSchema(b)
	benchExec(b,
		"CREATE TABLE "+s+".tasks (id int8 PRIMARY KEY, tenant text NOT NULL, status text NOT NULL, created_at timestamptz NOT NULL)",
		fmt.Sprintf(`INSERT INTO %s.tasks SELECT g, CASE WHEN g %% 1000 = 1 AND g <= 5000 THEN 'a'
			WHEN g %% 1000 = 2 AND g <= 5000 THEN 'b' ELSE 'big' END, 'waiting',
			'2024-01-01'::timestamptz + g * interval '1 second' FROM generate_series(1, %d) AS g`, s, backlog+10),
		"CREATE INDEX ON "+s+".tasks (created_at) WHERE status = 'waiting'",
		"ANALYZE "+s+".tasks",
	)
	query := "SELECT id, tenant, created_at FROM " + s + ".tasks WHERE status = 'waiting' ORDER BY created_at"
	for _, c := range []struct {
		name  string
		group PerGroup
		held  map[string]int
		want  int
	}{
		{"none", PerGroup{}, nil, limit},
		{"tenant", PerGroup{Column: "tenant", Max: 2}, nil, 6},
		{"tenant/big-at-cap", PerGroup{Column: "tenant", Max: 2}, map[string]int{"big": 2}, 4},
	} {
		b.Run("group="+c.name, func(b *testing.B) {
			p, err := OpenPostgres(testDSN, config.Source{Query: query, Key: "id", Timeout: metav1.Duration{Duration: 30 * time.Second}}, c.group)
			if err != nil {
				b.Fatal(err)
			}
			defer p.Close()
			sel := Selection{Exclude: []string{"1"}, Limit: limit, Held: c.held}
			if _, err := p.Select(b.Context(), sel); err != nil { // connect, learn the key type
				b.Fatal(err)
			}
			for b.Loop() {
				got, err := p.Select(b.Context(), sel)
				if err != nil {
					b.Fatal(err)
				}
				if len(got) != c.want {
					b.Fatalf("Select returned %d rows, want %d", len(got), c.want)
				}
			}
		})
	}
}
