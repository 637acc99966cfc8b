package metrics

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"

	"github.com/jobsched/jobsched/pkg/backlog"
	"github.com/jobsched/jobsched/pkg/pushurl"
	"github.com/jobsched/jobsched/pkg/scheduler"
)

// pushed is one request the Pushgateway got: method, grouping key and the samples, one "name{labels} value" line
// each.
type pushed struct {
	Method, Group string
	Samples       []string
}

// group is the grouping key of a push path, /metrics/job/J/l1/v1/l2/v2, as "job=J l1=v1 l2=v2" with the labels
// sorted: the push package writes them in any order, and the Pushgateway reads them as a set.
func group(path string) string {
	parts := strings.Split(strings.TrimPrefix(path, "/metrics/"), "/")
	var pairs []string
	for i := 0; i+1 < len(parts); i += 2 {
		pairs = append(pairs, parts[i]+"="+parts[i+1])
	}
	if len(pairs) > 1 {
		sort.Strings(pairs[1:])
	}
	return strings.Join(pairs, " ")
}

func gateway(t *testing.T, status int) (*httptest.Server, *[]pushed) {
	t.Helper()
	var got []pushed
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p := pushed{Method: r.Method, Group: group(r.URL.EscapedPath())}
		dec := expfmt.NewDecoder(r.Body, expfmt.ResponseFormat(r.Header))
		for {
			var mf dto.MetricFamily
			err := dec.Decode(&mf)
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Errorf("decoding the pushed exposition (%s): %v", r.Header.Get("Content-Type"), err)
				break
			}
			for _, m := range mf.GetMetric() {
				var labels []string
				for _, l := range m.GetLabel() {
					labels = append(labels, fmt.Sprintf("%s=%q", l.GetName(), l.GetValue()))
				}
				p.Samples = append(p.Samples, fmt.Sprintf("%s{%s} %v", mf.GetName(), strings.Join(labels, ","), m.GetGauge().GetValue()))
			}
		}
		sort.Strings(p.Samples)
		got = append(got, p)
		w.WriteHeader(status)
	}))
	t.Cleanup(srv.Close)
	return srv, &got
}

var end = time.Unix(1764417600, 500_000_000)

func plan() *scheduler.Plan {
	return &scheduler.Plan{Slots: 0, Limit: "limits.maxActive: 2 of 2 unfinished", Bound: scheduler.BoundMaxActive, Jobs: []scheduler.JobStatus{
		{Name: "a", State: scheduler.StateRunning},
		{Name: "b", State: scheduler.StateUnschedulable},
		{Name: "c", State: scheduler.StateSucceeded},
		{Name: "d", State: scheduler.StateSucceeded, Delete: scheduler.DeleteRetention}, // deleted: not counted
	}}
}

