// Package querydoctor judges a pass's read before it runs: the plan PostgreSQL makes for it (EXPLAIN, never run),
// the powers of the role that runs it (Access).
//
// It says in words each whole-table scan or sort in the plan, with the index that would let the read stop after the
// rows it needs, and what the configured role may do that READ ONLY does not cover. The read itself, the EXPLAIN that plans it and
// the catalog queries belong to the source (package rows); this package only judges what they found.
package querydoctor

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"

	"github.com/lib/pq"
)

// WholeTableRows is how many rows a read may scan or sort before the query doctor speaks up: below it a pass is cheap
// whatever the plan; above it every pass pays for the whole backlog.
const WholeTableRows = 10000

// Finding is what the query doctor says about the plan PostgreSQL makes for a pass's read: the whole-table scans and
// sorts in it, in words, or why it could not check. It never fails the command that asked.
type Finding struct {
	Problems []Problem `json:"problems"`
	// Unchecked says why the plan could not be checked (then Problems is empty).
	Unchecked string `json:"unchecked,omitempty"`
	// Warnings are what the configured role may do that READ ONLY does not cover (see Access); checked even when the
	// plan could not be.
	Warnings []Warning `json:"warnings,omitempty"`
	// Cancel is what the doctor says of the read that asks source.cancelQuery about the keys of a pass's Jobs (nil
	// without one): a whole-table scan there costs every pass with an unfinished Job.
	Cancel *Finding `json:"cancel,omitempty"`
}

// Problem is one costly step of the read's plan.
type Problem struct {
	// Kind is "scan" (the read reads the whole table) or "sort" (it sorts every row the query selects).
	Kind  string `json:"kind"`
	Table string `json:"table"`
	// EstimatedRows are the planner's estimate of the rows scanned or sorted, per pass.
	EstimatedRows int64  `json:"estimatedRows"`
	Message       string `json:"message"`
	// Fix is the kind of index that would let the read stop after the rows it needs.
	Fix string `json:"fix"`
}

// String is the finding in one line: the plan's, then the role's warnings.
func (f *Finding) String() string {
	if f == nil {
		return ""
	}
	var parts []string
	switch {
	case f.Unchecked != "":
		parts = append(parts, "not checked: "+f.Unchecked)
	case len(f.Problems) == 0:
		parts = append(parts, "ok: EXPLAIN shows no whole-table scan or sort in the read")
	}
	for _, p := range f.Problems {
		parts = append(parts, p.Message+"; fix: "+p.Fix)
	}
	for _, w := range f.Warnings {
		parts = append(parts, "warning: "+w.Message+"; fix: "+w.Fix)
	}
	if f.Cancel != nil {
		parts = append(parts, "cancelQuery: "+f.Cancel.String())
	}
	return strings.Join(parts, "; ")
}

// Explainer is a source (a rows.Source) whose reads can be explained.
type Explainer interface {
	// Explain plans the read Select(exclude, limit) would make, without running it, and says what it costs.
	Explain(ctx context.Context, exclude []string, limit int) *Finding
}

// explainNode is one node of EXPLAIN (FORMAT JSON, VERBOSE).
type explainNode struct {
	NodeType     string        `json:"Node Type"`
	Relationship string        `json:"Parent Relationship"`
	Relation     string        `json:"Relation Name"`
	Schema       string        `json:"Schema"`
	Alias        string        `json:"Alias"`
	PlanRows     float64       `json:"Plan Rows"`
	SortKey      []string      `json:"Sort Key"`
	Filter       string        `json:"Filter"`
	IndexCond    string        `json:"Index Cond"`
	RecheckCond  string        `json:"Recheck Cond"`
	Workers      int           `json:"Workers Planned"`
	Plans        []explainNode `json:"Plans"`
}

// Plan is a plan of the read, as EXPLAIN (FORMAT JSON, VERBOSE) returns it.
type Plan struct{ root explainNode }

// ParsePlan reads the document EXPLAIN (FORMAT JSON, VERBOSE) returns for one statement.
func ParsePlan(doc string) (*Plan, error) {
	var plans []struct {
		Plan explainNode `json:"Plan"`
	}
	if err := json.Unmarshal([]byte(doc), &plans); err != nil || len(plans) != 1 {
		return nil, fmt.Errorf("EXPLAIN did not return one JSON plan: %v", err)
	}
	return &Plan{root: plans[0].Plan}, nil
}

// Table is a table the plan reads whole (a sequential scan): Diagnose needs its size.
type Table struct{ Schema, Name string }

// Tables are the tables the plan reads whole, in the plan's order (a table read twice is there twice).
func (p *Plan) Tables() []Table {
	var out []Table
	for _, n := range scannedTables(p.root) {
		out = append(out, Table{Schema: n.Schema, Name: n.Relation})
	}
	return out
}

