//go:build integration

package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
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
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/yaml"

	"github.com/jobsched/jobsched/pkg/jobmeta"
	"github.com/jobsched/jobsched/pkg/render"
	"github.com/jobsched/jobsched/pkg/scheduler"
)

// The shipped manifests, relative to this file's directory (pkg/e2e).
var manifestsDir = func() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..", "manifests")
}()

const fallbackWarning = "using quota for this pass"

// renderedDoc is one document of a rendered kustomization.
type renderedDoc struct {
	kind, name string
	raw        []byte
}

// kustomizeDocs renders dir with `kubectl kustomize` and splits the result into its documents.
func kustomizeDocs(t *testing.T, dir string) []renderedDoc {
	t.Helper()
	cmd := exec.Command("kubectl", "kustomize", dir)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Run(); err != nil {
		t.Fatalf("kubectl kustomize %s: %v\n%s", dir, err, errOut.String())
	}
	var docs []renderedDoc
	r := utilyaml.NewYAMLReader(bufio.NewReader(&out))
	for {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("splitting the output of kubectl kustomize %s: %v", dir, err)
		}
		if len(bytes.TrimSpace(doc)) == 0 {
			continue
		}
		var head struct {
			metav1.TypeMeta   `json:",inline"`
			metav1.ObjectMeta `json:"metadata"`
		}
		if err := yaml.Unmarshal(doc, &head); err != nil {
			t.Fatalf("decoding a document of kubectl kustomize %s: %v\n%s", dir, err, doc)
		}
		docs = append(docs, renderedDoc{kind: head.Kind, name: head.Name, raw: doc})
	}
	if len(docs) == 0 {
		t.Fatalf("kubectl kustomize %s rendered nothing", dir)
	}
	return docs
}

// pickDoc decodes the one document of kind into out; it fails unless there is exactly one.
func pickDoc(t *testing.T, docs []renderedDoc, kind string, out any) {
	t.Helper()
	var found []renderedDoc
	for _, d := range docs {
		if d.kind == kind {
			found = append(found, d)
		}
	}
	if len(found) != 1 {
		t.Fatalf("want exactly one %s in the rendered manifests, found %d", kind, len(found))
	}
	if err := yaml.UnmarshalStrict(found[0].raw, out); err != nil {
		t.Fatalf("decoding %s %s: %v", kind, found[0].name, err)
	}
}

// shippedRules returns the rules of the Role in manifests/base and of the ClusterRole in manifests/capacity, as
// rendered by kustomize.
func shippedRules(t *testing.T) (role, cluster []rbacv1.PolicyRule) {
	t.Helper()
	var r rbacv1.Role
	pickDoc(t, kustomizeDocs(t, filepath.Join(manifestsDir, "base")), "Role", &r)
	var cr rbacv1.ClusterRole
	pickDoc(t, kustomizeDocs(t, filepath.Join(manifestsDir, "capacity")), "ClusterRole", &cr)
	if len(r.Rules) == 0 || len(cr.Rules) == 0 {
		t.Fatalf("the shipped Role has %d rules and the ClusterRole %d: want some in both", len(r.Rules), len(cr.Rules))
	}
	return r.Rules, cr.Rules
}

// withoutVerb returns a deep copy of rules with verb removed from every rule on group/resource (a rule left with no
// verb is dropped). It fails if no rule granted it: the case would not test what it says.
func withoutVerb(t *testing.T, rules []rbacv1.PolicyRule, group, resource, verb string) []rbacv1.PolicyRule {
	t.Helper()
	var out []rbacv1.PolicyRule
	removed := false
	for _, r := range rules {
		r = *r.DeepCopy()
		if slices.Contains(r.APIGroups, group) && slices.Contains(r.Resources, resource) && slices.Contains(r.Verbs, verb) {
			if len(r.Resources) > 1 { // split off the other resources, which keep the verb
				rest := *r.DeepCopy()
				rest.Resources = slices.DeleteFunc(rest.Resources, func(s string) bool { return s == resource })
				out = append(out, rest)
				r.Resources = []string{resource}
			}
			r.Verbs = slices.DeleteFunc(r.Verbs, func(s string) bool { return s == verb })
			removed = true
		}
		if len(r.Verbs) > 0 {
			out = append(out, r)
		}
	}
	if !removed {
		t.Fatalf("the shipped Role does not grant %s on %s (group %q): %+v", verb, resource, group, rules)
	}
	return out
}

