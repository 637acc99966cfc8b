package rows

import (
	"context"
	"database/sql"
	"encoding/base64"
	"errors"
	"fmt"
	"math"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/lib/pq"

	"github.com/jobsched/jobsched/pkg/config"
)

// Postgres selects rows with the configured query, in one READ ONLY transaction per call, with the keys that already
// have a Job excluded and the LIMIT pushed into the statement, so the work does not grow with the backlog.
type Postgres struct {
	db      *sql.DB
	query   string // the user's query, trailing semicolons removed
	key     string // quoted key column
	keyName string
	timeout time.Duration
}

// OpenPostgres prepares a connection pool for dsn; nothing is contacted until the first call.
func OpenPostgres(dsn string, src config.Source) (*Postgres, error) {
	connector, err := pq.NewConnector(dsn)
	if err != nil {
		return nil, &config.Error{Err: fmt.Errorf("source: the PostgreSQL DSN is not valid: %s", dsnErrorText(err, dsn))}
	}
	db := sql.OpenDB(connector)
	db.SetMaxOpenConns(1)
	return &Postgres{
		db:      db,
		query:   strings.TrimRight(strings.TrimSpace(src.Query), "; \t\n"),
		key:     pq.QuoteIdentifier(src.Key),
		keyName: src.Key,
		timeout: src.Timeout.Duration,
	}, nil
}

// dsnErrorText is why dsn is not valid, without the DSN: net/url's parse errors quote the whole URL, and lib/pq's
// `missing "="` error quotes a whole word of a key=value DSN (all of a mistyped URL), either of which holds the password.
func dsnErrorText(err error, dsn string) string {
	var urlErr *url.Error
	if errors.As(err, &urlErr) {
		return "not a valid URL: " + urlErr.Err.Error()
	}
	msg := err.Error()
	for _, word := range strings.Fields(dsn) {
		msg = strings.ReplaceAll(msg, word, "…")
	}
	return msg
}

// Close releases the pool.
func (p *Postgres) Close() error { return p.db.Close() }

// selectSQL wraps the query: the subquery keeps its ORDER BY, and the filter and LIMIT outside it do not reorder rows.
// The key is compared in its own type (the array parameter takes the column's type), so an index on it can be used.
func (p *Postgres) selectSQL() string {
	return "SELECT * FROM (\n" + p.query + "\n) AS jobsched_q WHERE jobsched_q." + p.key +
		" IS NOT NULL AND NOT (jobsched_q." + p.key + " = ANY($1)) LIMIT $2"
}

func (p *Postgres) countSQL() string {
	return "SELECT count(*) FROM (SELECT 1 FROM (\n" + p.query + "\n) AS jobsched_q WHERE jobsched_q." + p.key +
		" IS NOT NULL AND NOT (jobsched_q." + p.key + " = ANY($1)) LIMIT $2) AS jobsched_c"
}

// Select implements Source.
func (p *Postgres) Select(ctx context.Context, exclude []string, limit int) ([]Row, error) {
	if limit <= 0 {
		return nil, nil
	}
	var out []Row
	err := p.readOnly(ctx, func(tx *sql.Tx) error {
		rs, err := tx.QueryContext(ctx, p.selectSQL(), pq.Array(nonNil(exclude)), limit)
		if err != nil {
			return err
		}
		defer rs.Close()
		out, err = p.scan(rs)
		return err
	})
	return out, err
}

// Count implements Source.
func (p *Postgres) Count(ctx context.Context, exclude []string, max int) (int, error) {
	var n int
	err := p.readOnly(ctx, func(tx *sql.Tx) error {
		return tx.QueryRowContext(ctx, p.countSQL(), pq.Array(nonNil(exclude)), max).Scan(&n)
	})
	return n, err
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// readOnly runs fn in a READ ONLY transaction with the statement timeout; it never commits anything.
func (p *Postgres) readOnly(ctx context.Context, fn func(*sql.Tx) error) error {
	tx, err := p.db.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return classify("connecting to PostgreSQL", err)
	}
	defer tx.Rollback() //nolint:errcheck // read-only: there is nothing to keep
	if ms := p.timeout.Milliseconds(); ms > 0 {
		if _, err := tx.ExecContext(ctx, "SET LOCAL statement_timeout = "+strconv.FormatInt(ms, 10)); err != nil {
			return classify("setting statement_timeout", err)
		}
	}
	if err := fn(tx); err != nil {
		return classify("running source.query", err)
	}
	return nil
}

