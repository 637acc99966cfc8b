package strictyaml

import (
	"strconv"
	"strings"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

type inner struct {
	Max   int     `json:"max"`
	Small int8    `json:"small"`
	Whole uint8   `json:"whole"`
	Ratio float64 `json:"ratio"`
	On    bool    `json:"on"`
}

type Embedded struct {
	Extra string `json:"extra"`
}

type sample struct {
	Embedded `json:",inline"`
	Name     string            `json:"name"`
	Inner    inner             `json:"inner"`
	Items    []inner           `json:"items"`
	List     []string          `json:"list"`
	Labels   map[string]string `json:"labels"`
	Timeout  metav1.Duration   `json:"timeout"`
	Size     resource.Quantity `json:"size"`
	Any      any               `json:"any"`
	Ptr      *int              `json:"ptr"`
	Skipped  string            `json:"-"`
}

// TestDecodeProblems pins each problem Decode reports, in the words the user sees, all of them at once.
func TestDecodeProblems(t *testing.T) {
	tests := []struct {
		name string
		yaml string
		want []string // each must appear in the problems
	}{
		{"repeated key", "name: a\nname: b\n", []string{"name: the key is written twice (first on line 1): YAML would keep only the last (line 2)"}},
		{"repeated nested key", "inner:\n  max: 1\n  max: 2\n", []string{"inner.max: the key is written twice (first on line 2)", "(line 3)"}},
		{"repeated key in a list item", "items:\n- max: 1\n  max: 2\n", []string{"items[0].max: the key is written twice"}},
		{"second document", "name: a\n---\nname: b\n", []string{"line 2: a second YAML document (after ---): the file must hold one"}},
		{"not an integer", "inner:\n  max: ten\n", []string{`inner.max: "ten" is not an integer (line 2)`}},
		{"quoted number", "inner:\n  max: \"5\"\n", []string{`inner.max: "5" is not an integer`}},
		{"float for an integer", "inner:\n  max: 1.5\n", []string{`inner.max: 1.5 is not an integer`}},
		{"out of range", "inner:\n  small: 300\n  whole: 256\n", []string{"inner.small: 300 is out of range", "inner.whole: 256 is out of range"}},
		{"negative whole number", "inner:\n  whole: -1\n", []string{"inner.whole: -1 is not a whole number"}},
		{"not a number", "inner:\n  ratio: .nan\n", []string{"inner.ratio: .nan is not a number"}},
		{"not a bool", "inner:\n  on: maybe\n", []string{`inner.on: "maybe" is not true or false`}},
		{"quoted bool", "inner:\n  on: \"yes\"\n", []string{`inner.on: "yes" is not true or false`}},
		{"bad duration", "timeout: 5x\n", []string{`timeout: "5x" is not a duration (e.g. 30s, 5m) (line 1)`}},
		{"bad quantity", "size: 2 cores\n", []string{`size: "2 cores" is not a quantity (e.g. 500m, 2Gi) (line 1)`}},
		{"number for a string", "name: 12\n", []string{`name: 12 is not a string (quote it: "12")`}},
		{"list for a string", "name: [a]\n", []string{"name: a list is not a string"}},
		{"mapping expected", "inner: 3\n", []string{"inner: must be a mapping (key: value lines), not 3"}},
		{"list expected", "list: a\n", []string{`list: must be a list (- item lines), not "a"`}},
		{"key not a name", "labels:\n  [a]: b\n", []string{"labels: a key must be a plain name, not a list"}},
		{"merge of a scalar", "inner:\n  <<: 3\n", []string{"inner.<<: merges a mapping, not 3"}},
		{"unknown keys, sorted, with a suggestion", "nmae: a\ninner:\n  maxx: 1\n  zzz: 2\n", //nolint:misspell // the typo is the input
			[]string{"unknown key(s): inner.maxx (line 3; did you mean max?), inner.zzz (line 4), nmae (line 1; did you mean name?)"}}, //nolint:misspell // the typo is the input
		{"a json:\"-\" field is unknown", "Skipped: a\n", []string{"unknown key(s): Skipped (line 1"}},
		{"an alias inside its own value", "any: &a [x, *a]\n", []string{"any[1][1]: the alias *a is inside the value it names"}},
		{"aliases of aliases", "list: &a0 [x, x, x, x, x, x, x, x, x, x]\n" + laughs(7) + "any: *a7\n",
			[]string{"the file expands to more than 131072 values (aliases of aliases)"}},
		{"every problem at once", "name: 1\ninner:\n  max: x\n  on: 2\nbogus: 1\n",
			[]string{"unknown key(s): bogus", "name: 1 is not a string", `inner.max: "x" is not an integer`, "inner.on: 2 is not true or false"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var out sample
			problems, err := Decode([]byte(tc.yaml), &out)
			if err != nil {
				t.Fatalf("the file could not be read: %v", err)
			}
			if problems == nil {
				t.Fatal("no problem")
			}
			for _, w := range tc.want {
				if !strings.Contains(problems.Error(), w) {
					t.Errorf("problems %q do not say %q", problems, w)
				}
			}
			if strings.Contains(problems.Error(), "json:") || strings.Contains(problems.Error(), "Go struct") {
				t.Errorf("problems %q speak of Go, not of the file", problems)
			}
		})
	}
}

// TestDecodeUnreadable pins the files that cannot be read at all: no value is decoded from them.
func TestDecodeUnreadable(t *testing.T) {
	tests := []struct{ name, yaml, want string }{
		{"empty", "", "line 1: the file is empty"},
		{"a list", "- a\n- b\n", "line 1: the file must be a mapping (key: value lines), not a list"},
		{"a scalar", "hello\n", `line 1: the file must be a mapping (key: value lines), not "hello"`},
		{"not YAML", "name: [\n", "yaml: line"},
		{"a tab in the indentation", "inner:\n\tmax: 1\n", "line 2: tabs are not allowed for indentation in YAML: indent with spaces"},
		{"an error without a line gets one", "name: a\nlist: [b]\nbad: \x01\n", "line 3: "},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var out sample
			_, err := Decode([]byte(tc.yaml), &out)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want one saying %q", err, tc.want)
			}
		})
	}
}

