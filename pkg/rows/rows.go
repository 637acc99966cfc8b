// Package rows reads the tasks a pass may schedule: from PostgreSQL (the product) or from a JSON-lines file (dry-run
// in CI). Either way a task is a Row: its key and its columns rendered as text, in the query's column order.
//
// Beside it: package pgdsn reads the DSN and keeps its password out of errors, package pgdial is the pool's dialer
// that aborts a read's connections when its context ends, and package querydoctor judges the plan of the read that
// (*Postgres).Explain asks PostgreSQL for.
package rows

import (
	"context"
	"errors"

	"github.com/jobsched/jobsched/pkg/config"
)

// Column is one selected column of a row, rendered as the text its environment variable gets.
type Column struct {
	Name  string
	Value string
	Null  bool // SQL NULL: the variable is not set
}

// Row is one task.
type Row struct {
	Key     string // the rendered value of the key column
	Columns []Column
	// Group is the row's value of the source's group column (PerGroup.Column) as text, "" for NULL; "" when the
	// source has no group column. From PostgreSQL it is the value's own text (column::text), the text the read
	// compares Selection.Held's groups with.
	Group string
	// Oversize is the row's size as text, in bytes, when it is over MaxRowBytes: PostgreSQL measured it and sent
	// only its key, so Columns and Group are empty and the row cannot make a Job. 0 for every other row.
	Oversize int64
	// Cancelled says the source's cancel query (source.cancelQuery) returns the row's key: it gets no Job.
	Cancelled bool
}

// MaxRowBytes bounds a row read from PostgreSQL, as text (all its columns): a larger row never enters the process,
// only its key and its size do. A Job holds at most 1 MiB (render.MaxJobBytes) and a variable 128 KiB, so the bound
// only turns away rows that could make no Job, or only through env.columns leaving most of them out.
const MaxRowBytes = 1 << 20

// Selection says which rows Select returns.
type Selection struct {
	Exclude []string // keys that already have a Job
	Limit   int      // at most this many rows
	// Held is the number of unfinished Jobs of each group, for a source with a PerGroup: at most PerGroup.Max −
	// Held[g] rows of group g are returned, none of a group at its cap. Groups not in Held hold none.
	Held map[string]int
}

// PerGroup caps the rows of each value of a column: a source built with one returns, per read, at most Max − Held[g]
// rows of each group g, in the query's order. A PerGroup with no Column is none.
type PerGroup struct {
	Column string // a column the query returns
	Max    int    // unfinished Jobs per group, at least 1
}

// Option is an optional setting of a source, given when it is built: a PerGroup.
type Option interface{ apply(*options) error }

type options struct {
	group *PerGroup
}

func (g PerGroup) apply(o *options) error {
	if g.Column == "" {
		return nil
	}
	if g.Max < 1 {
		return &config.Error{Err: errors.New("limits.perGroup.maxActive: must be at least 1")}
	}
	o.group = &g
	return nil
}

func buildOptions(opts []Option) (options, error) {
	var o options
	for _, opt := range opts {
		if err := opt.apply(&o); err != nil {
			return options{}, err
		}
	}
	return o, nil
}

// Source is where rows come from.
type Source interface {
	// Select returns at most s.Limit rows, in the source's order, whose key is not in s.Exclude and not NULL; with a
	// PerGroup, at most PerGroup.Max − s.Held[g] of each group g. A row whose key the cancel query returns is
	// returned with Cancelled set (it counts against the limit).
	Select(ctx context.Context, s Selection) ([]Row, error)
	// Count counts the rows Select would return with no limit and no PerGroup, stopping at max (so the answer is at
	// most max).
	Count(ctx context.Context, exclude []string, max int) (int, error)
	// Selected returns which of keys the query returns now (NULL keys never match), in the order of keys, each once:
	// one read, whatever the backlog.
	Selected(ctx context.Context, keys []string) ([]string, error)
	// Lookup returns the rows of keys that the query returns now, in its order: one read, pushed down like Selected.
	Lookup(ctx context.Context, keys []string) ([]Row, error)
	// Cancelled returns which of keys the cancel query (source.cancelQuery) returns now, in the order of keys, each
	// once: one read bounded by keys; nil, with no read, when the source has none or keys is empty.
	Cancelled(ctx context.Context, keys []string) ([]string, error)
	// Ping proves the source answers, at the cost of one read that returns nothing: a pass that has no room to read
	// a row still sees a lost database.
	Ping(ctx context.Context) error
}
