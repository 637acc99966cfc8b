//go:build integration

package e2e

import (
	"bufio"
	"bytes"
	"context"
	"database/sql"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/yaml"

	"github.com/jobsched/jobsched/pkg/jobmeta"
)

// The repository's root, relative to this file's directory (pkg/e2e).
var repoRoot = func() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..")
}()

// readmeBlock returns the fenced block (```sh, ```sql) that follows the marker line `<!-- tested: name` in file
// (relative to the repository root). The README marks the blocks the tests run as written.
func readmeBlock(t *testing.T, file, name string) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(repoRoot, file))
	if err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(bytes.NewReader(data))
	marker := "<!-- tested: " + name
	state := 0 // 0: looking for the marker, 1: for the fence, 2: in the block
	var block []string
	for sc.Scan() {
		line := sc.Text()
		switch {
		case state == 0 && (strings.HasPrefix(line, marker+" ") || strings.HasPrefix(line, marker+"-->")):
			state = 1
		case state == 1 && (line == "```sh" || line == "```sql"):
			state = 2
		case state == 1 && strings.TrimSpace(line) != "":
			t.Fatalf("%s: the marker %q is not followed by a ```sh or ```sql block", file, marker)
		case state == 2 && line == "```":
			return strings.Join(block, "\n") + "\n"
		case state == 2:
			block = append(block, line)
		}
	}
	t.Fatalf("%s has no fenced block marked %q", file, marker)
	return ""
}

// commandLines are the commands of a block: its lines without blank ones.
func commandLines(block string) []string {
	var out []string
	for _, l := range strings.Split(block, "\n") {
		if strings.TrimSpace(l) != "" && !strings.HasPrefix(strings.TrimSpace(l), "#") {
			out = append(out, l)
		}
	}
	return out
}

// shell runs script with bash -euo pipefail in dir, with the jobsched binary first in PATH and the given extra
// environment (KUBECONFIG is the test cluster's unless env sets it). It returns stdout and fails the test on a
// non-zero exit.
func shell(t *testing.T, dir, script string, env ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "-euo", "pipefail", "-c", script)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "PATH="+filepath.Dir(binary)+string(os.PathListSeparator)+os.Getenv("PATH"), "KUBECONFIG="+kubeconfig)
	cmd.Env = append(cmd.Env, env...)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Run(); err != nil {
		t.Fatalf("in %s:\n%s\nfailed: %v\nstdout:\n%s\nstderr:\n%s", dir, script, err, out.String(), errOut.String())
	}
	return out.String()
}

// copyTree copies the directory src to dst (which must not exist), as `cp -r src dst` does.
func copyTree(t *testing.T, src, dst string) {
	t.Helper()
	err := filepath.WalkDir(src, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, path)
		if err != nil {
			return err
		}
		target := filepath.Join(dst, rel)
		if d.IsDir() {
			return os.MkdirAll(target, 0o755)
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		return os.WriteFile(target, data, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// cloneWithManifests makes a directory that holds what a clone of the repository holds for the README's commands:
// manifests/.
func cloneWithManifests(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	copyTree(t, filepath.Join(repoRoot, "manifests"), filepath.Join(dir, "manifests"))
	return dir
}

// edit replaces old by new in a file, and fails when old is not there exactly once: an edit that no longer applies
// means the README's instructions and the files have drifted apart.
func edit(t *testing.T, path, old, new string) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(data), old); n != 1 {
		t.Fatalf("%s: %q occurs %d times, want once", path, old, n)
	}
	if err := os.WriteFile(path, []byte(strings.Replace(string(data), old, new, 1)), 0o644); err != nil {
		t.Fatal(err)
	}
}

// adminClient is a client of the cluster of kubeconfig kcfg, as its admin.
func adminClient(t *testing.T, kcfg string) kubernetes.Interface {
	t.Helper()
	cfg, err := clientcmd.BuildConfigFromFlags("", kcfg)
	if err != nil {
		t.Fatal(err)
	}
	return kubernetes.NewForConfigOrDie(cfg)
}

// freshNamespace deletes namespace ns if a previous run left it, waits until it is gone, and deletes it again (and
// waits) when the test ends. The caller creates it, as the README does.
func freshNamespace(t *testing.T, kube kubernetes.Interface, ns string) {
	t.Helper()
	gone := func() {
		t.Helper()
		ctx := context.Background()
		err := kube.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			t.Fatal(err)
		}
		err = wait.PollUntilContextTimeout(ctx, time.Second, 3*time.Minute, true, func(ctx context.Context) (bool, error) {
			_, err := kube.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
			return apierrors.IsNotFound(err), nil
		})
		if err != nil {
			t.Errorf("namespace %s is still there: %v", ns, err)
		}
	}
	gone()
	t.Cleanup(gone)
}