// TestDecodeValues checks the values decoded, and that a file with problems still fills every other key.
func TestDecodeValues(t *testing.T) {
	var out sample
	problems, err := Decode([]byte(`---
extra: e
name: n
inner: &i {max: 0x10, small: -3, whole: 7, ratio: 1.5, on: yes}
items: [*i, {<<: *i, max: 2}]
list: [a, 'b']
labels: {team: a}
timeout: 30s
size: 500m
any: {k: [1, true, ~, x]}
ptr: 4
---
`), &out)
	if err != nil || problems != nil {
		t.Fatalf("err %v, problems %v", err, problems)
	}
	want := inner{Max: 16, Small: -3, Whole: 7, Ratio: 1.5, On: true}
	if out.Extra != "e" || out.Name != "n" || out.Inner != want || len(out.Items) != 2 || out.Items[0] != want ||
		out.Items[1].Max != 2 || out.Items[1].Ratio != 1.5 || strings.Join(out.List, ",") != "a,b" ||
		out.Labels["team"] != "a" || out.Timeout.Duration.String() != "30s" || out.Size.String() != "500m" ||
		out.Ptr == nil || *out.Ptr != 4 {
		t.Errorf("decoded %+v", out)
	}
	if m, ok := out.Any.(map[string]any); !ok || len(m["k"].([]any)) != 4 {
		t.Errorf("any decoded as %#v", out.Any)
	}

	var partial sample
	problems, err = Decode([]byte("name: n\ninner:\n  max: ten\n  ratio: 2\n"), &partial)
	if err != nil || problems == nil {
		t.Fatalf("err %v, problems %v", err, problems)
	}
	if partial.Name != "n" || partial.Inner.Ratio != 2 || partial.Inner.Max != 0 {
		t.Errorf("the other keys were not filled: %+v", partial)
	}
}

// TestDecodeKubernetesTypes decodes a Job as the API server reads it: int-or-string, quantities, inline metadata.
func TestDecodeKubernetesTypes(t *testing.T) {
	var job batchv1.Job
	problems, err := Decode([]byte(`apiVersion: batch/v1
kind: Job
metadata:
  labels: {team: a}
spec:
  backoffLimit: 2
  template:
    spec:
      containers:
      - name: w
        image: w:1
        resources: {requests: {cpu: 500m, memory: 1Gi}}
        livenessProbe: {httpGet: {port: http}}
        ports: [{containerPort: 8080}]
`), &job)
	if err != nil || problems != nil {
		t.Fatalf("err %v, problems %v", err, problems)
	}
	c := job.Spec.Template.Spec.Containers
	if job.Kind != "Job" || job.Labels["team"] != "a" || *job.Spec.BackoffLimit != 2 || len(c) != 1 ||
		c[0].Resources.Requests.Cpu().String() != "500m" || c[0].LivenessProbe.HTTPGet.Port.String() != "http" ||
		c[0].Ports[0].ContainerPort != 8080 {
		t.Errorf("decoded %+v", job)
	}
	problems, _ = Decode([]byte("apiVersion: batch/v1\nkind: Job\nspec:\n  backofLimit: 1\n  template:\n    spec:\n      containers:\n      - imag: x\n"), &job)
	if problems == nil || !strings.Contains(problems.Error(), "spec.backofLimit (line 4; did you mean backoffLimit?)") ||
		!strings.Contains(problems.Error(), "spec.template.spec.containers[0].imag (line 8; did you mean image?)") {
		t.Errorf("problems %v", problems)
	}
}