// waitAllowed waits until the ServiceAccount of kcfg may do every verb of rules (in e.ns, or cluster-wide when
// cluster), as the API server's authorizer sees it: a new RoleBinding takes a moment to reach it.
func (e *env) waitAllowed(kcfg string, rules []rbacv1.PolicyRule, cluster bool) {
	e.t.Helper()
	cfg, err := clientcmd.BuildConfigFromFlags("", kcfg)
	if err != nil {
		e.t.Fatal(err)
	}
	c := kubernetes.NewForConfigOrDie(cfg)
	ns := e.ns
	if cluster {
		ns = ""
	}
	for _, r := range rules {
		for _, g := range r.APIGroups {
			for _, res := range r.Resources {
				for _, v := range r.Verbs {
					attr := &authorizationv1.ResourceAttributes{Namespace: ns, Group: g, Resource: res, Verb: v}
					e.eventually(fmt.Sprintf("the ServiceAccount may %s %s", v, res), 30*time.Second, func() bool {
						rev, err := c.AuthorizationV1().SelfSubjectAccessReviews().Create(e.ctx,
							&authorizationv1.SelfSubjectAccessReview{Spec: authorizationv1.SelfSubjectAccessReviewSpec{ResourceAttributes: attr}},
							metav1.CreateOptions{})
						return err == nil && rev.Status.Allowed
					})
				}
			}
		}
	}
}

// jobNames returns the names of the Jobs in the namespace, sorted.
func (e *env) jobNames() []string {
	e.t.Helper()
	var names []string
	for _, j := range e.jobs() {
		names = append(names, j.Name)
	}
	slices.Sort(names)
	return names
}

func expectedNames(prefix string, keys []string) []string {
	var names []string
	for _, k := range keys {
		names = append(names, render.JobName(prefix, k))
	}
	slices.Sort(names)
	return names
}

// TestRBACShippedRole: jobsched with exactly the Role of manifests/base and the ClusterRole of manifests/capacity (as
// rendered by kustomize) runs every command, creates the Jobs, deletes them when finished, and uses capacity nodes
// without falling back to quota.
func TestRBACShippedRole(t *testing.T) {
	t.Parallel()
	e := newNodeEnv(t, "8", "16Gi")
	rules, clusterRules := shippedRules(t)
	keys := e.insert("task", 3)
	cfg := e.writeConfig(config{extra: "limits:\n  maxActive: 10\n  capacity: nodes\ngc:\n  succeededRetention: 0s\n"})
	e.kcfg = e.asServiceAccount("jobsched", rules, clusterRules)
	e.waitAllowed(e.kcfg, rules, false)
	e.waitAllowed(e.kcfg, clusterRules, true)

	// The binary really runs as the ServiceAccount: it may not read Secrets, which admin may.
	sacfg, err := clientcmd.BuildConfigFromFlags("", e.kcfg)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kubernetes.NewForConfigOrDie(sacfg).CoreV1().Secrets(e.ns).List(e.ctx, metav1.ListOptions{}); !apierrors.IsForbidden(err) {
		t.Fatalf("the ServiceAccount's kubeconfig may list Secrets (err %v): it is not the restricted identity", err)
	}

	noFallback := func(what string, r result) {
		t.Helper()
		if strings.Contains(r.stderr, fallbackWarning) || strings.Contains(r.stdout, fallbackWarning) {
			t.Errorf("%s: capacity nodes fell back to quota although the ClusterRole is bound:\n%s\n%s", what, r.stdout, r.stderr)
		}
	}
	run := func(args ...string) result {
		t.Helper()
		r := e.jobsched(append(args, "--config", cfg)...)
		what := strings.Join(args, " ")
		if r.code != 0 {
			t.Fatalf("%s exited %d with the shipped Role:\nstdout:\n%s\nstderr:\n%s", what, r.code, r.stdout, r.stderr)
		}
		noFallback(what, r)
		return r
	}

	// Read-only and dry commands first: they create nothing.
	run("status")
	var st map[string]any
	if r := run("status", "-o", "json"); json.Unmarshal([]byte(r.stdout), &st) != nil || st["scheduler"] != "e2e" {
		t.Errorf("status -o json is not the status document of scheduler e2e:\n%s", r.stdout)
	}
	run("dry-run")
	if s := run("dry-run", "--server").summary(t); s.Created != len(keys) || s.Failed != 0 {
		t.Errorf("dry-run --server: created %d, failed %d; want %d accepted by the server and 0 failed", s.Created, s.Failed, len(keys))
	}
	if names := e.jobNames(); len(names) != 0 {
		t.Fatalf("Jobs exist after status and dry-run, which must not write: %v", names)
	}

	r := run("tick")
	if s := r.summary(t); s.Created != len(keys) || s.Failed != 0 {
		t.Errorf("tick: created %d, failed %d; want %d and 0", s.Created, s.Failed, len(keys))
	}
	if got, want := e.jobNames(), expectedNames("e2e", keys); !slices.Equal(got, want) {
		t.Fatalf("after tick the namespace has Jobs %v, want %v", got, want)
	}

	e.waitJobs(batchv1.JobComplete, len(keys))
	if s := run("gc").summary(t); s.Deleted != len(keys) || s.Failed != 0 {
		t.Errorf("gc: deleted %d, failed %d; want %d and 0", s.Deleted, s.Failed, len(keys))
	}
	if names := e.jobNames(); len(names) != 0 {
		t.Errorf("Jobs left after gc: %v", names)
	}
	e.eventually("the finished Jobs' pods to go (propagation)", time.Minute, func() bool { return len(e.pods()) == 0 })
	run("status")
}

