// Package rows reads the tasks a pass may schedule: from PostgreSQL (the product) or from a JSON-lines file (dry-run
// in CI). Either way a task is a Row: its key and its columns rendered as text, in the query's column order.
package rows

import "context"

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
}

// Source is where rows come from.
type Source interface {
	// Select returns at most limit rows, in the source's order, whose key is not in exclude and not NULL.
	Select(ctx context.Context, exclude []string, limit int) ([]Row, error)
	// Count counts the rows Select would return with no limit, stopping at max (so the answer is at most max).
	Count(ctx context.Context, exclude []string, max int) (int, error)
	// Selected returns which of keys the query returns now (NULL keys never match), in the order of keys, each once:
	// one read, whatever the backlog.
	Selected(ctx context.Context, keys []string) ([]string, error)
	// Lookup returns the rows of keys that the query returns now, in its order: one read, pushed down like Selected.
	Lookup(ctx context.Context, keys []string) ([]Row, error)
}
