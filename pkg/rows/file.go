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
	"strconv"
	"unicode/utf8"

	"github.com/jobsched/jobsched/pkg/config"
	"github.com/jobsched/jobsched/pkg/input"
)

// File holds rows read from JSON lines (one object a line, keys in column order), for dry-run without a database.
type File struct {
	rows  []Row
	group *PerGroup
	// NullKeys counts the rows left out because their key is null, as the SQL source leaves them out.
	NullKeys int
	// Duplicates are the rows left out because an earlier row has the same key, in the file's order: the first row
	// of a key is the task, as a table with a unique key would have it.
	Duplicates []Duplicate
	// Invalid are the rows left out because a value is not what a row can hold (not valid UTF-8, or a \u escape of
	// half a surrogate pair, which is no character), in the file's
	// order: the pass skips them with their line, as it skips a row of the database that cannot make a Job.
	Invalid []Invalid
}

// Invalid is a row left out, with why.
type Invalid struct {
	Key    string
	Line   int
	Reason string
}

// Duplicate is a row whose key an earlier row already has.
type Duplicate struct {
	Key   string
	Line  int // its line
	First int // the line of the row that has the key
}

// MaxLine is the longest line ReadFile reads: one row.
const MaxLine = 16 << 20

// Stdin is the name that makes ReadFile read standard input.
const Stdin = "-"

// ReadFile reads a JSON-lines file, or standard input when name is "-". Values become text the way PostgreSQL rows
// do: strings as is, numbers and booleans as written, null as NULL, objects and arrays as compact JSON. A row
// without the key column is a configuration error (a query always returns its columns); a row whose key is null is
// left out and counted in NullKeys; a row whose key an earlier row has is left out and listed in Duplicates. opts may
// give a PerGroup: then every row needs its column too (a null puts the row in group "").
func ReadFile(name, key string, opts ...Option) (*File, error) {
	return ReadFileContext(context.Background(), name, os.Stdin, key, opts...)
}

// MaxFile bounds what ReadFileContext reads of a file or of standard input: the rows are held in memory.
const MaxFile = 64 << 20

// ReadFileContext is ReadFile of at most MaxFile bytes under ctx, stdin standing for standard input: a file larger
// is refused at its byte MaxFile+1, and a pipe or FIFO that stays open is abandoned when ctx ends (SIGTERM,
// --timeout), which is an error that is not a configuration error.
func ReadFileContext(ctx context.Context, name string, stdin io.Reader, key string, opts ...Option) (*File, error) {
	shown, open := name, func() (io.ReadCloser, error) {
		f, err := os.Open(name)
		if err != nil {
			return nil, &config.Error{Err: fmt.Errorf("--rows: %w", err)}
		}
		return f, nil
	}
	if name == Stdin {
		shown, open = "standard input", func() (io.ReadCloser, error) { return io.NopCloser(stdin), nil }
	}
	f, err := input.Read(ctx, shown, open, MaxFile, func(r io.Reader) (*File, error) { return ReadFrom(r, shown, key, opts...) })
	var tooLarge *input.TooLargeError
	switch {
	case errors.As(err, &tooLarge):
		return nil, &config.Error{Err: fmt.Errorf("--rows: %w", err)}
	case err != nil && ctx.Err() != nil && !config.IsConfigError(err):
		return nil, fmt.Errorf("--rows: %w", err)
	}
	return f, err
}

// ReadFrom reads JSON lines from r as ReadFile does; name says where they come from in errors.
func ReadFrom(r io.Reader, name, key string, opts ...Option) (*File, error) {
	o, err := buildOptions(opts)
	if err != nil {
		return nil, err
	}
	out := &File{group: o.group}
	first := map[string]int{} // key → its line
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64*1024), MaxLine)
	line := 0
	for sc.Scan() {
		line++
		text := bytes.TrimSpace(sc.Bytes())
		if line == 1 {
			text = bytes.TrimPrefix(text, []byte("\ufeff")) // a byte-order mark some editors write
		}
		if len(text) == 0 {
			continue
		}
		row, keyCol, err := parseObject(text, key)
		if err != nil {
			return nil, &config.Error{Err: fmt.Errorf("--rows %s:%d: %w", name, line, err)}
		}
		switch keyCol {
		case keyMissing:
			return nil, &config.Error{Err: fmt.Errorf("--rows %s:%d: the row has no column %q (source.key): every row "+
				"needs the key column (a null key leaves the row out)", name, line, key)}
		case keyNull:
			out.NullKeys++
			continue
		}
		if out.group != nil {
			i := slices.IndexFunc(row.Columns, func(c Column) bool { return c.Name == out.group.Column })
			if i < 0 {
				return nil, &config.Error{Err: fmt.Errorf("--rows %s:%d: the row has no column %q (limits.perGroup.column): "+
					"every row needs the group column (a null puts the row in group \"\")", name, line, out.group.Column)}
			}
			row.Group = row.Columns[i].Value
		}
		if at := invalidUTF8(sc.Bytes()); at >= 0 {
			// encoding/json would replace the bytes by U+FFFD and the Job get another value than the row's.
			out.Invalid = append(out.Invalid, Invalid{Key: row.Key, Line: line,
				Reason: fmt.Sprintf("is not valid UTF-8 (byte %d)", at+1)})
			continue
		}
		if at, esc := loneSurrogate(sc.Bytes()); at >= 0 {
			// encoding/json reads it as U+FFFD too.
			out.Invalid = append(out.Invalid, Invalid{Key: row.Key, Line: line,
				Reason: fmt.Sprintf("holds %s (byte %d), a lone half of a UTF-16 surrogate pair", esc, at+1)})
			continue
		}
		if at, ok := first[row.Key]; ok {
			out.Duplicates = append(out.Duplicates, Duplicate{Key: row.Key, Line: line, First: at})
			continue
		}
		first[row.Key] = line
		out.rows = append(out.rows, row)
	}
	if err := sc.Err(); err != nil {
		if errors.Is(err, bufio.ErrTooLong) {
			return nil, &config.Error{Err: fmt.Errorf("--rows %s:%d: the line is longer than %d bytes, the limit of one row",
				name, line+1, MaxLine)}
		}
		return nil, &config.Error{Err: fmt.Errorf("--rows %s:%d: %w", name, line+1, err)}
	}
	return out, nil
}

