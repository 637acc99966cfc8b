package e2e

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"strings"
	"testing"
)

// TestScenariosSayParallel: every test of pkg/e2e calls t.Parallel() on its first line, where a reader sees it (go
// test would run one that does not alone, before all the parallel ones, and the suite would take that much longer),
// and so does a t.Run in it that starts a scenario on the shared cluster (newNodeEnv, newTaskScenario,
// newQueuesEnv): the helpers do not. It reads the sources, so it runs without the integration tag and a cluster.
func TestScenariosSayParallel(t *testing.T) {
	t.Parallel()
	files, err := filepath.Glob("*_test.go")
	if err != nil {
		t.Fatal(err)
	}
	starts := map[string]bool{"newNodeEnv": true, "newTaskScenario": true, "newQueuesEnv": true}
	fset := token.NewFileSet()
	checked, tests := 0, 0
	for _, name := range files {
		f, err := parser.ParseFile(fset, name, nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		// Each function literal or test function whose own body (not a nested literal's) starts a scenario.
		var check func(what string, body *ast.BlockStmt)
		check = func(what string, body *ast.BlockStmt) {
			starts0 := false
			ast.Inspect(body, func(n ast.Node) bool {
				switch n := n.(type) {
				case *ast.FuncLit:
					check(what+" (a t.Run in it)", n.Body)
					return false
				case *ast.CallExpr:
					if id, ok := n.Fun.(*ast.Ident); ok && starts[id.Name] {
						starts0 = true
					}
				}
				return true
			})
			if !starts0 {
				return
			}
			checked++
			if !firstIsParallel(body) {
				t.Errorf("%s: %s starts a scenario but its first line is not t.Parallel()", fset.Position(body.Pos()), what)
			}
		}
		for _, d := range f.Decls {
			fn, ok := d.(*ast.FuncDecl)
			if !ok || fn.Recv != nil || !strings.HasPrefix(fn.Name.Name, "Test") || fn.Name.Name == "TestMain" {
				continue
			}
			check(fn.Name.Name, fn.Body)
			tests++
			if !firstIsParallel(fn.Body) { // any test, scenario or not, that is not parallel runs alone before the others
				t.Errorf("%s: %s's first line is not t.Parallel(): it would run alone, before every parallel test", fset.Position(fn.Pos()), fn.Name.Name)
			}
		}
	}
	if checked == 0 || tests < 50 {
		t.Errorf("%d tests read, %d start a scenario: is the check reading pkg/e2e?", tests, checked)
	}
}

func firstIsParallel(body *ast.BlockStmt) bool {
	if len(body.List) == 0 {
		return false
	}
	st, ok := body.List[0].(*ast.ExprStmt)
	if !ok {
		return false
	}
	call, ok := st.X.(*ast.CallExpr)
	if !ok {
		return false
	}
	sel, ok := call.Fun.(*ast.SelectorExpr)
	return ok && sel.Sel.Name == "Parallel"
}
