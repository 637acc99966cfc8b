package jobend

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/jobsched/jobsched/pkg/kube"
	"github.com/jobsched/jobsched/pkg/testkit"
)

// jobEvent is one watch event of a Job in namespace batch: uid, resourceVersion and, unless "", its condition.
func jobEvent(typ, name, uid, rv, condition string) string {
	status := "{}"
	if condition != "" {
		status = fmt.Sprintf(`{"conditions":[{"type":%q,"status":"True"}]}`, condition)
	}
	return fmt.Sprintf(`{"type":%q,"object":{"kind":"Job","apiVersion":"batch/v1","metadata":{"name":%q,"namespace":"batch","uid":%q,"resourceVersion":%q},"status":%s}}`,
		typ, name, uid, rv, status)
}

func bookmark(rv string) string {
	return fmt.Sprintf(`{"type":"BOOKMARK","object":{"kind":"Job","apiVersion":"batch/v1","metadata":{"resourceVersion":%q}}}`, rv)
}

const expiredEvent = `{"type":"ERROR","object":{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"Expired","message":"too old resource version: 10 (20)","code":410}}`

// TestWaitJobEnd: what wakes the wait (a Job that finishes, or is deleted unfinished, after the list) and what does
// not (a new Job, a Job already finished when listed, a bookmark); a watch the server closes is opened again from
// the last resourceVersion seen, and one it failed from the same; an expired resourceVersion is ErrExpired, on the
// WATCH or in its stream.
func TestWaitJobEnd(t *testing.T) {
	tests := []struct {
		name     string
		watches  [][]string // the events each WATCH answers, in turn; then the stream closes
		code     int        // the first WATCH's HTTP status instead (410, 500), with no events
		want     string
		wantErr  error
		wantRVs  []string // the resourceVersion of each WATCH
		finished []types.UID
	}{
		{name: "a Job completes", finished: []types.UID{"u-old"},
			watches: [][]string{{jobEvent("ADDED", "new", "u-new", "11", ""), jobEvent("MODIFIED", "old", "u-old", "12", "Complete"),
				bookmark("13"), jobEvent("MODIFIED", "a", "u-a", "14", ""), jobEvent("MODIFIED", "a", "u-a", "15", "Complete")}},
			want: "a", wantRVs: []string{"10"}},
		{name: "a Job fails", watches: [][]string{{jobEvent("MODIFIED", "b", "u-b", "11", "Failed")}}, want: "b", wantRVs: []string{"10"}},
		{name: "a finished Job is deleted, then an unfinished one", finished: []types.UID{"u-old"},
			watches: [][]string{{jobEvent("DELETED", "old", "u-old", "11", "Complete"), jobEvent("DELETED", "c", "u-c", "12", "")}},
			want:    "c", wantRVs: []string{"10"}},
		{name: "the server closes the watch: it goes on from the last bookmark",
			watches: [][]string{{jobEvent("ADDED", "new", "u-new", "11", ""), bookmark("17")}, {jobEvent("MODIFIED", "a", "u-a", "18", "Complete")}},
			want:    "a", wantRVs: []string{"10", "17"}},
		{name: "expired in the stream", watches: [][]string{{expiredEvent}}, wantErr: ErrExpired, wantRVs: []string{"10"}},
		{name: "expired on the WATCH", code: http.StatusGone, wantErr: ErrExpired, wantRVs: []string{"10"}},
		{name: "a WATCH the server fails is opened again", code: http.StatusInternalServerError,
			watches: [][]string{nil, {jobEvent("MODIFIED", "a", "u-a", "11", "Complete")}}, want: "a", wantRVs: []string{"10", "10"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var mu sync.Mutex
			var rvs []string
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				q := r.URL.Query()
				if r.URL.Path != "/apis/batch/v1/namespaces/batch/jobs" || q.Get("watch") != "true" || q.Get("labelSelector") != "jobsched.io/scheduler=s" || q.Get("allowWatchBookmarks") != "true" {
					t.Errorf("unexpected request %s?%s", r.URL.Path, r.URL.RawQuery)
					http.NotFound(w, r)
					return
				}
				mu.Lock()
				rvs = append(rvs, q.Get("resourceVersion"))
				n := len(rvs)
				mu.Unlock()
				if tt.code != 0 && n == 1 {
					w.Header().Set("Content-Type", "application/json")
					w.WriteHeader(tt.code)
					fmt.Fprintf(w, `{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"Expired","message":"too old","code":%d}`, tt.code)
					return
				}
				if n > len(tt.watches) {
					t.Errorf("WATCH %d: the wait should have ended", n)
					return
				}
				testkit.WatchEvents(w, tt.watches[n-1]...)
			}))
			defer srv.Close()
			c, _, err := kube.NewClient(kube.Options{Kubeconfig: testkit.Kubeconfig(t, srv.URL)})
			if err != nil {
				t.Fatal(err)
			}
			finished := map[types.UID]bool{}
			for _, u := range tt.finished {
				finished[u] = true
			}
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			got, err := Wait(ctx, c.BatchV1().Jobs("batch"), "jobsched.io/scheduler=s", "10", finished)
			if got != tt.want || !errors.Is(err, tt.wantErr) {
				t.Errorf("got %q, %v; want %q, %v", got, err, tt.want, tt.wantErr)
			}
			mu.Lock()
			defer mu.Unlock()
			if !slices.Equal(rvs, tt.wantRVs) {
				t.Errorf("WATCHes from resourceVersions %v, want %v", rvs, tt.wantRVs)
			}
		})
	}
}

// TestWaitJobEndContext: when the context ends during the wait (SIGTERM, the end of --fill-for), the wait returns
// its cause.
func TestWaitJobEndContext(t *testing.T) {
	watching := make(chan struct{})
	var once sync.Once
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		testkit.WatchEvents(w, bookmark("11"))
		once.Do(func() { close(watching) })
		<-r.Context().Done() // a watch on which nothing happens
	}))
	defer srv.Close()
	c, _, err := kube.NewClient(kube.Options{Kubeconfig: testkit.Kubeconfig(t, srv.URL)})
	if err != nil {
		t.Fatal(err)
	}
	stop := errors.New("terminated")
	ctx, cancel := context.WithCancelCause(context.Background())
	go func() { <-watching; cancel(stop) }()
	_, err = Wait(ctx, c.BatchV1().Jobs("batch"), "a=b", "10", nil)
	if !errors.Is(err, stop) || strings.Contains(fmt.Sprint(err), "resourceVersion") {
		t.Errorf("error %v, want the context's cause", err)
	}
}
