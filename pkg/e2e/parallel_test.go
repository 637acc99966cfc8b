package e2e

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"strings"
	"testing"
)

// TestScenariosSayParallel: a test that starts a scenario on the shared cluster (newNodeEnv, newTaskScenario,
// newQueuesEnv) calls t.Parallel() on its first line, where a reader sees it: the helpers do not (go test would run
// such a test alone, before all the parallel ones, and the suite would take that much longer). It reads the sources,
// so it runs without the integration tag and a cluster.
func TestScenariosSayParallel(t *testing.T) {
	files, err := filepath.Glob("*_test.go")
	if err != nil {
		t.Fatal(err)
	}
	starts := map[string]bool{"newNodeEnv": true, "newTaskScenario": true, "newQueuesEnv": true}
	fset := token.NewFileSet()
	checked := 0
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
			if fn, ok := d.(*ast.FuncDecl); ok && fn.Recv == nil && strings.HasPrefix(fn.Name.Name, "Test") {
				check(fn.Name.Name, fn.Body)
			}
		}
	}
	if checked == 0 {
		t.Error("no test starts a scenario: is the check reading pkg/e2e?")
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
