// Package runinfo says where a results file's figures were measured: the commit, the machine's load.
// The bench (scripts/bench) and the e2e tests that write results files share it; it imports nothing of jobsched.
package runinfo

import (
	"bytes"
	"os"
	"os/exec"
	"strings"
)

// Commit is the repository's HEAD (12 hex digits), marked -dirty when the work tree has uncommitted changes; "?"
// outside git.
func Commit() string {
	out, err := exec.Command("git", "rev-parse", "--short=12", "HEAD").Output()
	if err != nil {
		return "?"
	}
	c := strings.TrimSpace(string(out))
	if st, err := exec.Command("git", "status", "--porcelain", "--untracked-files=no").Output(); err == nil && len(bytes.TrimSpace(st)) > 0 {
		c += "-dirty"
	}
	return c
}

// LoadAvg is the machine's load average over the last 1, 5 and 15 minutes (n of them, at most 3); "?" where
// /proc/loadavg cannot be read.
func LoadAvg(n int) string {
	data, err := os.ReadFile("/proc/loadavg")
	f := strings.Fields(string(data))
	if err != nil || len(f) < 3 {
		return "?"
	}
	return strings.Join(f[:min(max(n, 1), 3)], " ")
}
