//go:build integration

package e2e

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/jobsched/jobsched/pkg/testkit/kwokkit"
)

// maxInputRSS bounds the peak memory of a run that reads an input that never ends: the binary's own (about 25 MB)
// and what its bounds let in (64 MiB of --rows at most), far below what an unbounded read reached (2.1 GB).
const maxInputRSS = 400 << 20

// inputsDir writes an offline install (jobsched.yaml, job.yaml) whose source block ends with extra, and returns its
// config's path.
func inputsDir(t *testing.T, extra string) string {
	t.Helper()
	dir := t.TempDir()
	cfg := "name: inputs\nnamespace: inputs\nsource:\n  query: SELECT id FROM tasks\n  key: id\n" + extra + "job:\n  template: job.yaml\n"
	job := kwokkit.Job{Duration: "1s", PodSpec: taskPodSpec("", "", "", "")}.YAML()
	for name, body := range map[string]string{"jobsched.yaml": cfg, "job.yaml": job} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return filepath.Join(dir, "jobsched.yaml")
}

// peakRSS is the peak resident memory of a process that ended, in bytes.
func peakRSS(cmd *exec.Cmd) int64 {
	return cmd.ProcessState.SysUsage().(*syscall.Rusage).Maxrss << 10
}

// TestInputsThatNeverEnd (issue 58, finding 10): every input is read bounded in size and under the run's context.
// source.dsnFile /dev/zero grew to 2.1 GB deaf to SIGTERM; --rows - on a stdin that stays open ignored --timeout and
// SIGTERM and then exited 0; a FIFO as --config blocked in open(). Now: the bound is exit 2 naming it, with the
// memory it lets in; --timeout and SIGTERM end a read that blocks with exit 1, saying what was not read.
func TestInputsThatNeverEnd(t *testing.T) {
	t.Parallel()
	t.Run("a DSN file that never ends", func(t *testing.T) {
		cmd := jobschedCommand(context.Background(), "", "", nil, "dry-run", "--offline", "--config", inputsDir(t, "  dsnFile: /dev/zero\n"))
		r := runCommand(t, cmd)
		if r.code != 2 || !strings.Contains(r.stderr, "source.dsnFile: /dev/zero is larger than 65536 bytes") {
			t.Errorf("exit %d, want 2 naming the bound:\n%s", r.code, r.stderr)
		}
		if rss := peakRSS(cmd); rss > maxInputRSS {
			t.Errorf("peak RSS %d MB, want at most %d", rss>>20, maxInputRSS>>20)
		}
	})
	t.Run("rows on a stdin that never ends", func(t *testing.T) {
		cmd := jobschedCommand(context.Background(), "", "", nil, "dry-run", "--offline", "--config", inputsDir(t, ""), "--rows", "-")
		w := stdinPipe(t, cmd)
		go func() { // rows until the binary stops reading
			defer w.Close()
			for i := 0; ; i++ {
				if _, err := fmt.Fprintf(w, "{\"id\": \"k%d\", \"url\": %q}\n", i, strings.Repeat("x", 1000)); err != nil {
					return
				}
			}
		}()
		r := waitCommand(t, cmd)
		if r.code != 2 || !strings.Contains(r.stderr, "standard input is larger than 67108864 bytes") {
			t.Errorf("exit %d, want 2 naming the bound:\n%s", r.code, r.stderr)
		}
		if rss := peakRSS(cmd); rss > maxInputRSS {
			t.Errorf("peak RSS %d MB, want at most %d", rss>>20, maxInputRSS>>20)
		}
	})
	t.Run("rows on a stdin that stays open, --timeout", func(t *testing.T) {
		cmd := jobschedCommand(context.Background(), "", "", nil, "dry-run", "--offline", "--config", inputsDir(t, ""), "--rows", "-", "--timeout", "1s")
		w := stdinPipe(t, cmd)
		defer w.Close()
		r := waitCommand(t, cmd)
		if r.code != 1 || !strings.Contains(r.stderr, "--rows: standard input was not read to its end: --timeout 1s passed") {
			t.Errorf("exit %d, want 1 saying --timeout passed:\n%s", r.code, r.stderr)
		}
	})
	t.Run("rows on a stdin that stays open, SIGTERM", func(t *testing.T) {
		cmd := jobschedCommand(context.Background(), "", "", nil, "dry-run", "--offline", "--config", inputsDir(t, ""), "--rows", "-")
		w := stdinPipe(t, cmd)
		defer w.Close()
		// A write larger than the pipe's buffer returns once the binary has read most of it: it is reading.
		if _, err := io.WriteString(w, strings.Repeat("{\"id\": \"a\"}\n", 100_000)); err != nil {
			t.Fatal(err)
		}
		if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		r := waitCommand(t, cmd)
		if r.code != 1 || !strings.Contains(r.stderr, "--rows: standard input was not read to its end") {
			t.Errorf("exit %d, want 1 saying stdin was not read:\n%s", r.code, r.stderr)
		}
	})
	t.Run("a FIFO as --config that no one writes, --timeout", func(t *testing.T) {
		fifo := filepath.Join(t.TempDir(), "jobsched.yaml")
		if err := syscall.Mkfifo(fifo, 0o600); err != nil {
			t.Fatal(err)
		}
		r := runCommand(t, jobschedCommand(context.Background(), "", "", nil, "dry-run", "--offline", "--config", fifo, "--timeout", "1s"))
		if r.code != 1 || !strings.Contains(r.stderr, "reading config: "+fifo+" was not read to its end: --timeout 1s passed") {
			t.Errorf("exit %d, want 1 saying --timeout passed:\n%s", r.code, r.stderr)
		}
	})
	t.Run("a FIFO as --config that stays open, SIGTERM", func(t *testing.T) {
		fifo := filepath.Join(t.TempDir(), "jobsched.yaml")
		if err := syscall.Mkfifo(fifo, 0o600); err != nil {
			t.Fatal(err)
		}
		cmd := jobschedCommand(context.Background(), "", "", nil, "dry-run", "--offline", "--config", fifo)
		startCommand(t, cmd)
		// Opening the FIFO to write returns once the binary has opened it to read: then it waits for the bytes.
		w, err := os.OpenFile(fifo, os.O_WRONLY, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer w.Close()
		if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		r := waitCommand(t, cmd)
		if r.code != 1 || !strings.Contains(r.stderr, "reading config: "+fifo+" was not read to its end") {
			t.Errorf("exit %d, want 1 saying the config was not read:\n%s", r.code, r.stderr)
		}
	})
}

// stdinPipe gives cmd a pipe as its standard input, starts it and returns the pipe's writing end.
func stdinPipe(t *testing.T, cmd *exec.Cmd) io.WriteCloser {
	t.Helper()
	w, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	startCommand(t, cmd)
	return w
}