// TestRBACMissingVerb: with the shipped Role less one verb, the command that needs it fails with exit 1 and the API
// server's forbidden message, and leaves the namespace's Jobs as they were.
func TestRBACMissingVerb(t *testing.T) {
	t.Parallel()
	shipped, _ := shippedRules(t)
	const quota = "limits:\n  capacity: quota\ngc:\n  succeededRetention: 0s\n"

	type check struct {
		args []string // the command, without --config
		want string   // fragment of stderr
	}
	cases := []struct {
		name                    string
		group, resource         string
		verbs                   []string                    // removed from the shipped Role
		setup                   func(e *env, keys []string) // as admin, before the binding (may be nil)
		before                  func(e *env, cfg string)    // as the ServiceAccount, before the checks (may be nil)
		checks                  []check
		wantJobs                func(e *env, keys []string) []string // the Jobs the namespace must hold afterwards
		wantSummaryFailedOnTick int                                  // when > 0: tick's summary line says so
	}{
		{
			name: "jobs create", group: "batch", resource: "jobs", verbs: []string{"create"},
			checks:                  []check{{[]string{"tick"}, `cannot create resource "jobs"`}},
			wantSummaryFailedOnTick: 2,
		},
		{
			// The pass streams its list (watch) and lists page by page where it cannot: without both it cannot read.
			name: "jobs list and watch", group: "batch", resource: "jobs", verbs: []string{"list", "watch"},
			checks: []check{
				{[]string{"tick"}, `cannot list resource "jobs"`},
				{[]string{"gc"}, `cannot list resource "jobs"`},
				{[]string{"status"}, `cannot list resource "jobs"`},
			},
		},
		{
			name: "pods list and watch", group: "", resource: "pods", verbs: []string{"list", "watch"},
			checks: []check{{[]string{"tick"}, `cannot list resource "pods"`}},
		},
		{
			name: "resourcequotas list", group: "", resource: "resourcequotas", verbs: []string{"list"},
			checks: []check{{[]string{"tick"}, `cannot list resource "resourcequotas"`}},
		},
		{
			name: "jobs delete", group: "batch", resource: "jobs", verbs: []string{"delete"},
			before: func(e *env, cfg string) {
				// The ServiceAccount may create: a Job per row, which finish.
				if s := e.tick(cfg).summary(e.t); s.Created != 2 {
					e.t.Fatalf("the first tick created %d Jobs, want 2", s.Created)
				}
				e.waitJobs(batchv1.JobComplete, 2)
			},
			checks: []check{
				{[]string{"gc"}, `cannot delete resource "jobs"`},
				// tick's delete step fails the same way; the rows still have their Job, so nothing is created again.
				{[]string{"tick"}, `cannot delete resource "jobs"`},
			},
			wantJobs: func(_ *env, keys []string) []string { return expectedNames("e2e", keys) },
		},
		{
			name: "jobs get", group: "batch", resource: "jobs", verbs: []string{"get"},
			setup: func(e *env, keys []string) {
				// A Job with the name jobsched gives keys[0], without the scheduler label: the pass does not list it,
				// plans a create, gets AlreadyExists and must read the Job to see whose it is.
				suspend := true
				_, err := e.kube.BatchV1().Jobs(e.ns).Create(e.ctx, &batchv1.Job{
					ObjectMeta: metav1.ObjectMeta{Name: render.JobName("e2e", keys[0])},
					Spec: batchv1.JobSpec{
						Suspend: &suspend,
						Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
							RestartPolicy: corev1.RestartPolicyNever,
							Containers:    []corev1.Container{{Name: "other", Image: "other:1"}},
						}},
					},
				}, metav1.CreateOptions{})
				if err != nil {
					e.t.Fatal(err)
				}
			},
			checks: []check{{[]string{"tick"}, `cannot get resource "jobs"`}},
			// The other Job stays as it was; keys[1] has no conflict and gets its Job.
			wantJobs: func(_ *env, keys []string) []string { return expectedNames("e2e", keys) },
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			if tc.verbs[0] == "delete" {
				e.addNode("n0", "8", "16Gi", 110, nil)
			}
			keys := e.insert("task", 2)
			cfg := e.writeConfig(config{extra: quota})
			if tc.setup != nil {
				tc.setup(e, keys)
			}
			before := map[string]types.UID{}
			for _, j := range e.jobs() {
				before[j.Name] = j.UID
			}
			rules := shipped
			for _, verb := range tc.verbs {
				rules = withoutVerb(t, rules, tc.group, tc.resource, verb)
			}
			verb := strings.Join(tc.verbs, " and ")
			e.kcfg = e.asServiceAccount("jobsched", rules, nil)
			e.waitAllowed(e.kcfg, rules, false)
			if tc.before != nil {
				tc.before(e, cfg)
				for _, j := range e.jobs() {
					before[j.Name] = j.UID
				}
			}

			for _, c := range tc.checks {
				what := strings.Join(c.args, " ")
				r := e.jobsched(append(c.args, "--config", cfg)...)
				for _, line := range strings.Split(r.stderr, "\n") {
					if strings.HasPrefix(line, "Error:") {
						t.Logf("%s: exit %d: %s", what, r.code, line)
					}
				}
				if r.code != 1 {
					t.Errorf("%s without %s on %s: exit %d, want 1\nstdout:\n%s\nstderr:\n%s", what, verb, tc.resource, r.code, r.stdout, r.stderr)
				}
				if !strings.Contains(r.stderr, "forbidden") || !strings.Contains(r.stderr, c.want) {
					t.Errorf("%s without %s on %s: stderr lacks \"forbidden\" and %s:\n%s", what, verb, tc.resource, c.want, r.stderr)
				}
				if what == "tick" && tc.wantSummaryFailedOnTick > 0 {
					if s := r.summary(t); s.Failed != tc.wantSummaryFailedOnTick || s.Created != 0 {
						t.Errorf("tick: summary failed %d, created %d; want failed %d, created 0", s.Failed, s.Created, tc.wantSummaryFailedOnTick)
					}
				}
			}

			// What the API server holds: only the Jobs expected, and those that existed before unchanged.
			var want []string
			if tc.wantJobs != nil {
				want = tc.wantJobs(e, keys)
			}
			if got := e.jobNames(); !slices.Equal(got, want) {
				t.Errorf("Jobs in the namespace: %v, want %v", got, want)
			}
			for _, j := range e.jobs() {
				if uid, ok := before[j.Name]; ok && uid != j.UID {
					t.Errorf("Job %s was replaced (uid %s, was %s)", j.Name, j.UID, uid)
				}
				if j.DeletionTimestamp != nil {
					t.Errorf("Job %s is being deleted", j.Name)
				}
			}
			if verb == "get" {
				other, err := e.kube.BatchV1().Jobs(e.ns).Get(e.ctx, render.JobName("e2e", keys[0]), metav1.GetOptions{})
				if err != nil || other.Labels[jobmeta.LabelScheduler] != "" || other.Spec.Template.Spec.Containers[0].Name != "other" {
					t.Errorf("the pre-existing Job %s was changed or lost (err %v)", render.JobName("e2e", keys[0]), err)
				}
			}
		})
	}
}

