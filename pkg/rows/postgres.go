package rows

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/lib/pq"

	"github.com/jobsched/jobsched/pkg/config"
	"github.com/jobsched/jobsched/pkg/pgdial"
	"github.com/jobsched/jobsched/pkg/pgdsn"
)

// Postgres selects rows with the configured query, in one READ ONLY transaction per call, with the keys that already
// have a Job excluded and the LIMIT pushed into the statement, so the work does not grow with the backlog.
type Postgres struct {
	*pool
	query   string // the user's query, trailing semicolons removed
	key     string // quoted key column
	keyName string
	timeout time.Duration

	group    *PerGroup // nil: no group column
	groupCol string    // quoted group column

	keyType string // the key column's database type name, learned by the first read
	columns int    // how many columns the query returns, learned with keyType

	cancel        string // source.cancelQuery, trailing semicolons removed; "" when none (see cancel.go)
	cancelLearned bool   // its key column was checked by a read (learnCancel)
}

// pool is what the sources of one install share (see Share): the connection pool and what guards it.
type pool struct {
	db      *sql.DB
	guard   *pgdial.Guard
	connect time.Duration // the connect timeout
	secrets []string      // what of the DSN may be the password: never in an error
	turn    chan struct{} // one read at a time: the pool has one connection, and the guard aborts all it has
	// failed is the error of the last read that could not connect, and when it ended: a read within the connect
	// timeout after it fails at once with it, so that a pass (its reads, one per queue, then the query doctor's)
	// pays the timeout once, not once per read. Read and written only while holding turn.
	failed   error
	failedAt time.Time
}

// source is a Postgres reading src's query on pl.
func (pl *pool) source(src config.Source, o options) *Postgres {
	p := &Postgres{
		pool:    pl,
		query:   strings.TrimRight(strings.TrimSpace(src.Query), "; \t\n"),
		key:     pq.QuoteIdentifier(src.Key),
		keyName: src.Key,
		timeout: src.Timeout.Duration,
		group:   o.group,
		cancel:  strings.TrimRight(strings.TrimSpace(src.CancelQuery), "; \t\n"),
	}
	if o.group != nil {
		p.groupCol = pq.QuoteIdentifier(o.group.Column)
	}
	return p
}

// DefaultConnectTimeout bounds connecting (TCP and the startup handshake) when neither the DSN's connect_timeout nor
// PGCONNECT_TIMEOUT sets a positive one: lib/pq would otherwise wait for ever on a host that does not answer.
const DefaultConnectTimeout = 10 * time.Second

// OpenPostgres prepares a connection pool for dsn; nothing is contacted until the first call. No error it or the
// Postgres returns holds the DSN's password. opts may give a PerGroup.
func OpenPostgres(dsn string, src config.Source, opts ...Option) (*Postgres, error) {
	o, err := buildOptions(opts)
	if err != nil {
		return nil, err
	}
	cfg, err := pgdsn.Parse(dsn)
	if err != nil {
		return nil, &config.Error{Err: err}
	}
	if cfg.ConnectTimeout <= 0 {
		cfg.ConnectTimeout = DefaultConnectTimeout
	}
	connector, err := pgdsn.Connector(cfg, dsn)
	if err != nil {
		return nil, &config.Error{Err: err}
	}
	guard := pgdial.New()
	connector.Dialer(guard)
	db := sql.OpenDB(connector)
	db.SetMaxOpenConns(1)
	pl := &pool{db: db, guard: guard, connect: cfg.ConnectTimeout, secrets: pgdsn.Secrets(dsn, cfg.Password),
		turn: make(chan struct{}, 1)}
	return pl.source(src, o), nil
}

// Close releases the pool.
func (p *Postgres) Close() error { return p.db.Close() }

