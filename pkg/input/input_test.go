package input

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestReadBounded: a file is read whole up to its bound, refused one byte past it (/dev/zero too), and an open or a
// read that blocks is abandoned when the context ends, with its cause.
func TestReadBounded(t *testing.T) {
	dir := t.TempDir()
	exact := filepath.Join(dir, "exact")
	if err := os.WriteFile(exact, []byte(strings.Repeat("x", 10)), 0o600); err != nil {
		t.Fatal(err)
	}
	if data, err := ReadFile(context.Background(), exact, 10); err != nil || len(data) != 10 {
		t.Errorf("a file of exactly its bound: %d bytes, %v", len(data), err)
	}
	var tl *TooLargeError
	if _, err := ReadFile(context.Background(), exact, 9); !errors.As(err, &tl) || err.Error() != exact+" is larger than 9 bytes" {
		t.Errorf("a file one byte over: %v", err)
	}
	if _, err := ReadFile(context.Background(), "/dev/zero", 1<<10); !errors.As(err, &tl) {
		t.Errorf("/dev/zero: %v", err)
	}
	r, w := io.Pipe()
	defer w.Close()
	ctx, cancel := context.WithCancelCause(context.Background())
	cancel(errors.New("terminated"))
	_, err := Read(ctx, "standard input", func() (io.ReadCloser, error) { return r, nil }, 10, io.ReadAll)
	if !errors.Is(err, context.Canceled) || err.Error() != "standard input was not read to its end: terminated" {
		t.Errorf("a pipe that stays open, the context ended: %v", err)
	}
}
