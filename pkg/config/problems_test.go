package config

import (
	"fmt"
	"strings"
	"testing"
)

// tpl is a valid template with extra spec lines (indented by two spaces) before its pod template.
func tpl(spec string) string {
	return "apiVersion: batch/v1\nkind: Job\nspec:\n" + spec + `  template:
    spec:
      restartPolicy: Never
      containers:
      - name: worker
        image: worker:1
`
}

// TestLoadProblems checks that each problem of the config or template file is an error naming the file, the key by
// its full path, and what is wrong in the file's own words, all of them at once.
func TestLoadProblems(t *testing.T) {
	tests := []struct {
		name   string
		config string
		job    string
		want   []string // every one must appear in the error
	}{
		// YAML strictness: repeated keys, a second document, types read as written.
		{"repeated key", minimal + "name: other\n", "",
			[]string{"name: the key is written twice (first on line 2)", "line 8"}},
		{"repeated nested key", minimal + "limits:\n  maxActive: 1\n  maxActive: 2\n", "",
			[]string{"limits.maxActive: the key is written twice", "line 10"}},
		{"repeated key in a sequence item", minimal + "env:\n  passthrough: [A]\n  passthrough: [B]\n", "",
			[]string{"env.passthrough: the key is written twice"}},
		{"second document", minimal + "---\nname: other\n", "", []string{"second YAML document", "line 8"}},
		{"not an integer", minimal + "limits:\n  maxActive: ten\n", "", []string{`limits.maxActive: "ten" is not an integer (line 9)`}},
		{"quoted number is not an integer", minimal + "limits:\n  maxPerTick: \"5\"\n", "", []string{`limits.maxPerTick: "5" is not an integer`}},
		{"float is not an integer", minimal + "limits:\n  maxPerTick: 1.5\n", "", []string{`limits.maxPerTick: 1.5 is not an integer`}},
		{"not a bool", minimal + "limits:\n  blockOnUnschedulable: maybe\n", "",
			[]string{`limits.blockOnUnschedulable: "maybe" is not true or false`}},
		{"bad duration", strings.Replace(minimal, "  key: id\n", "  key: id\n  timeout: 5x\n", 1), "",
			[]string{`source.timeout: "5x" is not a duration (e.g. 30s, 5m) (line 6)`}},
		{"number for a string", strings.Replace(minimal, "key: id", "key: 12", 1), "", []string{`source.key: 12 is not a string (quote it: "12")`}},
		{"list for a string", strings.Replace(minimal, "key: id", "key: [a]", 1), "", []string{`source.key: a list is not a string`}},
		{"mapping expected", minimal + "limits: 3\n", "", []string{"limits: must be a mapping"}},
		{"list expected", minimal + "env:\n  columns: url\n", "", []string{`env.columns: must be a list`}},
		{"the file is a list", "- a\n- b\n", "", []string{"must be a mapping", "line 1"}},
		{"not YAML", "name: [\n", "", []string{"yaml: line"}},
		{"aliases of aliases", minimal + "env:\n  columns: &a0 [x, x, x, x, x, x, x, x, x, x]\n" + laughs(7) +
			"limits:\n  capacity: *a7\n", "", []string{"limits.capacity", "the file expands to more than"}},
		// The file: 10 KB of aliases of aliases over a 10,000-byte string, 46 s and 3.65 GB before the bound.
		{"aliases of aliases over a long string", minimal + "env:\n  prefix: &a0 " + strings.Repeat("X", 10000) + "\n" + laughs(4) +
			"limits:\n  capacity: *a4\n", "", []string{"gc.l1", "the file expands to more than 4194304 bytes (aliases of aliases)"}},
		{"a template larger than any Job", minimal, tpl("") + "# " + strings.Repeat("x", 4<<20) + "\n",
			[]string{"job.template:", "job.yaml is larger than 4194304 bytes"}},
		{"an alias inside its own value", minimal + "limits:\n  capacity: &a [x, *a]\n", "",
			[]string{"limits.capacity[1][1]: the alias *a is inside the value it names"}},
		{"an alias inside its own template value", minimal, strings.Replace(tpl(""), "image: worker:1\n",
			"image: worker:1\n        resources:\n          limits: {cpu: &q [*q]}\n", 1),
			[]string{"resources.limits.cpu[0][0]: the alias *q is inside"}},

		{"every problem at once", minimal + "limits:\n  maxActive: ten\n  maxPerTick: -1\n  capacity: lots\n  maxActiv: 3\n" +
			"gc:\n  succeededRetention: 5x\n", "",
			[]string{`limits.maxActive: "ten" is not an integer`, "limits.maxPerTick: must not be negative",
				`limits.capacity: "lots"`, "unknown key(s): limits.maxActiv", `gc.succeededRetention: "5x" is not a duration`}},

		{"template: repeated key", minimal, tpl("  backoffLimit: 1\n  backoffLimit: 2\n"),
			[]string{"job.yaml", "spec.backoffLimit: the key is written twice (first on line 4)"}},
		{"template: second document", minimal, tpl("") + "---\napiVersion: v1\nkind: Pod\n",
			[]string{"job.yaml", "second YAML document"}},
		{"template: bad quantity", minimal, strings.Replace(tpl(""), "image: worker:1\n",
			"image: worker:1\n        resources:\n          requests:\n            cpu: 2 cores\n            memory: 1Gi\n", 1),
			[]string{"job.yaml", `spec.template.spec.containers[0].resources.requests.cpu: "2 cores" is not a quantity (e.g. 500m, 2Gi) (line 12)`}},
		{"template: not an integer", minimal, tpl("  backoffLimit: many\n"), []string{`spec.backoffLimit: "many" is not an integer`}},
		{"template: problems at once", minimal, tpl("  backoffLimit: many\n  suspend: true\n  backofLimit: 1\n"),
			[]string{`spec.backoffLimit: "many" is not an integer`, "spec.suspend: must not be true", "unknown key(s): spec.backofLimit"}},

		// Templates whose Jobs would hold a slot for ever.
		{"template: suspend", minimal, tpl("  suspend: true\n"), []string{"spec.suspend: must not be true", "never runs"}},
		{"template: parallelism 0", minimal, tpl("  parallelism: 0\n"), []string{"spec.parallelism: must not be 0", "no pod"}},
		{"template: managedBy", minimal, tpl("  managedBy: example.com/other\n"),
			[]string{`spec.managedBy: must be empty or kubernetes.io/job-controller, not "example.com/other"`}},

		// Passthrough globs that copy everything.
		{"passthrough *", minimal + "env:\n  passthrough: [S3_*, \"*\", \"**\", \"*?\", \"[A-Z]*\"]\n", "",
			[]string{`env.passthrough[1]: "*" would copy every variable`, `env.passthrough[2]: "**"`,
				`env.passthrough[3]: "*?"`, `env.passthrough[4]: "[A-Z]*"`}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := loadFails(t, tc.config, tc.job, tc.want)
			if strings.Contains(err.Error(), "json:") || strings.Contains(err.Error(), "Go struct") {
				t.Errorf("error %q speaks of Go, not of the file", err)
			}
		})
	}
}

