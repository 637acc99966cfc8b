// Package strictyaml decodes one YAML document into a Go value strictly.
//
// Every key the value has no field for, every key written twice and every value not of its field's type is a problem,
// each named by its full path and line in the file's own words (limits.maxActive: "ten" is not an integer (line 9)),
// and all of them are reported at once. Fields are matched by their JSON names, so Kubernetes API types decode as the
// API server reads them.
package strictyaml

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"reflect"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	yaml "go.yaml.in/yaml/v3"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Decode decodes one YAML document into out, reading every value against out's Go type. problems lists, each
// by its full path (e.g. limits.maxActiv, spec.template.spec.containers[0].imag) and line, every key out has no
// field for, every key written twice, and every value that is not of its field's type, in the words the file uses
// (limits.maxActive: "ten" is not an integer); out is still filled with every other key, so that they can be
// validated too (LeftOut says which were not). err is a file that cannot be read at all: not YAML, a second
// document, not a mapping.
func Decode(data []byte, out any) (problems, err error) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, errors.New("line 1: the file is empty")
		}
		return nil, withLine(err, data)
	}
	var next yaml.Node
	var second error // reported with the first document's problems, which are still checked
	switch err := dec.Decode(&next); {
	case errors.Is(err, io.EOF):
	case err != nil:
		return nil, withLine(err, data)
	case !isEmptyDocument(&next):
		second = fmt.Errorf("line %d: a second YAML document (after ---): the file must hold one", next.Line)
	}
	root := &doc
	if root.Kind == yaml.DocumentNode && len(root.Content) == 1 {
		root = root.Content[0]
	}
	root = resolve(root)
	if root.Kind != yaml.MappingNode {
		return nil, fmt.Errorf("line %d: the file must be a mapping (key: value lines), not %s", root.Line, shown(root))
	}
	d := &decoder{}
	if second != nil {
		d.problems = append(d.problems, second)
	}
	tree, _ := d.convert(root, reflect.TypeOf(out), "")
	js, err := json.Marshal(tree)
	if err != nil {
		return nil, err
	}
	if err := json.Unmarshal(js, out); err != nil {
		return nil, err // every value was checked against its type: a bug if it happens
	}
	if len(d.unknown) > 0 {
		sort.Strings(d.unknown)
		d.problems = append([]error{fmt.Errorf("unknown key(s): %s", strings.Join(d.unknown, ", "))}, d.problems...)
	}
	if len(d.problems) == 0 {
		return nil, nil
	}
	return &Problems{errs: d.problems, leftOut: d.leftOut}, nil
}

// Problems are Decode's problems, reported together (one per line).
type Problems struct {
	errs    []error
	leftOut map[string]bool
}

func (p *Problems) Error() string   { return errors.Join(p.errs...).Error() }
func (p *Problems) Unwrap() []error { return p.errs }

// LeftOut says whether Decode's problems say that the value at path (as they name it: limits.maxActive,
// queues[1].source.key) is not of its field's type, and so was left out of the decoded value.
func LeftOut(problems error, path string) bool {
	var p *Problems
	return errors.As(problems, &p) && p.leftOut[path]
}

// withLine gives a YAML error that names no line (a bad tag, bad UTF-8, a control character) the first line where
// the file, cut after it, fails to read (found by bisection: a file that fails cut after line n fails cut later).
func withLine(err error, data []byte) error {
	if m := tokenLine.FindStringSubmatch(err.Error()); m != nil {
		lines := strings.Split(string(data), "\n")
		if n, _ := strconv.Atoi(m[1]); n >= 1 && n <= len(lines) && strings.Contains(lines[n-1][:len(lines[n-1])-len(strings.TrimLeft(lines[n-1], " \t"))], "\t") {
			return fmt.Errorf("line %d: tabs are not allowed for indentation in YAML: indent with spaces", n)
		}
	}
	if lineNumber.MatchString(err.Error()) {
		return err
	}
	lines := bytes.SplitAfter(data, []byte("\n"))
	fails := func(n int) bool {
		dec := yaml.NewDecoder(bytes.NewReader(bytes.Join(lines[:n], nil)))
		for {
			var doc yaml.Node
			if e := dec.Decode(&doc); e != nil {
				return !errors.Is(e, io.EOF)
			}
		}
	}
	n := sort.Search(len(lines), func(i int) bool { return fails(i + 1) }) + 1
	return fmt.Errorf("line %d: %w", min(n, len(lines)), err)
}

