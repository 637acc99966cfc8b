//go:build integration

package rows

import (
	"context"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/jobsched/jobsched/pkg/querydoctor"
)

// TestExplain checks the query doctor against a real PostgreSQL, on 200,000 waiting rows and 20,000 done ones,
// analyzed so that the planner's estimates are real: a query an index serves gets no problem; an ORDER BY no index
// serves is a sort of every waiting row with the index that would fix it; a selective WHERE without an index is a
// scan of the whole table; a plan that cannot be made is a finding that says why, not an error.
func TestExplain(t *testing.T) {
	s := newSchema(t)
	exec(t,
		"CREATE TABLE "+s+".tasks (id int8 PRIMARY KEY, status text NOT NULL, priority int NOT NULL, created_at timestamptz NOT NULL)",
		`INSERT INTO `+s+`.tasks SELECT g, CASE WHEN g <= 200000 THEN 'waiting' ELSE 'done' END, g % 7,
			'2024-01-01'::timestamptz + g * interval '1 second' FROM generate_series(1, 220000) AS g`,
		"CREATE INDEX ON "+s+".tasks (created_at) WHERE status = 'waiting'",
		"ANALYZE "+s+".tasks",
	)
	table := strings.Trim(s, `"`) + ".tasks"
	exclude := []string{"1", "2", "3"}
	for _, tc := range []struct {
		name  string
		query string
		want  []querydoctor.Problem
	}{
		{
			name:  "an index serves WHERE and ORDER BY",
			query: "SELECT * FROM " + s + ".tasks WHERE status = 'waiting' ORDER BY created_at",
			want:  []querydoctor.Problem{},
		},
		{
			name:  "no ORDER BY: the scan stops at the LIMIT",
			query: "SELECT * FROM " + s + ".tasks",
			want:  []querydoctor.Problem{},
		},
		{
			name:  "ORDER BY without an index sorts every waiting row",
			query: "SELECT * FROM " + s + ".tasks WHERE status = 'waiting' ORDER BY priority DESC, created_at",
			want: []querydoctor.Problem{{Kind: "sort", Table: table, EstimatedRows: 200000,
				Message: "every pass sorts all ~200000 rows the query selects from " + table +
					" (ORDER BY priority DESC, created_at) to return the first 10, after reading the whole table",
				Fix: "an index on " + table + " (priority DESC, created_at) WHERE status = 'waiting'"}},
		},
		{
			name:  "a WHERE that selects few rows, without an index, reads the whole table",
			query: "SELECT * FROM " + s + ".tasks WHERE status = 'stuck' AND priority = 3",
			want: []querydoctor.Problem{{Kind: "scan", Table: table, EstimatedRows: 220000,
				Message: "every pass reads the whole table " + table + " (~220000 rows) to find 10",
				Fix:     "an index on " + table + " (status, priority), or one on " + table + " (id) WHERE status = 'stuck' AND priority = 3"}},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := open(t, testDSN, tc.query, "id", 30*time.Second)
			got := p.Explain(t.Context(), exclude, 10)
			if got.Unchecked != "" {
				t.Fatalf("Explain could not check: %s", got.Unchecked)
			}
			for i := range got.Problems { // the estimate is the planner's: within 5% of the truth
				if w := tc.want; i < len(w) && got.Problems[i].EstimatedRows > w[i].EstimatedRows*95/100 &&
					got.Problems[i].EstimatedRows < w[i].EstimatedRows*105/100 {
					got.Problems[i].EstimatedRows = w[i].EstimatedRows
					got.Problems[i].Message = strings.Replace(got.Problems[i].Message, estimate(got.Problems[i].Message), estimate(w[i].Message), 1)
				}
			}
			if !reflect.DeepEqual(got.Problems, tc.want) {
				t.Errorf("Explain =\n%+v\nwant\n%+v", got.Problems, tc.want)
			}
		})
	}

	t.Run("the cancel query: its read of the keys asked, judged apart", func(t *testing.T) {
		query := "SELECT * FROM " + s + ".tasks WHERE status = 'waiting' ORDER BY created_at"
		for _, tc := range []struct {
			name, cancel string
			want         []string // kind and table of each problem
		}{
			{"the key's index serves it", "SELECT id FROM " + s + ".tasks WHERE status = 'cancelled'", nil},
			{"a key the index cannot serve: the whole table each pass", "SELECT id + 0 AS id FROM " + s + ".tasks WHERE status = 'cancelled'",
				[]string{"scan " + table}},
		} {
			t.Run(tc.name, func(t *testing.T) {
				got := openCancel(t, query, tc.cancel).Explain(t.Context(), exclude, 10)
				if got.Unchecked != "" || len(got.Problems) != 0 || got.Cancel == nil || got.Cancel.Unchecked != "" {
					t.Fatalf("Explain = %+v (cancel %+v), want the read without problem and the cancel read checked", got, got.Cancel)
				}
				var problems []string
				for _, pr := range got.Cancel.Problems {
					problems = append(problems, pr.Kind+" "+pr.Table)
				}
				if !reflect.DeepEqual(problems, tc.want) {
					t.Errorf("the cancel read's problems %v (%s), want %v", problems, got.Cancel, tc.want)
				}
				if !strings.Contains(got.String(), "; cancelQuery: ") {
					t.Errorf("String() = %q, want the cancel read's finding in it", got.String())
				}
			})
		}
	})

	t.Run("a failure is a finding", func(t *testing.T) {
		p := open(t, testDSN, "SELECT * FROM "+s+".tasks", "id", 30*time.Second)
		ctx, cancel := context.WithCancel(t.Context())
		cancel()
		got := p.Explain(ctx, nil, 10)
		if !strings.HasPrefix(got.Unchecked, "could not EXPLAIN the read: ") || len(got.Problems) != 0 {
			t.Errorf("Explain with an ended context = %+v, want no problem and why it could not check", got)
		}
		if !strings.HasPrefix(got.String(), "not checked: could not EXPLAIN the read") {
			t.Errorf("String() = %q", got.String())
		}
	})
}

// estimate is the "~N" of a message.
func estimate(msg string) string {
	i := strings.Index(msg, "~")
	j := strings.Index(msg[i:], " ")
	return msg[i : i+j]
}
