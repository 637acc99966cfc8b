package pgdial

import (
	"context"
	"errors"
	"net"
	"os"
	"testing"
	"time"

	"github.com/jobsched/jobsched/pkg/testkit/tcpkit"
)

// TestWatchAbortsBlockedReads: when the watched context ends, a read blocked on a server that never answers fails
// after the grace, on every connection the Guard made; after stop, the end of the context touches nothing.
func TestWatchAbortsBlockedReads(t *testing.T) {
	addr := tcpkit.NewSilent(t).Addr()
	g := New()
	var conns []net.Conn
	for range 2 {
		c, err := g.DialContext(t.Context(), "tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		conns = append(conns, c)
	}
	ctx, cancel := context.WithCancel(t.Context())
	stop := g.Watch(ctx)
	errs := make(chan error, len(conns))
	for _, c := range conns {
		go func() {
			_, err := c.Read(make([]byte, 1))
			errs <- err
		}()
	}
	cancel()
	for range conns {
		if err := <-errs; !errors.Is(err, os.ErrDeadlineExceeded) {
			t.Errorf("blocked read ended with %v, want the deadline the Guard set", err)
		}
	}
	stop()

	c, err := g.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel = context.WithCancel(t.Context())
	stop = g.Watch(ctx)
	stop()
	cancel()
	if _, err := c.Write([]byte("x")); err != nil {
		t.Errorf("write after stop: %v; want the connection untouched by the end of a context no longer watched", err)
	}
	c.Close()
	conns[0].Close()
	conns[1].Close()
	g.mu.Lock()
	defer g.mu.Unlock()
	if len(g.conns) != 0 {
		t.Errorf("the Guard keeps %d closed connection(s)", len(g.conns))
	}
}

// TestWatchLeavesTheGraceToTheCancel: a read that ends within the grace after its context (lib/pq's cancel request
// was answered) leaves the connections untouched: an abort at once would have beaten lib/pq to the statement's
// return, and lib/pq then sends no cancel at all (the statement ran on in the server: TestReadAfterDeadline).
func TestWatchLeavesTheGraceToTheCancel(t *testing.T) {
	addr := tcpkit.NewSilent(t).Addr()
	g := New()
	g.Grace = time.Hour
	c, err := g.DialContext(t.Context(), "tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithCancel(t.Context())
	stop := g.Watch(ctx)
	cancel()
	stop()
	if _, err := c.Write([]byte("x")); err != nil {
		t.Errorf("write after a read that ended within the grace: %v; want the connection untouched", err)
	}
}