var lineNumber = regexp.MustCompile(`line \d+`)

var tokenLine = regexp.MustCompile(`line (\d+): found character that cannot start any token`)

// isEmptyDocument is what a trailing --- leaves.
func isEmptyDocument(n *yaml.Node) bool {
	if n.Kind == yaml.DocumentNode && len(n.Content) == 1 {
		n = n.Content[0]
	}
	return n.Kind == 0 || n.Kind == yaml.ScalarNode && n.Tag == "!!null" && n.Value == ""
}

type decoder struct {
	unknown  []string
	problems []error
	leftOut  map[string]bool     // the paths of the values with a problem: left out of the result
	values   int                 // values converted, aliases expanded
	bytes    int                 // the bytes of their text and of the keys
	over     bool                // past maxValues or MaxBytes: nothing more is converted
	active   map[*yaml.Node]bool // the targets of the aliases being converted
}

// What aliases of aliases may expand a small file to: maxValues values, MaxBytes bytes of text (keys and values;
// far above a Kubernetes object, which the API server holds to 1.5 MiB). A file past either is refused before it
// is expanded further.
const (
	maxValues = 1 << 17
	MaxBytes  = 4 << 20
)

// enter counts n and follows an alias, refusing one inside its own target and a file that expands past maxValues
// or MaxBytes; leave is to be called when n is converted.
func (d *decoder) enter(n *yaml.Node, path string) (target *yaml.Node, leave func(), ok bool) {
	target = resolve(n)
	if !d.count(n, path, len(target.Value)) {
		return nil, nil, false
	}
	if n.Kind != yaml.AliasNode {
		return n, func() {}, true
	}
	if d.active == nil {
		d.active = map[*yaml.Node]bool{}
	}
	if d.active[target] {
		d.bad(n, path, "the alias *%s is inside the value it names", n.Value)
		return nil, nil, false
	}
	d.active[target] = true
	return target, func() { delete(d.active, target) }, true
}

// count adds a value of size bytes and says whether the file is still within maxValues and MaxBytes; the first
// value past them is the problem.
func (d *decoder) count(n *yaml.Node, path string, size int) bool {
	if d.over {
		return false
	}
	d.values, d.bytes = d.values+1, d.bytes+size
	switch {
	case d.values > maxValues:
		d.bad(n, path, "the file expands to more than %d values (aliases of aliases)", maxValues)
	case d.bytes > MaxBytes:
		d.bad(n, path, "the file expands to more than %d bytes (aliases of aliases)", MaxBytes)
	default:
		return true
	}
	d.over = true
	return false
}

func (d *decoder) bad(n *yaml.Node, path, format string, args ...any) {
	if d.leftOut == nil {
		d.leftOut = map[string]bool{}
	}
	d.leftOut[path] = true
	d.problems = append(d.problems, fmt.Errorf("%s: %s (line %d)", path, fmt.Sprintf(format, args...), n.Line))
}

var unmarshaler = reflect.TypeFor[json.Unmarshaler]()

var durationType = reflect.TypeFor[metav1.Duration]()

// durationSyntax is what time.ParseDuration reads: a duration it refuses although written so is too long to hold.
var durationSyntax = regexp.MustCompile(`^[-+]?([0-9]*(\.[0-9]*)?(ns|us|µs|μs|ms|s|m|h))+$`)

// tooLong says s is written as a duration but is longer than a time.Duration holds (9999999999h).
func tooLong(s string) bool {
	_, err := time.ParseDuration(s)
	return err != nil && s != "" && durationSyntax.MatchString(s)
}

