//go:build integration

package cmd

import (
	"bytes"
	"context"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/jobsched/jobsched/pkg/kube"
	"github.com/jobsched/jobsched/pkg/testkit"
)

// TestQueuesShareOneConnection: the queues' sources read on one database connection. The pass runs as a role
// with CONNECTION LIMIT 1: a second connection (a pool per queue keeps its idle one) would be refused, and the pass
// would fail; with one pool, three queues read and every queue gets its Jobs.
func TestQueuesShareOneConnection(t *testing.T) {
	dsn, db, s := testDB(t)
	role := s + "_r"
	for _, stmt := range []string{
		"CREATE TABLE " + s + ".tasks (id text PRIMARY KEY, queue text)",
		"INSERT INTO " + s + ".tasks SELECT q || i, q FROM unnest(ARRAY['a', 'b', 'c']) q, generate_series(1, 2) i",
		"CREATE ROLE " + role + " LOGIN PASSWORD 'pw' CONNECTION LIMIT 1",
		"GRANT USAGE ON SCHEMA " + s + " TO " + role,
		"GRANT SELECT ON " + s + ".tasks TO " + role,
	} {
		if _, err := db.Exec(stmt); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		if _, err := db.Exec("DROP OWNED BY " + role + "; DROP ROLE " + role); err != nil {
			t.Errorf("dropping %s: %v", role, err)
		}
	})
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	u.User = url.UserPassword(role, "pw")
	t.Setenv("DATABASE_URL", u.String())

	dir := t.TempDir()
	tpl, err := os.ReadFile("testdata/job.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	b.WriteString("name: batch\nnamespace: work\nlimits: {capacity: off}\nqueues:\n")
	for _, q := range []string{"a", "b", "c"} {
		fmt.Fprintf(&b, "- name: %s\n  source: {query: \"SELECT id FROM %s.tasks WHERE queue = '%s' ORDER BY id\", key: id}\n  job: {template: job.yaml}\n", q, s, q)
	}
	for name, data := range map[string][]byte{"job.yaml": tpl, "jobsched.yaml": []byte(b.String())} {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	node := testkit.MakeNode("node-0").Allocatable(corev1.ResourcePods, "10").Obj()
	client := testkit.NewFake(node)
	newKube := func(kube.Options) (kube.Interface, string, error) { return client, "work", nil }
	var out, errOut bytes.Buffer
	if code := runWith(context.Background(), []string{"tick", "--config", filepath.Join(dir, "jobsched.yaml"), "--log-format", "json"}, &out, &errOut, newKube); code != 0 {
		t.Fatalf("tick: exit %d; stderr:\n%s", code, errOut.String())
	}
	jobs, err := client.BatchV1().Jobs("work").List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	perQueue := map[string]int{}
	for _, j := range jobs.Items {
		perQueue[j.Labels["jobsched.io/queue"]]++
	}
	if want := map[string]int{"a": 2, "b": 2, "c": 2}; fmt.Sprint(perQueue) != fmt.Sprint(want) {
		t.Errorf("Jobs per queue %v, want %v; stderr:\n%s", perQueue, want, errOut.String())
	}
}