// typedKeys are the key types compared as values of the type, so that an index on the key can serve Selected, and
// because their text (see columnText) is not always PostgreSQL's ::text of the value. A key that is not the
// rendered text of a value of the type matches no row and is left out before the statement (it would fail it with
// SQLSTATE 22P02). Every other type is compared as text (key::text), which never fails, whatever a Job's annotation
// holds.
var typedKeys = map[string]struct {
	cast  string
	parse func(string) (string, bool) // the key as input text of the type, and whether it is one
}{
	"INT2":        {"int2", parseInt(16)},
	"INT4":        {"int4", parseInt(32)},
	"INT8":        {"int8", parseInt(64)},
	"UUID":        {"uuid", parseUUID},
	"TIMESTAMPTZ": {"timestamptz", parseTime(time.RFC3339Nano)},
	"TIMESTAMP":   {"timestamp", parseTime(time.RFC3339Nano)},
	"TIMETZ":      {"timetz", parseTime("15:04:05.999999Z07:00")},
	"BYTEA": {"bytea", func(s string) (string, bool) {
		b, err := base64.StdEncoding.DecodeString(s)
		return `\x` + hex.EncodeToString(b), err == nil
	}},
}

func parseInt(bits int) func(string) (string, bool) {
	return func(s string) (string, bool) {
		_, err := strconv.ParseInt(s, 10, bits)
		return s, err == nil
	}
}

