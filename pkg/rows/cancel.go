package rows

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/jobsched/jobsched/pkg/config"
)

// The cancel query (source.cancelQuery) returns the keys of tasks to cancel. It is never read whole: each statement
// asks it about given keys only, `SELECT key FROM (<cancelQuery>) AS jobsched_q WHERE key = ANY($1)`, so with an
// index on the key a read costs about the keys asked, however many rows the query would return. Two reads ask it:
// Cancelled, about the keys of a pass's unfinished Jobs, and Select, about the rows it is about to return, in the
// same READ ONLY transaction as their read (a row the cancel query returns comes back with Cancelled set).

// Cancelled implements Source: which of keys the cancel query returns now, in the order of keys, each once. With no
// cancel query, or no keys, it reads nothing and returns nil.
func (p *Postgres) Cancelled(ctx context.Context, keys []string) ([]string, error) {
	if p.cancel == "" || len(keys) == 0 {
		return nil, nil
	}
	var out []string
	err := p.readOnly(ctx, func(tx *sql.Tx) error {
		var err error
		out, err = p.cancelledIn(ctx, tx, keys)
		return err
	})
	return out, err
}

// CancelStatement is the statement that asks the cancel query about keys and its arguments (the key column's type
// is learned by the first read), so that a test measures the read's own SQL.
func (p *Postgres) CancelStatement(keys []string) (string, []any) {
	col, arrayType, arg := p.keyArray(keys)
	return "SELECT jobsched_q." + p.key + " FROM (\n" + p.cancel + "\n) AS jobsched_q WHERE " + col +
		" = ANY($1::" + arrayType + ")", []any{arg}
}

// cancelledIn is Cancelled in the transaction tx.
func (p *Postgres) cancelledIn(ctx context.Context, tx *sql.Tx, keys []string) ([]string, error) {
	stmt, args := p.CancelStatement(keys)
	rs, err := tx.QueryContext(ctx, stmt, args...)
	if err != nil {
		return nil, inQueryOf("source.cancelQuery", p.cancel, stmt, err)
	}
	defer rs.Close()
	types, err := rs.ColumnTypes()
	if err != nil {
		return nil, err
	}
	found := map[string]bool{}
	for rs.Next() {
		var v any
		if err := rs.Scan(&v); err != nil {
			return nil, err
		}
		found[columnText(types[0].DatabaseTypeName(), v)] = true
	}
	if err := rs.Err(); err != nil {
		return nil, inQueryOf("source.cancelQuery", p.cancel, stmt, err)
	}
	return selectedInOrder(keys, found), nil
}

// markCancelled sets Cancelled on the rows of out whose key the cancel query returns, in tx: one statement, bounded
// by the rows read. Nothing is read without a cancel query or rows.
func (p *Postgres) markCancelled(ctx context.Context, tx *sql.Tx, out []Row) error {
	if p.cancel == "" || len(out) == 0 {
		return nil
	}
	keys := make([]string, len(out))
	for i, r := range out {
		keys[i] = r.Key
	}
	cancelled, err := p.cancelledIn(ctx, tx, keys)
	if err != nil {
		return err
	}
	is := map[string]bool{}
	for _, k := range cancelled {
		is[k] = true
	}
	for i := range out {
		out[i].Cancelled = is[out[i].Key]
	}
	return nil
}

// learnCancel checks, once, that the cancel query returns a column named source.key that compares with the query's
// key (LIMIT 0: no row is read): the same type, or two types both compared as text.
func (p *Postgres) learnCancel(ctx context.Context, tx *sql.Tx) error {
	names, keyType, err := p.resultColumns(ctx, tx, "source.cancelQuery", p.cancel)
	if err != nil {
		return err
	}
	if keyType == "" {
		return noColumn("source.cancelQuery", "key", p.keyName, names)
	}
	_, typed := typedKeys[keyType]
	_, mainTyped := typedKeys[p.keyType]
	if keyType != p.keyType && (typed || mainTyped) {
		cast := typedKeys[p.keyType].cast
		if cast == "" {
			cast = "text"
		}
		return &config.Error{Err: fmt.Errorf("source.cancelQuery: its column %q is %s and source.query's is %s: "+
			"return the same type (e.g. %s::%s AS %s)", p.keyName, keyType, p.keyType, p.key, cast, p.key)}
	}
	p.cancelLearned = true
	return nil
}