func TestPush(t *testing.T) {
	states := func(v string) []string {
		var out []string
		for _, s := range []string{"backoff", "dead", "queued", "running", "starting", "succeeded", "unschedulable"} {
			out = append(out, fmt.Sprintf(`jobsched_jobs{state=%q} %s`, s, v))
		}
		return out
	}
	tick := []string{
		"jobsched_backlog_capped{} 1",
		"jobsched_backlog_rows{} 10000",
		"jobsched_last_success_timestamp_seconds{} 1.7644176005e+09",
		"jobsched_pass_blocked{} 1",
		"jobsched_pass_created_jobs{} 3",
		"jobsched_pass_deleted_jobs{} 1",
		"jobsched_pass_duration_seconds{} 1.5",
		"jobsched_pass_failed{} 0",
		"jobsched_pass_failed_writes{} 2",
		`jobsched_jobs{state="backoff"} 0`,
		`jobsched_jobs{state="dead"} 0`,
		`jobsched_jobs{state="queued"} 0`,
		`jobsched_jobs{state="running"} 1`,
		`jobsched_jobs{state="starting"} 0`,
		`jobsched_jobs{state="succeeded"} 1`,
		`jobsched_jobs{state="unschedulable"} 1`,
		"jobsched_pass_retried_jobs{} 1",
		"jobsched_pass_selected_rows{} 4",
		"jobsched_pass_skipped_rows{} 1",
		"jobsched_pass_skipped_size_rows{} 1",
		"jobsched_rate_limited_rows{} 0",
		"jobsched_slots{} 0",
		`jobsched_slots_limit_info{limit="maxActive"} 1`,
		"jobsched_next_create_timestamp_seconds{} NaN",
	}
	rateBound := plan()
	next := end.Add(time.Minute)
	rateBound.Limit, rateBound.Bound, rateBound.NextCreate = "limits.rate: 30 per 1m, next create at 12:01:00", scheduler.BoundRate, &next
	rateTick := []string{}
	for _, s := range tick {
		switch {
		case s == "jobsched_rate_limited_rows{} 0":
			s = "jobsched_rate_limited_rows{} 10000" // the backlog
		case strings.HasPrefix(s, "jobsched_slots_limit_info"):
			s = `jobsched_slots_limit_info{limit="rate"} 1`
		case strings.HasPrefix(s, "jobsched_next_create_timestamp_seconds"):
			s = "jobsched_next_create_timestamp_seconds{} 1.7644176605e+09" // end + 1m
		}
		rateTick = append(rateTick, s)
	}
	sum := scheduler.Summary{Selected: 4, Created: 3, Skipped: 1, SkippedSize: 1, Blocked: "limits.maxActive: 2 of 2 unfinished", Deleted: 1, Failed: 2, Retried: 1}
	tests := []struct {
		name string
		pass Pass
		want pushed
	}{
		{
			name: "tick",
			pass: Pass{Job: JobTick, Scheduler: "reports", Namespace: "batch", Duration: 1500 * time.Millisecond, Summary: sum,
				Plan: plan(), Backlogs: []backlog.Count{{Rows: 10000, Capped: true}}, End: end},
			want: pushed{Method: "POST", Group: "job=jobsched namespace=batch scheduler=reports", Samples: tick},
		},
		{
			name: "a tick whose slots a limits.rate bound: the backlog is rate-limited",
			pass: Pass{Job: JobTick, Scheduler: "reports", Namespace: "batch", Duration: 1500 * time.Millisecond, Summary: sum,
				Plan: rateBound, Backlogs: []backlog.Count{{Rows: 10000, Capped: true}}, End: end},
			want: pushed{Method: "POST", Group: "job=jobsched namespace=batch scheduler=reports", Samples: rateTick},
		},
		{
			name: "a failed tick that could not list Jobs: no last success, NaN for what it could not learn",
			pass: Pass{Job: JobTick, Scheduler: "reports", Namespace: "batch", Duration: 1500 * time.Millisecond,
				Summary: scheduler.Summary{Blocked: "cannot list Jobs"}, Failed: true, End: end},
			want: pushed{Method: "POST", Group: "job=jobsched namespace=batch scheduler=reports", Samples: append(states("NaN"),
				"jobsched_backlog_capped{} NaN",
				"jobsched_backlog_rows{} NaN",
				"jobsched_pass_blocked{} 1",
				"jobsched_pass_created_jobs{} 0",
				"jobsched_pass_deleted_jobs{} 0",
				"jobsched_pass_duration_seconds{} 1.5",
				"jobsched_pass_failed{} 1",
				"jobsched_pass_failed_writes{} 0",
				"jobsched_pass_retried_jobs{} 0",
				"jobsched_pass_selected_rows{} 0",
				"jobsched_pass_skipped_rows{} 0",
				"jobsched_pass_skipped_size_rows{} 0",
				"jobsched_rate_limited_rows{} NaN",
				"jobsched_slots{} NaN",
				`jobsched_slots_limit_info{limit="unknown"} 1`,
				"jobsched_next_create_timestamp_seconds{} NaN",
			)},
		},
		{
			name: "gc: its own group, no slots, rows or creates",
			pass: Pass{Job: JobGC, Scheduler: "reports", Namespace: "batch", Duration: 250 * time.Millisecond,
				Summary: scheduler.Summary{Deleted: 1}, Plan: plan(), End: end},
			want: pushed{Method: "POST", Group: "job=jobsched-gc namespace=batch scheduler=reports", Samples: []string{
				"jobsched_last_success_timestamp_seconds{} 1.7644176005e+09",
				"jobsched_pass_deleted_jobs{} 1",
				"jobsched_pass_duration_seconds{} 0.25",
				"jobsched_pass_failed{} 0",
				"jobsched_pass_failed_writes{} 0",
				`jobsched_jobs{state="backoff"} 0`,
				`jobsched_jobs{state="dead"} 0`,
				`jobsched_jobs{state="queued"} 0`,
				`jobsched_jobs{state="running"} 1`,
				`jobsched_jobs{state="starting"} 0`,
				`jobsched_jobs{state="succeeded"} 1`,
				`jobsched_jobs{state="unschedulable"} 1`,
			}},
		},
		{
			name: "a namespace and name with characters a path segment cannot hold are encoded",
			pass: Pass{Job: JobGC, Scheduler: "a/b", Namespace: "batch", Plan: plan(), End: end},
			want: pushed{Method: "POST", Group: "job=jobsched-gc namespace=batch scheduler@base64=YS9i"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv, got := gateway(t, http.StatusOK)
			if err := Push(context.Background(), srv.URL, tt.pass); err != nil {
				t.Fatal(err)
			}
			if len(*got) != 1 {
				t.Fatalf("%d pushes, want 1", len(*got))
			}
			g := (*got)[0]
			if tt.want.Samples == nil {
				g.Samples = nil // only the grouping key is checked
			} else {
				sort.Strings(tt.want.Samples)
			}
			if diff := cmp.Diff(tt.want, g); diff != "" {
				t.Errorf("push (-want +got):\n%s", diff)
			}
		})
	}
}

