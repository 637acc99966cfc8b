// Package pgdial is the dialer of jobsched's PostgreSQL pool: it keeps the connections it made, so that when a read's
// context ends every one of them fails its blocked read or write (after a grace for lib/pq's cancel request: Guard).
package pgdial

import (
	"context"
	"net"
	"sync"
	"time"
)

// Guard is the pool's dialer (a pq.Dialer and pq.DialerContext): it keeps the connections it made, so that when a
// read's context ends every one of them fails its blocked read or write, after Grace. lib/pq alone sends a cancel
// request (on a new connection, which this does not touch: a server that answers stops the statement) and goes on
// waiting for the server to answer, which one that hangs never does. The Grace is the cancel request's: aborting at
// once races lib/pq, whose cancel is not sent at all when the statement has already returned (an abort is such a
// return), and the statement then runs on in the server until its statement_timeout. A connection made while the
// context ends is bounded by the connect timeout.
type Guard struct {
	// Grace is how long after the context ends the connections are aborted, unless the read ended first.
	Grace  time.Duration
	mu     sync.Mutex
	conns  map[*guardedConn]struct{}
	dialer net.Dialer
}

// DefaultGrace is a Guard's Grace: a cancel request on a network of milliseconds is answered well within it, and a
// server that hangs costs the read at most this beyond its deadline.
const DefaultGrace = time.Second

// Watch makes the end of ctx abort the connections, Grace later, until the returned stop is called; stop waits for
// an abort that has begun, so that it cannot reach the next read's connection.
func (g *Guard) Watch(ctx context.Context) (stop func()) {
	stopped, done := make(chan struct{}), make(chan struct{})
	after := context.AfterFunc(ctx, func() {
		defer close(done)
		t := time.NewTimer(g.Grace)
		defer t.Stop()
		select {
		case <-stopped: // the read ended within the grace: the server answered the cancel request
		case <-t.C:
			g.abort()
		}
	})
	return func() {
		if !after() {
			close(stopped)
			<-done
		}
	}
}

func (g *Guard) abort() {
	g.mu.Lock()
	defer g.mu.Unlock()
	for c := range g.conns {
		_ = c.SetDeadline(time.Unix(1, 0))
	}
}

// Dial, DialTimeout and DialContext implement pq.Dialer and pq.DialerContext.
func (g *Guard) Dial(network, address string) (net.Conn, error) {
	return g.DialContext(context.Background(), network, address)
}

func (g *Guard) DialTimeout(network, address string, timeout time.Duration) (net.Conn, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	return g.DialContext(ctx, network, address)
}

func (g *Guard) DialContext(ctx context.Context, network, address string) (net.Conn, error) {
	c, err := g.dialer.DialContext(ctx, network, address)
	if err != nil {
		return nil, err
	}
	gc := &guardedConn{Conn: c, guard: g}
	g.mu.Lock()
	defer g.mu.Unlock()
	g.conns[gc] = struct{}{}
	return gc, nil
}

type guardedConn struct {
	net.Conn
	guard *Guard
}

func (c *guardedConn) Close() error {
	c.guard.mu.Lock()
	delete(c.guard.conns, c)
	c.guard.mu.Unlock()
	return c.Conn.Close()
}

// New is a Guard with no connections yet.
func New() *Guard { return &Guard{Grace: DefaultGrace, conns: map[*guardedConn]struct{}{}} }
