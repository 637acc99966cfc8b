//go:build integration

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	neturl "net/url"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"sigs.k8s.io/yaml"
)

// What scripts/test.sh provides for the monitoring tests: promtool (scripts/prometheus.sh promtool) and a running
// Prometheus that scrapes the test Pushgateway (scripts/prometheus.sh up), with the directory of its rule files.
var (
	promtool        = os.Getenv("JOBSCHED_TEST_PROMTOOL")
	prometheusURL   = os.Getenv("JOBSCHED_TEST_PROMETHEUS")
	prometheusRules = os.Getenv("JOBSCHED_TEST_PROMETHEUS_RULES")
)

var monitoringDir = filepath.Join(repoRoot, "manifests", "monitoring")

func needPromtool(t *testing.T) {
	t.Helper()
	if promtool == "" {
		t.Fatal("JOBSCHED_TEST_PROMTOOL must be set: run scripts/test.sh (scripts/prometheus.sh promtool installs it)")
	}
}

func runPromtool(t *testing.T, dir string, args ...string) string {
	t.Helper()
	needPromtool(t)
	cmd := exec.Command(promtool, args...)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// rulesFileGroups are the groups of manifests/monitoring/jobsched.rules.yaml, as YAML decodes them.
func rulesFileGroups(t *testing.T) []any {
	t.Helper()
	var f struct {
		Groups []any `json:"groups"`
	}
	data, err := os.ReadFile(filepath.Join(monitoringDir, "jobsched.rules.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(data, &f); err != nil {
		t.Fatal(err)
	}
	return f.Groups
}

// TestAlertRules: the rules file is valid (promtool check rules) and its unit tests pass (promtool test rules), and
// every alert has a test where it fires and one where it stays quiet.
func TestAlertRules(t *testing.T) {
	t.Parallel()
	runPromtool(t, monitoringDir, "check", "rules", "jobsched.rules.yaml")
	runPromtool(t, monitoringDir, "test", "rules", "jobsched.rules.test.yaml")

	var rules struct {
		Groups []struct {
			Rules []struct {
				Alert string `json:"alert"`
			} `json:"rules"`
		} `json:"groups"`
	}
	var tests struct {
		Tests []struct {
			AlertRuleTest []struct {
				Alertname string `json:"alertname"`
				ExpAlerts []any  `json:"exp_alerts"`
			} `json:"alert_rule_test"`
		} `json:"tests"`
	}
	for file, v := range map[string]any{"jobsched.rules.yaml": &rules, "jobsched.rules.test.yaml": &tests} {
		data, err := os.ReadFile(filepath.Join(monitoringDir, file))
		if err != nil {
			t.Fatal(err)
		}
		if err := yaml.Unmarshal(data, v); err != nil {
			t.Fatal(err)
		}
	}
	fires, quiet := map[string]bool{}, map[string]bool{}
	for _, tc := range tests.Tests {
		for _, a := range tc.AlertRuleTest {
			if len(a.ExpAlerts) > 0 {
				fires[a.Alertname] = true
			} else {
				quiet[a.Alertname] = true
			}
		}
	}
	var n int
	for _, g := range rules.Groups {
		for _, r := range g.Rules {
			if r.Alert == "" {
				continue
			}
			n++
			if !fires[r.Alert] || !quiet[r.Alert] {
				t.Errorf("alert %s: a test where it fires %v, one where it stays quiet %v; want both", r.Alert, fires[r.Alert], quiet[r.Alert])
			}
		}
	}
	if n < 6 {
		t.Errorf("%d alerts in jobsched.rules.yaml, want the six of the README", n)
	}
}

// TestAlertRulesPrometheusRule: the PrometheusRule and the kustomize component ship the rules file's groups and the
// dashboard unchanged.
func TestAlertRulesPrometheusRule(t *testing.T) {
	t.Parallel()
	var pr struct {
		Kind string `json:"kind"`
		Spec struct {
			Groups []any `json:"groups"`
		} `json:"spec"`
	}
	data, err := os.ReadFile(filepath.Join(monitoringDir, "prometheusrule.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(data, &pr); err != nil {
		t.Fatal(err)
	}
	if want := rulesFileGroups(t); pr.Kind != "PrometheusRule" || !reflect.DeepEqual(pr.Spec.Groups, want) {
		t.Errorf("prometheusrule.yaml's spec.groups differ from jobsched.rules.yaml's groups: edit both together")
	}

	// The component, included by an overlay as the README says.
	clone := cloneWithManifests(t)
	overlay := filepath.Join(clone, "manifests", "examples", "monitoring")
	if err := os.MkdirAll(overlay, 0o755); err != nil {
		t.Fatal(err)
	}
	kust := "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nnamespace: monitoring\ncomponents:\n  - ../../monitoring\n"
	if err := os.WriteFile(filepath.Join(overlay, "kustomization.yaml"), []byte(kust), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("kubectl", "kustomize", overlay).Output()
	if err != nil {
		t.Fatalf("kubectl kustomize of an overlay with the monitoring component: %v", err)
	}
	objs := decodeObjects(t, string(out))
	if got, want := kindNames(objs), []string{"ConfigMap monitoring/jobsched-dashboard", "PrometheusRule monitoring/jobsched"}; !slices.Equal(got, want) {
		t.Fatalf("the component renders %v, want %v", got, want)
	}
	find(t, objs, "PrometheusRule", "", &pr)
	if !reflect.DeepEqual(pr.Spec.Groups, rulesFileGroups(t)) {
		t.Errorf("the component's PrometheusRule differs from jobsched.rules.yaml")
	}
	var cm struct {
		Metadata struct {
			Labels map[string]string `json:"labels"`
		} `json:"metadata"`
		Data map[string]string `json:"data"`
	}
	find(t, objs, "ConfigMap", "", &cm)
	dash, err := os.ReadFile(filepath.Join(monitoringDir, "dashboard.json"))
	if err != nil {
		t.Fatal(err)
	}
	if cm.Metadata.Labels["grafana_dashboard"] != "1" || cm.Data["jobsched.json"] != string(dash) {
		t.Errorf("the dashboard ConfigMap: labels %v, jobsched.json equal to dashboard.json: %v", cm.Metadata.Labels, cm.Data["jobsched.json"] == string(dash))
	}
}

// panelQuery is one query of the dashboard.
type panelQuery struct {
	Panel, Expr string
}

// dashboardQueries are the dashboard's PromQL queries (every panel target, and the selector of each variable's
// label_values), with its variables replaced by one namespace and scheduler.
func dashboardQueries(t *testing.T, namespace, scheduler string) []panelQuery {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(monitoringDir, "dashboard.json"))
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
		Templating struct {
			List []struct {
				Name  string `json:"name"`
				Type  string `json:"type"`
				Query any    `json:"query"`
			} `json:"list"`
		} `json:"templating"`
	}
	if err := json.Unmarshal(data, &d); err != nil {
		t.Fatalf("dashboard.json: %v", err)
	}
	subst := strings.NewReplacer("$namespace", namespace, "$scheduler", scheduler)
	var out []panelQuery
	for _, p := range d.Panels {
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		for _, tg := range p.Targets {
			out = append(out, panelQuery{p.Title, subst.Replace(tg.Expr)})
		}
	}
	for _, v := range d.Templating.List {
		if v.Type != "query" {
			continue
		}
		q, _ := v.Query.(map[string]any)["query"].(string)
		inner, ok := strings.CutPrefix(q, "label_values(")
		i := strings.LastIndex(inner, ",")
		if !ok || i < 0 {
			t.Fatalf("variable %s: query %q is not label_values(selector, label)", v.Name, q)
		}
		out = append(out, panelQuery{"variable " + v.Name, subst.Replace(inner[:i])})
	}
	return out
}

// TestDashboardQueries: every query of the dashboard parses (promtool check rules on a file with one recording rule
// per query: promtool 2.42 has no query parser of its own), and the panels the README lists are there.
func TestDashboardQueries(t *testing.T) {
	t.Parallel()
	qs := dashboardQueries(t, "batch", "reports")
	var b strings.Builder
	b.WriteString("groups:\n  - name: dashboard\n    rules:\n")
	var titles []string
	for i, q := range qs {
		fmt.Fprintf(&b, "      - record: dashboard_query_%d\n        expr: %q\n", i, q.Expr)
		titles = append(titles, q.Panel)
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "dashboard.rules.yaml"), []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	out := runPromtool(t, dir, "check", "rules", "dashboard.rules.yaml")
	if !strings.Contains(out, fmt.Sprintf("SUCCESS: %d rules found", len(qs))) {
		t.Errorf("promtool check rules: %s", out)
	}
	for _, want := range []string{"Backlog", "Jobs created and deleted per pass", "Jobs by state", "Slots and what bound them",
		"Pass duration", "Failed passes", "Dead tasks"} {
		if !slices.Contains(titles, want) {
			t.Errorf("the dashboard has no panel %q (panels: %v)", want, slices.Compact(titles))
		}
	}
}

// promQuery runs an instant query against the test Prometheus and returns the label sets of its result.
func promQuery(t *testing.T, expr string) []map[string]string {
	t.Helper()
	resp, err := http.Get(prometheusURL + "/api/v1/query?query=" + neturl.QueryEscape(expr))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var r struct {
		Status string `json:"status"`
		Error  string `json:"error"`
		Data   struct {
			Result []struct {
				Metric map[string]string `json:"metric"`
			} `json:"result"`
		} `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&r); err != nil {
		t.Fatal(err)
	}
	if r.Status != "success" {
		t.Fatalf("query %s: %s", expr, r.Error)
	}
	var out []map[string]string
	for _, s := range r.Data.Result {
		out = append(out, s.Metric)
	}
	return out
}

// dbProxy forwards TCP connections to target until cut is called; then every connection is closed and new ones are
// refused: the database becomes unreachable under an unchanged DSN.
func dbProxy(t *testing.T, target string) (addr string, cut func()) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var conns []net.Conn
	closed := false
	track := func(c net.Conn) bool {
		mu.Lock()
		defer mu.Unlock()
		if closed {
			c.Close()
			return false
		}
		conns = append(conns, c)
		return true
	}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			if !track(c) {
				continue
			}
			go func() {
				up, err := net.Dial("tcp", target)
				if err != nil || !track(up) {
					c.Close()
					return
				}
				go func() { _, _ = io.Copy(up, c); up.Close() }()
				_, _ = io.Copy(c, up)
				c.Close()
			}()
		}
	}()
	cut = func() {
		mu.Lock()
		defer mu.Unlock()
		if closed {
			return
		}
		closed = true
		ln.Close()
		for _, c := range conns {
			c.Close()
		}
	}
	t.Cleanup(cut)
	return ln.Addr().String(), cut
}

// replaceOnce replaces old by new in s, and fails when old is not there exactly once.
func replaceOnce(t *testing.T, s, old, new string) string {
	t.Helper()
	if n := strings.Count(s, old); n != 1 {
		t.Fatalf("%q occurs %d times, want once", old, n)
	}
	return strings.Replace(s, old, new, 1)
}

// TestMonitoringPrometheus: Debian's Prometheus scrapes the real Pushgateway (honor_labels: true) while real ticks
// run on the local control plane; every dashboard query returns series for this scheduler, and once the database
// is unreachable the stalled-scheduler rule fires (in the test's copy of the rules, its threshold and `for` are
// seconds, not minutes).
func TestMonitoringPrometheus(t *testing.T) {
	t.Parallel()
	needPushgateway(t)
	if prometheusURL == "" || prometheusRules == "" {
		t.Fatal("JOBSCHED_TEST_PROMETHEUS and JOBSCHED_TEST_PROMETHEUS_RULES must be set: run scripts/test.sh (scripts/prometheus.sh up)")
	}
	const threshold = 15 // seconds without a successful pass, in the test's copy
	data, err := os.ReadFile(filepath.Join(monitoringDir, "jobsched.rules.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	rules := replaceOnce(t, string(data),
		"expr: time() - jobsched_last_success_timestamp_seconds{job=\"jobsched\"} > 600\n        for: 5m\n",
		fmt.Sprintf("expr: time() - jobsched_last_success_timestamp_seconds{job=\"jobsched\"} > %d\n        for: 2s\n", threshold))
	load := func(rules string) error {
		if err := os.WriteFile(filepath.Join(prometheusRules, "jobsched.rules.yaml"), []byte(rules), 0o644); err != nil {
			return err
		}
		resp, err := http.Post(prometheusURL+"/-/reload", "", nil)
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("reloading Prometheus: %s", resp.Status)
		}
		return nil
	}
	if err := load(rules); err != nil {
		t.Fatal(err)
	}
	// A Prometheus left running (KEEP=1) goes back to the shipped rules.
	t.Cleanup(func() {
		if err := load(string(data)); err != nil {
			t.Error(err)
		}
	})

	e := newEnv(t)
	e.addNode("n1", "4", "8Gi", 110, nil)
	u, err := neturl.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	proxy, cut := dbProxy(t, u.Host)
	u.Host = proxy
	dbDSN := u.String()
	// Room for every row: a pass that a limit blocks reads no rows, so it would not notice the database is gone.
	cfg := e.writeConfig(config{duration: "3s", extra: "limits:\n  maxActive: 50\n  capacity: quota\nmetrics:\n  pushgateway: " + pushgateway + "\n"})
	e.insert("t", 6)
	e.worker()
	tick := func() result {
		t.Helper()
		return e.run([]string{"DATABASE_URL=" + dbDSN}, "tick", "--config", cfg)
	}

	// Ticks, as the CronJob would run them (here back to back), until Prometheus has scraped a series for every
	// query of the dashboard.
	queries := dashboardQueries(t, e.ns, "e2e")
	start := time.Now()
	missing := queries
	for len(missing) > 0 {
		if time.Since(start) > 2*time.Minute {
			t.Fatalf("after 2 minutes of ticks, these dashboard queries return no series: %v", missing)
		}
		if r := tick(); r.code != 0 {
			t.Fatalf("tick exited %d:\n%s", r.code, r.stderr)
		}
		var still []panelQuery
		for _, q := range missing {
			if len(promQuery(t, q.Expr)) == 0 {
				still = append(still, q)
			}
		}
		missing = still
	}
	t.Logf("every dashboard query returned series after %s of ticks", time.Since(start).Round(time.Second))
	stalled := fmt.Sprintf(`ALERTS{alertname="JobschedStalled", namespace=%q, scheduler="e2e"}`, e.ns)
	if got := promQuery(t, stalled); len(got) != 0 {
		t.Fatalf("JobschedStalled is %v while passes succeed", got)
	}

	// The database goes away: every pass fails (and pushes no last success) until the rule fires.
	cut()
	cutAt := time.Now()
	firing := stalled[:len(stalled)-1] + `, alertstate="firing"}`
	ctx, cancel := context.WithTimeout(e.ctx, 2*time.Minute)
	defer cancel()
	for {
		if r := tick(); r.code == 0 {
			t.Fatalf("a tick with the database unreachable exited 0:\n%s", r.stderr)
		}
		if got := promQuery(t, firing); len(got) == 1 {
			if got[0]["severity"] != "warning" {
				t.Errorf("JobschedStalled labels %v, want severity warning", got[0])
			}
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("JobschedStalled did not fire within 2 minutes of the database going away (pending: %v)", promQuery(t, stalled))
		}
	}
	t.Logf("JobschedStalled fired %s after the database went away", time.Since(cutAt).Round(time.Second))
}
