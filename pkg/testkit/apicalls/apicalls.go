// Package apicalls counts the requests an API server has served, from its apiserver_request_total, for the
// measurements that compare the calls of a pass (scripts/bench and the e2e tests).
package apicalls

import (
	"bufio"
	"bytes"
	"context"
	"regexp"
	"strconv"

	"k8s.io/client-go/kubernetes"
)

var (
	requestTotal = regexp.MustCompile(`^apiserver_request_total\{(.*)\} ([0-9.e+]+)$`)
	label        = regexp.MustCompile(`(\w+)="([^"]*)"`)
)

// Get reads the API server's /metrics and returns Parse of it.
func Get(ctx context.Context, c kubernetes.Interface) (map[string]float64, error) {
	data, err := c.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		return nil, err
	}
	return Parse(data)
}

// Parse sums apiserver_request_total by "VERB resource[/subresource]". A WATCH that is not namespaced is counted
// as "cluster-wide WATCH …": a WATCH is counted when it ends, so a namespaced one within a measured window is a
// pass's streaming list, and a cluster-wide one is some controller's.
func Parse(metrics []byte) (map[string]float64, error) {
	out := map[string]float64{}
	sc := bufio.NewScanner(bytes.NewReader(metrics))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		m := requestTotal.FindStringSubmatch(sc.Text())
		if m == nil {
			continue
		}
		l := map[string]string{}
		for _, kv := range label.FindAllStringSubmatch(m[1], -1) {
			l[kv[1]] = kv[2]
		}
		res := l["resource"]
		if res == "" {
			res = "/metrics"
		}
		if l["subresource"] != "" {
			res += "/" + l["subresource"]
		}
		v, _ := strconv.ParseFloat(m[2], 64)
		verb := l["verb"]
		if verb == "WATCH" && l["scope"] != "namespace" {
			verb = "cluster-wide WATCH"
		}
		out[verb+" "+res] += v
	}
	return out, sc.Err()
}
