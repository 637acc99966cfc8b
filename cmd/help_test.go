package cmd

import (
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"
	"sigs.k8s.io/yaml"

	"github.com/jobsched/jobsched/pkg/version"
)

func TestVersion(t *testing.T) {
	want := version.Get()
	line := "jobsched " + want.String() + "\n"
	decodeJSON := func(s string) (version.Info, error) {
		var v version.Info
		err := json.Unmarshal([]byte(s), &v)
		return v, err
	}
	decodeYAML := func(s string) (version.Info, error) {
		var v version.Info
		err := yaml.UnmarshalStrict([]byte(s), &v)
		return v, err
	}
	tests := []struct {
		name   string
		args   []string
		code   int
		decode func(string) (version.Info, error) // nil: stdout must be the one line
	}{
		{"version", []string{"version"}, 0, nil},
		{"--version", []string{"--version"}, 0, nil},
		{"version needs no config", []string{"version", "--config", "/nonexistent/jobsched.yaml"}, 0, nil},
		{"version -o json", []string{"version", "-o", "json"}, 0, decodeJSON},
		{"version -o yaml", []string{"version", "-o", "yaml"}, 0, decodeYAML},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			code, stdout, stderr := runCmd(t, tc.args...)
			if code != tc.code {
				t.Fatalf("exit %d, want %d; stderr:\n%s", code, tc.code, stderr)
			}
			if tc.decode == nil {
				if stdout != line {
					t.Errorf("stdout %q, want %q", stdout, line)
				}
				return
			}
			got, err := tc.decode(stdout)
			if err != nil {
				t.Fatalf("decoding %q: %v", stdout, err)
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("document (-want +got):\n%s", diff)
			}
		})
	}

	t.Run("bad -o is a usage error", func(t *testing.T) {
		code, stdout, stderr := runCmd(t, "version", "-o", "xml")
		if code != exitUsage || stdout != "" || !strings.Contains(stderr, `-o: "xml"`) {
			t.Errorf("exit %d, stdout %q, stderr %q; want exit 2, no output, the -o error", code, stdout, stderr)
		}
	})
}

// complete asks cobra's hidden __complete command, as the shell scripts of `jobsched completion` do, and returns
// the offered values.
func complete(t *testing.T, args ...string) []string {
	t.Helper()
	code, stdout, stderr := runCmd(t, append([]string{"__complete"}, args...)...)
	if code != 0 {
		t.Fatalf("__complete %v: exit %d\n%s", args, code, stderr)
	}
	var got []string
	for _, l := range strings.Split(strings.TrimSpace(stdout), "\n") {
		if !strings.HasPrefix(l, ":") { // the last line is the directive
			got = append(got, l)
		}
	}
	return got
}

func TestCompletion(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want []string
	}{
		{"status -o", []string{"status", "-o", ""}, []string{"table", "json", "yaml"}},
		{"status --output=", []string{"status", "--output", ""}, []string{"table", "json", "yaml"}},
		{"dry-run -o", []string{"dry-run", "-o", ""}, []string{"table", "json", "yaml", "jobs"}},
		{"version -o", []string{"version", "-o", ""}, []string{"json", "yaml"}},
		{"--log-level on a subcommand", []string{"tick", "--log-level", ""}, []string{"debug", "info", "warn", "error"}},
		{"--log-level on the root", []string{"--log-level", ""}, []string{"debug", "info", "warn", "error"}},
		{"--log-format", []string{"gc", "--log-format", ""}, []string{"json", "console"}},
		{"the completion command exists", []string{"completion", ""}, []string{"bash", "fish", "powershell", "zsh"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := complete(t, tc.args...)
			// cobra filters fixed values by the prefix typed so far; with "" it returns them all (in order).
			for i := range got {
				got[i], _, _ = strings.Cut(got[i], "\t") // drop a description
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("completions (-want +got):\n%s", diff)
			}
		})
	}
}

