package main

import (
	"os/exec"
	"strings"
	"testing"
)

// TestNoClientset: the binary links none of client-go's clientset (k8s.io/client-go/kubernetes and its scheme,
// typed clients and fake), nor what imports it (discovery, apply configurations, tools/events,
// tools/leaderelection, tools/record): its scheme registers every API group when the process starts, which costs
// every run megabytes of memory before any work (scripts/bench/README.md, Memory). jobsched's client is
// pkg/kube.Interface; only tests may use the clientset.
func TestNoClientset(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", ".").Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	banned := []string{"k8s.io/client-go/kubernetes", "k8s.io/client-go/discovery", "k8s.io/client-go/applyconfigurations",
		"k8s.io/client-go/tools/events", "k8s.io/client-go/tools/leaderelection"}
	deps := strings.Fields(string(out))
	if len(deps) < 100 {
		t.Fatalf("go list -deps listed %d packages: %q", len(deps), deps)
	}
	for _, p := range deps {
		for _, b := range banned {
			if p == b || strings.HasPrefix(p, b+"/") || p == "k8s.io/client-go/tools/record" {
				t.Errorf("the binary links %s", p)
			}
		}
	}
}
