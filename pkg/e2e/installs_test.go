//go:build integration

package e2e

import (
	"context"
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/yaml"
)

// The standard labels every object of an install carries, besides app.kubernetes.io/version (the image's tag).
var standardLabels = map[string]string{
	"app.kubernetes.io/name":       "jobsched",
	"app.kubernetes.io/part-of":    "jobsched",
	"app.kubernetes.io/managed-by": "kustomize",
}

// install is one overlay in a copy of manifests/, made from the example by the README's recipe.
type install struct {
	dir       string // the overlay
	namespace string
	instance  string // nameSuffix without the dash, app.kubernetes.io/instance, name, job.namePrefix
	table     string // what its query reads
}

// newInstall copies the example overlay of clone into examples/<dirName> and makes the README's edits: the
// namespace in kustomization.yaml and jobsched.yaml; for another instance name, nameSuffix,
// app.kubernetes.io/instance, name and job.namePrefix; and its own table in the query. extra is appended to the
// limits: of jobsched.yaml.
func newInstall(t *testing.T, clone, dirName, namespace, instance, table string) install {
	t.Helper()
	examples := filepath.Join(clone, "manifests", "examples")
	in := install{dir: filepath.Join(examples, dirName), namespace: namespace, instance: instance, table: table}
	copyTree(t, filepath.Join(examples, "reports"), in.dir)
	k, c := filepath.Join(in.dir, "kustomization.yaml"), filepath.Join(in.dir, "jobsched.yaml")
	edit(t, k, "\nnamespace: batch\n", "\nnamespace: "+namespace+"\n")
	edit(t, c, "\nnamespace: batch ", "\nnamespace: "+namespace+" ")
	if instance != "reports" {
		edit(t, k, "\nnameSuffix: -reports\n", "\nnameSuffix: -"+instance+"\n")
		edit(t, k, "app.kubernetes.io/instance: reports\n", "app.kubernetes.io/instance: "+instance+"\n")
		edit(t, c, "\nname: reports ", "\nname: "+instance+" ")
		edit(t, c, "\n  namePrefix: reports ", "\n  namePrefix: "+instance+" ")
	}
	edit(t, c, "\n    FROM tasks\n", "\n    FROM "+table+"\n")
	return in
}

// limits sets limits.maxActive and the task pods' run time (kwok) of an install.
func (in install) limits(t *testing.T, maxActive int, runFor string) {
	t.Helper()
	edit(t, filepath.Join(in.dir, "jobsched.yaml"), "\n  maxActive: 10\n", fmt.Sprintf("\n  maxActive: %d\n", maxActive))
	edit(t, filepath.Join(in.dir, "job.yaml"), "\n  template:\n    metadata:\n", fmt.Sprintf("\n  template:\n    metadata:\n      annotations:\n        jobsched.io/kwok-duration: %q\n", runFor))
}

