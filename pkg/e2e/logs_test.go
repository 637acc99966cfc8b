//go:build integration

package e2e

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/client-go/tools/clientcmd"

	"github.com/jobsched/jobsched/pkg/testkit"
)

// deprecatedAffinity is a pod spec addition the API server warns of (a deprecated node label in a preferred node
// affinity) and that changes no placement.
const deprecatedAffinity = `affinity:
  nodeAffinity:
    preferredDuringSchedulingIgnoredDuringExecution:
    - weight: 1
      preference:
        matchExpressions:
        - {key: beta.kubernetes.io/arch, operator: In, values: [amd64]}
`

// jsonLines are stderr's lines, each decoded; the test fails at a line that is not a JSON object (klog's text).
func jsonLines(t *testing.T, stderr string) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, l := range strings.Split(strings.TrimSpace(stderr), "\n") {
		if strings.HasPrefix(l, "Error: ") { // testkit.WithErrors' addition, not the process's
			continue
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Errorf("a line that is not JSON: %q", l)
			continue
		}
		out = append(out, m)
	}
	return out
}

// TestLogsOneFormat: every line of a plain tick and of a fill is a JSON line with --log-format json, and the API
// server's warnings (a deprecated node label in the Job template) are among them at warn, with the run's scheduler
// and namespace. A 10 s outage of the API server during a fill (its connections cut and refused, through a proxy of
// the test's own: the shared API server stays up for the other tests) is said once per lost watch, at warn, and
// once when it is back; client-go's "Watch failed", at error about once a second per watch, is not written; and a
// watch back wakes a pass that lists afresh (woke watchLost): what the watch missed arrives after its return.
func TestLogsOneFormat(t *testing.T) {
	t.Parallel()
	// Two Jobs fit at once and run 20 s: none ends during the outage, which begins after the fill's first pass, so
	// that no Job's end wakes the pass that follows it.
	e, keys, cfg := newTaskScenario(t, "4", "8Gi", 6, config{cpu: "2", duration: "20s", extra: "gc:\n  succeededRetention: 0s\n"})
	e.writeTemplate("e2e", jobTemplate{duration: "20s", podSpec: taskPodSpec(e.pool, "", "2", "") + deprecatedAffinity})
	e.worker()
	warned := func(lines []map[string]any) int {
		n := 0
		for _, m := range lines {
			if m["message"] == "the API server warns" && m["level"] == "warn" && m["scheduler"] == "e2e" && m["namespace"] == e.ns &&
				strings.Contains(m["warning"].(string), "beta.kubernetes.io/arch") {
				n++
			}
		}
		return n
	}

	t.Run("tick", func(t *testing.T) {
		e.exec("UPDATE " + e.table + " SET status = 'held' WHERE id <> '" + keys[0] + "'")
		r := e.tick(cfg)
		if n := warned(jsonLines(t, r.stderr)); n != 1 {
			t.Errorf("%d warnings of the API server with the run's fields, want 1:\n%s", n, r.stderr)
		}
	})

	t.Run("fill with an outage", func(t *testing.T) {
		e.exec("UPDATE " + e.table + " SET status = 'waiting' WHERE status = 'held'")
		p := newCutProxy(t, e.kcfg)
		cmd, stderr := e.startWith(p.kubeconfig, e.dsn, nil, "tick", "--config", cfg, "--fill-for", "150s")
		// After its first pass the fill waits on its watches.
		e.eventually("the fill's first pass", 30*time.Second, func() bool { return strings.Contains(stderr.String(), `"pass done"`) })
		p.cut()
		_ = testkit.Pause(e.ctx, 10*time.Second) // the outage's length: the scenario's schedule
		p.restore()
		r := e.exited(cmd, stderr, 140*time.Second, "once the backlog is empty")
		if r.code != 0 {
			t.Fatalf("exit %d:\n%s", r.code, r.stderr)
		}
		lines := jsonLines(t, r.stderr)
		if n := warned(lines); n != len(keys)-1 {
			t.Errorf("%d warnings of the API server with the run's fields, want %d (one per create):\n%s", n, len(keys)-1, r.stderr)
		}
		lost, back := map[string]int{}, map[string]int{}
		for _, m := range lines {
			w := fmt.Sprint(m["watch"], " ", m["labelSelector"], " ", m["fieldSelector"])
			switch m["message"] {
			case "Watch failed":
				t.Errorf("client-go's line for each failed attempt: %v", m)
			case "lost a watch: retrying every second until it is back (said once)":
				lost[w]++
				if m["level"] != "warn" || m["scheduler"] != "e2e" || m["namespace"] != e.ns {
					t.Errorf("a lost watch said %v, want at warn with the run's fields", m)
				}
			case "the watch is back":
				back[w]++
			}
		}
		if len(lost) == 0 {
			t.Errorf("no lost watch said in an outage of 10 s:\n%s", r.stderr)
		}
		if !wokeAfter(r.stderr, "watchLost") {
			t.Errorf("no pass woken by a watch back after the outage (woke watchLost):\n%s", r.stderr)
		}
		for w, n := range lost {
			if n != 1 || back[w] != 1 {
				t.Errorf("watch %s: lost said %d times, back %d, want once each", w, n, back[w])
			}
		}
	})
}

// cutProxy forwards TCP connections to an API server, and can cut them all and refuse new ones for a while (an
// outage as its clients see it) without stopping the server.
type cutProxy struct {
	t          *testing.T
	addr       string // its own, kept across a cut
	target     string
	kubeconfig string // the scenario's, with the proxy as the server

	mu    sync.Mutex
	ln    net.Listener
	conns map[net.Conn]bool
}

// newCutProxy starts a proxy to the server of kubeconfig kcfg and writes the kubeconfig that goes through it.
func newCutProxy(t *testing.T, kcfg string) *cutProxy {
	t.Helper()
	c, err := clientcmd.LoadFromFile(kcfg)
	if err != nil {
		t.Fatal(err)
	}
	cluster := c.Clusters[c.Contexts[c.CurrentContext].Cluster]
	u, err := url.Parse(cluster.Server)
	if err != nil {
		t.Fatal(err)
	}
	p := &cutProxy{t: t, target: u.Host, conns: map[net.Conn]bool{}}
	p.listen("127.0.0.1:0")
	u.Host = p.addr
	cluster.Server = u.String()
	p.kubeconfig = filepath.Join(t.TempDir(), "kubeconfig")
	if err := clientcmd.WriteToFile(*c, p.kubeconfig); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.cut)
	return p
}

func (p *cutProxy) listen(addr string) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		p.t.Fatal(err)
	}
	p.mu.Lock()
	p.ln, p.addr = ln, ln.Addr().String()
	p.mu.Unlock()
	go func() {
		for {
			in, err := ln.Accept()
			if errors.Is(err, net.ErrClosed) {
				return
			} else if err != nil {
				continue
			}
			go p.forward(in)
		}
	}()
}

func (p *cutProxy) forward(in net.Conn) {
	out, err := net.Dial("tcp", p.target)
	if err != nil {
		in.Close()
		return
	}
	p.mu.Lock()
	p.conns[in], p.conns[out] = true, true
	p.mu.Unlock()
	go func() { _, _ = io.Copy(out, in); out.Close() }()
	_, _ = io.Copy(in, out)
	in.Close()
}

// cut closes the listener and every connection: new ones are refused until restore.
func (p *cutProxy) cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ln != nil {
		p.ln.Close()
		p.ln = nil
	}
	for c := range p.conns {
		c.Close()
	}
	clear(p.conns)
}

// restore listens again on the same address.
func (p *cutProxy) restore() { p.listen(p.addr) }