// addClusterNode creates a kwok node with room for the example's task pods and deletes it when the test ends.
func addClusterNode(t *testing.T, kube kubernetes.Interface, name string) {
	t.Helper()
	ctx := context.Background()
	rl := corev1.ResourceList{
		corev1.ResourceCPU:    resource.MustParse("16"),
		corev1.ResourceMemory: resource.MustParse("64Gi"),
		corev1.ResourcePods:   resource.MustParse("110"),
	}
	_ = kube.CoreV1().Nodes().Delete(ctx, name, metav1.DeleteOptions{})
	node := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"type": "kwok"},
			Annotations: map[string]string{"kwok.x-k8s.io/node": "fake"}},
		Status: corev1.NodeStatus{Capacity: rl, Allocatable: rl},
	}
	if _, err := kube.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = kube.CoreV1().Nodes().Delete(context.Background(), name, metav1.DeleteOptions{}) })
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		n, err := kube.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, nil //nolint:nilerr // read again until the minute is up
		}
		for _, taint := range n.Spec.Taints {
			if taint.Key == corev1.TaintNodeNotReady || taint.Key == corev1.TaintNodeUnreachable {
				return false, nil
			}
		}
		for _, c := range n.Status.Conditions {
			if c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue {
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		t.Fatalf("node %s Ready and untainted: %v", name, err)
	}
}

// database creates a database of its own on the test server, with the given tables in the shape of the example's
// query (id, url, created_at, status), and returns its DSN and a handle; it is dropped when the test ends.
func database(t *testing.T, tables ...string) (string, *sql.DB) {
	t.Helper()
	admin, err := sql.Open("postgres", dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { admin.Close() })
	name := fmt.Sprintf("e2e_%s_%04x", strings.ToLower(strings.NewReplacer("/", "_", "-", "_").Replace(t.Name())), rand.IntN(0xffff))
	if _, err := admin.Exec(`CREATE DATABASE ` + name); err != nil {
		t.Fatal(err)
	}
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatalf("JOBSCHED_TEST_DSN is not a URL: %v", err)
	}
	u.Path = "/" + name
	db, err := sql.Open("postgres", u.String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		db.Close()
		_, _ = admin.Exec(`DROP DATABASE IF EXISTS ` + name + ` WITH (FORCE)`)
	})
	for _, table := range tables {
		if _, err := db.Exec(`CREATE TABLE ` + table + ` (id text PRIMARY KEY, url text, status text NOT NULL DEFAULT 'waiting', created_at timestamptz NOT NULL DEFAULT now())`); err != nil {
			t.Fatal(err)
		}
	}
	return u.String(), db
}

// insertRows adds n waiting rows to table, keys prefix-0 … prefix-(n-1), in that order of created_at.
func insertRows(t *testing.T, db *sql.DB, table, prefix string, n int) []string {
	t.Helper()
	var keys []string
	for i := range n {
		key := fmt.Sprintf("%s-%d", prefix, i)
		if _, err := db.Exec(`INSERT INTO `+table+` (id, url, created_at) VALUES ($1, $2, now() + $3 * interval '1 second')`, key, "https://example.com/"+key, i); err != nil {
			t.Fatal(err)
		}
		keys = append(keys, key)
	}
	return keys
}

