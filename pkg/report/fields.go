package report

import (
	"bytes"
	"encoding/json"
	"fmt"

	"github.com/jobsched/jobsched/pkg/capacity"
)

// marshal is v as JSON, HTML characters as they are (the encoder that prints a document escapes them if it does).
func marshal(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}

// withFields is v, a struct, as a JSON object with a capacity mode's fields (capacity.Section's, a Queuer's
// JobField) added: before v's field before (its key), or last when before is "". v's own fields keep their order and
// the mode's come where the document always had them.
func withFields(v any, before string, fields []capacity.Field) ([]byte, error) {
	b, err := marshal(v)
	if err != nil || len(fields) == 0 {
		return b, err
	}
	var add bytes.Buffer
	for _, f := range fields {
		k, err := marshal(f.Key)
		if err != nil {
			return nil, err
		}
		val, err := marshal(f.Value)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", f.Key, err)
		}
		add.WriteByte(',')
		add.Write(k)
		add.WriteByte(':')
		add.Write(val)
	}
	// A key is found by its quoted name after a comma: inside a JSON string a quote is always escaped.
	at := len(b) - 1 // before the closing brace
	if before != "" {
		k, err := marshal(before)
		if err != nil {
			return nil, err
		}
		i := bytes.Index(b, append([]byte{','}, append(k, ':')...))
		if i < 0 {
			return nil, fmt.Errorf("the document has no field %s", before)
		}
		at = i
	}
	out := make([]byte, 0, len(b)+add.Len())
	out = append(out, b[:at]...)
	out = append(out, add.Bytes()...)
	return append(out, b[at:]...), nil
}