// TestPushFailure: a Pushgateway that refuses the push is an error for the caller to log.
func TestPushFailure(t *testing.T) {
	srv, _ := gateway(t, http.StatusBadRequest)
	err := Push(context.Background(), srv.URL, Pass{Job: JobTick, Scheduler: "reports", Namespace: "batch", End: end})
	if err == nil || !strings.Contains(err.Error(), "400") {
		t.Errorf("Push to a gateway answering 400: %v, want an error with the status", err)
	}
	if err := Push(context.Background(), "http://127.0.0.1:1", Pass{Job: JobTick, Scheduler: "reports", Namespace: "batch", End: end}); err == nil {
		t.Error("Push to a closed port: no error")
	}
}

// TestPushFailureHidesPassword: a Pushgateway URL with basic-auth credentials never shows its password in the error
// (which the pass logs).
func TestPushFailureHidesPassword(t *testing.T) {
	srv, _ := gateway(t, http.StatusBadRequest)
	for _, url := range []string{
		strings.Replace(srv.URL, "http://", "http://pusher:s3cret-pw@", 1), // the gateway answers 400
		"http://pusher:s3cret-pw@127.0.0.1:1",                              // nothing listens
	} {
		err := Push(context.Background(), url, Pass{Job: JobTick, Scheduler: "reports", Namespace: "batch", End: end})
		if err == nil {
			t.Fatalf("Push to %s: no error", url)
		}
		if strings.Contains(err.Error(), "s3cret-pw") {
			t.Errorf("the error shows the password: %v", err)
		}
	}
}

// pushgatewayShapes are Pushgateway URLs around a password pw, each of a shape that fails somewhere: the gateway
// (at gw, answering 400) refuses it, nothing listens, or validation refuses it. pw is given raw, percent-encoded by
// net/url, and fully percent-encoded.
var pushgatewayShapes = []func(gw, pw string) string{
	func(gw, pw string) string { return "http://metrics:" + pw + "@" + gw + "/" },
	func(gw, pw string) string {
		return "http://" + url.UserPassword("metrics", pw).String() + "@" + gw + "/"
	},
	func(gw, pw string) string { return "http://metrics:" + hexEscape(pw) + "@" + gw + "/" },
	func(gw, pw string) string {
		return "http://" + url.UserPassword("metrics", pw).String() + "@127.0.0.1:1/"
	},
	func(gw, pw string) string { return "http://" + url.User(pw).String() + "@" + gw + "/" },
	func(gw, pw string) string {
		return "http://" + url.UserPassword("metrics", pw).String() + "@" + gw + "/?a=b"
	},
	func(gw, pw string) string {
		return "ftp://" + url.UserPassword("metrics", pw).String() + "@" + gw + "/"
	},
	func(gw, pw string) string { return "http://metrics:" + pw + "@[::1/" },
	func(gw, pw string) string { return "http://metrics:" + pw + "@" + gw + "/\x7f" },
	func(gw, pw string) string { return "http://metrics:" + hexEscape(pw) + "@" + gw + ":x/" },
	func(gw, pw string) string { return "metrics:" + pw + "@" + gw },
}

