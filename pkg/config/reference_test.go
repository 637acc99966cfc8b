package config

import (
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"sigs.k8s.io/yaml"
)

// referenceDir holds the annotated reference configurations the README links: together they show every key.
var referenceDir = filepath.Join("..", "..", "manifests", "examples", "reference")

// notInReference are keys the decoder accepts only to say what to write instead: they are errors, shown as comments.
var notInReference = []string{"gc.failedRetention", "queues[].gc.failedRetention", "queues[].source.dsnEnv", "queues[].source.dsnFile",
	"queues[].source.notify", "queues[].source.poll"}

// TestReferenceConfigs keeps the reference from drifting: each file loads (an unknown key, a key of the wrong type
// or a value that does not validate fails it), the files together hold every key Config reads, and jobsched.yaml
// sets each optional key to its default: it loads to the same configuration as its required keys alone.
func TestReferenceConfigs(t *testing.T) {
	shown := map[string]bool{}
	for _, name := range []string{"jobsched.yaml", "queues.yaml", "autoscale.yaml"} {
		file := filepath.Join(referenceDir, name)
		data, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := Parse(file, data); err != nil {
			t.Errorf("%s does not load:\n%v", name, err)
		}
		var doc map[string]any
		if err := yaml.Unmarshal(data, &doc); err != nil {
			t.Fatal(err)
		}
		keyPaths("", doc, shown)
	}

	want, maps := map[string]bool{}, map[string]bool{}
	configKeys("", reflect.TypeFor[Config](), want, maps)
	for _, k := range notInReference {
		delete(want, k)
	}
	var missing, extra []string
	for k := range want {
		if !shown[k] {
			missing = append(missing, k)
		}
	}
	for k := range shown {
		if !want[k] && !underMap(k, want, maps) {
			extra = append(extra, k)
		}
	}
	slices.Sort(missing)
	slices.Sort(extra)
	if len(missing) > 0 {
		t.Errorf("keys of Config that neither reference file shows: %v", missing)
	}
	if len(extra) > 0 {
		t.Errorf("keys the reference files show that Config does not read: %v", extra)
	}

	file := filepath.Join(referenceDir, "jobsched.yaml")
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	ref, err := Parse(file, data)
	if err != nil {
		t.Fatal(err)
	}
	required := `
name: reports
namespace: batch
source:
  query: SELECT id, url FROM tasks WHERE status = 'waiting' ORDER BY created_at
  key: id
job:
  template: ../reports/job.yaml
`
	defaults, err := Parse(file, []byte(required))
	if err != nil {
		t.Fatal(err)
	}
	defaults.APIVersion, defaults.Kind = APIVersion, Kind // absent is this version
	for _, c := range []*Config{ref, defaults} {
		c.Template, c.Queues[0].Template = nil, nil
	}
	if diff := cmp.Diff(defaults, ref, cmpopts.EquateEmpty()); diff != "" {
		t.Errorf("jobsched.yaml sets an optional key to other than its default (-default +reference):\n%s", diff)
	}
}

// keyPaths adds the path of every key of a decoded YAML mapping, a list of mappings as name[].
func keyPaths(prefix string, v any, out map[string]bool) {
	switch v := v.(type) {
	case map[string]any:
		for k, sub := range v {
			out[prefix+k] = true
			keyPaths(prefix+k+".", sub, out)
		}
	case []any:
		for _, e := range v {
			if m, ok := e.(map[string]any); ok {
				delete(out, strings.TrimSuffix(prefix, "."))
				out[strings.TrimSuffix(prefix, ".")+"[]"] = true
				keyPaths(strings.TrimSuffix(prefix, ".")+"[].", m, out)
			}
		}
	}
}

// underMap says key is an entry of a map Config reads (job.requestsFrom.cpu under job.requestsFrom): its keys are
// the user's (resources), not keys of Config.
func underMap(key string, want, maps map[string]bool) bool {
	for k := range maps {
		if want[k] && strings.HasPrefix(key, k+".") {
			return true
		}
	}
	return false
}

// configKeys adds the path of every key t reads (its json names), down to the values that are not structs of ours,
// to out, and those whose values are maps by the user's names (job.requestsFrom) to maps too.
func configKeys(prefix string, t reflect.Type, out, maps map[string]bool) {
	for f := range t.Fields() {
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "" || name == "-" {
			continue
		}
		ft := f.Type
		if ft.Kind() == reflect.Pointer {
			ft = ft.Elem()
		}
		path := prefix + name
		if ft.Kind() == reflect.Slice && ft.Elem().Kind() == reflect.Struct {
			path += "[]"
			ft = ft.Elem()
		}
		out[path] = true
		if ft.Kind() == reflect.Map {
			maps[path] = true
		}
		if ft.Kind() == reflect.Struct && ft.PkgPath() == t.PkgPath() {
			configKeys(path+".", ft, out, maps)
		}
	}
}
