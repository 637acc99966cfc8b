// Package tcpkit holds the TCP stand-ins the tests of several packages use for a database host that misbehaves.
// It is a package of its own, importing nothing of jobsched, so that pkg/rows' own tests can use it (pkg/testkit
// imports pkg/rows). Only tests import it.
package tcpkit

import (
	"net"
	"sync"
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