// typeNames say what a value of a type with its own decoding looks like.
var typeNames = map[reflect.Type]string{
	reflect.TypeFor[metav1.Duration]():   "a duration (e.g. 30s, 5m)",
	reflect.TypeFor[resource.Quantity](): "a quantity (e.g. 500m, 2Gi)",
	reflect.TypeFor[metav1.Time]():       "a time (RFC 3339, e.g. 2024-01-31T12:00:00Z)",
}

// convert turns n into the JSON value that t decodes, reporting each problem under path; ok is false when the value
// is left out (null, or a problem).
func (d *decoder) convert(n *yaml.Node, t reflect.Type, path string) (v any, ok bool) {
	n, leave, ok := d.enter(n, path)
	if !ok {
		return nil, false
	}
	defer leave()
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if n.Kind == yaml.ScalarNode && n.Tag == "!!null" {
		return nil, false
	}
	if reflect.PointerTo(t).Implements(unmarshaler) {
		v := d.plain(n, path)
		js, err := json.Marshal(v)
		if err == nil {
			err = reflect.New(t).Interface().(json.Unmarshaler).UnmarshalJSON(js)
		}
		if err != nil {
			if t == durationType && tooLong(n.Value) {
				d.bad(n, path, "%s is longer than the longest duration (%s)", shown(n), time.Duration(math.MaxInt64).Truncate(time.Hour))
			} else if name, ok := typeNames[t]; ok {
				d.bad(n, path, "%s is not %s", shown(n), name)
			} else {
				d.bad(n, path, "%s is not valid here: %v", shown(n), err)
			}
			return nil, false
		}
		return v, true
	}
	switch t.Kind() {
	case reflect.Struct:
		if n.Kind != yaml.MappingNode {
			d.bad(n, path, "must be a mapping (key: value lines), not %s", shown(n))
			return nil, false
		}
		fields := jsonFields(t)
		out := map[string]any{}
		d.mapping(n, path, func(key string, kn, vn *yaml.Node) {
			ft, ok := fields[key]
			if !ok {
				d.unknown = append(d.unknown, fmt.Sprintf("%s (line %d%s)", join(path, key), kn.Line, suggest(key, fields)))
				return
			}
			if v, ok := d.convert(vn, ft, join(path, key)); ok {
				out[key] = v
			}
		})
		return out, true
	case reflect.Map:
		if n.Kind != yaml.MappingNode {
			d.bad(n, path, "must be a mapping (key: value lines), not %s", shown(n))
			return nil, false
		}
		out := map[string]any{}
		d.mapping(n, path, func(key string, kn, vn *yaml.Node) {
			if v, ok := d.convert(vn, t.Elem(), join(path, key)); ok {
				out[key] = v
			}
		})
		return out, true
	case reflect.Slice:
		if t.Elem().Kind() == reflect.Uint8 { // []byte: base64 text
			return d.scalar(n, path, "a string", n.Tag == "!!str", n.Value)
		}
		if n.Kind != yaml.SequenceNode {
			d.bad(n, path, "must be a list (- item lines), not %s", shown(n))
			return nil, false
		}
		out := []any{}
		for i, c := range n.Content {
			if v, ok := d.convert(c, t.Elem(), fmt.Sprintf("%s[%d]", path, i)); ok {
				out = append(out, v)
			}
		}
		return out, true
	case reflect.String:
		if n.Kind == yaml.ScalarNode && n.Tag != "!!str" && n.Tag != "!!timestamp" {
			d.bad(n, path, "%s is not a string (quote it: %q)", shown(n), n.Value)
			return nil, false
		}
		return d.scalar(n, path, "a string", true, n.Value)
	case reflect.Bool:
		switch strings.ToLower(n.Value) {
		case "true", "yes", "on":
			return d.scalar(n, path, "true or false", n.Tag != "!!str" || n.Style == 0, true)
		case "false", "no", "off":
			return d.scalar(n, path, "true or false", n.Tag != "!!str" || n.Style == 0, false)
		}
		return d.scalar(n, path, "true or false", false, nil)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		var i int64
		m := decimal(n)
		ok := m.Kind == yaml.ScalarNode && m.Tag == "!!int" && m.Decode(&i) == nil
		if ok && (i < -1<<(t.Bits()-1) || i > 1<<(t.Bits()-1)-1) {
			d.bad(n, path, "%s is out of range", shown(n))
			return nil, false
		}
		return d.scalar(n, path, "an integer", ok, i)
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		var u uint64
		m := decimal(n)
		ok := m.Kind == yaml.ScalarNode && m.Tag == "!!int" && m.Decode(&u) == nil
		if ok && t.Bits() < 64 && u > 1<<t.Bits()-1 {
			d.bad(n, path, "%s is out of range", shown(n))
			return nil, false
		}
		return d.scalar(n, path, "a whole number", ok, u)
	case reflect.Float32, reflect.Float64:
		var f float64
		m := decimal(n)
		ok := m.Kind == yaml.ScalarNode && (m.Tag == "!!int" || m.Tag == "!!float") && m.Decode(&f) == nil &&
			!math.IsInf(f, 0) && !math.IsNaN(f)
		return d.scalar(n, path, "a number", ok, f)
	}
	return d.plain(n, path), true // interface{} and anything else: as written
}

