// Package tcpkit holds the TCP stand-ins the tests of several packages use for a database host that misbehaves.
// It is a package of its own, importing nothing of jobsched, so that pkg/rows' own tests can use it (pkg/testkit
// imports pkg/rows). Only tests import it.
package tcpkit

import (
	"io"
	"net"
	"sync"
	"sync/atomic"
	"testing"
)

// Silent is a TCP listener that accepts connections and never answers: a database host that hangs. Every
// connection is held open, never read or written, until Close.
type Silent struct {
	ln       net.Listener
	mu       sync.Mutex
	conns    []net.Conn
	accepted int
}

// NewSilent is a Silent on a free port of 127.0.0.1, closed when the test ends.
func NewSilent(t testing.TB) *Silent {
	t.Helper()
	s, err := ListenSilent("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s
}

// ListenSilent is a Silent on addr (e.g. the port of a database that was just killed); the caller closes it.
func ListenSilent(addr string) (*Silent, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	s := &Silent{ln: ln}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s.mu.Lock()
			s.conns = append(s.conns, c)
			s.accepted++
			s.mu.Unlock()
		}
	}()
	return s, nil
}

// Addr is host:port.
func (s *Silent) Addr() string { return s.ln.Addr().String() }

// Accepted is how many connections it has accepted.
func (s *Silent) Accepted() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.accepted
}

// Close stops listening and closes every connection held.
func (s *Silent) Close() {
	s.ln.Close()
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, c := range s.conns {
		c.Close()
	}
	s.conns = nil
}

// ClosedPort is an address of 127.0.0.1 where nothing listens: a database that is stopped.
func ClosedPort(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

// Proxy forwards the TCP connections it accepts to a target and counts the bytes the target sends back: what the
// client received. A test reads it to prove that something never crossed the wire.
type Proxy struct {
	ln       net.Listener
	received atomic.Int64
}

// NewProxy is a Proxy on a free port of 127.0.0.1 to target, closed with its connections when the test ends. watch,
// when not nil, reads a copy of what each client sends, one call per connection, in a goroutine of its own; it
// returns when the connection ends.
func NewProxy(t testing.TB, target string, watch func(io.Reader)) *Proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &Proxy{ln: ln}
	var mu sync.Mutex
	var conns []net.Conn
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			c.Close()
		}
	})
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			up, err := net.Dial("tcp", target)
			if err != nil {
				c.Close()
				continue
			}
			mu.Lock()
			conns = append(conns, c, up)
			mu.Unlock()
			go func() {
				_, _ = io.Copy(counter{c, &p.received}, up)
				c.Close()
			}()
			go func() {
				var client io.Reader = c
				if watch != nil {
					pr, pw := io.Pipe()
					go func() { watch(pr); _, _ = io.Copy(io.Discard, pr) }()
					defer pw.Close()
					client = io.TeeReader(c, pw)
				}
				_, _ = io.Copy(up, client)
				up.Close()
			}()
		}
	}()
	return p
}

// Addr is host:port.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// Received is how many bytes the target has sent to the clients, over every connection so far.
func (p *Proxy) Received() int64 { return p.received.Load() }

// counter is a Writer that adds what it writes to n as it goes.
type counter struct {
	w io.Writer
	n *atomic.Int64
}

func (c counter) Write(b []byte) (int, error) {
	n, err := c.w.Write(b)
	c.n.Add(int64(n))
	return n, err
}