// tokenKubeconfig writes a kubeconfig for the cluster of kcfg that authenticates as the ServiceAccount sa of ns with a token from
// `kubectl create token`, as the CronJob's pod does with its mounted token, and waits until the API server lets it
// create and list Jobs there and list nodes (a new binding takes a moment to reach the authorizer).
func tokenKubeconfig(t *testing.T, kcfg, ns, sa string) string {
	t.Helper()
	tok := strings.TrimSpace(shell(t, t.TempDir(), fmt.Sprintf("kubectl create token %s -n %s --duration 1h", sa, ns), "KUBECONFIG="+kcfg))
	admin, err := clientcmd.LoadFromFile(kcfg)
	if err != nil {
		t.Fatal(err)
	}
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["local"] = admin.Clusters[admin.Contexts[admin.CurrentContext].Cluster]
	cfg.AuthInfos[sa] = &clientcmdapi.AuthInfo{Token: tok}
	cfg.Contexts[sa] = &clientcmdapi.Context{Cluster: "local", AuthInfo: sa, Namespace: ns}
	cfg.CurrentContext = sa
	path := filepath.Join(t.TempDir(), sa+".kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		t.Fatal(err)
	}
	rc, err := clientcmd.BuildConfigFromFlags("", path)
	if err != nil {
		t.Fatal(err)
	}
	c := kubernetes.NewForConfigOrDie(rc)
	for _, a := range []authorizationv1.ResourceAttributes{
		{Namespace: ns, Group: "batch", Resource: "jobs", Verb: "create"},
		{Namespace: ns, Group: "batch", Resource: "jobs", Verb: "list"},
		{Resource: "nodes", Verb: "list"},
	} {
		err := wait.PollUntilContextTimeout(context.Background(), 200*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
			rev, err := c.AuthorizationV1().SelfSubjectAccessReviews().Create(ctx, &authorizationv1.SelfSubjectAccessReview{
				Spec: authorizationv1.SelfSubjectAccessReviewSpec{ResourceAttributes: &a}}, metav1.CreateOptions{})
			return err == nil && rev.Status.Allowed, nil
		})
		if err != nil {
			t.Fatalf("the ServiceAccount %s/%s may not %s %s: %v", ns, sa, a.Verb, a.Resource, err)
		}
	}
	return path
}

// runAs runs the jobsched binary in dir with kcfg and the DSN, and returns the result whatever the exit code.
func runAs(t *testing.T, dir, kcfg, dbDSN string, args ...string) result {
	t.Helper()
	cmd := jobschedCommand(t.Context(), kcfg, dbDSN, nil, args...)
	cmd.Dir = dir
	return runCommand(t, cmd)
}

// tickAs runs one pass as a ServiceAccount and fails the test unless it exits 0 without falling back to quota.
// walkthrough prepares one on the cluster of kcfg: namespace ns made afresh, a cluster node called node, a clone
// with the manifests. It returns the admin client and the clone.
func walkthrough(t *testing.T, kcfg, ns, node string) (kubernetes.Interface, string) {
	t.Helper()
	kube := adminClient(t, kcfg)
	freshNamespace(t, kube, ns)
	addClusterNode(t, kube, node)
	return kube, cloneWithManifests(t)
}