// TestRBACWithoutWatch: an install whose Role lacks watch (an older Role, or a cluster that refuses it) cannot stream
// its lists; the pass lists page by page instead and does its work.
func TestRBACWithoutWatch(t *testing.T) {
	t.Parallel()
	shipped, _ := shippedRules(t)
	e := newEnv(t)
	keys := e.insert("task", 3)
	cfg := e.writeConfig(config{extra: "limits:\n  capacity: quota\n"})
	rules := withoutVerb(t, withoutVerb(t, shipped, "batch", "jobs", "watch"), "", "pods", "watch")
	e.kcfg = e.asServiceAccount("jobsched", rules, nil)
	e.waitAllowed(e.kcfg, rules, false)
	if s := e.tick(cfg).summary(t); s.Created != len(keys) || s.Failed != 0 {
		t.Fatalf("tick without watch: created %d, failed %d; want %d created", s.Created, s.Failed, len(keys))
	}
	// The second pass must see them (page by page) and create nothing more.
	if s := e.tick(cfg).summary(t); s.Created != 0 || s.AlreadyPresent != 0 || s.Failed != 0 {
		t.Errorf("second tick without watch: %+v, want nothing to do", s)
	}
	if got := e.jobNames(); !slices.Equal(got, expectedNames("e2e", keys)) {
		t.Errorf("Jobs %v, want %v", got, expectedNames("e2e", keys))
	}
}

