package rows_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/jobsched/jobsched/pkg/config"
	"github.com/jobsched/jobsched/pkg/rows"
)

func writeRows(t *testing.T, content string) string {
	t.Helper()
	name := filepath.Join(t.TempDir(), "rows.jsonl")
	if err := os.WriteFile(name, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return name
}

func fileKeys(rs []rows.Row) []string {
	out := []string{}
	for _, r := range rs {
		out = append(out, r.Key)
	}
	return out
}

// TestReadFileValues checks the Row of each line: keys in the file's order, columns in each object's order, values
// rendered the way PostgreSQL rows are, rows without a key left out and counted.
func TestReadFileValues(t *testing.T) {
	long := strings.Repeat("x", 200*1024) // longer than bufio.Scanner's default 64 KiB line
	content := `{"id": "a1", "s": "hé \"q\"\n\u00e9", "n": 12.50, "big": 123456789012345678901234567890, "e": 1E+20, "t": true, "f": false, "z": null, "o": {"b": 1, "a": [1, 2]}, "arr": [ 1 , "x" , {} ], "empty": ""}
{"id": 42, "n": -0.0}

  {"n": 1, "id": null}
{"n": 2, "id": null}
{"id": true}
{"id": {"k": [1, 2]}}
{"z": "key last", "id": "c3"}` + "\r\n" +
		`{"id": ""}` + "\n" +
		`{"id": "long", "v": "` + long + `"}` + "\n" +
		"   \t \n" +
		`{"id": "b2"}`
	f, err := rows.ReadFile(writeRows(t, content), "id")
	if err != nil {
		t.Fatalf("ReadFile: %v", err)
	}
	col := func(name, value string) rows.Column { return rows.Column{Name: name, Value: value} }
	want := []rows.Row{
		{Key: "a1", Columns: []rows.Column{
			col("id", "a1"),
			col("s", "hé \"q\"\né"),
			col("n", "12.50"),
			col("big", "123456789012345678901234567890"),
			col("e", "1E+20"),
			col("t", "true"),
			col("f", "false"),
			{Name: "z", Null: true},
			col("o", `{"b":1,"a":[1,2]}`),
			col("arr", `[1,"x",{}]`),
			col("empty", ""),
		}},
		{Key: "42", Columns: []rows.Column{col("id", "42"), col("n", "-0.0")}},
		{Key: "true", Columns: []rows.Column{col("id", "true")}},
		{Key: `{"k":[1,2]}`, Columns: []rows.Column{col("id", `{"k":[1,2]}`)}},
		{Key: "c3", Columns: []rows.Column{col("z", "key last"), col("id", "c3")}},
		{Key: "", Columns: []rows.Column{col("id", "")}},
		{Key: "long", Columns: []rows.Column{col("id", "long"), col("v", long)}},
		{Key: "b2", Columns: []rows.Column{col("id", "b2")}},
	}
	got, err := f.Select(context.Background(), rows.Selection{Limit: 100})
	if err != nil {
		t.Fatalf("Select: %v", err)
	}
	if !reflect.DeepEqual(got, want) {
		if len(got) != len(want) {
			t.Fatalf("Select returned keys %q, want %q", fileKeys(got), fileKeys(want))
		}
		for i := range want {
			if !reflect.DeepEqual(got[i], want[i]) {
				t.Errorf("row %d:\n got %+v\nwant %+v", i, got[i], want[i])
			}
		}
	}
	if f.NullKeys != 2 {
		t.Errorf("NullKeys = %d, want 2", f.NullKeys)
	}
}

// TestReadFileErrors checks that a line that is not one JSON object is a configuration error naming the file and line.
func TestReadFileErrors(t *testing.T) {
	tests := []struct {
		name string
		bad  string
	}{
		{"not JSON", `not json`},
		{"an array", `[{"id": 1}]`},
		{"a string", `"id"`},
		{"a number", `42`},
		{"trailing comma", `{"id": 1,}`},
		{"truncated", `{"id": 1`},
		{"two objects", `{"id": 1} {"id": 2}`},
		{"trailing garbage", `{"id": 1} x`},
		{"bad value", `{"id": tru}`},
		{"unquoted name", `{id: 1}`},
		{"no key column", `{"n": 1}`},
		{"key column in another case", `{"ID": 1}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// The bad line is line 3, after a good line and a blank one.
			name := writeRows(t, `{"id": "ok"}`+"\n\n"+tt.bad+"\n"+`{"id": "after"}`+"\n")
			f, err := rows.ReadFile(name, "id")
			if err == nil {
				got, _ := f.Select(context.Background(), rows.Selection{Limit: 100})
				t.Fatalf("ReadFile accepted %q: %+v", tt.bad, got)
			}
			if !config.IsConfigError(err) {
				t.Errorf("%v is not a configuration error", err)
			}
			if where := fmt.Sprintf("%s:3:", name); !strings.Contains(err.Error(), where) {
				t.Errorf("error %q does not name %q", err, where)
			}
		})
	}
	t.Run("missing file", func(t *testing.T) {
		name := filepath.Join(t.TempDir(), "nope.jsonl")
		_, err := rows.ReadFile(name, "id")
		if err == nil {
			t.Fatal("ReadFile of a missing file succeeded")
		}
		if !config.IsConfigError(err) || !strings.Contains(err.Error(), name) {
			t.Errorf("error %v: want a configuration error naming %s", err, name)
		}
	})
}

// TestFileSelectAndCount checks exclusion and limit in Select, and Count up to max, keeping the file's order.
func TestFileSelectAndCount(t *testing.T) {
	var b strings.Builder
	for _, k := range []string{"k5", "k1", "k4", "k2", "k3", "k7", "k6"} {
		fmt.Fprintf(&b, "{\"id\": %q, \"n\": 1}\n", k)
	}
	b.WriteString(`{"id": null}` + "\n")
	f, err := rows.ReadFile(writeRows(t, b.String()), "id")
	if err != nil {
		t.Fatalf("ReadFile: %v", err)
	}
	all := []string{"k5", "k1", "k4", "k2", "k3", "k7", "k6"}
	tests := []struct {
		name      string
		exclude   []string
		limit     int
		want      []string
		wantCount int // Count with max = limit
	}{
		{"everything in file order", nil, 100, all, 7},
		{"limit", nil, 3, []string{"k5", "k1", "k4"}, 3},
		{"limit 0", nil, 0, []string{}, 0},
		{"exclusion", []string{"k1", "k2", "k9"}, 100, []string{"k5", "k4", "k3", "k7", "k6"}, 5},
		{"limit counts after exclusion", []string{"k5", "k1"}, 2, []string{"k4", "k2"}, 2},
		{"exclusion is exact", []string{"K5", "k", "k1 ", ""}, 100, all, 7},
		{"everything excluded", all, 100, []string{}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := f.Select(context.Background(), rows.Selection{Exclude: tt.exclude, Limit: tt.limit})
			if err != nil {
				t.Fatalf("Select: %v", err)
			}
			if !reflect.DeepEqual(fileKeys(got), tt.want) {
				t.Errorf("Select keys = %q, want %q", fileKeys(got), tt.want)
			}
			n, err := f.Count(context.Background(), tt.exclude, tt.limit)
			if err != nil {
				t.Fatalf("Count: %v", err)
			}
			if n != tt.wantCount {
				t.Errorf("Count = %d, want %d", n, tt.wantCount)
			}
		})
	}
}

// TestReadFileProblems checks the errors a person meets first: each names the file, the line and what to do.
func TestReadFileProblems(t *testing.T) {
	tests := []struct {
		name    string
		content string
		want    []string // every one must appear in the error
	}{
		{"the file lacks the key column", `{"n": 1}` + "\n" + `{"n": 2}` + "\n",
			[]string{":1:", `no column "id"`, "source.key"}},
		{"one row lacks the key column", `{"id": 1}` + "\n" + `{"n": 2}` + "\n",
			[]string{":2:", `no column "id"`}},
		{"a pretty-printed object", `{"id": 1}` + "\n" + "{\n  \"id\": 2,\n  \"n\": 3\n}\n",
			[]string{":2:", "one JSON object per line"}},
		{"a JSON array of objects", `[{"id": 1}, {"id": 2}]`, []string{":1:", "one JSON object per line"}},
		{"a line over the limit", `{"id": 1}` + "\n" + `{"id": 2, "v": "` + strings.Repeat("x", rows.MaxLine) + `"}` + "\n",
			[]string{":2:", fmt.Sprint(rows.MaxLine), "longer than"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			name := writeRows(t, tt.content)
			_, err := rows.ReadFile(name, "id")
			if err == nil {
				t.Fatal("ReadFile succeeded")
			}
			if !config.IsConfigError(err) {
				t.Errorf("%v is not a configuration error", err)
			}
			for _, w := range append(tt.want, name) {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not mention %q", err, w)
				}
			}
		})
	}
}

// TestReadFileDuplicates checks that the first row of a key is the task and every later one is left out and listed.
func TestReadFileDuplicates(t *testing.T) {
	content := `{"id": "a", "n": 1}
{"id": "b", "n": 2}
{"id": "a", "n": 3}
{"id": 1}
{"id": "1"}
{"id": "a", "n": 4}
`
	f, err := rows.ReadFile(writeRows(t, content), "id")
	if err != nil {
		t.Fatal(err)
	}
	got, _ := f.Select(context.Background(), rows.Selection{Limit: 100})
	want := []rows.Row{
		{Key: "a", Columns: []rows.Column{{Name: "id", Value: "a"}, {Name: "n", Value: "1"}}},
		{Key: "b", Columns: []rows.Column{{Name: "id", Value: "b"}, {Name: "n", Value: "2"}}},
		{Key: "1", Columns: []rows.Column{{Name: "id", Value: "1"}}},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Select = %+v, want %+v", got, want)
	}
	wantDup := []rows.Duplicate{{Key: "a", Line: 3, First: 1}, {Key: "1", Line: 5, First: 4}, {Key: "a", Line: 6, First: 1}}
	if !reflect.DeepEqual(f.Duplicates, wantDup) {
		t.Errorf("Duplicates = %+v, want %+v", f.Duplicates, wantDup)
	}
}

// TestReadFileSurrogates: a \u escape of half a UTF-16 surrogate pair is no character (encoding/json would read it
// as U+FFFD, and the Job would get another value than the row's): its row is left out as Invalid, with the escape
// and its byte, like a value that is not UTF-8; a whole pair, an escaped backslash before "u", and U+FFFD itself read.
func TestReadFileSurrogates(t *testing.T) {
	content := `{"id": "a", "v": "\ud800x"}
{"id": "b", "v": "\uD83D\uDE00 \\ud800 \ufffd"}
{"id": "c", "v": "x\udc00"}
{"id": "d", "v": "\ud83d\u0041"}
{"id": "\udfff"}
`
	f, err := rows.ReadFile(writeRows(t, content), "id")
	if err != nil {
		t.Fatal(err)
	}
	got, _ := f.Select(context.Background(), rows.Selection{Limit: 100})
	want := []rows.Row{{Key: "b", Columns: []rows.Column{{Name: "id", Value: "b"}, {Name: "v", Value: "\U0001F600 \\ud800 \uFFFD"}}}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Select = %+v, want %+v", got, want)
	}
	wantInvalid := []rows.Invalid{
		{Key: "a", Line: 1, Reason: `holds \ud800 (byte 19), a lone half of a UTF-16 surrogate pair`},
		{Key: "c", Line: 3, Reason: `holds \udc00 (byte 20), a lone half of a UTF-16 surrogate pair`},
		{Key: "d", Line: 4, Reason: `holds \ud83d (byte 19), a lone half of a UTF-16 surrogate pair`},
		{Key: "\uFFFD", Line: 5, Reason: `holds \udfff (byte 9), a lone half of a UTF-16 surrogate pair`},
	}
	if !reflect.DeepEqual(f.Invalid, wantInvalid) {
		t.Errorf("Invalid = %+v, want %+v", f.Invalid, wantInvalid)
	}
}

// TestReadFileStdin checks that "-" reads standard input.
func TestReadFileStdin(t *testing.T) {
	name := writeRows(t, `{"id": "from-stdin"}`+"\n")
	in, err := os.Open(name)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	saved := os.Stdin
	os.Stdin = in
	defer func() { os.Stdin = saved }()
	f, err := rows.ReadFile("-", "id")
	if err != nil {
		t.Fatal(err)
	}
	got, _ := f.Select(context.Background(), rows.Selection{Limit: 10})
	if !reflect.DeepEqual(fileKeys(got), []string{"from-stdin"}) {
		t.Errorf("keys = %q, want [from-stdin]", fileKeys(got))
	}
}

// TestFileSelected checks which keys the file has, in the order asked, each once.
func TestFileSelected(t *testing.T) {
	f, err := rows.ReadFile(writeRows(t, `{"id": "k1"}`+"\n"+`{"id": "k2"}`+"\n"+`{"id": null}`+"\n"+`{"id": "k3"}`+"\n"), "id")
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		keys []string
		want []string
	}{
		{"none asked", nil, nil},
		{"some", []string{"k3", "nope", "k1"}, []string{"k3", "k1"}},
		{"asked twice", []string{"k2", "k2"}, []string{"k2"}},
		{"null is no key", []string{"", "null"}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := f.Selected(context.Background(), tt.keys)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("Selected(%q) = %q, want %q", tt.keys, got, tt.want)
			}
		})
	}
}

// TestFileSelectPerGroup is the per-group rule of the PostgreSQL source, on a rows file: tenant big with 100 rows, a
// and b with 5 each, interleaved, Max 2: at most Max − held rows of each tenant, in the file's order.
func TestFileSelectPerGroup(t *testing.T) {
	var b strings.Builder
	tenant := func(i int) string {
		switch i % 20 {
		case 3:
			return "a"
		case 13:
			return "b"
		}
		return "big"
	}
	n := map[string]int{}
	for i := 0; n["big"] < 100 || n["a"] < 5 || n["b"] < 5; i++ {
		if g := tenant(i); n[g] < map[string]int{"big": 100, "a": 5, "b": 5}[g] {
			n[g]++
			fmt.Fprintf(&b, "{\"id\": \"k%d\", \"tenant\": %q}\n", i, g)
		}
	}
	b.WriteString(`{"id": "n1", "tenant": null}` + "\n" + `{"id": "n2", "tenant": ""}` + "\n" + `{"id": "n3"` +
		", \"tenant\": null}\n")
	f, err := rows.ReadFile(writeRows(t, b.String()), "id", rows.PerGroup{Column: "tenant", Max: 2})
	if err != nil {
		t.Fatalf("ReadFile: %v", err)
	}
	tests := []struct {
		name string
		sel  rows.Selection
		want []string
	}{
		{"two of each, in the file's order", rows.Selection{Limit: 200}, []string{"k0", "k1", "k3", "k13", "k23", "k33", "n1", "n2"}},
		{"big at its cap", rows.Selection{Limit: 200, Held: map[string]int{"big": 2}}, []string{"k3", "k13", "k23", "k33", "n1", "n2"}},
		{"a holds one", rows.Selection{Limit: 200, Held: map[string]int{"a": 1}}, []string{"k0", "k1", "k3", "k13", "k33", "n1", "n2"}},
		{"null and empty are one group", rows.Selection{Limit: 200, Held: map[string]int{"": 1, "big": 5}}, []string{"k3", "k13", "k23", "k33", "n1"}},
		{"the limit", rows.Selection{Limit: 3}, []string{"k0", "k1", "k3"}},
		{"excluded keys are not counted", rows.Selection{Exclude: []string{"k0", "k3"}, Limit: 5}, []string{"k1", "k2", "k13", "k23", "k33"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := f.Select(context.Background(), tt.sel)
			if err != nil {
				t.Fatalf("Select: %v", err)
			}
			if !reflect.DeepEqual(fileKeys(got), tt.want) {
				t.Errorf("Select keys = %q, want %q", fileKeys(got), tt.want)
			}
			for _, r := range got {
				if want := tenant(0); r.Key == "k0" && r.Group != want {
					t.Errorf("row k0 has group %q, want %q", r.Group, want)
				}
				if strings.HasPrefix(r.Key, "n") && r.Group != "" {
					t.Errorf("row %s has group %q, want \"\"", r.Key, r.Group)
				}
			}
		})
	}
	if n, err := f.Count(context.Background(), nil, 1000); err != nil || n != 113 {
		t.Errorf("Count = %d, %v; want 113: the backlog is every row, whatever its group", n, err)
	}

	_, err = rows.ReadFile(writeRows(t, `{"id": "k1", "tenant": "a"}`+"\n"+`{"id": "k2"}`+"\n"), "id",
		rows.PerGroup{Column: "tenant", Max: 2})
	if err == nil || !config.IsConfigError(err) || !strings.Contains(err.Error(), `:2: the row has no column "tenant" (limits.perGroup.column)`) {
		t.Errorf("a row without the group column: %v; want a configuration error naming the line and the column", err)
	}
	_, err = rows.ReadFile(writeRows(t, `{"id": "k1"}`+"\n"), "id", rows.PerGroup{Column: "tenant"})
	if err == nil || !config.IsConfigError(err) || !strings.Contains(err.Error(), "limits.perGroup.maxActive") {
		t.Errorf("Max 0: %v; want a configuration error naming limits.perGroup.maxActive", err)
	}
	// The group column first in its row, Max 1.
	one, err := rows.ReadFile(writeRows(t, `{"tenant": "a", "id": "k1"}`+"\n"+`{"tenant": "a", "id": "k2"}`+"\n"), "id",
		rows.PerGroup{Column: "tenant", Max: 1})
	if err != nil {
		t.Fatalf("ReadFile with Max 1: %v", err)
	}
	if got, _ := one.Select(context.Background(), rows.Selection{Limit: 5}); !reflect.DeepEqual(got, []rows.Row{
		{Key: "k1", Group: "a", Columns: []rows.Column{{Name: "tenant", Value: "a"}, {Name: "id", Value: "k1"}}},
	}) {
		t.Errorf("Max 1: Select = %+v, want row k1 of group a only", got)
	}
	if f, err := rows.ReadFile(writeRows(t, `{"id": "k1"}`+"\n"), "id", rows.PerGroup{}); err != nil {
		t.Errorf("an empty PerGroup: %v; want none", err)
	} else if got, _ := f.Select(context.Background(), rows.Selection{Limit: 5}); !reflect.DeepEqual(fileKeys(got), []string{"k1"}) {
		t.Errorf("an empty PerGroup: Select = %q, want k1", fileKeys(got))
	}
}
