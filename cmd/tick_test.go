package cmd

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/jobsched/jobsched/pkg/kube"
	"github.com/jobsched/jobsched/pkg/testkit"
)

// TestPassReports: gc (the pass without a database) reports a Deleted Event for the Job it deletes and pushes its
// metrics to --pushgateway; a Pushgateway that fails costs a log line, never the pass; a --pushgateway that is no
// http(s) URL is exit 2.
func TestPassReports(t *testing.T) {
	old := testkit.MakeJob("old").Name("reports-old").Finished(batchv1.JobComplete, time.Now().Add(-time.Hour)).Obj()
	tests := []struct {
		name       string
		status     int    // the Pushgateway's answer
		flag       string // --pushgateway; "gateway": the test server
		code       int
		wantPushes []string // method and path
		wantLog    string
		wantEvents []string // reasons
	}{
		{name: "pushed", status: http.StatusOK, flag: "gateway", code: 0,
			wantPushes: []string{"POST /metrics/job/jobsched-gc/scheduler/reports/namespace/batch"}, wantEvents: []string{"Deleted"}},
		{name: "the Pushgateway fails", status: http.StatusInternalServerError, flag: "gateway", code: 0,
			wantPushes: []string{"POST /metrics/job/jobsched-gc/scheduler/reports/namespace/batch"},
			wantLog:    "metrics not pushed", wantEvents: []string{"Deleted"}},
		{name: "no Pushgateway", code: 0, wantEvents: []string{"Deleted"}},
		{name: "not an http URL", flag: "pushgateway:9091", code: 2, wantLog: "--pushgateway:"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var mu sync.Mutex
			var pushes []string
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				mu.Lock()
				// The grouping labels come in any order (the push package ranges over a map).
				path := strings.Replace(r.URL.Path, "/namespace/batch/scheduler/reports", "/scheduler/reports/namespace/batch", 1)
				pushes = append(pushes, r.Method+" "+path)
				mu.Unlock()
				w.WriteHeader(tt.status)
			}))
			defer srv.Close()
			client := testkit.NewFake(old.DeepCopy())
			newKube := func(kube.Options) (kube.Interface, string, error) { return client, "default", nil }
			args := []string{"gc", "--config", "testdata/jobsched.yaml", "--log-format", "json"}
			if tt.flag == "gateway" {
				args = append(args, "--pushgateway", srv.URL)
			} else if tt.flag != "" {
				args = append(args, "--pushgateway", tt.flag)
			}
			var out, errOut bytes.Buffer
			if code := runWith(context.Background(), args, &out, &errOut, newKube); code != tt.code {
				t.Fatalf("exit %d, want %d: %s", code, tt.code, errOut.String())
			}
			if strings.Join(pushes, "\n") != strings.Join(tt.wantPushes, "\n") {
				t.Errorf("pushes %q, want %q", pushes, tt.wantPushes)
			}
			if !strings.Contains(errOut.String(), tt.wantLog) {
				t.Errorf("stderr lacks %q:\n%s", tt.wantLog, errOut.String())
			}
			evs, err := client.EventsV1().Events("batch").List(context.Background(), metav1.ListOptions{})
			if err != nil {
				t.Fatal(err)
			}
			var reasons []string
			for _, e := range evs.Items {
				reasons = append(reasons, e.Reason)
			}
			if strings.Join(reasons, ",") != strings.Join(tt.wantEvents, ",") {
				t.Errorf("Events %v, want %v", reasons, tt.wantEvents)
			}
		})
	}
}

// TestPushgatewayPasswordNeverPrinted: the Pushgateway URL's password, plain or percent-encoded, shows in no log
// line (debug included) and no error, whether the URL comes from --pushgateway or from metrics.pushgateway.
func TestPushgatewayPasswordNeverPrinted(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusOK) }))
	defer srv.Close()
	failing := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusBadGateway) }))
	defer failing.Close()
	host := strings.TrimPrefix(srv.URL, "http://")
	for _, tc := range []struct {
		name, url, secret string
	}{
		{"pushed, debug log", "http://metrics:PgwS3cret@" + host + "/", "PgwS3cret"},
		{"percent-encoded, push fails", "http://metrics:p%40ss%2Fw0rd@" + strings.TrimPrefix(failing.URL, "http://") + "/", "ss%2Fw0rd"},
		{"has a query", "http://metrics:PgwS3cret@" + host + "/?x=1", "PgwS3cret"},
		{"not http", "ftp://metrics:PgwS3cret@" + host + "/", "PgwS3cret"},
		{"not a URL", "http://metrics:PgwS3cret@[::1/", "PgwS3cret"},
		{"a control character", "http://metrics:PgwS3cret@" + host + "/\n", "PgwS3cret"},
	} {
		for _, from := range []string{"flag", "config"} {
			t.Run(tc.name+" from "+from, func(t *testing.T) {
				args := []string{"gc", "--log-level", "debug", "--log-format", "json"}
				if from == "flag" {
					args = append(args, "--config", "testdata/jobsched.yaml", "--pushgateway", tc.url)
				} else {
					args = append(args, "--config", configWith(t, "metrics:\n  pushgateway: "+strconv.Quote(tc.url)+"\n"))
				}
				newKube := func(kube.Options) (kube.Interface, string, error) { return testkit.NewFake(), "batch", nil }
				var out, errOut bytes.Buffer
				runWith(context.Background(), args, &out, &errOut, newKube)
				for _, s := range []string{tc.secret, "p@ss", "PgwS3"} {
					if strings.Contains(out.String()+errOut.String(), s) {
						t.Errorf("the output shows %q:\n%s%s", s, out.String(), errOut.String())
					}
				}
				if !strings.Contains(tc.name, "push fails") && !strings.Contains(errOut.String(), "metrics:xxxxx@") {
					t.Errorf("the output does not show the URL redacted:\n%s", errOut.String())
				}
			})
		}
	}
}

// configWith is testdata/jobsched.yaml (its template copied beside it) with more YAML appended.
func configWith(t *testing.T, more string) string {
	t.Helper()
	dir := t.TempDir()
	for _, f := range []string{"jobsched.yaml", "job.yaml"} {
		b, err := os.ReadFile(filepath.Join("testdata", f))
		if err != nil {
			t.Fatal(err)
		}
		if f == "jobsched.yaml" {
			b = append(b, more...)
		}
		if err := os.WriteFile(filepath.Join(dir, f), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return filepath.Join(dir, "jobsched.yaml")
}
