// Package input reads what a user points jobsched at (the config and its templates, source.dsnFile, --rows)
// bounded in size and under the run's context: a file larger than its bound is refused after bound+1 bytes (a
// device that never ends, /dev/zero, costs no more), and an open or read that blocks (a FIFO without a writer, a
// terminal or a pipe that stays open) is abandoned when the context ends (SIGTERM, --timeout), its goroutine left
// blocked until the process exits.
package input

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
)

// TooLargeError is a file larger than its bound.
type TooLargeError struct {
	Name  string
	Bound int64
}

func (e *TooLargeError) Error() string {
	return fmt.Sprintf("%s is larger than %d bytes", e.Name, e.Bound)
}

var errTooLarge = errors.New("larger than its bound") // Read says which, and how large

// ReadFile is file's content, at most bound bytes, read under ctx.
func ReadFile(ctx context.Context, file string, bound int64) ([]byte, error) {
	return Read(ctx, file, func() (io.ReadCloser, error) { return os.Open(file) }, bound, io.ReadAll)
}

// Read opens a reader with open and reads it with read, under ctx: read sees at most bound bytes, and an error
// (*TooLargeError) in place of the byte after them. When ctx ends first, Read returns at once with an error that
// names what it read (name) and wraps ctx's cause; the open and the read are left to end with the process.
func Read[T any](ctx context.Context, name string, open func() (io.ReadCloser, error), bound int64, read func(io.Reader) (T, error)) (T, error) {
	type result struct {
		v   T
		err error
	}
	done := make(chan result, 1)
	go func() {
		var r result
		f, err := open()
		if err != nil {
			r.err = err
			done <- r
			return
		}
		defer f.Close()
		l := &limited{r: f, left: bound}
		r.v, r.err = read(l)
		if l.over { // whatever read made of the bytes before (a line cut at the bound, say)
			var zero T
			r.v, r.err = zero, &TooLargeError{Name: name, Bound: bound}
		}
		done <- r
	}()
	select {
	case r := <-done:
		return r.v, r.err
	case <-ctx.Done():
		var zero T
		return zero, fmt.Errorf("%s was not read to its end: %w", name, ended{cause: context.Cause(ctx), err: ctx.Err()})
	}
}

// ended is why a context ended: its cause in words, and both its cause and its error unwrapped (errors.Is
// context.DeadlineExceeded holds with a cause of the caller's own).
type ended struct{ cause, err error }

func (e ended) Error() string   { return e.cause.Error() }
func (e ended) Unwrap() []error { return []error{e.cause, e.err} }

// limited is an io.LimitedReader that fails, rather than ends, past its bound (over).
type limited struct {
	r    io.Reader
	left int64
	over bool
}

func (l *limited) Read(p []byte) (int, error) {
	if l.left <= 0 {
		// One byte more says whether the input ends at the bound or goes on.
		var one [1]byte
		n, err := io.ReadFull(l.r, one[:])
		if n > 0 {
			l.over = true
			return 0, errTooLarge
		}
		if err == nil || errors.Is(err, io.ErrUnexpectedEOF) {
			err = io.EOF
		}
		return 0, err
	}
	if int64(len(p)) > l.left {
		p = p[:l.left]
	}
	n, err := l.r.Read(p)
	l.left -= int64(n)
	return n, err
}
