package apicalls

import (
	"maps"
	"testing"
)

func TestParse(t *testing.T) {
	metrics := []byte(`# HELP apiserver_request_total Counter of apiserver requests
apiserver_request_total{code="200",component="apiserver",resource="jobs",scope="namespace",verb="LIST",version="v1"} 3
apiserver_request_total{code="201",component="apiserver",resource="jobs",scope="namespace",verb="POST",version="v1"} 10
apiserver_request_total{code="409",component="apiserver",resource="jobs",scope="namespace",verb="POST",version="v1"} 2
apiserver_request_total{code="200",component="apiserver",resource="jobs",scope="namespace",subresource="status",verb="PUT",version="v1"} 1
apiserver_request_total{code="0",component="apiserver",resource="pods",scope="cluster",verb="WATCH",version="v1"} 4
apiserver_request_total{code="0",component="apiserver",resource="pods",scope="namespace",verb="WATCH",version="v1"} 1
apiserver_request_total{code="200",component="apiserver",scope="",verb="GET"} 7
apiserver_request_duration_seconds_count{resource="jobs",verb="LIST"} 99
`)
	got, err := Parse(metrics)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]float64{
		"LIST jobs":               3,
		"POST jobs":               12,
		"PUT jobs/status":         1,
		"cluster-wide WATCH pods": 4,
		"WATCH pods":              1,
		"GET (no resource)":       7,
	}
	if !maps.Equal(got, want) {
		t.Errorf("Parse = %v, want %v", got, want)
	}
}

// TestBetween: what grew between two readings, without the others' cluster-wide WATCHes and the requests for no
// resource (the reads of /metrics; the API server's own or another client's /openapi/v3, which the API server
// labels with a subresource).
func TestBetween(t *testing.T) {
	before := map[string]float64{"LIST jobs": 3, "POST jobs": 2, "GET (no resource)": 5, "cluster-wide WATCH pods": 1}
	after := map[string]float64{"LIST jobs": 3, "POST jobs": 12, "GET (no resource)": 9, "cluster-wide WATCH pods": 4, "WATCH pods": 1,
		"GET (no resource)/openapi/v3": 1}
	if got, want := Between(before, after), map[string]int{"POST jobs": 10, "WATCH pods": 1}; !maps.Equal(got, want) {
		t.Errorf("Between = %v, want %v", got, want)
	}
}

// TestUnresponsive: the watchers closed as unresponsive, summed by resource over their other labels.
func TestUnresponsive(t *testing.T) {
	metrics := []byte(`# HELP apiserver_terminated_watchers_total Counter of watchers closed due to unresponsiveness broken by resource type.
# TYPE apiserver_terminated_watchers_total counter
apiserver_terminated_watchers_total{group="",resource="pods"} 2
apiserver_terminated_watchers_total{group="batch",resource="jobs"} 1
apiserver_terminated_watchers_total{group="other",resource="pods"} 3
apiserver_request_total{code="200",resource="pods",scope="cluster",verb="LIST",version="v1"} 9
`)
	got, err := Unresponsive(metrics)
	if err != nil {
		t.Fatal(err)
	}
	if want := map[string]float64{"pods": 5, "jobs": 1}; !maps.Equal(got, want) {
		t.Errorf("Unresponsive = %v, want %v", got, want)
	}
	if got, err := Unresponsive([]byte("apiserver_request_total 1\n")); err != nil || len(got) != 0 {
		t.Errorf("no such family: %v, %v; want none", got, err)
	}
}