// passAndOperate is what both walkthroughs do once the install is up on the cluster of kcfg: a pass as the
// install's ServiceAccount sa (the CronJob's pod: the same binary with that identity's token; its config in dir)
// creates a Job per row of a fresh table, then the README's block (pause, resume, run a pass now) runs line by line
// in shellDir with env, each line checked: the CronJob suspended, then not, then exactly one jobsched-reports-now-*
// Job, running as sa.
func passAndOperate(t *testing.T, kube kubernetes.Interface, kcfg, ns, sa, dir, shellDir, block string, env ...string) {
	t.Helper()
	ctx := context.Background()
	env = append(env, "KUBECONFIG="+kcfg)
	dbDSN, db := database(t, "tasks")
	keys := insertRows(t, db, "tasks", "report", 2)
	if s := tickAs(t, dir, tokenKubeconfig(t, kcfg, ns, sa), dbDSN); s.Created != len(keys) || s.Failed != 0 {
		t.Errorf("tick as the ServiceAccount: created %d, failed %d; want %d and 0", s.Created, s.Failed, len(keys))
	}
	if got, _ := schedulerJobs(t, kube, ns, "reports"); !slices.Equal(got, expectedNames("reports", keys)) {
		t.Fatalf("after the tick, scheduler reports has Jobs %v, want %v", got, expectedNames("reports", keys))
	}

	operate := commandLines(readmeBlock(t, "README.md", block))
	if len(operate) != 3 {
		t.Fatalf("the README's %s block has %d commands, want pause, resume, run now:\n%q", block, len(operate), operate)
	}
	suspended := func() bool {
		t.Helper()
		cj, err := kube.BatchV1().CronJobs(ns).Get(ctx, "jobsched-reports", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return cj.Spec.Suspend != nil && *cj.Spec.Suspend
	}
	shell(t, shellDir, operate[0], env...)
	if !suspended() {
		t.Errorf("after %q the CronJob is not suspended", operate[0])
	}
	shell(t, shellDir, operate[1], env...)
	if suspended() {
		t.Errorf("after %q the CronJob is still suspended", operate[1])
	}
	shell(t, shellDir, operate[2], env...)
	jobs, err := kube.BatchV1().Jobs(ns).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/instance=reports"})
	if err != nil {
		t.Fatal(err)
	}
	var manual []batchv1.Job
	for _, j := range jobs.Items {
		if strings.HasPrefix(j.Name, "jobsched-reports-now-") {
			manual = append(manual, j)
		}
	}
	if len(manual) != 1 || manual[0].Spec.Template.Spec.ServiceAccountName != sa {
		t.Errorf("after %q: Jobs of the CronJob %v, want one jobsched-reports-now-* running as the ServiceAccount %s", operate[2], manual, sa)
	}
}

func tickAs(t *testing.T, dir, kcfg, dbDSN string) summary {
	t.Helper()
	r := runAs(t, dir, kcfg, dbDSN, "tick", "--config", "jobsched.yaml")
	if r.code != 0 {
		t.Fatalf("tick in %s exited %d:\n%s", dir, r.code, r.stderr)
	}
	if strings.Contains(r.stderr, fallbackWarning) {
		t.Errorf("tick in %s fell back to quota: the install's ClusterRoleBinding does not reach its ServiceAccount:\n%s", dir, r.stderr)
	}
	return r.summary(t)
}

// schedulerJobs returns the names of the Jobs of scheduler in ns, sorted, and their UIDs.
func schedulerJobs(t *testing.T, kube kubernetes.Interface, ns, scheduler string) ([]string, map[string]string) {
	t.Helper()
	l, err := kube.BatchV1().Jobs(ns).List(context.Background(), metav1.ListOptions{LabelSelector: jobmeta.LabelScheduler + "=" + scheduler})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	uids := map[string]string{}
	for _, j := range l.Items {
		names = append(names, j.Name)
		uids[j.Name] = string(j.UID)
	}
	slices.Sort(names)
	return names, uids
}

// planJobNames returns the names of every Job object anywhere in a dry-run document (JSON or YAML).
func planJobNames(t *testing.T, doc string) []string {
	t.Helper()
	var v any
	if err := yaml.Unmarshal([]byte(doc), &v); err != nil {
		t.Fatalf("the dry-run output is not YAML: %v\n%s", err, doc)
	}
	var names []string
	var walk func(any)
	walk = func(v any) {
		switch x := v.(type) {
		case map[string]any:
			if x["kind"] == "Job" && x["apiVersion"] == "batch/v1" {
				if md, ok := x["metadata"].(map[string]any); ok {
					if n, ok := md["name"].(string); ok {
						names = append(names, n)
					}
				}
			}
			for _, c := range x {
				walk(c)
			}
		case []any:
			for _, c := range x {
				walk(c)
			}
		}
	}
	walk(v)
	slices.Sort(names)
	return slices.Compact(names)
}

// sampleKeys are the keys of manifests/examples/reports/sample-rows.jsonl.
func sampleKeys(t *testing.T) []string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(repoRoot, "manifests", "examples", "reports", "sample-rows.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, l := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		var row struct {
			ID string `json:"id"`
		}
		if err := yaml.Unmarshal([]byte(l), &row); err != nil || row.ID == "" {
			t.Fatalf("sample-rows.jsonl: %q: no id (%v)", l, err)
		}
		keys = append(keys, row.ID)
	}
	return keys
}