func hexEscape(s string) string {
	var b strings.Builder
	for i := range len(s) {
		fmt.Fprintf(&b, "%%%02X", s[i])
	}
	return b.String()
}

// pushgatewayTexts is every text a Pushgateway URL reaches: its validation error, the URL as jobsched prints it,
// and the push's error.
func pushgatewayTexts(raw string) []string {
	texts := []string{pushurl.Redact(raw)}
	if err := pushurl.Validate(raw); err != nil {
		return append(texts, err.Error())
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := Push(ctx, raw, Pass{Job: JobTick, Scheduler: "reports", Namespace: "batch", End: end}); err != nil {
		texts = append(texts, err.Error())
	}
	return texts
}

// checkPushgatewayRedacted fails when a text of the URL holds (part of) pw, which starts with J and ends with K: no
// text holds either letter otherwise.
func checkPushgatewayRedacted(t *testing.T, gw string, shape int, pw string) {
	t.Helper()
	raw := pushgatewayShapes[shape](gw, pw)
	for _, msg := range pushgatewayTexts(raw) {
		if strings.ContainsAny(msg, "JK") {
			t.Errorf("shape %d: URL %q: a text shows (part of) the password %q:\n%s", shape, raw, pw, msg)
		}
	}
}

// TestPushgatewayURLRedacted checks every shape with the passwords of the issue: no validation error, printed URL or
// push error shows them, raw or percent-encoded.
func TestPushgatewayURLRedacted(t *testing.T) {
	srv, _ := gateway(t, http.StatusBadRequest)
	gw := strings.TrimPrefix(srv.URL, "http://")
	for shape := range pushgatewayShapes {
		for _, pw := range []string{"JPgwS3cretK", "Jp@ss/w0rdK", "Jp%40ss%2Fw0rdK", "J a:b K"} {
			checkPushgatewayRedacted(t, gw, shape, pw)
		}
	}
}

// TestPushSendsCredentials checks that the credentials of the URL still reach the gateway, as basic auth.
func TestPushSendsCredentials(t *testing.T) {
	var user, pw string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		user, pw, _ = r.BasicAuth()
		w.WriteHeader(http.StatusOK)
	}))
	defer srv.Close()
	raw := "http://" + url.UserPassword("metrics", "p@ss/w0rd").String() + "@" + strings.TrimPrefix(srv.URL, "http://") + "/"
	if err := Push(context.Background(), raw, Pass{Job: JobTick, Scheduler: "reports", Namespace: "batch", End: end}); err != nil {
		t.Fatal(err)
	}
	if user != "metrics" || pw != "p@ss/w0rd" {
		t.Errorf("the gateway got basic auth %q:%q, want metrics:p@ss/w0rd", user, pw)
	}
}

// FuzzPushgatewayURLRedaction builds Pushgateway URLs of every shape around a random password and checks that no
// text jobsched makes of them shows it. The seed corpus runs with every go test; scripts/fuzz.sh searches further.
func FuzzPushgatewayURLRedaction(f *testing.F) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusBadRequest)
	}))
	defer srv.Close()
	gw := strings.TrimPrefix(srv.URL, "http://")
	f.Add(uint8(0), "PgwS3cret")
	f.Add(uint8(2), "p@ss/w0rd")
	f.Add(uint8(7), "a b")
	f.Fuzz(func(t *testing.T, shape uint8, pw string) {
		if len(pw) < 2 || strings.ContainsAny(pw, "JK\x00") {
			t.Skip()
		}
		checkPushgatewayRedacted(t, gw, int(shape)%len(pushgatewayShapes), "J"+pw+"K")
	})
}

