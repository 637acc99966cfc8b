package rows

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"

	"github.com/jobsched/jobsched/pkg/config"
)

// File holds rows read from JSON lines (one object a line, keys in column order), for dry-run without a database.
type File struct {
	rows []Row
	// NullKeys counts the rows left out because their key was missing or null, as the SQL source leaves them out.
	NullKeys int
}

// ReadFile reads a JSON-lines file. Values become text the way PostgreSQL rows do: strings as is, numbers and
// booleans as written, null as NULL, objects and arrays as compact JSON.
func ReadFile(name, key string) (*File, error) {
	f, err := os.Open(name)
	if err != nil {
		return nil, &config.Error{Err: fmt.Errorf("--rows: %w", err)}
	}
	defer f.Close()
	out := &File{}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 64*1024), 16*1024*1024)
	for line := 1; sc.Scan(); line++ {
		text := bytes.TrimSpace(sc.Bytes())
		if len(text) == 0 {
			continue
		}
		row, hasKey, err := parseObject(text, key)
		if err != nil {
			return nil, &config.Error{Err: fmt.Errorf("--rows %s:%d: %w", name, line, err)}
		}
		if !hasKey {
			out.NullKeys++
			continue
		}
		out.rows = append(out.rows, row)
	}
	if err := sc.Err(); err != nil {
		return nil, &config.Error{Err: fmt.Errorf("--rows %s: %w", name, err)}
	}
	return out, nil
}

// parseObject decodes one JSON object keeping its keys' order; hasKey is false when the key column is missing or null.
func parseObject(text []byte, key string) (row Row, hasKey bool, err error) {
	dec := json.NewDecoder(bytes.NewReader(text))
	dec.UseNumber()
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return Row{}, false, errors.New("not a JSON object")
	}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return Row{}, false, err
		}
		name := tok.(string) // object keys are always strings
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return Row{}, false, fmt.Errorf("column %q: %w", name, err)
		}
		col, err := column(name, raw)
		if err != nil {
			return Row{}, false, err
		}
		if name == key && !col.Null {
			row.Key, hasKey = col.Value, true
		}
		row.Columns = append(row.Columns, col)
	}
	if _, err := dec.Token(); err != nil {
		return Row{}, false, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return Row{}, false, errors.New("trailing data after the object")
	}
	return row, hasKey, nil
}

func column(name string, raw json.RawMessage) (Column, error) {
	switch raw[0] {
	case 'n':
		return Column{Name: name, Null: true}, nil
	case '"':
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return Column{}, fmt.Errorf("column %q: %w", name, err)
		}
		return Column{Name: name, Value: s}, nil
	case '{', '[':
		var buf bytes.Buffer
		if err := json.Compact(&buf, raw); err != nil {
			return Column{}, fmt.Errorf("column %q: %w", name, err)
		}
		return Column{Name: name, Value: buf.String()}, nil
	}
	return Column{Name: name, Value: string(raw)}, nil // number, true, false: as written
}

// Select implements Source.
func (f *File) Select(_ context.Context, exclude []string, limit int) ([]Row, error) {
	var out []Row
	for _, r := range f.rows {
		if len(out) >= limit {
			break
		}
		if !slices.Contains(exclude, r.Key) {
			out = append(out, r)
		}
	}
	return out, nil
}

// Count implements Source.
func (f *File) Count(ctx context.Context, exclude []string, max int) (int, error) {
	rows, err := f.Select(ctx, exclude, max)
	return len(rows), err
}
