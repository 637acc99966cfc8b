package config

import (
	"encoding/json"
	"fmt"
	"reflect"
	"sort"
	"strings"

	"sigs.k8s.io/yaml"
)

// decodeStrict decodes YAML into out. unknown lists every key that out has no field for, each by its full path
// (e.g. limits.maxActiv, spec.template.spec.containers[0].imag), which the plain decoder's error does not give; out
// is still filled so that the other keys can be validated too. err is a document that cannot be decoded at all.
func decodeStrict(data []byte, out any) (unknown, err error) {
	var tree any
	if err := yaml.Unmarshal(data, &tree); err != nil {
		return nil, err
	}
	if err := yaml.Unmarshal(data, out); err != nil {
		return nil, err
	}
	if keys := unknownKeys(tree, reflect.TypeOf(out), ""); len(keys) > 0 {
		sort.Strings(keys)
		return fmt.Errorf("unknown key(s): %s", strings.Join(keys, ", ")), nil
	}
	return nil, nil
}

var unmarshaler = reflect.TypeFor[json.Unmarshaler]()

func unknownKeys(v any, t reflect.Type, path string) []string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if reflect.PointerTo(t).Implements(unmarshaler) {
		return nil // a type with its own decoding (durations, quantities, …) checks itself
	}
	var out []string
	switch v := v.(type) {
	case map[string]any:
		switch t.Kind() {
		case reflect.Map:
			for k, child := range v {
				out = append(out, unknownKeys(child, t.Elem(), join(path, k))...)
			}
		case reflect.Struct:
			fields := jsonFields(t)
			for k, child := range v {
				ft, ok := fields[k]
				if !ok {
					out = append(out, join(path, k))
					continue
				}
				out = append(out, unknownKeys(child, ft, join(path, k))...)
			}
		}
	case []any:
		if t.Kind() == reflect.Slice {
			for i, child := range v {
				out = append(out, unknownKeys(child, t.Elem(), fmt.Sprintf("%s[%d]", path, i))...)
			}
		}
	}
	return out
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
