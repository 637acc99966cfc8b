package main

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// counter is a plain-HTTP proxy in front of the API server that counts one client's requests, by "VERB resource",
// and the bytes of their responses as they are read (a watch's as its events arrive): what that client costs the
// API server, with nobody else's calls in the count. The client's kubeconfig (Kubeconfig) names the proxy and no
// credentials; the proxy adds the bench's own.
type counter struct {
	srv   *http.Server
	url   string
	mu    sync.Mutex
	calls map[string]int
	bytes atomic.Int64
}

// tally is what a counter has counted so far.
type tally struct {
	calls map[string]int
	bytes int64
}

func (t tally) total() int {
	n := 0
	for _, c := range t.calls {
		n += c
	}
	return n
}

// minus is what was counted between earlier and t.
func (t tally) minus(earlier tally) tally {
	d := tally{calls: map[string]int{}, bytes: t.bytes - earlier.bytes}
	for k, v := range t.calls {
		if v > earlier.calls[k] {
			d.calls[k] = v - earlier.calls[k]
		}
	}
	return d
}

func newCounter(kubeconfig string) (*counter, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return nil, err
	}
	upstream, err := url.Parse(cfg.Host)
	if err != nil {
		return nil, err
	}
	rt, err := rest.TransportFor(cfg)
	if err != nil {
		return nil, err
	}
	c := &counter{calls: map[string]int{}}
	p := &httputil.ReverseProxy{
		Rewrite:       func(r *httputil.ProxyRequest) { r.SetURL(upstream) },
		Transport:     rt,
		FlushInterval: -1, // a watch's events reach the client as they come
		ModifyResponse: func(resp *http.Response) error {
			resp.Body = &countingBody{ReadCloser: resp.Body, n: &c.bytes}
			return nil
		},
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	c.url = "http://" + l.Addr().String()
	c.srv = &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c.mu.Lock()
		c.calls[callKind(r)]++
		c.mu.Unlock()
		p.ServeHTTP(w, r)
	})}
	go func() { _ = c.srv.Serve(l) }()
	return c, nil
}

func (c *counter) snapshot() tally {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := tally{calls: make(map[string]int, len(c.calls)), bytes: c.bytes.Load()}
	for k, v := range c.calls {
		t.calls[k] = v
	}
	return t
}

func (c *counter) Close() error { return c.srv.Close() }

// Kubeconfig writes, in dir, a kubeconfig that reaches the API server through the counter.
func (c *counter) Kubeconfig(dir string) (string, error) {
	file := filepath.Join(dir, "kubeconfig-counted")
	doc := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters: [{name: counted, cluster: {server: %q}}]
users: [{name: counted, user: {}}]
contexts: [{name: counted, context: {cluster: counted, user: counted}}]
current-context: counted
`, c.url)
	return file, os.WriteFile(file, []byte(doc), 0o600)
}

type countingBody struct {
	io.ReadCloser
	n *atomic.Int64
}

func (b *countingBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	b.n.Add(int64(n))
	return n, err
}

// callKind is a request as "VERB resource[/subresource]" with the API server's verbs (list, watch, get, create, …).
func callKind(r *http.Request) string {
	parts := strings.Split(strings.Trim(r.URL.Path, "/"), "/")
	switch {
	case len(parts) >= 2 && parts[0] == "api":
		parts = parts[2:]
	case len(parts) >= 3 && parts[0] == "apis":
		parts = parts[3:]
	default:
		return r.Method + " " + r.URL.Path
	}
	if len(parts) >= 2 && parts[0] == "namespaces" && len(parts) > 2 {
		parts = parts[2:]
	}
	resource, named := "", false
	if len(parts) > 0 {
		resource = parts[0]
	}
	if len(parts) > 1 {
		named = true
	}
	if len(parts) > 2 {
		resource += "/" + parts[2]
	}
	verb := strings.ToLower(r.Method)
	switch {
	case r.Method == http.MethodGet && r.URL.Query().Get("watch") == "true":
		verb = "watch"
	case r.Method == http.MethodGet && !named:
		verb = "list"
	case r.Method == http.MethodPost:
		verb = "create"
	case r.Method == http.MethodPut:
		verb = "update"
	}
	return verb + " " + resource
}