var uuidText = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$`)

func parseUUID(s string) (string, bool) { return s, uuidText.MatchString(s) }

func parseTime(layout string) func(string) (string, bool) {
	return func(s string) (string, bool) {
		_, err := time.Parse(layout, s)
		return s, err == nil
	}
}

// keyArray is the key column as compared with $1, its array type, and the array of keys to pass as $1: typed keys
// that parse as the column's type (a key that does not is dropped: it can match nothing), else the keys as text.
func (p *Postgres) keyArray(keys []string) (col, arrayType string, arg any) {
	col = "jobsched_q." + p.key
	t, ok := typedKeys[p.keyType]
	if !ok {
		return col + "::text", "text[]", pq.Array(nonNil(keys))
	}
	vals := []string{}
	for _, k := range keys {
		if v, ok := t.parse(k); ok {
			vals = append(vals, v)
		}
	}
	return col, t.cast + "[]", pq.Array(vals)
}

// keyMatch is the condition "the key is one of $1" and the array to pass as $1.
func (p *Postgres) keyMatch(keys []string) (string, any) {
	col, arrayType, arg := p.keyArray(keys)
	return col + " = ANY($1::" + arrayType + ")", arg
}

// keyExcluded is the condition "the key is not one of $1" and the array to pass as $1. It is a NOT IN over the
// unnested array, which PostgreSQL runs as one hashed subplan built once per read: `NOT (key = ANY($1))` is hashed
// too, but the planner estimates it element by element, so its planning grows with the keys (BenchmarkSelectExcluded
// measures both). It stays a filter: an anti-join may reorder the rows.
func (p *Postgres) keyExcluded(keys []string) (string, any) {
	col, arrayType, arg := p.keyArray(keys)
	return col + " NOT IN (SELECT unnest($1::" + arrayType + "))", arg
}

// selectSQL wraps the query: the subquery keeps its ORDER BY, and the filter and LIMIT outside it do not reorder rows.
// excluded is the condition of keyExcluded.
func (p *Postgres) selectSQL(excluded string) string {
	return "SELECT * FROM (\n" + p.query + "\n) AS jobsched_q WHERE jobsched_q." + p.key +
		" IS NOT NULL AND " + excluded + " LIMIT $2"
}

// groupText is the row's group as the read compares it: the group column's own text, "" for NULL.
func (p *Postgres) groupText() string {
	return "coalesce(jobsched_q." + p.groupCol + "::text, '')"
}

// selectGroupSQL is selectSQL with a PerGroup: the query's rows are numbered in the order the query returns them
// (jobsched_ord), the groups at their cap are left out, each row gets its rank in its group (jobsched_n), and a row is
// kept when its rank is within its group's room, Max ($5) − held; the result is sorted back into the query's order.
// $3 and $4 are the held groups and their counts. Three columns follow the query's: the group's text, the ordinal and
// the rank (scan drops them).
//
// What the order relies on: jobsched_ord is row_number() with an empty window, directly over the query's subquery,
// so it numbers the rows in the order the subquery delivers them. The SQL standard leaves that order open (only an
// outermost ORDER BY fixes one); PostgreSQL keeps it, because it does not flatten a subquery that has an ORDER BY (the
// subquery is planned with its own sort) and a window without PARTITION BY or ORDER BY adds no sort. The read
// without a PerGroup relies on the same (its filter and LIMIT over the subquery keep the subquery's order);
// TestSelectPerGroupKeepsOrder checks it on plans that sort, use an index, and run in parallel.
//
// What it costs: the LIMIT is above the window, so the read goes through every row of the query whose group is not
// at its cap (the ranks need them all) and sorts them by group, where the read without a PerGroup stops at its
// LIMIT; the groups at their cap are left out before the sort. BenchmarkSelectPerGroup measures the two side by side.
func (p *Postgres) selectGroupSQL(excluded string) string {
	return "SELECT jobsched_w.* FROM (SELECT jobsched_o.*, row_number() OVER (PARTITION BY jobsched_o.jobsched_g " +
		"ORDER BY jobsched_o.jobsched_ord) AS jobsched_n FROM (SELECT jobsched_q.*, " + p.groupText() +
		" AS jobsched_g, row_number() OVER () AS jobsched_ord FROM (\n" + p.query + "\n) AS jobsched_q WHERE jobsched_q." +
		p.key + " IS NOT NULL AND " + excluded + " AND " + p.groupText() + " NOT IN (SELECT jobsched_h.g FROM " +
		"unnest($3::text[], $4::int8[]) AS jobsched_h(g, n) WHERE jobsched_h.n >= $5)) AS jobsched_o) AS jobsched_w " +
		"LEFT JOIN unnest($3::text[], $4::int8[]) AS jobsched_h(g, n) ON jobsched_h.g = jobsched_w.jobsched_g " +
		"WHERE jobsched_w.jobsched_n <= $5 - coalesce(jobsched_h.n, 0) ORDER BY jobsched_w.jobsched_ord LIMIT $2"
}

// groupColumns are the columns selectGroupSQL adds to the query's: a query that returns one of them cannot be read
// with a PerGroup (the name would be ambiguous).
var groupColumns = []string{"jobsched_g", "jobsched_ord", "jobsched_n"}

// heldArrays are Selection.Held as the two arrays selectGroupSQL takes ($3 and $4), in the order of the groups.
func heldArrays(held map[string]int) (groups, counts any) {
	gs := make([]string, 0, len(held))
	for g, n := range held {
		if n > 0 {
			gs = append(gs, g)
		}
	}
	slices.Sort(gs)
	ns := make([]int64, len(gs))
	for i, g := range gs {
		ns[i] = int64(held[g])
	}
	return pq.Array(gs), pq.Array(ns)
}

// SelectStatement is the statement Select runs and its arguments, so that the bench (scripts/bench) times the read's
// own SQL rather than a copy.
func (p *Postgres) SelectStatement(s Selection) (string, []any) {
	excluded, arg := p.keyExcluded(s.Exclude)
	if p.group == nil {
		return p.boundedSQL(p.selectSQL(excluded), 3), []any{arg, s.Limit, MaxRowBytes}
	}
	groups, counts := heldArrays(s.Held)
	return p.boundedSQL(p.selectGroupSQL(excluded), 6), []any{arg, s.Limit, groups, counts, p.group.Max, MaxRowBytes}
}

// boundedSQL wraps stmt, a read of rows, so that no row over MaxRowBytes (parameter $n) is sent: PostgreSQL measures
// each row it returns, and a row over the bound comes with every column NULL. Two columns follow stmt's: the key and
// the size (see scan). The size is the sum of the octet_length of the query's columns as text, at least what the wire
// carries of them (pg_column_size is not: it counts a value as stored, compressed); a text value is measured from its
// header, without reading it. Before the first read has learned the query's columns, the row is measured as one
// text (the row's literal), which is the same bound but reads the values. Only the rows stmt returns are measured:
// the bound sits above its LIMIT, and each row of stmt is one row of the result, in stmt's order (a nested loop over
// stmt, which keeps its ORDER BY as a subquery with a LIMIT or an ORDER BY).
func (p *Postgres) boundedSQL(stmt string, n int) string {
	size := "(SELECT octet_length(jobsched_b.*::text) AS n)"
	if p.columns > 0 {
		cols, sum := make([]string, p.columns), make([]string, p.columns)
		for i := range cols {
			cols[i] = "jobsched_c" + strconv.Itoa(i+1)
			sum[i] = "coalesce(octet_length(jobsched_p." + cols[i] + "::text)::int8, 0)" // a sum of int4 may overflow
		}
		// The query's columns by position: their names may repeat, or be jobsched's own.
		size = "(SELECT " + strings.Join(sum, " + ") + " AS n FROM (SELECT jobsched_b.*) AS jobsched_p(" +
			strings.Join(cols, ", ") + "))"
	}
	return "SELECT jobsched_r.*, jobsched_b." + p.key + ", jobsched_s.n FROM (" + stmt + ") AS jobsched_b " +
		"CROSS JOIN LATERAL " + size + " AS jobsched_s " +
		"LEFT JOIN LATERAL (SELECT jobsched_b.*) AS jobsched_r ON jobsched_s.n <= $" + strconv.Itoa(n)
}

// extraColumns is how many columns the statement of Select or Lookup returns after the query's: the group's text
// (and, for Select, the ordinal and the rank), then the two of boundedSQL.
func (p *Postgres) extraColumns(lookup bool) int {
	switch {
	case p.group == nil:
		return boundColumns
	case lookup:
		return 1 + boundColumns
	}
	return 3 + boundColumns
}

// boundColumns are the columns boundedSQL adds: the key and the row's size.
const boundColumns = 2

func (p *Postgres) countSQL(excluded string) string {
	return "SELECT count(*) FROM (SELECT 1 FROM (\n" + p.query + "\n) AS jobsched_q WHERE jobsched_q." + p.key +
		" IS NOT NULL AND " + excluded + " LIMIT $2) AS jobsched_c"
}

func (p *Postgres) selectedSQL(match string) string {
	return "SELECT jobsched_q." + p.key + " FROM (\n" + p.query + "\n) AS jobsched_q WHERE jobsched_q." + p.key +
		" IS NOT NULL AND " + match
}

// Select implements Source.
func (p *Postgres) Select(ctx context.Context, s Selection) ([]Row, error) {
	if s.Limit <= 0 {
		return nil, nil
	}
	var out []Row
	err := p.readOnly(ctx, func(tx *sql.Tx) error {
		stmt, args := p.SelectStatement(s)
		rs, err := tx.QueryContext(ctx, stmt, args...)
		if err != nil {
			return p.inQuery(stmt, err)
		}
		defer rs.Close()
		out, err = p.scan(rs, p.extraColumns(false))
		if err = p.inQuery(stmt, err); err != nil {
			return err
		}
		rs.Close()
		return p.markCancelled(ctx, tx, out)
	})
	return out, err
}

// Count implements Source.
func (p *Postgres) Count(ctx context.Context, exclude []string, max int) (int, error) {
	var n int
	err := p.readOnly(ctx, func(tx *sql.Tx) error {
		excluded, arg := p.keyExcluded(exclude)
		stmt := p.countSQL(excluded)
		return p.inQuery(stmt, tx.QueryRowContext(ctx, stmt, arg, max).Scan(&n))
	})
	return n, err
}

// Selected implements Source: the keys of keys that the query returns now, in the order of keys, each once.
func (p *Postgres) Selected(ctx context.Context, keys []string) ([]string, error) {
	if len(keys) == 0 {
		return nil, nil
	}
	found := map[string]bool{}
	err := p.readOnly(ctx, func(tx *sql.Tx) error {
		match, arg := p.keyMatch(keys)
		stmt := p.selectedSQL(match)
		rs, err := tx.QueryContext(ctx, stmt, arg)
		if err != nil {
			return p.inQuery(stmt, err)
		}
		defer rs.Close()
		types, err := rs.ColumnTypes()
		if err != nil {
			return err
		}
		for rs.Next() {
			var v any
			if err := rs.Scan(&v); err != nil {
				return err
			}
			found[columnText(types[0].DatabaseTypeName(), v)] = true
		}
		return p.inQuery(stmt, rs.Err())
	})
	if err != nil {
		return nil, err
	}
	return selectedInOrder(keys, found), nil
}

// Lookup implements Source.
func (p *Postgres) Lookup(ctx context.Context, keys []string) ([]Row, error) {
	if len(keys) == 0 {
		return nil, nil
	}
	var out []Row
	err := p.readOnly(ctx, func(tx *sql.Tx) error {
		match, arg := p.keyMatch(keys)
		stmt := "SELECT * FROM (\n" + p.query + "\n) AS jobsched_q WHERE jobsched_q." + p.key + " IS NOT NULL AND " + match
		if p.group != nil {
			stmt = "SELECT jobsched_q.*, " + p.groupText() + " AS jobsched_g FROM (\n" + p.query + "\n) AS jobsched_q WHERE jobsched_q." +
				p.key + " IS NOT NULL AND " + match
		}
		stmt = p.boundedSQL(stmt, 2)
		rs, err := tx.QueryContext(ctx, stmt, arg, MaxRowBytes)
		if err != nil {
			return p.inQuery(stmt, err)
		}
		defer rs.Close()
		out, err = p.scan(rs, p.extraColumns(true))
		return p.inQuery(stmt, err)
	})
	return out, err
}

// Ping implements Source: one SELECT in the read's READ ONLY transaction, under source.timeout and the pass's
// deadline, like every read.
func (p *Postgres) Ping(ctx context.Context) error {
	return p.readOnly(ctx, func(tx *sql.Tx) error {
		var one int
		return tx.QueryRowContext(ctx, "SELECT $1::int4", 1).Scan(&one)
	})
}

func selectedInOrder(keys []string, found map[string]bool) []string {
	var out []string
	for _, k := range keys {
		if found[k] {
			out = append(out, k)
			delete(found, k)
		}
	}
	return out
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// readOnly runs fn in a READ ONLY transaction with the statement timeout; it never commits anything. When ctx ends
// the connection's reads and writes fail at once, even on a server that accepted the connection and never answers
// (lib/pq's own cancel request would wait on that server). The first read learns the key column's type.
func (p *Postgres) readOnly(ctx context.Context, fn func(*sql.Tx) error) (err error) {
	defer func() { err = ended(ctx, err) }()
	select {
	case p.turn <- struct{}{}:
		defer func() { <-p.turn }()
	case <-ctx.Done():
		return fmt.Errorf("waiting for the previous read: %w", ctx.Err())
	}
	if err := ctx.Err(); err != nil {
		return p.redact(fmt.Errorf("connecting to PostgreSQL: %w", err))
	}
	if p.failed != nil && time.Since(p.failedAt) < p.connect {
		return p.failed
	}
	stop := p.guard.Watch(ctx)
	defer stop()
	conn, err := p.db.Conn(ctx)
	var tx *sql.Tx
	if err == nil {
		if tx, err = conn.BeginTx(ctx, &sql.TxOptions{ReadOnly: true}); err != nil {
			conn.Close()
		}
	}
	if err != nil {
		err = p.redact(classify("connecting to PostgreSQL", err))
		if ctx.Err() == nil {
			p.failed, p.failedAt = err, time.Now()
		}
		return err
	}
	p.failed = nil
	defer clean(ctx, conn)
	defer tx.Rollback() //nolint:errcheck // read-only: there is nothing to keep
	if ms := p.timeout.Milliseconds(); ms > 0 {
		// set_config(..., true) is SET LOCAL, with the value as a parameter (see learnKeyType).
		if _, err := tx.ExecContext(ctx, "SELECT set_config('statement_timeout', $1, true)", strconv.FormatInt(ms, 10)); err != nil {
			return p.redact(classify("setting statement_timeout", err))
		}
	}
	if p.keyType == "" {
		if err := p.learnKeyType(ctx, tx); err != nil {
			return p.redact(err)
		}
	}
	if p.cancel != "" && !p.cancelLearned {
		if err := p.learnCancel(ctx, tx); err != nil {
			return p.redact(err)
		}
	}
	if err := fn(tx); err != nil {
		return p.redact(classify("running source.query", err))
	}
	return nil
}

// clean ends, after the read's transaction, what its query may have left in the session: the pool keeps its one
// connection for the next read and the next pass (status -w, tick --fill-for), and a session-level advisory lock, a
// temporary table, a setting, a LISTEN or a prepared statement would outlive the read. DISCARD ALL ends them; a
// connection it cannot clean (ctx ended, the server is gone) is closed, never reused. It is cheaper than a session
// per read (a connect, with SCRAM, each time) and keeps the one connection a role's CONNECTION LIMIT may allow (a
// new session can be refused while the old one's backend is still exiting). What it does not end, a connection a
// function opened elsewhere (dblink, postgres_fdw), is what the role check of the query doctor warns about. The
// text is fixed, with no parameter: like the driver's BEGIN and ROLLBACK it goes in the simple-query protocol.
func clean(ctx context.Context, conn *sql.Conn) {
	if _, err := conn.ExecContext(ctx, "DISCARD ALL"); err != nil {
		_ = conn.Raw(func(any) error { return driver.ErrBadConn }) // database/sql closes the connection
	}
	conn.Close()
}

// redact is pgdsn.Redact with what of the DSN may be the password; a configuration error stays one.
func (p *Postgres) redact(err error) error {
	out := pgdsn.Redact(err, p.secrets)
	if out != err && config.IsConfigError(err) {
		return &config.Error{Err: out}
	}
	return out
}

// ended says that ctx ended a failed read: the error is then context.Canceled or context.DeadlineExceeded as well.
func ended(ctx context.Context, err error) error {
	if err == nil || ctx.Err() == nil || errors.Is(err, ctx.Err()) {
		return err
	}
	return fmt.Errorf("%w: %w", ctx.Err(), err)
}

// learnKeyType reads the key column's type from the query's result columns (LIMIT 0: no row is read). Like every
// statement jobsched sends, it has a parameter: lib/pq sends a statement without one in the simple-query protocol,
// which runs every statement of the text, and a query could then end the READ ONLY transaction (COMMIT; ...) and
// write. With the extended protocol the server parses the text as one statement, or refuses it.
func (p *Postgres) learnKeyType(ctx context.Context, tx *sql.Tx) error {
	names, keyType, err := p.resultColumns(ctx, tx, "source.query", p.query)
	if err != nil {
		return err
	}
	if keyType == "" {
		return p.noKeyColumn(names)
	}
	if p.group != nil && !slices.Contains(names, p.group.Column) {
		return noColumn("limits.perGroup.column", "column", p.group.Column, names)
	}
	if p.group != nil {
		for _, n := range names {
			if slices.Contains(groupColumns, n) {
				return &config.Error{Err: fmt.Errorf("source.query: the query returns a column named %q, a name the "+
					"read with limits.perGroup adds itself (%s): rename it in the query (AS another name)", n, quoteList(groupColumns))}
			}
		}
	}
	p.keyType, p.columns = keyType, len(names)
	return nil
}

// resultColumns are the names of the columns query (the text of config key source) returns and the type of the
// key column among them ("" when there is none), read with LIMIT 0: no row is read.
func (p *Postgres) resultColumns(ctx context.Context, tx *sql.Tx, source, query string) (names []string, keyType string, _ error) {
	stmt := "SELECT * FROM (\n" + query + "\n) AS jobsched_q LIMIT $1"
	rs, err := tx.QueryContext(ctx, stmt, 0)
	if err != nil {
		return nil, "", classify("running "+source, inQueryOf(source, query, stmt, err))
	}
	defer rs.Close()
	types, err := rs.ColumnTypes()
	if err != nil {
		return nil, "", classify("running "+source, err)
	}
	names = make([]string, len(types))
	for i, t := range types {
		names[i] = t.Name()
		if t.Name() == p.keyName && keyType == "" {
			keyType = t.DatabaseTypeName()
		}
	}
	return names, keyType, nil
}

// noKeyColumn is the error of a query that returns no column named source.key.
func (p *Postgres) noKeyColumn(names []string) error {
	return noColumn("source.key", "key", p.keyName, names)
}

// noColumn is the error of a query that returns no column name, which the config key at path (whose last part is
// setting) names.
func noColumn(path, setting, name string, names []string) error {
	msg := fmt.Sprintf("%s: the query returns no column %q (it returns %s)", path, name, quoteList(names))
	for _, n := range names {
		if n == strings.ToLower(name) && n != name {
			msg += fmt.Sprintf("; PostgreSQL folds unquoted names to lower case: set %s: %s, or quote the name in the query (AS %s)",
				setting, n, pq.QuoteIdentifier(name))
			break
		}
	}
	return &config.Error{Err: errors.New(msg)}
}

func quoteList(names []string) string {
	if len(names) == 0 {
		return "no columns"
	}
	q := make([]string, len(names))
	for i, n := range names {
		q[i] = strconv.Quote(n)
	}
	return strings.Join(q, ", ")
}

// queryError is the database's error about a statement jobsched built around source.query: its position is given
// in the user's query (jobsched's wrapper never shows), and known mistakes get a hint.
type queryError struct {
	pq     *pq.Error
	source string // the key of the query: source.query or source.cancelQuery
	where  string // "at line L, column C of source.query", or "" when the server gave no position
	hint   string
}

// wrapperTail is jobsched's text after the query, where the server quotes the statement from a token on (an
// unclosed comment or quote runs to its end).
var wrapperTail = regexp.MustCompile(`(?s)\n\) AS jobsched_q.*?"`)