// TestManifestsLabelsAndNames: every object of the example install, and the pod template of its CronJob, carries
// the standard labels with the install's instance and the image's tag as version; every installable object has a
// name of its own in two installs in one namespace and in two namespaces (the cluster-scoped ones included), so
// no apply of one overwrites the other.
func TestManifestsLabelsAndNames(t *testing.T) {
	t.Parallel()
	clone := cloneWithManifests(t)
	installs := []install{
		newInstall(t, clone, "a-reports", "team-a", "reports", "tasks"),
		newInstall(t, clone, "a-exports", "team-a", "exports", "exports"),
		newInstall(t, clone, "b-reports", "team-b", "reports", "tasks"),
	}
	owner := map[string]string{} // kind/namespace/name → install dir
	for _, in := range installs {
		docs := kustomizeDocs(t, in.dir)
		var cj batchv1.CronJob
		pickDoc(t, docs, "CronJob", &cj)
		image := cj.Spec.JobTemplate.Spec.Template.Spec.Containers[0].Image
		_, tag, _ := strings.Cut(image, ":")
		want := map[string]string{"app.kubernetes.io/instance": in.instance, "app.kubernetes.io/version": tag}
		for k, v := range standardLabels {
			want[k] = v
		}
		check := func(what string, got map[string]string) {
			t.Helper()
			for k, v := range want {
				if got[k] != v {
					t.Errorf("%s: %s: label %s = %q, want %q", in.dir, what, k, got[k], v)
				}
			}
		}
		for _, d := range docs {
			var obj struct {
				metav1.ObjectMeta `json:"metadata"`
			}
			if err := yaml.Unmarshal(d.raw, &obj); err != nil {
				t.Fatal(err)
			}
			check(d.kind+" "+d.name, obj.Labels)
			key := d.kind + "/" + obj.Namespace + "/" + d.name
			if prev, ok := owner[key]; ok {
				t.Errorf("%s is rendered by both %s and %s: the later apply would take it over", key, prev, in.dir)
			}
			owner[key] = in.dir
			if obj.Namespace == "" && !strings.Contains(d.name, in.namespace) {
				t.Errorf("%s: the cluster-scoped %s %s does not carry the namespace %s", in.dir, d.kind, d.name, in.namespace)
			}
		}
		check("the CronJob's Job template", cj.Spec.JobTemplate.Labels)
		check("the CronJob's pod template", cj.Spec.JobTemplate.Spec.Template.Labels)
		if cj.Name != "jobsched-"+in.instance {
			t.Errorf("%s: CronJob %s, want jobsched-%s (the README's commands name it)", in.dir, cj.Name, in.instance)
		}
		var crb rbacv1.ClusterRoleBinding
		pickDoc(t, docs, "ClusterRoleBinding", &crb)
		var cr rbacv1.ClusterRole
		pickDoc(t, docs, "ClusterRole", &cr)
		wantSubject := []rbacv1.Subject{{Kind: "ServiceAccount", Name: cj.Spec.JobTemplate.Spec.Template.Spec.ServiceAccountName, Namespace: in.namespace}}
		if crb.RoleRef.Name != cr.Name || !slices.Equal(crb.Subjects, wantSubject) {
			t.Errorf("%s: ClusterRoleBinding %s binds %s to %+v, want %s to %+v", in.dir, crb.Name, crb.RoleRef.Name, crb.Subjects, cr.Name, wantSubject)
		}
	}
	// The base's version label is the tag of the image its CronJob runs.
	var cj batchv1.CronJob
	docs := kustomizeDocs(t, filepath.Join(manifestsDir, "base"))
	pickDoc(t, docs, "CronJob", &cj)
	if _, tag, _ := strings.Cut(cj.Spec.JobTemplate.Spec.Template.Spec.Containers[0].Image, ":"); cj.Labels["app.kubernetes.io/version"] != tag {
		t.Errorf("the base labels version %q but runs the image tag %q", cj.Labels["app.kubernetes.io/version"], tag)
	}
}