// TestWalkthroughTry runs the README's one-minute try as written, in a clone, with no DSN and no reachable cluster:
// it prints the Jobs of the example's sample rows.
func TestWalkthroughTry(t *testing.T) {
	t.Parallel() // offline: no cluster, no database
	dir := cloneWithManifests(t)
	block := readmeBlock(t, "README.md", "try")
	out := shell(t, dir, block, "DATABASE_URL=", "KUBECONFIG="+filepath.Join(dir, "no-such-kubeconfig"))
	if got, want := planJobNames(t, out), expectedNames("reports", sampleKeys(t)); !slices.Equal(got, want) {
		t.Errorf("the try prints Jobs %v, want one per sample row %v:\n%s", got, want, out)
	}
}

// testWalkthroughDeploy follows the README's Deploy section on a control plane: its install block as
// written (copy manifests/, create the namespace and Secrets, dry-run the sample rows, render, apply), then one
// `jobsched tick` as the install's ServiceAccount with its token, as the CronJob's pod would run it, against a real
// table in the shape of the example's query; then its pause/resume/run-now and remove blocks.
//
// It uses the README's namespace, batch, on the cluster of kcfg (TestReadmeOwnCluster).
func testWalkthroughDeploy(t *testing.T, kcfg string) {
	const ns = "batch"
	kube, clone := walkthrough(t, kcfg, ns, "walkthrough")
	ctx := context.Background()
	onCluster := "KUBECONFIG=" + kcfg

	shell(t, clone, readmeBlock(t, "README.md", "install"), onCluster)
	dir := filepath.Join(clone, "my-jobsched", "examples", "reports")

	// What the install made, by the names and labels the README gives.
	cj, err := kube.BatchV1().CronJobs(ns).Get(ctx, "jobsched-reports", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the CronJob the README names: %v", err)
	}
	if got := cj.Spec.JobTemplate.Spec.Template.Labels["app.kubernetes.io/instance"]; got != "reports" {
		t.Errorf("the CronJob's pods have app.kubernetes.io/instance %q, want reports", got)
	}
	for _, s := range []string{"jobsched-db", "reports-worker-db"} {
		if _, err := kube.CoreV1().Secrets(ns).Get(ctx, s, metav1.GetOptions{}); err != nil {
			t.Errorf("Secret %s: %v", s, err)
		}
	}
	crb, err := kube.RbacV1().ClusterRoleBindings().Get(ctx, "jobsched-capacity-reports-batch", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the install's ClusterRoleBinding: %v", err)
	}
	if want := []rbacv1.Subject{{Kind: "ServiceAccount", Name: cj.Spec.JobTemplate.Spec.Template.Spec.ServiceAccountName, Namespace: ns}}; !slices.Equal(crb.Subjects, want) {
		t.Errorf("ClusterRoleBinding subjects %+v, want %+v", crb.Subjects, want)
	}

	// The CronJob's pod, as the install's ServiceAccount: here the same binary with that identity's token.
	passAndOperate(t, kube, kcfg, ns, cj.Spec.JobTemplate.Spec.Template.Spec.ServiceAccountName, dir, dir, "operate")

	// Remove: the install's objects go, cluster-scoped ones included.
	shell(t, dir, readmeBlock(t, "README.md", "remove"), onCluster)
	if _, err := kube.RbacV1().ClusterRoles().Get(ctx, "jobsched-capacity-reports-batch", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("the install's ClusterRole after kubectl delete -k: err %v, want NotFound", err)
	}
	if _, err := kube.BatchV1().CronJobs(ns).Get(ctx, "jobsched-reports", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("the CronJob after kubectl delete -k: err %v, want NotFound", err)
	}
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
		names, _ := schedulerJobs(t, kube, ns, "reports")
		return len(names) == 0, nil
	})
	if err != nil {
		t.Errorf("the task Jobs are still there after the README's delete: %v", err)
	}
}
