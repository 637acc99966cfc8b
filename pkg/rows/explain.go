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
// tables the plan reads: the finding's warnings.
func (p *Postgres) Explain(ctx context.Context, exclude []string, limit int) *querydoctor.Finding {
	var plan *querydoctor.Plan
	var acc querydoctor.Access
	rows := map[querydoctor.Table]float64{}
	err := p.readOnly(ctx, func(tx *sql.Tx) error {
		var err error
		if acc, err = access(ctx, tx); err != nil { // first: a plan that cannot be made still has the role's warnings
			return err
		}
		excluded, arg := p.keyExcluded(exclude)
		var doc string
		stmt := "EXPLAIN (FORMAT JSON, VERBOSE) " + p.selectSQL(excluded)
		if err := tx.QueryRowContext(ctx, stmt, arg, max(limit, 1)).Scan(&doc); err != nil {
			return p.inQuery(stmt, err)
		}
		if plan, err = querydoctor.ParsePlan(doc); err != nil {
			return err
		}
		if acc.Tables, err = tableAccess(ctx, tx, plan.Relations()); err != nil {
			return err
		}
		for _, t := range plan.Tables() {
			var n float64
			err := tx.QueryRowContext(ctx, `SELECT c.reltuples::float8 FROM pg_catalog.pg_class c
				JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = $1 AND c.relname = $2`,
				t.Schema, t.Name).Scan(&n)
			if err != nil {
				return err
			}
			rows[t] = n
		}
		return nil
	})
	if err != nil {
		return &querydoctor.Finding{Problems: []querydoctor.Problem{}, Unchecked: "could not EXPLAIN the read: " + err.Error(),
			Warnings: acc.Warnings()}
	}
	f := querydoctor.Diagnose(plan, rows, limit, p.keyName)
	f.Warnings = acc.Warnings()
	return f
}