// TestManifestsServerDryRun: the example overlay, rendered into a namespace enforcing the restricted Pod Security
// Standard, is accepted by the API server with no PodSecurity warning; the pods its CronJob and its Job template make
// are admitted (and a non-compliant one is not); and the binary loads the example's jobsched.yaml.
func TestManifestsServerDryRun(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	example := filepath.Join(manifestsDir, "examples", "reports")

	// kustomize refuses an absolute resource path; a relative one outside the root is fine.
	kdir := filepath.Join(e.dir, "overlay")
	if err := os.MkdirAll(kdir, 0o755); err != nil {
		t.Fatal(err)
	}
	abs, err := filepath.Abs(example)
	if err != nil {
		t.Fatal(err)
	}
	rel, err := filepath.Rel(kdir, abs)
	if err != nil {
		t.Fatal(err)
	}
	kust := fmt.Sprintf("apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nnamespace: %s\nresources:\n  - %s\n", e.ns, rel)
	if err := os.WriteFile(filepath.Join(kdir, "kustomization.yaml"), []byte(kust), 0o600); err != nil {
		t.Fatal(err)
	}
	docs := kustomizeDocs(t, kdir)

	// The ClusterRoleBinding's subject follows the namespace (the component's comment promises it).
	var crb rbacv1.ClusterRoleBinding
	pickDoc(t, docs, "ClusterRoleBinding", &crb)
	var sa corev1.ServiceAccount
	pickDoc(t, docs, "ServiceAccount", &sa)
	if len(crb.Subjects) != 1 || crb.Subjects[0].Namespace != e.ns || crb.Subjects[0].Name != sa.Name {
		t.Errorf("ClusterRoleBinding %s subjects %+v, want the ServiceAccount %s in %s", crb.Name, crb.Subjects, sa.Name, e.ns)
	}

	ns, err := e.kube.CoreV1().Namespaces().Get(e.ctx, e.ns, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if ns.Labels == nil {
		ns.Labels = map[string]string{}
	}
	ns.Labels["pod-security.kubernetes.io/enforce"] = "restricted"
	ns.Labels["pod-security.kubernetes.io/warn"] = "restricted"
	if _, err := e.kube.CoreV1().Namespaces().Update(e.ctx, ns, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}

	t.Run("kubectl apply --dry-run=server", func(t *testing.T) {
		var all bytes.Buffer
		for _, d := range docs {
			all.WriteString("---\n")
			all.Write(d.raw)
		}
		ctx, cancel := context.WithTimeout(e.ctx, 2*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, "kubectl", "apply", "--dry-run=server", "-f", "-", "--kubeconfig", kubeconfig)
		cmd.Stdin = &all
		var out, errOut bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errOut
		if err := cmd.Run(); err != nil {
			t.Fatalf("kubectl apply --dry-run=server: %v\nstdout:\n%s\nstderr:\n%s", err, out.String(), errOut.String())
		}
		if strings.Contains(errOut.String(), "would violate PodSecurity") || strings.Contains(out.String(), "would violate PodSecurity") {
			t.Errorf("the rendered manifests would violate PodSecurity restricted:\n%s", errOut.String())
		}
		if n := strings.Count(out.String(), "(server dry run)"); n != len(docs) {
			t.Errorf("the server dry-ran %d objects, want the %d rendered:\n%s", n, len(docs), out.String())
		}
	})

	// The binary loads the example's config as is (a copy with job.yaml next to it), with no database and no cluster.
	var plan scheduler.Plan
	t.Run("jobsched dry-run --offline", func(t *testing.T) {
		dir := filepath.Join(e.dir, "example")
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		for _, f := range []string{"jobsched.yaml", "job.yaml"} {
			data, err := os.ReadFile(filepath.Join(example, f))
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, f), data, 0o600); err != nil {
				t.Fatal(err)
			}
		}
		rows := filepath.Join(dir, "rows.jsonl")
		keys := []string{"r-1", "Report/2"}
		if err := os.WriteFile(rows, []byte(`{"id": "r-1", "url": "https://example.com/1", "created_at": "2026-01-01T00:00:00Z"}
{"id": "Report/2", "url": "https://example.com/2", "created_at": "2026-01-01T00:00:01Z"}
`), 0o600); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(e.ctx, time.Minute)
		defer cancel()
		// No DSN (source.dsnEnv is DATABASE_URL) and no reachable kubeconfig: --rows and --offline need neither.
		r := runCommand(t, jobschedCommand(ctx, "", "", []string{"KUBECONFIG=" + filepath.Join(dir, "no-such-kubeconfig")},
			"dry-run", "--offline", "--rows", rows, "--config", filepath.Join(dir, "jobsched.yaml"), "-o", "json"))
		if r.code != 0 {
			t.Fatalf("jobsched dry-run --offline with the example config: exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
		}
		if err := json.Unmarshal([]byte(r.stdout), &plan); err != nil {
			t.Fatalf("dry-run -o json: %v\n%s", err, r.stdout)
		}
		var got []string
		for _, c := range plan.Creates {
			got = append(got, c.Job.Name)
		}
		slices.Sort(got)
		if want := expectedNames("reports", keys); !slices.Equal(got, want) {
			t.Errorf("dry-run plans Jobs %v, want %v", got, want)
		}
	})

	// PodSecurity only warns about the pod templates of CronJobs and Jobs: create their pods (dryRun=All) in the
	// enforcing namespace, where a violation is rejected.
	var cj batchv1.CronJob
	pickDoc(t, docs, "CronJob", &cj)
	var cm corev1.ConfigMap
	pickDoc(t, docs, "ConfigMap", &cm)
	var tpl batchv1.Job
	if err := yaml.UnmarshalStrict([]byte(cm.Data["job.yaml"]), &tpl); err != nil {
		t.Fatalf("job.yaml of ConfigMap %s: %v", cm.Name, err)
	}
	// The CronJob's pod runs as the ServiceAccount jobsched; the ServiceAccount admission wants it to exist.
	if _, err := e.kube.CoreV1().ServiceAccounts(e.ns).Create(e.ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: cj.Spec.JobTemplate.Spec.Template.Spec.ServiceAccountName}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	pods := []struct {
		name string
		tpl  corev1.PodTemplateSpec
	}{
		{"cronjob jobTemplate", cj.Spec.JobTemplate.Spec.Template},
		{"example job.yaml", tpl.Spec.Template},
	}
	if len(plan.Creates) > 0 {
		pods = append(pods, struct {
			name string
			tpl  corev1.PodTemplateSpec
		}{"Job rendered by jobsched", plan.Creates[0].Job.Spec.Template})
	}
	for _, p := range pods {
		t.Run("pod from "+p.name, func(t *testing.T) {
			if _, err := e.dryRunPod(p.tpl); err != nil {
				t.Errorf("the pod of the %s is rejected in a restricted namespace: %v", p.name, err)
			}
			// Negative control: the same pod without runAsNonRoot is rejected, so the check above can fail.
			bad := *p.tpl.DeepCopy()
			if bad.Spec.SecurityContext != nil {
				bad.Spec.SecurityContext.RunAsNonRoot = nil
			}
			for i := range bad.Spec.Containers {
				if sc := bad.Spec.Containers[i].SecurityContext; sc != nil {
					sc.RunAsNonRoot = nil
				}
			}
			_, err := e.dryRunPod(bad)
			if err == nil || !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "violates PodSecurity") {
				t.Errorf("without runAsNonRoot the pod of the %s: err %v, want forbidden: violates PodSecurity", p.name, err)
			}
		})
	}
}

// dryRunPod creates, with dryRun=All, a pod of the template in e.ns.
func (e *env) dryRunPod(tpl corev1.PodTemplateSpec) (*corev1.Pod, error) {
	pod := &corev1.Pod{ObjectMeta: *tpl.ObjectMeta.DeepCopy(), Spec: *tpl.Spec.DeepCopy()}
	pod.GenerateName, pod.Name, pod.Namespace = "", "admission-check", e.ns
	return e.kube.CoreV1().Pods(e.ns).Create(e.ctx, pod, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
}
