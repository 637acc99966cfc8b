package main

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// modeWords are the concepts of one capacity mode or another (Kueue's queues and Workloads, the autoscaler's
// NodePools, its word and its grace, the limits only one mode reads, config's mode names): shared code asks the
// mode's optional interfaces (capacity.Bounder, Waiter, Inspector, Queuer, Labeler, PodFollower) and never names
// them. The quotas are not here: every mode that fits counts them (nodes too).
var modeWords = regexp.MustCompile(`(?i)kueue|autoscal|karpenter|nodepool|nodeclaim|workload|localqueue|maxqueued|maxpending|worddue|wordgrace|waitingfornodes|^capacity(nodes|quota|off|kueue|autoscale)$`)

// modePackages are the packages of the modes and of what only one mode reads; the wiring (pkg/capacity/modes) is
// imported by one file.
var modePackages = regexp.MustCompile(`^github\.com/jobsched/jobsched/pkg/(kueue|autoscaler|capacity/(autoscale|kueue|nodes|off|quota|fixed|modes))(/|$)`)

// modesWiring is the one file of the shared code that may import the modes (a blank import of pkg/capacity/modes).
const modesWiring = "pkg/scheduler/modes.go"

// TestSharedCodeNamesNoMode: the Go code of the scheduler, the reports, the commands and the Job renderer (tests
// aside) names no capacity mode's own concepts, in an identifier or an import: a mode is a package under
// pkg/capacity that registers itself, and a new one is that package and one import in pkg/capacity/modes.
func TestSharedCodeNamesNoMode(t *testing.T) {
	for _, dir := range []string{"pkg/scheduler", "pkg/report", "pkg/render", "cmd"} {
		files, err := filepath.Glob(filepath.Join(dir, "*.go"))
		if err != nil {
			t.Fatal(err)
		}
		if len(files) == 0 {
			t.Fatalf("%s: no Go file", dir)
		}
		for _, file := range files {
			if strings.HasSuffix(file, "_test.go") {
				continue
			}
			src, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			fset := token.NewFileSet()
			f, err := parser.ParseFile(fset, file, src, parser.SkipObjectResolution)
			if err != nil {
				t.Fatal(err)
			}
			for _, imp := range f.Imports {
				path, _ := strconv.Unquote(imp.Path.Value)
				if modePackages.MatchString(path) && !(filepath.ToSlash(file) == modesWiring && strings.HasSuffix(path, "/capacity/modes")) {
					t.Errorf("%s: imports %s, a capacity mode's package", fset.Position(imp.Pos()), path)
				}
			}
			ast.Inspect(f, func(n ast.Node) bool {
				if id, ok := n.(*ast.Ident); ok && modeWords.MatchString(id.Name) {
					t.Errorf("%s: %s names a capacity mode's own concept", fset.Position(id.Pos()), id.Name)
				}
				return true
			})
		}
	}
}