// readmeLogSelector is the label selector of the README's `kubectl logs -l` line.
func readmeLogSelector(t *testing.T) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(repoRoot, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^kubectl logs -n batch -l (\S+)`).FindSubmatch(data)
	if m == nil {
		t.Fatal("the README has no line `kubectl logs -n batch -l SELECTOR`")
	}
	return string(m[1])
}

// TestReadmeOwnCluster runs what the README tells a user to apply to a cluster, on a control plane of its own, one
// after another: the installs, the Helm walkthrough and the Deploy walkthrough. The example's task pods have no
// nodeSelector and would land on the scenarios' nodes of the shared cluster, and both walkthroughs use the README's
// namespace, batch. On a cluster of their own they run beside the scenarios rather than alone before them
// (scripts/README.md, "The suite's critical path"). JOBSCHED_README_CLUSTER_DIR reuses a cluster's state directory.
func TestReadmeOwnCluster(t *testing.T) {
	t.Parallel() // its own control plane: no other test reaches it
	kcfg, _ := ownCluster(t, os.Getenv("JOBSCHED_README_CLUSTER_DIR"), "cluster-readme-test-", nil)
	t.Run("installs", func(t *testing.T) { testInstalls(t, kcfg) })
	t.Run("walkthrough-helm", func(t *testing.T) { testWalkthroughHelm(t, kcfg) })
	t.Run("walkthrough-deploy", func(t *testing.T) { testWalkthroughDeploy(t, kcfg) })
}

// testInstalls: three installs made by the README's recipe, two schedulers in one namespace and the same scheduler
// in a second namespace, applied to the cluster of kcfg and each run as its own ServiceAccount: none ever counts,
// deletes or selects (logs) the other's objects, and deleting one install leaves the others' capacity access whole.
func testInstalls(t *testing.T, kcfg string) {
	kube := adminClient(t, kcfg)
	onCluster := "KUBECONFIG=" + kcfg
	ctx := context.Background()
	suffix := fmt.Sprintf("%04x", rand.IntN(0xffff))
	nsA, nsB := "installs-a-"+suffix, "installs-b-"+suffix
	for _, ns := range []string{nsA, nsB} {
		freshNamespace(t, kube, ns)
	}
	addClusterNode(t, kube, "installs-"+suffix)
	clone := cloneWithManifests(t)
	reportsA := newInstall(t, clone, "reports-a", nsA, "reports", "tasks_a")
	exportsA := newInstall(t, clone, "exports-a", nsA, "exports", "exports_a")
	reportsB := newInstall(t, clone, "reports-b", nsB, "reports", "tasks_b")
	// reports run long (they stay unfinished and count), exports finish at once (gc deletes them).
	reportsA.limits(t, 2, "10m")
	exportsA.limits(t, 2, "1s")
	reportsB.limits(t, 2, "10m")
	installs := []install{reportsA, exportsA, reportsB}

	for _, ns := range []string{nsA, nsB} {
		shell(t, clone, fmt.Sprintf("kubectl create namespace %[1]s && kubectl create secret generic jobsched-db -n %[1]s --from-literal=dsn=unused", ns), onCluster)
	}
	for _, in := range installs {
		shell(t, in.dir, "kubectl apply -k .", onCluster)
	}
	crName := func(in install) string { return "jobsched-capacity-" + in.instance + "-" + in.namespace }
	for _, in := range installs {
		if _, err := kube.RbacV1().ClusterRoleBindings().Get(ctx, crName(in), metav1.GetOptions{}); err != nil {
			t.Fatalf("%s: its ClusterRoleBinding: %v", in.dir, err)
		}
	}

	dbDSN, db := database(t, reportsA.table, exportsA.table, reportsB.table)
	saKcfg := map[string]string{}
	keys := map[string][]string{}
	for _, in := range installs {
		saKcfg[in.dir] = tokenKubeconfig(t, kcfg, in.namespace, "jobsched-"+in.instance)
		keys[in.dir] = insertRows(t, db, in.table, in.instance+"-"+in.namespace, 3)
	}
	tick := func(in install) summary {
		t.Helper()
		return tickAs(t, in.dir, saKcfg[in.dir], dbDSN)
	}
	jobsOf := func(in install) ([]string, map[string]string) {
		t.Helper()
		return schedulerJobs(t, kube, in.namespace, in.instance)
	}

	// reports in A fills its maxActive of 2; exports in the same namespace and reports in B (same scheduler name)
	// each still create 2: neither counts the other's unfinished Jobs.
	for _, in := range installs {
		if s := tick(in); s.Created != 2 {
			t.Errorf("%s: the first tick created %d, want its maxActive 2 (another install's Jobs were counted?)", in.dir, s.Created)
		}
	}
	// A second tick of reports in A creates nothing: its own 2 Jobs do count (so the check above can fail).
	if s := tick(reportsA); s.Created != 0 {
		t.Errorf("%s: the second tick created %d with 2 of its Jobs running, want 0", reportsA.dir, s.Created)
	}
	for _, in := range installs {
		if got, _ := jobsOf(in); !slices.Equal(got, expectedNames(in.instance, keys[in.dir][:2])) {
			t.Errorf("%s: Jobs %v, want %v", in.dir, got, expectedNames(in.instance, keys[in.dir][:2]))
		}
	}
	_, reportsAUIDs := jobsOf(reportsA)

	// exports' Jobs finish. reports in A (succeededRetention 0s) does not delete them; exports does.
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		l, err := kube.BatchV1().Jobs(nsA).List(ctx, metav1.ListOptions{LabelSelector: "jobsched.io/scheduler=exports"})
		if err != nil {
			return false, err
		}
		done := 0
		for _, j := range l.Items {
			for _, c := range j.Status.Conditions {
				if c.Type == batchv1.JobComplete && c.Status == corev1.ConditionTrue {
					done++
				}
			}
		}
		return done == 2, nil
	})
	if err != nil {
		t.Fatalf("exports' Jobs to complete: %v", err)
	}
	if s := tick(reportsA); s.Deleted != 0 {
		t.Errorf("%s deleted %d Jobs; none of its own has finished", reportsA.dir, s.Deleted)
	}
	if got, _ := jobsOf(exportsA); len(got) != 2 {
		t.Errorf("exports' finished Jobs after a tick of reports: %v, want both still there", got)
	}
	if s := tick(exportsA); s.Deleted != 2 {
		t.Errorf("%s deleted %d of its finished Jobs, want 2", exportsA.dir, s.Deleted)
	}
	if _, uids := jobsOf(reportsA); !maps.Equal(uids, reportsAUIDs) {
		t.Errorf("reports' Jobs in %s changed: %v, were %v", nsA, uids, reportsAUIDs)
	}

	// The README's `kubectl logs -l` selector, in a namespace with two installs, selects the pods of one.
	sel := readmeLogSelector(t)
	if _, err := labels.Parse(sel); err != nil {
		t.Fatalf("the README's selector %q: %v", sel, err)
	}
	for _, in := range []install{reportsA, exportsA} {
		shell(t, in.dir, fmt.Sprintf("kubectl create job -n %s --from=cronjob/jobsched-%s jobsched-%s-now", nsA, in.instance, in.instance), onCluster)
	}
	var selected []corev1.Pod
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		l, err := kube.CoreV1().Pods(nsA).List(ctx, metav1.ListOptions{LabelSelector: sel})
		if err != nil {
			return false, err
		}
		selected = l.Items
		return len(selected) > 0, nil
	})
	if err != nil {
		t.Fatalf("pods selected by the README's %q in %s: %v", sel, nsA, err)
	}
	for _, p := range selected {
		if job := p.Labels["batch.kubernetes.io/job-name"]; !strings.HasPrefix(job, "jobsched-reports-") {
			t.Errorf("the README's selector %q selects pod %s of Job %s, which is not the reports install's", sel, p.Name, job)
		}
	}

	// Deleting one install removes its own cluster-scoped objects only; the others keep their capacity access.
	shell(t, exportsA.dir, "kubectl delete -k .", onCluster)
	if _, err := kube.RbacV1().ClusterRoles().Get(ctx, crName(exportsA), metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("the deleted install's ClusterRole: err %v, want NotFound", err)
	}
	for _, in := range []install{reportsA, reportsB} {
		for _, get := range []func() error{
			func() error {
				_, err := kube.RbacV1().ClusterRoles().Get(ctx, crName(in), metav1.GetOptions{})
				return err
			},
			func() error {
				_, err := kube.RbacV1().ClusterRoleBindings().Get(ctx, crName(in), metav1.GetOptions{})
				return err
			},
		} {
			if err := get(); err != nil {
				t.Errorf("%s after another install was deleted: %v", in.dir, err)
			}
		}
		tick(in) // fails the test if it falls back to quota
	}
}
