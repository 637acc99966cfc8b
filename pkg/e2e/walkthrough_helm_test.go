//go:build integration

package e2e

import (
	"context"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"testing"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
)

// testWalkthroughHelm follows the README's "Install with Helm" on a control plane: its install block as
// written in a clone (with helm on PATH), then one `jobsched tick` as the release's ServiceAccount with its token and
// the files its ConfigMap mounts, against a real table in the shape of the example's query; then its remove block,
// after which nothing of the release is left.
//
// Like testWalkthroughDeploy it uses the README's namespace, batch, on the cluster of kcfg (TestReadmeOwnCluster).
func testWalkthroughHelm(t *testing.T, kcfg string) {
	needHelm(t)
	const ns = "batch"
	kube, clone := walkthrough(t, kcfg, ns, "walkthrough-helm")
	ctx := context.Background()
	path := "PATH=" + filepath.Dir(helmBinary) + string(os.PathListSeparator) + filepath.Dir(binary) + string(os.PathListSeparator) + os.Getenv("PATH")
	onCluster := "KUBECONFIG=" + kcfg
	t.Cleanup(func() {
		_, _ = runHelm(t, "uninstall", "reports", "-n", ns, "--ignore-not-found", "--kubeconfig", kcfg)
	})

	shell(t, clone, readmeBlock(t, "README.md", "helm-install"), path, onCluster)

	cj, err := kube.BatchV1().CronJobs(ns).Get(ctx, "jobsched-reports", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the CronJob the README names: %v", err)
	}
	sa := cj.Spec.JobTemplate.Spec.Template.Spec.ServiceAccountName
	crb, err := kube.RbacV1().ClusterRoleBindings().Get(ctx, "jobsched-capacity-reports-batch", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the release's ClusterRoleBinding: %v", err)
	}
	if want := []rbacv1.Subject{{Kind: "ServiceAccount", Name: sa, Namespace: ns}}; !slices.Equal(crb.Subjects, want) {
		t.Errorf("ClusterRoleBinding subjects %+v, want %+v", crb.Subjects, want)
	}

	// The CronJob's pod: the files of the release's ConfigMap, the ServiceAccount's token.
	cm, err := kube.CoreV1().ConfigMaps(ns).Get(ctx, "jobsched-reports-config", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	for f, data := range cm.Data {
		if err := os.WriteFile(filepath.Join(dir, f), []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	passAndOperate(t, kube, kcfg, ns, sa, dir, clone, "helm-operate", path)
	if got, err := kube.CoreV1().ConfigMaps(ns).Get(ctx, "jobsched-reports-config", metav1.GetOptions{}); err != nil || !reflect.DeepEqual(got.Data, cm.Data) {
		t.Errorf("after the upgrades with --reuse-values the ConfigMap is not the installed one (err %v)", err)
	}

	shell(t, clone, readmeBlock(t, "README.md", "helm-remove"), path, onCluster)
	sel := metav1.ListOptions{LabelSelector: "app.kubernetes.io/instance=reports"}
	left := func() []string {
		var out []string
		if l, err := kube.CoreV1().ServiceAccounts(ns).List(ctx, sel); err != nil || len(l.Items) > 0 {
			out = append(out, "ServiceAccount")
		}
		if l, err := kube.CoreV1().ConfigMaps(ns).List(ctx, sel); err != nil || len(l.Items) > 0 {
			out = append(out, "ConfigMap")
		}
		if l, err := kube.BatchV1().CronJobs(ns).List(ctx, sel); err != nil || len(l.Items) > 0 {
			out = append(out, "CronJob")
		}
		if l, err := kube.RbacV1().Roles(ns).List(ctx, sel); err != nil || len(l.Items) > 0 {
			out = append(out, "Role")
		}
		if l, err := kube.RbacV1().RoleBindings(ns).List(ctx, sel); err != nil || len(l.Items) > 0 {
			out = append(out, "RoleBinding")
		}
		if _, err := kube.RbacV1().ClusterRoles().Get(ctx, "jobsched-capacity-reports-batch", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			out = append(out, "ClusterRole")
		}
		if _, err := kube.RbacV1().ClusterRoleBindings().Get(ctx, "jobsched-capacity-reports-batch", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			out = append(out, "ClusterRoleBinding")
		}
		// The CronJob's Jobs (the pass run now): the garbage collector deletes them with it.
		if l, err := kube.BatchV1().Jobs(ns).List(ctx, sel); err != nil || len(l.Items) > 0 {
			out = append(out, "the CronJob's Jobs")
		}
		if names, _ := schedulerJobs(t, kube, ns, "reports"); len(names) > 0 {
			out = append(out, "task Jobs")
		}
		return out
	}
	var got []string
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
		got = left()
		return len(got) == 0, nil
	})
	if err != nil {
		t.Errorf("after the README's remove block, the release left %v", got)
	}
}