// Relations are the tables the plan reads, by any scan, each once, in the plan's order.
func (p *Plan) Relations() []Table {
	var out []Table
	seen := map[Table]bool{}
	var walk func(n explainNode)
	walk = func(n explainNode) {
		if t := (Table{Schema: n.Schema, Name: n.Relation}); n.Relation != "" && !seen[t] {
			seen[t] = true
			out = append(out, t)
		}
		for _, c := range n.Plans {
			walk(c)
		}
	}
	walk(p.root)
	return out
}

// Diagnose says what the plan costs. rows holds each table of Tables with its row count (pg_class.reltuples; -1
// when never analyzed); limit is the read's LIMIT; key is the key column, whose conditions (the source's own) are
// left out of the fixes.
func Diagnose(p *Plan, rows map[Table]float64, limit int, key string) *Finding {
	tables := map[string]float64{}
	for t, n := range rows {
		tables[t.Schema+"."+t.Name] = n
	}
	return diagnose(p.root, tables, max(limit, 1), key)
}

func isSeqScan(n explainNode) bool {
	return n.NodeType == "Seq Scan" || n.NodeType == "Parallel Seq Scan"
}

func scannedTables(n explainNode) []explainNode {
	var out []explainNode
	if isSeqScan(n) && n.Relation != "" {
		out = append(out, n)
	}
	for _, c := range n.Plans {
		out = append(out, scannedTables(c)...)
	}
	return out
}

// blocking node types consume their whole input before returning a row: a LIMIT above them does not stop the scan
// below them early.
var blocking = map[string]bool{"Sort": true, "Aggregate": true, "Hash": true, "SetOp": true, "WindowAgg": true,
	"Materialize": true}

// diagnose walks the plan. tables holds each scanned table's row count (pg_class.reltuples; -1 when never analyzed);
// limit is the read's LIMIT; key is the key column, whose conditions (added by jobsched) are left out of the fixes.
func diagnose(root explainNode, tables map[string]float64, limit int, key string) *Finding {
	f := &Finding{Problems: []Problem{}}
	// scale turns the per-worker estimates under a Gather into totals.
	var walk func(n explainNode, lim float64, streaming bool, scale float64)
	walk = func(n explainNode, lim float64, streaming bool, scale float64) {
		if n.Relationship == "SubPlan" || n.Relationship == "InitPlan" {
			lim, streaming = 0, false // runs on its own, to the end
		}
		n.PlanRows *= scale
		switch {
		case n.NodeType == "Gather" || n.NodeType == "Gather Merge":
			scale *= parallelDivisor(n.Workers) // below, the estimates are each process's share
		case n.NodeType == "Limit":
			lim, streaming = n.PlanRows, true
		case n.NodeType == "Sort" && n.PlanRows >= WholeTableRows:
			f.Problems = append(f.Problems, sortProblem(n, limit, key))
			return // the scan below is part of this problem
		case isSeqScan(n):
			total := max(tables[n.Schema+"."+n.Relation], n.PlanRows)
			read := total
			if streaming && lim > 0 && n.PlanRows > lim {
				read = total * lim / n.PlanRows // stops once the LIMIT has its rows
			}
			if read >= WholeTableRows {
				f.Problems = append(f.Problems, scanProblem(n, total, limit, key))
			}
		case blocking[n.NodeType]:
			streaming = false
		}
		for _, c := range n.Plans {
			walk(c, lim, streaming, scale)
		}
	}
	walk(root, float64(limit), false, 1)
	return f
}

// parallelDivisor is how the planner splits the rows of a parallel plan among its workers and the leader
// (costsize.c, get_parallel_divisor): the leader takes a share that shrinks by 30% per worker.
func parallelDivisor(workers int) float64 {
	d := float64(workers)
	if leader := 1 - 0.3*d; leader > 0 {
		d += leader
	}
	return d
}

func sortProblem(sort explainNode, limit int, key string) Problem {
	scan := firstScan(sort)
	table := tableName(scan)
	keys := make([]string, len(sort.SortKey))
	for i, k := range sort.SortKey {
		keys[i] = unqualify(k, scan)
	}
	msg := fmt.Sprintf("every pass sorts all ~%d rows the query selects from %s (ORDER BY %s) to return the first %d",
		int64(sort.PlanRows), table, strings.Join(keys, ", "), limit)
	if isSeqScan(scan) {
		msg += ", after reading the whole table"
	}
	fix := fmt.Sprintf("an index on %s (%s)", table, strings.Join(keys, ", "))
	if w := where(scan, key); w != "" {
		fix += " WHERE " + w
	}
	if scan.Relation == "" {
		fix = "an index matching the query's ORDER BY " + strings.Join(keys, ", ") + " and its WHERE"
	}
	return Problem{Kind: "sort", Table: table, EstimatedRows: int64(sort.PlanRows), Message: msg, Fix: fix}
}