// classify marks errors that say the query itself is wrong (syntax, unknown column, permission, an attempt to write
// in the READ ONLY transaction, a feature not supported there such as a data-modifying WITH) as configuration errors;
// everything else is a run-time error.
func classify(what string, err error) error {
	var pqErr *pq.Error
	if errors.As(err, &pqErr) {
		code := string(pqErr.Code)
		if strings.HasPrefix(code, "42") || code == "25006" || code == "0A000" {
			return &config.Error{Err: fmt.Errorf("source.query: %s: %w", what, err)}
		}
	}
	return fmt.Errorf("%s: %w", what, err)
}

func (p *Postgres) scan(rs *sql.Rows) ([]Row, error) {
	types, err := rs.ColumnTypes()
	if err != nil {
		return nil, err
	}
	keyAt := -1
	for i, t := range types {
		if t.Name() == p.keyName {
			keyAt = i
		}
	}
	if keyAt < 0 {
		return nil, &config.Error{Err: fmt.Errorf("source.key: the query returns no column %q", p.keyName)}
	}
	vals := make([]any, len(types))
	ptrs := make([]any, len(types))
	for i := range vals {
		ptrs[i] = &vals[i]
	}
	var out []Row
	for rs.Next() {
		if err := rs.Scan(ptrs...); err != nil {
			return nil, err
		}
		row := Row{Columns: make([]Column, len(types))}
		for i, t := range types {
			row.Columns[i] = Column{Name: t.Name()}
			if vals[i] == nil {
				row.Columns[i].Null = true
				continue
			}
			row.Columns[i].Value = render(t.DatabaseTypeName(), vals[i])
		}
		row.Key = row.Columns[keyAt].Value
		out = append(out, row)
	}
	return out, rs.Err()
}

// render gives a column value the text the SPEC promises: text as is, numbers and booleans in their SQL text form,
// timestamps RFC 3339 in UTC, json/jsonb as JSON text, bytea base64. Other types (numeric, uuid, arrays, intervals…)
// arrive from lib/pq as their PostgreSQL text form and are kept as is.
func render(dbType string, v any) string {
	switch v := v.(type) {
	case []byte:
		if dbType == "BYTEA" {
			return base64.StdEncoding.EncodeToString(v)
		}
		return string(v)
	case string:
		return v
	case int64:
		return strconv.FormatInt(v, 10)
	case float64:
		if dbType == "FLOAT4" {
			return formatFloat(v, 32)
		}
		return formatFloat(v, 64)
	case bool:
		return strconv.FormatBool(v)
	case time.Time:
		switch dbType {
		case "DATE":
			return v.Format(time.DateOnly)
		case "TIME":
			return v.Format("15:04:05.999999")
		case "TIMETZ":
			return v.Format("15:04:05.999999Z07:00")
		}
		return v.UTC().Format(time.RFC3339Nano)
	}
	return fmt.Sprint(v)
}

// formatFloat prints like PostgreSQL 12+: shortest exact digits, exponent form below 1e-4 or from 1e15 (1e6 for real).
func formatFloat(f float64, bits int) string {
	switch {
	case math.IsNaN(f):
		return "NaN"
	case math.IsInf(f, 1):
		return "Infinity"
	case math.IsInf(f, -1):
		return "-Infinity"
	}
	limit := 15
	if bits == 32 {
		limit = 6
	}
	if f != 0 {
		// The exponent of the shortest digits themselves: math.Log10 is inexact (Log10(1e15) < 15).
		e := strconv.FormatFloat(f, 'e', -1, bits)
		if exp, _ := strconv.Atoi(e[strings.IndexByte(e, 'e')+1:]); exp < -4 || exp >= limit {
			return e
		}
	}
	return strconv.FormatFloat(f, 'f', -1, bits)
}