// Every value completion offers for -o is one the command accepts, and a value it does not offer is refused: the
// completion and the command's check cannot drift apart unnoticed.
func TestOutputCompletionsAccepted(t *testing.T) {
	noConfig := filepath.Join(t.TempDir(), "none.yaml")
	for cmdName, formats := range outputFormats {
		for _, f := range append(slices.Clone(formats), "xml") {
			t.Run(cmdName+" -o "+f, func(t *testing.T) {
				// A config that does not exist: the command stops right after checking its flags.
				_, _, stderr := runCmd(t, cmdName, "-o", f, "--config", noConfig)
				refused := strings.Contains(stderr, fmt.Sprintf("-o: %q", f))
				if f == "xml" && !refused {
					t.Errorf("%s -o xml is not refused as a usage error (is -o still checked?):\n%s", cmdName, stderr)
				}
				if f != "xml" && refused {
					t.Errorf("completion offers %q but %s refuses it:\n%s", f, cmdName, stderr)
				}
			})
		}
	}
}

func TestExamples(t *testing.T) {
	root := newRootCmd(io.Discard, io.Discard)
	for _, c := range append(root.Commands(), root) {
		if c.Hidden || c.Name() == "help" || c.Name() == "completion" || c.IsAdditionalHelpTopicCommand() {
			continue
		}
		t.Run(c.Name(), func(t *testing.T) {
			if strings.TrimSpace(c.Example) == "" {
				t.Fatalf("%s has no Example", c.CommandPath())
			}
			n := 0
			for _, line := range strings.Split(c.Example, "\n") {
				line = strings.TrimSpace(line)
				if !strings.HasPrefix(line, "jobsched ") {
					continue
				}
				n++
				command, _, _ := strings.Cut(line, " | ") // what a pipe feeds is another program's
				args := strings.Fields(command)[1:]
				// Each example is parsed by a fresh command tree, as the shell would run it.
				r := newRootCmd(io.Discard, io.Discard)
				r.InitDefaultVersionFlag() // cobra adds --version when it executes
				sub, rest, err := r.Find(args)
				if err != nil {
					t.Errorf("example %q: %v", line, err)
					continue
				}
				if err := sub.ParseFlags(rest); err != nil {
					t.Errorf("example %q: %v", line, err)
				}
			}
			if n == 0 {
				t.Errorf("the Example of %s has no line starting with \"jobsched \":\n%s", c.CommandPath(), c.Example)
			}
		})
	}
}

// TestHelpFlagNames: no flag's help shows a back-quoted word as its value's name (pflag takes `word` as the name).
func TestHelpFlagNames(t *testing.T) {
	for _, sub := range []string{"tick", "gc", "status", "dry-run", "retry", "version"} {
		code, out, _ := runCmd(t, sub, "--help")
		if code != 0 || strings.Contains(out, "--timeout pass") {
			t.Errorf("%s --help (exit %d) shows a value name taken from back quotes:\n%s", sub, code, out)
		}
	}
}

// TestHelpTopics: `jobsched help TOPIC` prints the topic and nothing else (no usage, no flags), every line fits a
// terminal, `jobsched --help` lists each topic and shell completion offers it after help.
func TestHelpTopics(t *testing.T) {
	const width = 110
	offered := map[string]bool{}
	for _, c := range complete(t, "help", "") {
		name, _, _ := strings.Cut(c, "\t")
		offered[name] = true
	}
	_, rootHelp, _ := runCmd(t, "--help")
	_, topicsList, found := strings.Cut(rootHelp, "Additional help topics:\n")
	if !found {
		t.Fatalf("jobsched --help has no Additional help topics:\n%s", rootHelp)
	}
	for _, topic := range allTopics() {
		t.Run(topic.name, func(t *testing.T) {
			code, out, stderr := runCmd(t, "help", topic.name)
			if want := topic.long + "\n\n"; code != 0 || out != want || stderr != "" {
				t.Errorf("help %s: exit %d, stderr %q, stdout (-want +got):\n%s", topic.name, code, stderr, cmp.Diff(want, out))
			}
			for i, line := range strings.Split(topic.long, "\n") {
				if n := utf8.RuneCountInString(line); n > width {
					t.Errorf("line %d is %d characters, more than %d: %q", i+1, n, width, line)
				}
			}
			if !offered[topic.name] {
				t.Errorf("completion of jobsched help does not offer %s", topic.name)
			}
			if !strings.Contains(topicsList, "jobsched "+topic.name+" ") {
				t.Errorf("jobsched --help does not list the topic %s:\n%s", topic.name, topicsList)
			}
		})
	}
}