func (e *queryError) Error() string {
	msg := "pq: " + wrapperTail.ReplaceAllString(e.pq.Message, `"`)
	if e.where != "" {
		msg += " " + e.where
	}
	msg += " (" + string(e.pq.Code) + ")"
	if e.hint != "" {
		msg += "; " + e.hint
	}
	return msg
}

func (e *queryError) Unwrap() error { return e.pq }

// inQuery makes a database error about stmt, which holds p.query between "(\n" and "\n)", a queryError.
func (p *Postgres) inQuery(stmt string, err error) error {
	return inQueryOf("source.query", p.query, stmt, err)
}

// inQueryOf is inQuery for the query text query of config key source (source.query or source.cancelQuery).
func inQueryOf(source, query, stmt string, err error) error {
	var pqErr *pq.Error
	if !errors.As(err, &pqErr) {
		return err
	}
	qe := &queryError{pq: pqErr, source: source}
	if pqErr.Code == "22021" {
		qe.hint = "a value the query returns is not valid UTF-8 (in a SQL_ASCII database any byte can be stored), " +
			"and every read fails until the query changes: convert the column in source.query, e.g. " +
			"convert_from(name::bytea, 'LATIN1') AS name, or encode(name::bytea, 'escape') AS name"
	}
	if pqErr.Code == "42601" && (strings.Contains(pqErr.Message, "multiple commands") || strings.Contains(pqErr.Message, `near ";"`)) {
		qe.hint = source + " must be one SELECT statement, without a ';' inside it"
	}
	pos, perr := strconv.Atoi(pqErr.Position)
	at := strings.Index(stmt, "(\n"+query+"\n)")
	if perr != nil || pos <= 0 || at < 0 {
		return qe
	}
	start := utf8.RuneCountInString(stmt[:at+2]) // runes before the query; Position counts runes from 1
	rel := pos - start
	queryRunes := []rune(query)
	switch {
	case rel < 1:
	case rel > len(queryRunes):
		qe.where = "at the end of " + source
		if qe.hint == "" {
			qe.hint = "is a quote, a /* comment or a parenthesis left open?"
		}
	default:
		before := string(queryRunes[:rel-1])
		line := strings.Count(before, "\n") + 1
		col := utf8.RuneCountInString(before[strings.LastIndexByte(before, '\n')+1:]) + 1
		qe.where = fmt.Sprintf("at line %d, column %d of %s", line, col, source)
	}
	return qe
}

