package querydoctor

import (
	"reflect"
	"testing"
)

func TestConjuncts(t *testing.T) {
	for _, tc := range []struct {
		name, cond string
		want       []string
	}{
		{name: "empty", cond: "", want: nil},
		{name: "one", cond: "(status = 'waiting'::text)", want: []string{"status = 'waiting'::text"}},
		{name: "top-level AND", cond: "((id IS NOT NULL) AND (status = 'waiting'::text))",
			want: []string{"id IS NOT NULL", "status = 'waiting'::text"}},
		{name: "AND inside an OR stays", cond: "((a = 1) OR ((b = 2) AND (c = 3)))",
			want: []string{"(a = 1) OR ((b = 2) AND (c = 3))"}},
		{name: "an empty conjunct", cond: "a AND  AND b", want: []string{"a", "", "b"}},
		{name: "AND and parentheses in a literal", cond: "((note = ' AND ('::text) AND (n > 1))",
			want: []string{"note = ' AND ('::text", "n > 1"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := conjuncts(tc.cond); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("conjuncts(%q) = %q, want %q", tc.cond, got, tc.want)
			}
		})
	}
}

func TestStripParens(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"", ""},
		{"()", ""},
		{"a = 1", "a = 1"},
		{"(a = 1)", "a = 1"},
		{"((a = 1))", "a = 1"},
		{"( (a = 1) )", "a = 1"},
		{"(a = 1) AND (b = 2)", "(a = 1) AND (b = 2)"},
		{"((a = 1) AND (b = 2))", "(a = 1) AND (b = 2)"},
		{"(note = ')(')", "note = ')('"},
		{"(note = ')') AND (n > 1)", "(note = ')') AND (n > 1)"},
		{"(note = 'it''s (')", "note = 'it''s ('"},
	} {
		if got := stripParens(tc.in); got != tc.want {
			t.Errorf("stripParens(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestDiagnose(t *testing.T) {
	scan := func(rows float64, filter string) explainNode {
		return explainNode{NodeType: "Seq Scan", Relation: "tasks", Schema: "public", Alias: "tasks", PlanRows: rows, Filter: filter}
	}
	tables := map[string]float64{"public.tasks": 1e6}
	for _, tc := range []struct {
		name string
		plan explainNode
		want []string // kind and fix of each problem
	}{
		{name: "index scan under the limit", plan: explainNode{NodeType: "Limit", PlanRows: 10, Plans: []explainNode{
			{NodeType: "Index Scan", Relation: "tasks", Schema: "public", Alias: "tasks", PlanRows: 1e6}}}},
		{name: "seq scan that stops at the limit", plan: explainNode{NodeType: "Limit", PlanRows: 10, Plans: []explainNode{
			scan(5e5, "(tasks.status = 'waiting'::text)")}}},
		{name: "seq scan that finds fewer rows than the limit reads everything",
			plan: explainNode{NodeType: "Limit", PlanRows: 3, Plans: []explainNode{scan(3, "((tasks.id IS NOT NULL) AND (tasks.status = 'stuck'::text))")}},
			want: []string{"scan", "an index on tasks (status), or one on tasks (id) WHERE status = 'stuck'"}},
		{name: "small sort is fine", plan: explainNode{NodeType: "Limit", PlanRows: 10, Plans: []explainNode{
			{NodeType: "Sort", PlanRows: 500, SortKey: []string{"tasks.created_at"}, Plans: []explainNode{
				{NodeType: "Index Scan", Relation: "tasks", Schema: "public", Alias: "tasks", PlanRows: 500}}}}}},
		{name: "sort of the whole table", plan: explainNode{NodeType: "Limit", PlanRows: 10, Plans: []explainNode{
			{NodeType: "Sort", PlanRows: 9e5, SortKey: []string{"tasks.created_at"}, Plans: []explainNode{scan(9e5, "((tasks.id IS NOT NULL) AND (tasks.status = 'waiting'::text))")}}}},
			want: []string{"sort", "an index on tasks (created_at) WHERE status = 'waiting'"}},
		{name: "parallel sort: estimates are per process", plan: explainNode{NodeType: "Limit", PlanRows: 10, Plans: []explainNode{
			{NodeType: "Gather Merge", Workers: 2, PlanRows: 10, Plans: []explainNode{
				{NodeType: "Sort", PlanRows: 5000, SortKey: []string{"tasks.created_at"}, Plans: []explainNode{scan(5000, "")}}}}}},
			want: []string{"sort", "an index on tasks (created_at)"}},
		{name: "seq scan under an aggregate reads everything", plan: explainNode{NodeType: "Limit", PlanRows: 10, Plans: []explainNode{
			{NodeType: "Aggregate", PlanRows: 10, Plans: []explainNode{scan(1e6, "")}}}},
			want: []string{"scan", "an index matching the query's WHERE"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got []string
			for _, p := range diagnose(tc.plan, tables, 10, "id").Problems {
				got = append(got, p.Kind, p.Fix)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("diagnose = %q, want %q", got, tc.want)
			}
		})
	}
}