// TestLoadAccepts checks what must still load: YAML 1.1 booleans, a trailing ---, anchors, the template fields
// jobsched allows.
func TestLoadAccepts(t *testing.T) {
	tests := []struct {
		name, config, job string
	}{
		{"trailing document marker", minimal + "---\n", ""},
		{"document start marker", "---\n" + minimal, ""},
		{"yes and off", minimal + "limits:\n  blockOnUnschedulable: yes\n  capacity: off\n", ""},
		{"quoted off", minimal + "limits:\n  capacity: \"off\"\n", ""},
		{"null value is the default", minimal + "limits:\n  maxActive: null\n  maxPerTick: ~\n", ""},
		{"anchors and aliases", minimal + "env:\n  columns: &cols [a, b]\n  passthrough: *cols\n", ""},
		{"merge keys", minimal, strings.Replace(tpl(""), "kind: Job\n",
			"kind: Job\nmetadata:\n  labels: &l {team: a, tier: b}\n  annotations:\n    <<: *l\n    tier: c\n", 1)},
		{"a glob with a fixed start", minimal + "env:\n  passthrough: [S3_*, \"A?\", \"_x[0-9]*\"]\n", ""},
		{"template: fields jobsched allows", minimal, tpl("  suspend: false\n  parallelism: 2\n  completions: 2\n" +
			"  managedBy: kubernetes.io/job-controller\n  activeDeadlineSeconds: 600\n")},
		{"template: quantities and int-or-string", minimal, strings.Replace(tpl(""), "image: worker:1\n",
			"image: worker:1\n        resources:\n          requests: {cpu: 500m, memory: 1Gi, ephemeral-storage: 2}\n"+
				"        ports: [{containerPort: 8080}]\n        livenessProbe: {httpGet: {port: http}}\n", 1)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			files := map[string]string{"jobsched.yaml": tc.config}
			if tc.job != "" {
				files["job.yaml"] = tc.job
			}
			if _, err := Load(write(t, files), ""); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestDecodeValues checks the values decoded, not only that decoding succeeds.
func TestDecodeValues(t *testing.T) {
	file := write(t, map[string]string{"jobsched.yaml": minimal + "limits:\n  maxActive: 0x10\n  maxPerTick: 010\n  blockOnUnschedulable: off\n" +
		"env:\n  columns: &c [a, 'b']\n  passthrough: *c\n"})
	cfg, err := Load(file, "")
	if err != nil {
		t.Fatal(err)
	}
	if cfg.MaxActive() != 16 || cfg.MaxPerTick() != 10 || cfg.BlockOnUnschedulable() || strings.Join(cfg.Env.Passthrough, ",") != "a,b" {
		t.Errorf("maxActive %d, maxPerTick %d, blockOnUnschedulable %v, passthrough %q", cfg.MaxActive(), cfg.MaxPerTick(), cfg.BlockOnUnschedulable(), cfg.Env.Passthrough)
	}
	c := cfg.Template.Spec.Template.Spec.Containers
	if len(c) != 1 || c[0].Name != "worker" || c[0].Image != "worker:1" {
		t.Errorf("template containers %+v", c)
	}
}

// laughs writes n levels of lists of ten aliases of the level below (10^n values from a few hundred bytes), under
// gc, where lists are not expected: the decoder must stop counting long before it has expanded them.
func laughs(n int) string {
	var b strings.Builder
	b.WriteString("gc:\n")
	for i := 1; i <= n; i++ {
		fmt.Fprintf(&b, "  l%d: &a%d [", i, i)
		for j := range 10 {
			if j > 0 {
				b.WriteString(", ")
			}
			fmt.Fprintf(&b, "*a%d", i-1)
		}
		b.WriteString("]\n")
	}
	return b.String()
}

// loadFails loads config (and job as job.yaml, when given) and wants a config error that names each of want and the
// file; it returns that error.
func loadFails(t *testing.T, config, job string, want []string) error {
	t.Helper()
	files := map[string]string{"jobsched.yaml": config}
	if job != "" {
		files["job.yaml"] = job
	}
	file := write(t, files)
	_, err := Load(file, "")
	if err == nil {
		t.Fatal("no error")
	}
	if !IsConfigError(err) {
		t.Errorf("%v is not a config error", err)
	}
	for _, w := range append(want, file) {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error %q does not mention %q", err, w)
		}
	}
	return err
}
