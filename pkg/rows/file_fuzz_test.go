package rows

import (
	"bytes"
	"context"
	"encoding/json"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/jobsched/jobsched/pkg/config"
)

var rowsErrorWhere = regexp.MustCompile(`^--rows rows\.jsonl:\d+: `)

// FuzzReadRows throws random files at the rows file reader: it never panics, an error is a configuration error
// naming the file and the line, and a file it accepts round-trips: its rows, written back as JSON lines, read back
// as the same rows, keys and duplicates. The seed corpus (testdata/fuzz/FuzzReadRows) runs with every go test.
func FuzzReadRows(f *testing.F) {
	f.Add([]byte(`{"id": 1, "url": "https://x/1", "meta": {"a": [1, 2]}, "note": null}` + "\n" + `{"id": "b"}`))
	f.Add([]byte(`{"id": null}` + "\n" + `{"id": "a"}` + "\n" + `{"id": "a"}` + "\n"))
	f.Add([]byte("{\n  \"id\": 1\n}\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		file, err := ReadFrom(bytes.NewReader(data), "rows.jsonl", "id")
		if err != nil {
			if !config.IsConfigError(err) {
				t.Errorf("%v is not a configuration error", err)
			}
			if !rowsErrorWhere.MatchString(err.Error()) {
				t.Errorf("error %q does not name the file and the line", err)
			}
			return
		}
		rows, err := file.Select(context.Background(), Selection{Limit: len(data) + 1})
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range rows {
			if !validUTF8(r) {
				return // JSON text that is not UTF-8 reads with U+FFFD in place of the bad bytes: it cannot round-trip
			}
		}
		var out bytes.Buffer
		for _, r := range rows {
			out.WriteString(encodeRow(t, r))
			out.WriteByte('\n')
		}
		for _, d := range file.Duplicates { // a duplicate stays one
			out.WriteString(encodeRow(t, Row{Key: d.Key, Columns: []Column{{Name: "id", Value: d.Key}}}))
			out.WriteByte('\n')
		}
		again, err := ReadFrom(&out, "rows.jsonl", "id")
		if err != nil {
			t.Fatalf("the rows written back do not read: %v\n%s", err, out.String())
		}
		back, _ := again.Select(context.Background(), Selection{Limit: len(rows) + 1})
		if !reflect.DeepEqual(keysOf(back), keysOf(rows)) {
			t.Errorf("keys %q read back as %q", keysOf(rows), keysOf(back))
		}
		if len(again.Duplicates) != len(file.Duplicates) {
			t.Errorf("%d duplicates read back as %d", len(file.Duplicates), len(again.Duplicates))
		}
		for i := range rows {
			if i < len(back) && !reflect.DeepEqual(back[i], rows[i]) {
				t.Errorf("row %d: %+v read back as %+v", i, rows[i], back[i])
			}
		}
	})
}

// encodeRow writes r as one JSON object, every value as a JSON string (its text) or null.
func encodeRow(t *testing.T, r Row) string {
	var b strings.Builder
	b.WriteByte('{')
	for i, c := range r.Columns {
		if i > 0 {
			b.WriteByte(',')
		}
		name, err := json.Marshal(c.Name)
		if err != nil {
			t.Fatal(err)
		}
		b.Write(name)
		b.WriteByte(':')
		if c.Null {
			b.WriteString("null")
			continue
		}
		v, err := json.Marshal(c.Value)
		if err != nil {
			t.Fatal(err)
		}
		b.Write(v)
	}
	b.WriteByte('}')
	return b.String()
}

func keysOf(rs []Row) []string {
	out := []string{}
	for _, r := range rs {
		out = append(out, r.Key)
	}
	return out
}

// validUTF8 says whether every name and value of r is UTF-8.
func validUTF8(r Row) bool {
	for _, c := range r.Columns {
		if !utf8.ValidString(c.Name) || !utf8.ValidString(c.Value) {
			return false
		}
	}
	return true
}