// laughs writes n levels of lists of ten aliases of the level below (10^n values from a few hundred bytes), under a
// key of any type: the decoder must stop counting long before it has expanded them.
func laughs(n int) string {
	var b strings.Builder
	b.WriteString("labels:\n")
	for i := 1; i <= n; i++ {
		b.WriteString("  l" + string(rune('0'+i)) + ": &a" + string(rune('0'+i)) + " [")
		for j := range 10 {
			if j > 0 {
				b.WriteString(", ")
			}
			b.WriteString("*a" + string(rune('0'+i-1)))
		}
		b.WriteString("]\n")
	}
	return b.String()
}

// TestLeftOut: the paths of the values Decode left out for their type are known by path, as the problems name them;
// a value decoded, an unknown key, and no problems at all are not left out.
func TestLeftOut(t *testing.T) {
	var s sample
	problems, err := Decode([]byte("name: a\ninner: {max: ten, on: true}\nitems:\n- {max: 1}\n- {small: 300}\nnope: 1\n"), &s)
	if err != nil {
		t.Fatal(err)
	}
	for path, want := range map[string]bool{"inner.max": true, "items[1].small": true, "inner.on": false, "items[0].max": false,
		"name": false, "nope": false, "max": false} {
		if got := LeftOut(problems, path); got != want {
			t.Errorf("LeftOut(%s) = %v, want %v (problems: %v)", path, got, want, problems)
		}
	}
	if problems, err := Decode([]byte("name: a\n"), &s); problems != nil || err != nil || LeftOut(problems, "name") {
		t.Errorf("a clean file: problems %v, err %v", problems, err)
	}
}

// TestDecodeDecimal: an integer written with leading zeros is the decimal number a person means (YAML 1.1, which
// the YAML library follows there, reads 010 as octal 8 and 09 as a float), in every kind of number field; a prefix
// says another base.
func TestDecodeDecimal(t *testing.T) {
	var out sample
	problems, err := Decode([]byte("inner: {max: 010, small: -09, whole: 007, ratio: 010}\nitems: [{max: 0o10}, {max: 0x10}, {max: 00}]\n"+
		"size: 010\nany: 010\nptr: +0010\n"), &out)
	if err != nil || problems != nil {
		t.Fatalf("err %v, problems %v", err, problems)
	}
	want := inner{Max: 10, Small: -9, Whole: 7, Ratio: 10}
	if out.Inner != want || len(out.Items) != 3 || out.Items[0].Max != 8 || out.Items[1].Max != 16 || out.Items[2].Max != 0 ||
		out.Size.String() != "10" || out.Ptr == nil || *out.Ptr != 10 {
		t.Errorf("decoded %+v", out)
	}
	if n, ok := out.Any.(float64); !ok || n != 10 {
		t.Errorf("any decoded as %#v, want 10", out.Any)
	}
	problems, _ = Decode([]byte("name: 010\n"), &out)
	if problems == nil || !strings.Contains(problems.Error(), `name: 010 is not a string (quote it: "010")`) {
		t.Errorf("problems %v, want the string field to show 010 as written", problems)
	}
}

// TestDecodeAliasBytes: aliases of aliases over a long string are refused by the bytes they expand to, before they
// are expanded (the file: 10 KB, 46 s and 3.65 GB before the bound), whatever the number of values.
func TestDecodeAliasBytes(t *testing.T) {
	bomb := func(levels int) string {
		var b strings.Builder
		b.WriteString("list:\n- &a0 " + strings.Repeat("x", 10000) + "\n")
		for i := 1; i <= levels; i++ {
			b.WriteString("- &a" + strconv.Itoa(i) + " [")
			for j := range 10 {
				if j > 0 {
					b.WriteString(", ")
				}
				b.WriteString("*a" + strconv.Itoa(i-1))
			}
			b.WriteString("]\n")
		}
		return b.String()
	}
	for _, levels := range []int{3, 5} { // 10 MB in 1,000 values; 1 GB in 100,000 (fewer than maxValues)
		var out any
		problems, err := Decode([]byte(bomb(levels)), &out)
		if err != nil || problems == nil || !strings.Contains(problems.Error(), "the file expands to more than 4194304 bytes (aliases of aliases)") {
			t.Errorf("%d levels: err %v, problems %v; want the bytes it expands to refused", levels, err, problems)
		}
	}
	var out any
	if problems, err := Decode([]byte(bomb(2)), &out); err != nil || problems != nil { // 1 MB: a file may use aliases
		t.Errorf("2 levels: err %v, problems %v", err, problems)
	}
}
