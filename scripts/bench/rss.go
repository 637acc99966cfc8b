package main

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
)

// timedCmd is a jobsched run under /usr/bin/time, which writes the run's own peak resident set size to a file. The
// ru_maxrss os/exec gives for a child is no measure of it: Go starts a child as a vfork of the bench, and at exec the
// kernel carries the bench's own peak into the child's maxrss, so it reads max(bench, child) (a 5,000-node fill run
// and its reference's read the same 126.1 MB, the bench's). GNU time forks the run from its own small process.
type timedCmd struct {
	*exec.Cmd
	out string // the file time writes the peak to (kilobytes, on its last line)
}

func (b *bench) timedCommand(bin string, args ...string) (*timedCmd, error) {
	f, err := os.CreateTemp(b.dir, "rss-*")
	if err != nil {
		return nil, err
	}
	if err := f.Close(); err != nil {
		return nil, err
	}
	return &timedCmd{Cmd: exec.Command("/usr/bin/time", append([]string{"-f", "%M", "-o", f.Name(), bin}, args...)...), out: f.Name()}, nil
}

// rssMB is the run's peak resident set size in MB (10^6 bytes), once it has exited.
func (c *timedCmd) rssMB() (float64, error) {
	b, err := os.ReadFile(c.out)
	_ = os.Remove(c.out)
	if err != nil {
		return 0, err
	}
	return parseTimeRSS(string(b))
}

// parseTimeRSS reads time's -f %M output: the kilobytes on its last line (a line before it says the command exited
// non-zero or by a signal).
func parseTimeRSS(s string) (float64, error) {
	f := strings.Fields(s)
	if len(f) == 0 {
		return 0, errors.New("/usr/bin/time wrote no peak RSS")
	}
	kb, err := strconv.ParseInt(f[len(f)-1], 10, 64)
	if err != nil {
		return 0, fmt.Errorf("/usr/bin/time's peak RSS %q: %w", s, err)
	}
	return float64(kb) * 1024 / 1e6, nil
}

// terminate sends SIGTERM to the run (time's child; time itself would die of it and leave the run behind).
func (c *timedCmd) terminate() error {
	if c.Cmd == nil || c.Process == nil { // never started
		return nil
	}
	pid := c.Process.Pid
	children, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/children", pid, pid))
	if err != nil {
		return err
	}
	for _, p := range strings.Fields(string(children)) {
		n, err := strconv.Atoi(p)
		if err != nil {
			return err
		}
		if err := syscall.Kill(n, syscall.SIGTERM); err != nil {
			return err
		}
	}
	return nil
}

// gcTraceHeapMB is the largest heap a run's GODEBUG=gctrace=1 lines report ("gc 7 @1.2s 3%: …, 22->24->14 MB, 28 MB
// goal, …": the heap when the collection began, when it ended and what it left live, in MiB), 0 when it has none:
// with the peak RSS, it says how much of the peak is the heap (BENCH_FILL_GODEBUG).
func gcTraceHeapMB(stderr string) float64 {
	var most float64
	for _, line := range strings.Split(stderr, "\n") {
		if !strings.HasPrefix(line, "gc ") {
			continue
		}
		for _, f := range strings.Split(line, ", ") {
			heap, ok := strings.CutSuffix(f, " MB")
			if !ok || !strings.Contains(heap, "->") {
				continue
			}
			for _, n := range strings.Split(heap, "->") {
				if v, err := strconv.ParseFloat(n, 64); err == nil {
					most = max(most, v)
				}
			}
		}
	}
	return most
}