// scalar is v when n is a scalar that is one (ok), else the problem "<n> is not <what>".
func (d *decoder) scalar(n *yaml.Node, path, what string, ok bool, v any) (any, bool) {
	if n.Kind != yaml.ScalarNode || !ok {
		d.bad(n, path, "%s is not %s", shown(n), what)
		return nil, false
	}
	return v, true
}

// mapping calls fn for each key of n, and reports a key written twice (YAML would keep the last silently). The keys
// of a merge (<<: *anchor) come after n's own, which win.
func (d *decoder) mapping(n *yaml.Node, path string, fn func(key string, kn, vn *yaml.Node)) {
	seen := map[string]int{}
	var merges []*yaml.Node
	for i := 0; i+1 < len(n.Content); i += 2 {
		kn, vn := resolve(n.Content[i]), n.Content[i+1]
		if kn.Kind == yaml.ScalarNode && kn.Tag == "!!merge" {
			merges = append(merges, vn)
			continue
		}
		if kn.Kind != yaml.ScalarNode {
			d.bad(kn, path, "a key must be a plain name, not %s", shown(kn))
			continue
		}
		key := kn.Value
		if first, ok := seen[key]; ok {
			d.bad(kn, join(path, key), "the key is written twice (first on line %d): YAML would keep only the last", first)
			continue
		}
		seen[key] = kn.Line
		d.bytes += len(key)
		fn(key, kn, vn)
	}
	for _, m := range merges {
		m = resolve(m)
		sources := []*yaml.Node{m}
		if m.Kind == yaml.SequenceNode {
			sources = m.Content
		}
		for _, src := range sources {
			src = resolve(src)
			if src.Kind != yaml.MappingNode {
				d.bad(src, join(path, "<<"), "merges a mapping, not %s", shown(src))
				continue
			}
			for i := 0; i+1 < len(src.Content); i += 2 {
				kn := resolve(src.Content[i])
				if _, ok := seen[kn.Value]; ok || kn.Kind != yaml.ScalarNode || kn.Tag == "!!merge" {
					continue
				}
				seen[kn.Value] = kn.Line
				d.bytes += len(kn.Value)
				fn(kn.Value, kn, src.Content[i+1])
			}
		}
	}
}