// TestHelpTopicFiles: every Markdown file in cmd/help is a topic that renders: `jobsched help NAME` prints the file's
// text after its heading, exactly, and `jobsched --help` lists NAME with the heading. The files read are those on
// disk, so a file the embed pattern missed fails here.
func TestHelpTopicFiles(t *testing.T) {
	entries, err := os.ReadDir("help")
	if err != nil {
		t.Fatal(err)
	}
	_, rootHelp, _ := runCmd(t, "--help")
	var names []string
	for _, e := range entries {
		name, isMD := strings.CutSuffix(e.Name(), ".md")
		if e.IsDir() || !isMD {
			t.Errorf("cmd/help/%s: only topics (NAME.md) belong there", e.Name())
			continue
		}
		names = append(names, name)
		t.Run(name, func(t *testing.T) {
			data, err := os.ReadFile(filepath.Join("help", e.Name()))
			if err != nil {
				t.Fatal(err)
			}
			heading, body, _ := strings.Cut(string(data), "\n\n")
			code, out, stderr := runCmd(t, "help", name)
			if want := body + "\n"; code != 0 || out != want || stderr != "" {
				t.Errorf("help %s: exit %d, stderr %q, stdout (-want +got):\n%s", name, code, stderr, cmp.Diff(want, out))
			}
			listed := regexp.MustCompile(`(?m)^  jobsched ` + regexp.QuoteMeta(name) + ` +` + regexp.QuoteMeta(strings.TrimPrefix(heading, "# ")) + `$`)
			if !listed.MatchString(rootHelp) {
				t.Errorf("jobsched --help does not list %s with %q:\n%s", name, heading, rootHelp)
			}
		})
	}
	written, err := writtenTopics(helpFiles)
	if err != nil {
		t.Fatal(err)
	}
	var embedded []string
	for _, tp := range written {
		embedded = append(embedded, tp.name)
	}
	if !slices.Equal(embedded, names) || len(names) == 0 {
		t.Errorf("embedded topics %v, want the files of cmd/help %v", embedded, names)
	}
}

// TestParseTopic: a help file is "# SHORT", a blank line, then the text; anything else is refused.
func TestParseTopic(t *testing.T) {
	for _, tc := range []struct {
		name, md string
		want     topic
		wantErr  bool
	}{
		{name: "heading and text", md: "# Short line\n\nFirst line.\n\n    indented\n", want: topic{"x", "Short line", "First line.\n\n    indented"}},
		{name: "no final newline", md: "# S\n\ntext", want: topic{"x", "S", "text"}},
		{name: "no heading", md: "Short\n\ntext\n", wantErr: true},
		{name: "heading of two lines", md: "# S\nmore\n\ntext\n", wantErr: true},
		{name: "empty heading", md: "# \n\ntext\n", wantErr: true},
		{name: "no text", md: "# S\n\n\n", wantErr: true},
		{name: "no blank line", md: "# S\ntext\n", wantErr: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parseTopic("x", tc.md)
			if (err != nil) != tc.wantErr || got != tc.want {
				t.Errorf("parseTopic(%q) = %+v, %v; want %+v, error %v", tc.md, got, err, tc.want, tc.wantErr)
			}
		})
	}
}

// helpReference is a `jobsched help WORD` in the documentation.
var helpReference = regexp.MustCompile("jobsched help ([a-z][a-z-]*)")