// TestPushQueues: with config queues:, each queue's series (label queue) are pushed beside the install's, which
// are exactly those of the same pass without queues; a queue the plan does not know (the Jobs could not be listed)
// gets NaN, so that no stale value stays in the group; gc pushes only the Jobs by state.
func TestPushQueues(t *testing.T) {
	p := plan()
	p.Jobs[0].Queue, p.Jobs[1].Queue, p.Jobs[2].Queue, p.Jobs[3].Queue = "daily", "daily", "exports", "exports"
	p.Queues = []scheduler.QueuePlan{
		{Name: "daily", Priority: 10, Weight: 1, Unfinished: 2, Slots: 0, Limit: "limits.maxActive: 2 of 2 unfinished", Blocked: "limits.maxActive: 2 of 2 unfinished",
			Bound: scheduler.BoundMaxActive},
		{Name: "exports", Weight: 3, Slots: 3, Limit: "limits.rate: 3 per 1m, next create at 12:00:20", Bound: scheduler.BoundRate, Selected: 4, Creates: 3,
			GroupsAtCap: []string{"acme", "b"}, NextCreate: &end},
	}
	sum := scheduler.Summary{Selected: 4, Created: 3, Skipped: 1, Deleted: 1}
	base := Pass{Job: JobTick, Scheduler: "reports", Namespace: "batch", Duration: time.Second, Summary: sum, Plan: p,
		Backlogs: []backlog.Count{{Rows: 12}}, End: end}
	states := func(queue string, running, unschedulable, succeeded string) []string {
		v := map[string]string{"running": running, "unschedulable": unschedulable, "succeeded": succeeded}
		var out []string
		for _, s := range []string{"backoff", "dead", "queued", "running", "starting", "succeeded", "unschedulable"} {
			n := v[s]
			if n == "" {
				n = "0"
			}
			if running == "NaN" {
				n = "NaN"
			}
			out = append(out, fmt.Sprintf(`jobsched_queue_jobs{queue=%q,state=%q} %s`, queue, s, n))
		}
		return out
	}
	tests := []struct {
		name   string
		change func(*Pass)
		want   []string // the jobsched_queue_* samples
	}{
		{"tick", func(p *Pass) {
			p.Backlogs = []backlog.Count{{Queue: "daily", Rows: 3}, {Queue: "exports", Rows: 9}}
		}, append(append(states("daily", "1", "1", "0"), states("exports", "0", "0", "1")...),
			`jobsched_queue_backlog_capped{queue="daily"} 0`, `jobsched_queue_backlog_capped{queue="exports"} 0`,
			`jobsched_queue_backlog_rows{queue="daily"} 3`, `jobsched_queue_backlog_rows{queue="exports"} 9`,
			`jobsched_queue_blocked{queue="daily"} 1`, `jobsched_queue_blocked{queue="exports"} 0`,
			`jobsched_queue_groups_at_cap{queue="daily"} 0`, `jobsched_queue_groups_at_cap{queue="exports"} 2`,
			`jobsched_queue_planned_jobs{queue="daily"} 0`, `jobsched_queue_planned_jobs{queue="exports"} 3`,
			`jobsched_queue_rate_limited_rows{queue="daily"} 0`, `jobsched_queue_rate_limited_rows{queue="exports"} 9`,
			`jobsched_queue_selected_rows{queue="daily"} 0`, `jobsched_queue_selected_rows{queue="exports"} 4`,
			`jobsched_queue_slots{queue="daily"} 0`, `jobsched_queue_slots{queue="exports"} 3`,
			`jobsched_queue_slots_limit_info{limit="maxActive",queue="daily"} 1`,
			`jobsched_queue_slots_limit_info{limit="rate",queue="exports"} 1`,
			`jobsched_queue_next_create_timestamp_seconds{queue="daily"} NaN`,
			`jobsched_queue_next_create_timestamp_seconds{queue="exports"} 1.7644176005e+09`)},
		{"a queue added since the plan, and no backlog counted: NaN", func(p *Pass) {
			p.Queues = []string{"daily", "new"}
		}, append(append(states("daily", "1", "1", "0"), states("new", "NaN", "", "")...),
			`jobsched_queue_backlog_capped{queue="daily"} NaN`, `jobsched_queue_backlog_capped{queue="new"} NaN`,
			`jobsched_queue_backlog_rows{queue="daily"} NaN`, `jobsched_queue_backlog_rows{queue="new"} NaN`,
			`jobsched_queue_blocked{queue="daily"} 1`, `jobsched_queue_blocked{queue="new"} NaN`,
			`jobsched_queue_groups_at_cap{queue="daily"} 0`, `jobsched_queue_groups_at_cap{queue="new"} NaN`,
			`jobsched_queue_planned_jobs{queue="daily"} 0`, `jobsched_queue_planned_jobs{queue="new"} NaN`,
			`jobsched_queue_rate_limited_rows{queue="daily"} NaN`, `jobsched_queue_rate_limited_rows{queue="new"} NaN`,
			`jobsched_queue_selected_rows{queue="daily"} 0`, `jobsched_queue_selected_rows{queue="new"} NaN`,
			`jobsched_queue_slots{queue="daily"} 0`, `jobsched_queue_slots{queue="new"} NaN`,
			`jobsched_queue_slots_limit_info{limit="maxActive",queue="daily"} 1`,
			`jobsched_queue_slots_limit_info{limit="unknown",queue="new"} 1`,
			`jobsched_queue_next_create_timestamp_seconds{queue="daily"} NaN`,
			`jobsched_queue_next_create_timestamp_seconds{queue="new"} NaN`)},
		{"gc", func(p *Pass) { p.Job = JobGC }, append(states("daily", "1", "1", "0"), states("exports", "0", "0", "1")...)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			without := base
			tt.change(&without)
			with := without
			with.Queues = []string{"daily", "exports"}
			tt.change(&with)
			var install, queues []string
			for _, s := range pushOnce(t, with).Samples {
				if strings.HasPrefix(s, "jobsched_queue_") {
					queues = append(queues, s)
				} else {
					install = append(install, s)
				}
			}
			without.Queues = nil
			if diff := cmp.Diff(pushOnce(t, without).Samples, install); diff != "" {
				t.Errorf("the install's series differ from those of the pass without queues (-without +with):\n%s", diff)
			}
			sort.Strings(tt.want)
			if diff := cmp.Diff(tt.want, queues); diff != "" {
				t.Errorf("queue series (-want +got):\n%s", diff)
			}
		})
	}
}