// invalidUTF8 is the offset of the first byte of b that is not valid UTF-8, or -1.
func invalidUTF8(b []byte) int {
	for i := 0; i < len(b); {
		r, size := utf8.DecodeRune(b[i:])
		if r == utf8.RuneError && size == 1 {
			return i
		}
		i += size
	}
	return -1
}

// loneSurrogate is the offset and text of the first \u escape in the JSON line b that is half of a UTF-16 surrogate
// pair without its other half, or -1. A backslash outside a string is no JSON: b has been read as an object.
func loneSurrogate(b []byte) (int, string) {
	hex := func(i int) rune { // the \uXXXX at i, or -1
		if i+6 > len(b) || b[i] != '\\' || b[i+1] != 'u' {
			return -1
		}
		n, err := strconv.ParseUint(string(b[i+2:i+6]), 16, 16)
		if err != nil {
			return -1
		}
		return rune(n)
	}
	for i := 0; i < len(b); i++ {
		if b[i] != '\\' {
			continue
		}
		r := hex(i)
		switch {
		case r < 0:
			i++ // an escaped character (\\, \", \n, ...): not the start of another escape
		case r >= 0xd800 && r < 0xdc00:
			if lo := hex(i + 6); lo < 0xdc00 || lo > 0xdfff {
				return i, string(b[i : i+6])
			}
			i += 11 // the pair
		case r >= 0xdc00 && r <= 0xdfff:
			return i, string(b[i : i+6])
		default:
			i += 5
		}
	}
	return -1, ""
}

// What parseObject found of the key column.
const (
	keyMissing = iota
	keyNull
	keyPresent
)

// parseObject decodes one JSON object keeping its keys' order, and says whether the key column is there and not null.
func parseObject(text []byte, key string) (row Row, keyCol int, err error) {
	dec := json.NewDecoder(bytes.NewReader(text))
	dec.UseNumber()
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return Row{}, 0, errors.New("not a JSON object (one JSON object per line)")
	}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return Row{}, 0, perLine(err)
		}
		name := tok.(string) // object keys are always strings
		if slices.ContainsFunc(row.Columns, func(c Column) bool { return c.Name == name }) {
			return Row{}, 0, fmt.Errorf("column %q appears twice in the object", name)
		}
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return Row{}, 0, fmt.Errorf("column %q: %w", name, perLine(err))
		}
		col, err := column(name, raw)
		if err != nil {
			return Row{}, 0, err
		}
		if name == key {
			keyCol = keyNull
			if !col.Null {
				row.Key, keyCol = col.Value, keyPresent
			}
		}
		row.Columns = append(row.Columns, col)
	}
	if _, err := dec.Token(); err != nil {
		return Row{}, 0, perLine(err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return Row{}, 0, errors.New("trailing data after the object (one JSON object per line)")
	}
	return row, keyCol, nil
}

// perLine explains an object cut short by the end of its line: a pretty-printed object spans several lines.
func perLine(err error) error {
	if errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
		return errors.New("the object does not end on its line: write one JSON object per line (not pretty-printed)")
	}
	return err
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

// Select implements Source: the rows in the file's order, with a PerGroup at most Max − Held[g] of each group g.
func (f *File) Select(_ context.Context, s Selection) ([]Row, error) {
	var out []Row
	taken := map[string]int{}
	excluded := set(s.Exclude)
	for _, r := range f.rows {
		if len(out) >= s.Limit {
			break
		}
		if excluded[r.Key] {
			continue
		}
		if f.group != nil {
			if s.Held[r.Group]+taken[r.Group] >= f.group.Max {
				continue
			}
			taken[r.Group]++
		}
		out = append(out, r)
	}
	return out, nil
}

// Selected implements Source.
// Ping implements Source: a file read at start answers.
func (f *File) Ping(context.Context) error { return nil }

func (f *File) Selected(_ context.Context, keys []string) ([]string, error) {
	found := map[string]bool{}
	for _, r := range f.rows {
		found[r.Key] = true
	}
	return selectedInOrder(keys, found), nil
}

// Cancelled implements Source: a file has no cancel query (dry-run --rows shows no cancel).
func (f *File) Cancelled(context.Context, []string) ([]string, error) { return nil, nil }

// Lookup implements Source.
func (f *File) Lookup(_ context.Context, keys []string) ([]Row, error) {
	var out []Row
	wanted := set(keys)
	for _, r := range f.rows {
		if wanted[r.Key] {
			out = append(out, r)
		}
	}
	return out, nil
}

// Count implements Source.
func (f *File) Count(_ context.Context, exclude []string, max int) (int, error) {
	n := 0
	excluded := set(exclude)
	for _, r := range f.rows {
		if n < max && !excluded[r.Key] {
			n++
		}
	}
	return n, nil
}

// set is keys as a set: a pass's read of a large file with many keys excluded stays linear in both.
func set(keys []string) map[string]bool {
	out := make(map[string]bool, len(keys))
	for _, k := range keys {
		out[k] = true
	}
	return out
}
