package kube_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/jobsched/jobsched/pkg/kube"
	"github.com/jobsched/jobsched/pkg/testkit"
)

// apiServer answers the Jobs collection of namespace batch: a streaming list (watch=true) with watch, a LIST with
// list. It records each request as "WATCH" or "LIST".
func apiServer(t *testing.T, watch, list http.HandlerFunc) (string, func() []string) {
	t.Helper()
	var mu sync.Mutex
	var calls []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/apis/batch/v1/namespaces/batch/jobs" {
			http.NotFound(w, r)
			return
		}
		q := r.URL.Query()
		mu.Lock()
		if q.Get("watch") == "true" {
			calls = append(calls, "WATCH")
		} else {
			calls = append(calls, "LIST")
		}
		mu.Unlock()
		if q.Get("watch") == "true" {
			if q.Get("sendInitialEvents") != "true" || q.Get("allowWatchBookmarks") != "true" || q.Get("resourceVersionMatch") != "NotOlderThan" {
				t.Errorf("the streaming list asked %s, want sendInitialEvents, allowWatchBookmarks and resourceVersionMatch=NotOlderThan", r.URL.RawQuery)
			}
			watch(w, r)
			return
		}
		if q.Get("limit") != fmt.Sprint(kube.PageSize) {
			t.Errorf("LIST with limit %q, want %d", q.Get("limit"), kube.PageSize)
		}
		list(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv.URL, func() []string { mu.Lock(); defer mu.Unlock(); return slices.Clone(calls) }
}

func job(name string) string {
	return fmt.Sprintf(`{"kind":"Job","apiVersion":"batch/v1","metadata":{"name":%q,"namespace":"batch"}}`, name)
}

const endBookmark = `{"type":"BOOKMARK","object":{"kind":"Job","apiVersion":"batch/v1","metadata":{"resourceVersion":"9","annotations":{"k8s.io/initial-events-end":"true"}}}}`

func listPage(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	if r.URL.Query().Get("continue") == "" {
		fmt.Fprintf(w, `{"kind":"JobList","apiVersion":"batch/v1","metadata":{"continue":"next"},"items":[%s]}`, job("l1"))
		return
	}
	fmt.Fprintf(w, `{"kind":"JobList","apiVersion":"batch/v1","metadata":{},"items":[%s]}`, job("l2"))
}

func names(t *testing.T, url string) ([]string, error) {
	t.Helper()
	c, _, err := kube.NewClient(kube.Options{Kubeconfig: testkit.Kubeconfig(t, url)})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	err = kube.Each(context.Background(), c, c.BatchV1().Jobs("batch"), metav1.ListOptions{LabelSelector: "a=b"},
		func(j *batchv1.Job) { got = append(got, j.Name) })
	return got, err
}

// TestEachStreams: a server that streams lists sends the objects one by one and a bookmark: one WATCH, no LIST.
func TestEachStreams(t *testing.T) {
	url, calls := apiServer(t, func(w http.ResponseWriter, r *http.Request) {
		testkit.WatchEvents(w, `{"type":"ADDED","object":`+job("a")+`}`, `{"type":"ADDED","object":`+job("b")+`}`, endBookmark,
			`{"type":"ADDED","object":`+job("after-the-bookmark")+`}`)
	}, func(w http.ResponseWriter, r *http.Request) { t.Error("a LIST while the stream works") })
	got, err := names(t, url)
	if err != nil || !slices.Equal(got, []string{"a", "b"}) {
		t.Errorf("got %v, %v; want [a b] (what came before the bookmark)", got, err)
	}
	if c := calls(); !slices.Equal(c, []string{"WATCH"}) {
		t.Errorf("requests %v, want one WATCH", c)
	}
}

// TestEachFallsBackToPages: a server that refuses the streaming list (an old one: 400; RBAC without watch: 403) is
// listed page by page.
func TestEachFallsBackToPages(t *testing.T) {
	for _, code := range []int{http.StatusBadRequest, http.StatusForbidden} {
		url, calls := apiServer(t, func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(code)
			fmt.Fprintf(w, `{"kind":"Status","apiVersion":"v1","status":"Failure","message":"no","code":%d}`, code)
		}, listPage)
		got, err := names(t, url)
		if err != nil || !slices.Equal(got, []string{"l1", "l2"}) {
			t.Errorf("watch answered %d: got %v, %v; want [l1 l2] from two pages", code, got, err)
		}
		if c := calls(); !slices.Equal(c, []string{"WATCH", "LIST", "LIST"}) {
			t.Errorf("watch answered %d: requests %v, want WATCH then two LISTs", code, c)
		}
	}
}

// TestEachStreamCutShort: a stream that ends before its bookmark fails the list; nothing is listed a second time.
func TestEachStreamCutShort(t *testing.T) {
	for name, lines := range map[string][]string{
		"closed": {`{"type":"ADDED","object":` + job("a") + `}`},
		"error":  {`{"type":"ADDED","object":` + job("a") + `}`, `{"type":"ERROR","object":{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"Expired","message":"too old","code":410}}`},
	} {
		url, calls := apiServer(t, func(w http.ResponseWriter, r *http.Request) { testkit.WatchEvents(w, lines...) },
			func(w http.ResponseWriter, r *http.Request) { t.Error("a LIST after a stream started") })
		_, err := names(t, url)
		if err == nil {
			t.Errorf("%s: no error", name)
		} else if want := map[string]string{"closed": "before its last object", "error": "too old"}[name]; !strings.Contains(err.Error(), want) {
			t.Errorf("%s: error %q lacks %q", name, err, want)
		}
		if c := calls(); !slices.Equal(c, []string{"WATCH"}) {
			t.Errorf("%s: requests %v, want one WATCH", name, c)
		}
	}
}

// TestEachFakeClientLists: the fake clientset cannot stream; its objects are listed.
func TestEachFakeClientLists(t *testing.T) {
	c := fake.NewClientset(&batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: "f", Namespace: "batch"}})
	var got []string
	err := kube.Each(context.Background(), c, c.BatchV1().Jobs("batch"), metav1.ListOptions{},
		func(j *batchv1.Job) { got = append(got, j.Name) })
	if err != nil || !slices.Equal(got, []string{"f"}) {
		t.Errorf("got %v, %v; want [f]", got, err)
	}
}