// plain is n as JSON without a Go type to guide it: scalars by their YAML tags.
func (d *decoder) plain(n *yaml.Node, path string) any {
	n, leave, ok := d.enter(n, path)
	if !ok {
		return nil
	}
	defer leave()
	switch n.Kind {
	case yaml.MappingNode:
		out := map[string]any{}
		for i := 0; i+1 < len(n.Content); i += 2 {
			if k := resolve(n.Content[i]); k.Tag != "!!merge" {
				out[k.Value] = d.plain(n.Content[i+1], join(path, k.Value))
			}
		}
		return out
	case yaml.SequenceNode:
		out := []any{}
		for i, c := range n.Content {
			out = append(out, d.plain(c, fmt.Sprintf("%s[%d]", path, i)))
		}
		return out
	}
	switch n.Tag {
	case "!!null":
		return nil
	case "!!bool":
		var b bool
		if n.Decode(&b) == nil {
			return b
		}
	case "!!int", "!!float":
		var f float64
		if m := decimal(n); m.Decode(&f) == nil && !math.IsInf(f, 0) && !math.IsNaN(f) {
			if m.Tag == "!!int" {
				var i int64
				if m.Decode(&i) == nil {
					return json.Number(strconv.FormatInt(i, 10))
				}
			}
			return json.Number(strconv.FormatFloat(f, 'g', -1, 64))
		}
	}
	return n.Value
}

// decimal is n, a number, with leading zeros (010, -09) read as the decimal integer a person means: the YAML library
// reads them as YAML 1.1 does, 010 as octal 8 and 09 as a float. 0o10, 0x10 and 0b10 keep their base.
func decimal(n *yaml.Node) *yaml.Node {
	if n.Kind != yaml.ScalarNode || n.Style != 0 || n.Tag != "!!int" && n.Tag != "!!float" || !leadingZeros.MatchString(n.Value) {
		return n
	}
	sign, digits := "", n.Value
	if digits[0] == '-' || digits[0] == '+' {
		sign, digits = digits[:1], digits[1:]
	}
	m := *n
	m.Tag, m.Value = "!!int", sign+cmp.Or(strings.TrimLeft(digits, "0"), "0")
	return &m
}

var leadingZeros = regexp.MustCompile(`^[-+]?0[0-9]+$`)

// resolve follows an alias (*name) to the node it names.
func resolve(n *yaml.Node) *yaml.Node {
	for n.Kind == yaml.AliasNode && n.Alias != nil {
		n = n.Alias
	}
	return n
}

// shown is n as the file writes it: a quoted or string scalar quoted, others as is, collections by their kind.
func shown(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	}
	v := n.Value
	if len(v) > 80 {
		v = v[:80] + "…"
	}
	if n.Style&yaml.TaggedStyle != 0 {
		return n.Tag + " " + v // as written: !!str 10
	}
	if n.Style&(yaml.DoubleQuotedStyle|yaml.SingleQuotedStyle) != 0 || n.Tag == "!!str" && n.Style == 0 {
		return strconv.Quote(v)
	}
	return v
}

// jsonFields maps the JSON names of t's fields to their types, flattening inline and embedded structs.
func jsonFields(t reflect.Type) map[string]reflect.Type {
	fields := map[string]reflect.Type{}
	for i := range t.NumField() {
		f := t.Field(i)
		tag := f.Tag.Get("json")
		name, opts, _ := strings.Cut(tag, ",")
		if name == "-" || !f.IsExported() && !f.Anonymous {
			continue
		}
		if name == "" && (f.Anonymous || strings.Contains(opts, "inline")) {
			for k, ft := range jsonFields(f.Type) {
				fields[k] = ft
			}
			continue
		}
		if name == "" {
			name = f.Name
		}
		fields[name] = f.Type
	}
	return fields
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

// suggest is "; did you mean K?" for the field name K nearest to key (by edits, at most 2 or a case change, and fewer
// than key has characters: a0 is not a typo of gc), or "".
func suggest(key string, fields map[string]reflect.Type) string {
	best, bestD := "", min(3, len(key))
	for f := range fields {
		d := editDistance(strings.ToLower(key), strings.ToLower(f))
		if d < bestD || d == bestD && f < best {
			best, bestD = f, d
		}
	}
	if best == "" {
		return ""
	}
	return "; did you mean " + best + "?"
}

func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur := make([]int, len(b)+1)
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev = cur
	}
	return prev[len(b)]
}
