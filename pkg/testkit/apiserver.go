package testkit

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"testing"
)

// Kubeconfig writes a kubeconfig for an API server at server (a token user, namespace batch) and returns its path.
func Kubeconfig(t *testing.T, server string) string {
	t.Helper()
	f := filepath.Join(t.TempDir(), "kubeconfig")
	cfg := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: %q}}]
users: [{name: u, user: {token: t}}]
contexts: [{name: x, context: {cluster: c, user: u, namespace: batch}}]
current-context: x
`, server)
	if err := os.WriteFile(f, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	return f
}

// WatchEvents answers a WATCH with lines, one watch event each, flushed one by one.
func WatchEvents(w http.ResponseWriter, lines ...string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	for _, l := range lines {
		fmt.Fprintln(w, l)
		w.(http.Flusher).Flush()
	}
}
