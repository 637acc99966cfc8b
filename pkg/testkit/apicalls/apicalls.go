// Package apicalls counts the requests an API server has served, from its apiserver_request_total, for the
// measurements that compare the calls of a pass (scripts/bench, the e2e tests).
package apicalls

import (
	"bytes"
	"context"
	"strings"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"k8s.io/client-go/kubernetes"
)

// NoResource names the requests for no resource (/metrics, /healthz, /version, /openapi): "GET (no resource)".
const NoResource = "(no resource)"

// Counted says whether requests of kind k count as a pass's: not the cluster-wide WATCHes (some controller's or
// another client's informers) nor the requests for no resource (the measurer's own reads of /metrics; /openapi/v3,
// which the API server labels with a subresource, from some other client: jobsched makes no discovery calls).
func Counted(k string) bool {
	return !strings.HasPrefix(k, "cluster-wide WATCH ") && !strings.Contains(k, " "+NoResource)
}

// Between are the requests a pass made between the readings before and after (Parse's): the Counted kinds that
// grew, by how much.
func Between(before, after map[string]float64) map[string]int {
	out := map[string]int{}
	for k, v := range after {
		if d := int(v - before[k]); d > 0 && Counted(k) {
			out[k] = d
		}
	}
	return out
}

// Get reads the API server's /metrics and returns Parse of it.
func Get(ctx context.Context, c kubernetes.Interface) (map[string]float64, error) {
	data, err := Read(ctx, c)
	if err != nil {
		return nil, err
	}
	return Parse(data)
}

// Read reads the API server's /metrics.
func Read(ctx context.Context, c kubernetes.Interface) ([]byte, error) {
	return c.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
}

// Unresponsive sums apiserver_terminated_watchers_total by resource: the watches the API server closed because
// their client fell behind the events (the client then watches again from the last resourceVersion it had,
// and lists only when that is too old).
func Unresponsive(metrics []byte) (map[string]float64, error) {
	families, err := parse(metrics)
	if err != nil {
		return nil, err
	}
	out := map[string]float64{}
	for _, m := range families["apiserver_terminated_watchers_total"].GetMetric() {
		for _, p := range m.GetLabel() {
			if p.GetName() == "resource" {
				out[p.GetValue()] += m.GetCounter().GetValue()
			}
		}
	}
	return out, nil
}

func parse(metrics []byte) (map[string]*dto.MetricFamily, error) {
	parser := expfmt.NewTextParser(model.UTF8Validation)
	return parser.TextToMetricFamilies(bytes.NewReader(metrics))
}

// Parse sums apiserver_request_total by "VERB resource[/subresource]". A WATCH that is not namespaced is counted
// as "cluster-wide WATCH …": a WATCH is counted when it ends, so a namespaced one within a measured window is a
// pass's streaming list, and a cluster-wide one is some controller's.
func Parse(metrics []byte) (map[string]float64, error) {
	families, err := parse(metrics)
	if err != nil {
		return nil, err
	}
	out := map[string]float64{}
	f, ok := families["apiserver_request_total"]
	if !ok {
		return out, nil
	}
	for _, m := range f.GetMetric() {
		l := map[string]string{}
		for _, p := range m.GetLabel() {
			l[p.GetName()] = p.GetValue()
		}
		res := l["resource"]
		if res == "" {
			res = NoResource
		}
		if l["subresource"] != "" {
			res += "/" + l["subresource"]
		}
		verb := l["verb"]
		if verb == "WATCH" && l["scope"] != "namespace" {
			verb = "cluster-wide WATCH"
		}
		v := m.GetCounter().GetValue()
		if m.GetCounter() == nil {
			v = m.GetUntyped().GetValue()
		}
		out[verb+" "+res] += v
	}
	return out, nil
}