func scanProblem(scan explainNode, total float64, limit int, key string) Problem {
	table := tableName(scan)
	w := where(scan, key)
	msg := fmt.Sprintf("every pass reads the whole table %s (~%d rows) to find %d", table, int64(total), limit)
	fix := "an index matching the query's WHERE"
	if cols := filterColumns(w); len(cols) > 0 {
		fix = fmt.Sprintf("an index on %s (%s), or one on %s (%s) WHERE %s", table, strings.Join(cols, ", "), table, key, w)
	} else if w != "" {
		fix = fmt.Sprintf("an index on %s (%s) WHERE %s", table, key, w)
	}
	return Problem{Kind: "scan", Table: table, EstimatedRows: int64(total), Message: msg, Fix: fix}
}

// firstScan is the first node under n that reads a table (n itself when none does).
func firstScan(n explainNode) explainNode {
	if n.Relation != "" {
		return n
	}
	for _, c := range n.Plans {
		if s := firstScan(c); s.Relation != "" {
			return s
		}
	}
	return n
}

func tableName(n explainNode) string {
	switch {
	case n.Relation == "":
		return "the query's tables"
	case n.Schema == "" || n.Schema == "public":
		return n.Relation
	}
	return n.Schema + "." + n.Relation
}

// unqualify drops the scan's alias from column references, and the casts of literals to text.
func unqualify(s string, scan explainNode) string {
	if scan.Alias != "" {
		s = strings.ReplaceAll(s, scan.Alias+".", "")
	}
	return textCast.ReplaceAllString(s, "$1")
}

var textCast = regexp.MustCompile(`('(?:[^']|'')*')::(?:text|character varying)\b`)

// where is the scan's conditions that come from the query (jobsched's own, on the key and the excluded keys, left
// out), as SQL; "" when there are none.
func where(scan explainNode, key string) string {
	var keep []string
	seen := map[string]bool{}
	for _, cond := range []string{scan.IndexCond, scan.RecheckCond, scan.Filter} {
		for _, c := range conjuncts(unqualify(cond, scan)) {
			if seen[c] || strings.Contains(c, "SubPlan") || c == key+" IS NOT NULL" || c == pq.QuoteIdentifier(key)+" IS NOT NULL" {
				continue
			}
			seen[c] = true
			keep = append(keep, c)
		}
	}
	return strings.Join(keep, " AND ")
}

// conjuncts splits a condition as EXPLAIN prints it at its top-level ANDs, each without its outer parentheses.
func conjuncts(cond string) []string {
	cond = strings.TrimSpace(cond)
	if cond == "" {
		return nil
	}
	cond = stripParens(cond)
	var out []string
	start := 0
	outsideQuotes(cond, func(i, depth int) bool {
		if i >= start && depth == 0 && strings.HasPrefix(cond[i:], " AND ") {
			out = append(out, stripParens(strings.TrimSpace(cond[start:i])))
			start = i + len(" AND ")
		}
		return true
	})
	return append(out, stripParens(strings.TrimSpace(cond[start:])))
}

// stripParens removes parentheses that enclose all of s.
func stripParens(s string) string {
	for len(s) >= 2 && s[0] == '(' && s[len(s)-1] == ')' {
		enclosing := true
		outsideQuotes(s, func(i, depth int) bool {
			// The first parenthesis closes before the end: not one enclosing pair.
			enclosing = !(s[i] == ')' && depth == 0 && i < len(s)-1)
			return enclosing
		})
		if !enclosing {
			return s
		}
		s = strings.TrimSpace(s[1 : len(s)-1])
	}
	return s
}

// outsideQuotes is the one scanner of SQL text that conjuncts and stripParens share: it calls visit with each byte
// of s that is outside a '...' literal (a doubled ” inside one ends and reopens it: the same thing) and the depth
// of parentheses around that byte ('(' and ')' have the depth outside their pair), until visit returns false.
func outsideQuotes(s string, visit func(i, depth int) bool) {
	depth, quoted := 0, false
	for i := range len(s) {
		switch c := s[i]; {
		case c == '\'':
			quoted = !quoted
			continue
		case quoted:
			continue
		case c == ')':
			depth--
		}
		if !visit(i, depth) {
			return
		}
		if s[i] == '(' {
			depth++
		}
	}
}

// filterColumns are the columns of conditions "column OP value" in w, in order, each once.
func filterColumns(w string) []string {
	var cols []string
	seen := map[string]bool{}
	for _, c := range conjuncts(w) {
		if m := simpleCond.FindStringSubmatch(c); m != nil && !seen[m[1]] {
			seen[m[1]] = true
			cols = append(cols, m[1])
		}
	}
	return cols
}

var simpleCond = regexp.MustCompile(`^([a-z_][a-z0-9_]*|"(?:[^"]|"")+") (?:=|<|<=|>|>=|IS NULL|IS NOT NULL|~~)`)