// classify marks errors that say the query itself is wrong (syntax, unknown column, permission, an attempt to write
// in the READ ONLY transaction, a feature not supported there such as a data-modifying WITH, a value the query must
// convert: 22021) as configuration errors;
// everything else is a run-time error.
func classify(what string, err error) error {
	source := "source.query"
	if qe := (*queryError)(nil); errors.As(err, &qe) && qe.source != "" {
		source, what = qe.source, strings.ReplaceAll(what, "source.query", qe.source)
	}
	var pqErr *pq.Error
	if errors.As(err, &pqErr) {
		code := string(pqErr.Code)
		// 25001: the query tries to change the transaction (set_config('transaction_read_only', ...)); 2D000: to end it.
		if strings.HasPrefix(code, "42") || code == "25006" || code == "25001" || code == "2D000" || code == "0A000" ||
			code == "22021" {
			return &config.Error{Err: fmt.Errorf("%s: %s: %w", source, what, err)}
		}
	}
	return fmt.Errorf("%s: %w", what, err)
}

// scan reads the rows of rs, whose last extra columns are jobsched's: the group's text first when there is a group,
// and last the two of boundedSQL, the key and the row's size. A row over MaxRowBytes came with every other column
// NULL: it is its key and its size only.
func (p *Postgres) scan(rs *sql.Rows, extra int) ([]Row, error) {
	all, err := rs.ColumnTypes()
	if err != nil {
		return nil, err
	}
	types := all[:len(all)-extra]
	keyAt := -1
	for i, t := range types {
		if t.Name() == p.keyName {
			keyAt = i
		}
	}
	if keyAt < 0 {
		names := make([]string, len(types))
		for i, t := range types {
			names[i] = t.Name()
		}
		return nil, p.noKeyColumn(names)
	}
	vals := make([]any, len(all))
	ptrs := make([]any, len(all))
	for i := range vals {
		ptrs[i] = &vals[i]
	}
	var out []Row
	for rs.Next() {
		if err := rs.Scan(ptrs...); err != nil {
			return nil, err
		}
		if size, _ := vals[len(all)-1].(int64); size > MaxRowBytes {
			out = append(out, Row{Key: columnText(all[len(all)-2].DatabaseTypeName(), vals[len(all)-2]), Oversize: size})
			continue
		}
		row := Row{Columns: make([]Column, len(types))}
		for i, t := range types {
			row.Columns[i] = Column{Name: t.Name()}
			if vals[i] == nil {
				row.Columns[i].Null = true
				continue
			}
			row.Columns[i].Value = columnText(t.DatabaseTypeName(), vals[i])
		}
		row.Key = row.Columns[keyAt].Value
		if p.group != nil {
			row.Group = columnText(all[len(types)].DatabaseTypeName(), vals[len(types)])
		}
		out = append(out, row)
	}
	return out, rs.Err()
}

// columnText gives a column value the text the README promises: text as is, numbers and booleans in their SQL text form,
// timestamps RFC 3339 in UTC, json/jsonb as JSON text, bytea base64. Other types (numeric, uuid, arrays, intervals…)
// arrive from lib/pq as their PostgreSQL text form and are kept as is.
func columnText(dbType string, v any) string {
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