// TestDocsNameHelpTopics: every `jobsched help WORD` in the repository's Markdown and YAML files (the annotated
// manifests) and in the topics themselves names a topic or a command, so a reader sent there finds it.
func TestDocsNameHelpTopics(t *testing.T) {
	root := newRootCmd(io.Discard, io.Discard)
	exists := map[string]bool{}
	for _, c := range root.Commands() {
		exists[c.Name()] = true
	}
	check := func(where, text string) {
		for _, m := range helpReference.FindAllStringSubmatch(text, -1) {
			if !exists[m[1]] {
				t.Errorf("%s names `jobsched help %s`, which is no topic or command", where, m[1])
			}
		}
	}
	for _, topic := range allTopics() {
		check("the topic "+topic.name, topic.long)
	}
	n := 0
	err := filepath.WalkDir("..", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == ".git" || d.Name() == "testdata") {
			return filepath.SkipDir
		}
		if d.IsDir() || !(strings.HasSuffix(path, ".md") || strings.HasSuffix(path, ".yaml")) {
			return nil
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		n += len(helpReference.FindAllIndex(data, -1))
		check(path, string(data))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if n == 0 {
		t.Error("no Markdown file names a `jobsched help` topic: is the walk reading the repository?")
	}
}

// documentPaths reads the section of `jobsched help documents` whose title starts with title: the path of each
// field ("capacity.nodes[].name") and, for a field listed "as X", X.
func documentPaths(t *testing.T, title string) (paths map[string]bool, alias map[string]string) {
	t.Helper()
	paths, alias = map[string]bool{}, map[string]string{}
	_, section, found := strings.Cut(documentsTopic().long, "\n\n"+title)
	if !found {
		t.Fatalf("jobsched help documents has no section %q", title)
	}
	section, _, _ = strings.Cut(section, "\n\n")
	var stack []string
	for _, line := range strings.Split(section, "\n")[1:] {
		depth := (len(line)-len(strings.TrimLeft(line, " ")))/2 - 1
		f := strings.Fields(line)
		stack = append(stack[:depth], f[0])
		path := strings.Join(stack, ".")
		paths[path] = true
		if _, as, ok := strings.Cut(line, ", as "); ok {
			alias[path], _, _ = strings.Cut(as, ",")
		}
	}
	return paths, alias
}

// TestDocumentsTopic: every field of the documents in the goldens (status with and without queues; dry-run's plan
// of several configs) is in `jobsched help documents` at its path, so the list made from the types holds what the
// encoder writes.
func TestDocumentsTopic(t *testing.T) {
	for _, tc := range []struct {
		title string
		files []string
	}{
		{"jobsched status -o", []string{"testdata/golden-status/status.json", "testdata/golden-status/queues/status.json"}},
		{"jobsched dry-run -o", []string{"testdata/golden/minimal/dry-run.json", "testdata/golden/demo/dry-run.json",
			"testdata/golden/env-retry/dry-run.json", "testdata/golden/kueue/dry-run.json"}},
	} {
		paths, alias := documentPaths(t, tc.title)
		// known resolves a path through the "as X" of its longest aliased prefix.
		var known func(path string) bool
		known = func(path string) bool {
			if paths[path] {
				return true
			}
			for from, to := range alias {
				if rest, ok := strings.CutPrefix(path, from+"."); ok {
					return known(to + "." + rest)
				}
			}
			return false
		}
		var walk func(file, path string, v any)
		walk = func(file, path string, v any) {
			obj, ok := v.(map[string]any)
			if !ok {
				return
			}
			for k, e := range obj {
				name := strings.TrimPrefix(path+"."+k, ".")
				switch e := e.(type) {
				case []any:
					name += "[]"
					if !known(name) {
						t.Errorf("%s: %s is not in jobsched help documents", file, name)
					}
					for _, item := range e {
						walk(file, name, item)
					}
				case map[string]any:
					if known(name + "{}") {
						continue // a map by name: its keys are values
					}
					if !known(name) {
						t.Errorf("%s: %s is not in jobsched help documents", file, name)
					}
					walk(file, name, e)
				default:
					if !known(name) && !known(name+"[]") && !known(name+"{}") { // null: an empty list or map
						t.Errorf("%s: %s is not in jobsched help documents", file, name)
					}
				}
			}
		}
		for _, file := range tc.files {
			data, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			var doc any
			if err := json.Unmarshal(data, &doc); err != nil {
				t.Fatalf("%s: %v", file, err)
			}
			if tc.title == "jobsched dry-run -o" {
				for _, c := range doc.(map[string]any)["creates"].([]any) {
					delete(c.(map[string]any), "job") // a Kubernetes Job: the API's reference has its fields
				}
			}
			walk(file, "", doc)
		}
	}
}
