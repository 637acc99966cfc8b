package config

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// namesKeyOrLine matches one problem of a configuration error (after the file name) that says where it is: a key
// path (a resource name in it may have a domain: job.maxRequests.nvidia.com/gpu), or a line.
var namesKeyOrLine = regexp.MustCompile(`^(line \d+|yaml: line \d+|unknown key\(s\): |(apiVersion/kind|(queues\[\d+\] \([a-z0-9-]+\)\.)?[A-Za-z_][A-Za-z0-9_.\[\]/-]*): )|\(line \d+\)`)

// checkWhere fails unless every problem in err names a key or a line.
func checkWhere(t *testing.T, file string, err error) {
	t.Helper()
	for _, problem := range strings.Split(err.Error(), "\n") {
		// A template's problems are the config's job.template problem, each naming the template file.
		tpl := filepath.Join(filepath.Dir(file), "job.yaml") + ": "
		p := strings.TrimPrefix(problem, file+": ")
		p = strings.TrimPrefix(strings.TrimPrefix(p, "job.template: "+tpl), tpl)
		if strings.HasPrefix(p, "yaml: ") && !strings.HasPrefix(p, "yaml: line ") || !namesKeyOrLine.MatchString(p) {
			t.Errorf("problem %q names no key and no line (whole error: %q)", problem, err)
		}
	}
}

// FuzzConfigDecode throws random configuration and template files at Parse: it never panics, an error is always a
// configuration error whose every problem names a key or a line, and a configuration it accepts has its template.
// The seed corpus (testdata/fuzz/FuzzConfigDecode) runs with every go test.
func FuzzConfigDecode(f *testing.F) {
	job, err := os.ReadFile("testdata/job.yaml")
	if err != nil {
		f.Fatal(err)
	}
	f.Add([]byte(minimal), job)
	f.Add([]byte(minimal+"limits:\n  maxActive: ten\n"), []byte(tpl("  suspend: true\n")))
	f.Add([]byte("name: b\nqueues:\n- name: a\n  source: {query: q, key: id}\n  job: {template: job.yaml}\n  limits: {perGroup: {column: t, maxActive: 2}}\n"), job)
	f.Fuzz(func(t *testing.T, config, template []byte) {
		if strings.Contains(string(config), "/dev/") || strings.Contains(string(config), "/proc/") {
			t.Skip() // job.template could name a file that never ends
		}
		dir := t.TempDir()
		file := filepath.Join(dir, "jobsched.yaml")
		if err := os.WriteFile(filepath.Join(dir, "job.yaml"), template, 0o600); err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		cfg, err := Parse(file, config)
		if d := time.Since(start); d > 2*time.Second {
			t.Errorf("Parse took %v", d)
		}
		if err != nil {
			if !IsConfigError(err) {
				t.Errorf("%v is not a configuration error", err)
			}
			checkWhere(t, file, err)
			return
		}
		for i := range cfg.Queues {
			if tpl := cfg.QueueConfig(i).Template; tpl == nil || len(tpl.Spec.Template.Spec.Containers) == 0 {
				t.Errorf("accepted a configuration without a usable template for queue %d: %+v", i, cfg)
			}
		}
	})
}
