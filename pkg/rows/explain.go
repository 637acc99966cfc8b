package rows

import (
	"context"
	"database/sql"

	"github.com/jobsched/jobsched/pkg/querydoctor"
)

// Explain implements querydoctor.Explainer: EXPLAIN (never ANALYZE: nothing runs) of the statement Select sends
// without a PerGroup, with its parameters, in the same READ ONLY transaction, and the sizes of the tables it reads
// whole from pg_class; the query doctor judges the plan. The row-size bound around it (boundedSQL) is left out: it
// only measures the rows the statement returns, and would hide the plan's top under its join. Before the plan, in
// the same transaction, it reads what the role may do beyond reading (access), and the privileges it holds on the
// tables the plan reads: the finding's warnings. With source.cancelQuery, the statement that asks it about the
// excluded keys is planned and judged too (Finding.Cancel), as a read of that many keys.
func (p *Postgres) Explain(ctx context.Context, exclude []string, limit int) *querydoctor.Finding {
	var plan, cancel *querydoctor.Plan
	var acc querydoctor.Access
	rows, cancelRows := map[querydoctor.Table]float64{}, map[querydoctor.Table]float64{}
	err := p.readOnly(ctx, func(tx *sql.Tx) error {
		var err error
		if acc, err = access(ctx, tx); err != nil { // first: a plan that cannot be made still has the role's warnings
			return err
		}
		excluded, arg := p.keyExcluded(exclude)
		if plan, err = p.explain(ctx, tx, p.inQuery, rows, p.selectSQL(excluded), arg, max(limit, 1)); err != nil {
			return err
		}
		if p.cancel != "" { // asked about the keys the read excludes, as a pass asks it about its unfinished Jobs'
			stmt, args := p.CancelStatement(exclude)
			inCancel := func(stmt string, err error) error { return inQueryOf("source.cancelQuery", p.cancel, stmt, err) }
			if cancel, err = p.explain(ctx, tx, inCancel, cancelRows, stmt, args...); err != nil {
				return err
			}
		}
		tables := plan.Relations()
		if cancel != nil {
			tables = append(tables, cancel.Relations()...)
		}
		acc.Tables, err = tableAccess(ctx, tx, tables)
		return err
	})
	if err != nil {
		return &querydoctor.Finding{Problems: []querydoctor.Problem{}, Unchecked: "could not EXPLAIN the read: " + err.Error(),
			Warnings: acc.Warnings()}
	}
	f := querydoctor.Diagnose(plan, rows, limit, p.keyName)
	f.Warnings = acc.Warnings()
	if cancel != nil {
		f.Cancel = querydoctor.Diagnose(cancel, cancelRows, len(exclude), p.keyName)
	}
	return f
}

// explain is the plan of stmt with args (EXPLAIN, never run) in tx, and the sizes of the tables it reads whole, into
// rows; inQuery places a database error in the query's text.
func (p *Postgres) explain(ctx context.Context, tx *sql.Tx, inQuery func(string, error) error, rows map[querydoctor.Table]float64,
	stmt string, args ...any) (*querydoctor.Plan, error) {
	var doc string
	stmt = "EXPLAIN (FORMAT JSON, VERBOSE) " + stmt
	if err := tx.QueryRowContext(ctx, stmt, args...).Scan(&doc); err != nil {
		return nil, inQuery(stmt, err)
	}
	plan, err := querydoctor.ParsePlan(doc)
	if err != nil {
		return nil, err
	}
	for _, t := range plan.Tables() {
		var n float64
		err := tx.QueryRowContext(ctx, `SELECT c.reltuples::float8 FROM pg_catalog.pg_class c
			JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = $1 AND c.relname = $2`,
			t.Schema, t.Name).Scan(&n)
		if err != nil {
			return nil, err
		}
		rows[t] = n
	}
	return plan, nil
}