// pushOnce pushes p to a test Pushgateway and returns what it got.
func pushOnce(t *testing.T, p Pass) pushed {
	t.Helper()
	srv, got := gateway(t, http.StatusOK)
	if err := Push(context.Background(), srv.URL, p); err != nil {
		t.Fatal(err)
	}
	if len(*got) != 1 {
		t.Fatalf("%d pushes, want 1", len(*got))
	}
	return (*got)[0]
}

// TestLabelValuesBounded: every label value of every metric a pass pushes comes from a bounded set, whatever the
// pass: limit one of scheduler.Bounds or unknown, state one of scheduler.States, queue one of the configuration's
// queues; none carries a count, a time or words (no digit, no space, no colon: the limits in words, with their
// counts and times, went in the label before).
func TestLabelValuesBounded(t *testing.T) {
	allowed := map[string]map[string]bool{"limit": {Unknown: true}, "state": {}, "queue": {"daily": true, "exports": true}}
	for _, b := range scheduler.Bounds {
		allowed["limit"][string(b)] = true
	}
	for _, s := range scheduler.States {
		allowed["state"][string(s)] = true
	}
	next := end.Add(time.Minute)
	var passes []Pass
	for _, b := range scheduler.Bounds {
		p := plan()
		p.Bound, p.Limit, p.Blocked, p.NextCreate = b, "limits.rate: 30 per 1m, next create at 12:01:00", "x: 1 pod(s) Unschedulable (a: 0/1 nodes)", &next
		p.Queues = []scheduler.QueuePlan{{Name: "daily", Bound: b, Limit: "limits.maxActive: 2 of 2 unfinished", NextCreate: &next},
			{Name: "exports", Bound: scheduler.BoundCapacity, Limit: "capacity: 3 Job(s) fit on node-1 (cpu)"}}
		passes = append(passes, Pass{Job: JobTick, Plan: p, Queues: []string{"daily", "exports"}, End: end})
	}
	passes = append(passes, Pass{Job: JobTick, Queues: []string{"daily", "exports"}, Failed: true, End: end}, // Jobs not listed
		Pass{Job: JobGC, Plan: plan(), Queues: []string{"daily", "exports"}, End: end})
	seen := map[string]bool{}
	for _, p := range passes {
		families, err := registry(p).Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range families {
			for _, m := range f.GetMetric() {
				for _, l := range m.GetLabel() {
					set, ok := allowed[l.GetName()]
					if !ok || !set[l.GetValue()] || strings.ContainsAny(l.GetValue(), "0123456789 :") {
						t.Errorf("%s{%s=%q}: not a value of a bounded set", f.GetName(), l.GetName(), l.GetValue())
					}
					seen[l.GetName()+"="+l.GetValue()] = true
				}
			}
		}
	}
	for name, set := range allowed {
		for v := range set {
			if !seen[name+"="+v] {
				t.Errorf("label %s=%q never pushed: the passes do not cover the set", name, v)
			}
		}
	}
}
