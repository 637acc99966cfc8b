package rows

import (
	"context"
	"database/sql"

	"github.com/jobsched/jobsched/pkg/querydoctor"
)

// Explain implements querydoctor.Explainer: EXPLAIN (never ANALYZE: nothing runs) of the statement Select sends
// without a PerGroup, with its parameters, in the same READ ONLY transaction, and the sizes of the tables it reads
// whole from pg_class; the query doctor judges the plan. The row-size bound around it (boundedSQL) is left out: it
// only measures the rows the statement returns, and would hide the plan's top under its join.
func (p *Postgres) Explain(ctx context.Context, exclude []string, limit int) *querydoctor.Finding {
	var plan *querydoctor.Plan
	rows := map[querydoctor.Table]float64{}
	err := p.readOnly(ctx, func(tx *sql.Tx) error {
		excluded, arg := p.keyExcluded(exclude)
		var doc string
		stmt := "EXPLAIN (FORMAT JSON, VERBOSE) " + p.selectSQL(excluded)
		if err := tx.QueryRowContext(ctx, stmt, arg, max(limit, 1)).Scan(&doc); err != nil {
			return p.inQuery(stmt, err)
		}
		var err error
		if plan, err = querydoctor.ParsePlan(doc); err != nil {
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
		return &querydoctor.Finding{Problems: []querydoctor.Problem{}, Unchecked: "could not EXPLAIN the read: " + err.Error()}
	}
	return querydoctor.Diagnose(plan, rows, limit, p.keyName)
}
