//go:build integration

package autoscaler_test

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/yaml"

	"github.com/jobsched/jobsched/pkg/autoscaler"
	"github.com/jobsched/jobsched/pkg/config"
	"github.com/jobsched/jobsched/pkg/testkit"
)

// karpenterVersion is the Karpenter module whose CRDs the test installs (the one scripts/cluster.sh runs).
const karpenterVersion = "v1.13.0"

var crds = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}

// karpenterCRDs installs the NodePool and NodeClaim CRDs of the Karpenter module (from the module cache: `go mod
// download` fetches it) unless they are there, and waits until they are served.
func karpenterCRDs(t *testing.T, dyn dynamic.Interface) {
	t.Helper()
	out, err := exec.Command("go", "mod", "download", "-json", "sigs.k8s.io/karpenter@"+karpenterVersion).Output()
	if err != nil {
		t.Fatalf("go mod download sigs.k8s.io/karpenter@%s: %v", karpenterVersion, err)
	}
	var dir string
	for _, line := range strings.Split(string(out), "\n") {
		if k, v, ok := strings.Cut(strings.TrimSpace(line), ": "); ok && k == `"Dir"` {
			dir = strings.Trim(strings.TrimSuffix(v, ","), `"`)
		}
	}
	ctx := context.Background()
	for _, name := range []string{"karpenter.sh_nodepools.yaml", "karpenter.sh_nodeclaims.yaml"} {
		data, err := os.ReadFile(filepath.Join(dir, "kwok", "charts", "crds", name))
		if err != nil {
			t.Fatal(err)
		}
		var crd unstructured.Unstructured
		if err := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096).Decode(&crd.Object); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if _, err := dyn.Resource(crds).Create(ctx, &crd, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatalf("create CRD %s: %v", crd.GetName(), err)
		}
		err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
			got, err := dyn.Resource(crds).Get(ctx, crd.GetName(), metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			conds, _, _ := unstructured.NestedSlice(got.Object, "status", "conditions")
			for _, c := range conds {
				if m, ok := c.(map[string]any); ok && m["type"] == "Established" && m["status"] == "True" {
					return true, nil
				}
			}
			return false, nil
		})
		if err != nil {
			t.Fatalf("CRD %s not established: %v", crd.GetName(), err)
		}
	}
}

// withKarpenterCRDs is the local control plane's client config and a dynamic client of it, Karpenter's CRDs
// installed.
func withKarpenterCRDs(t *testing.T) (*rest.Config, dynamic.Interface) {
	t.Helper()
	cfg, err := clientcmd.BuildConfigFromFlags("", os.Getenv("KUBECONFIG"))
	if err != nil {
		t.Fatal(err)
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	karpenterCRDs(t, dyn)
	return cfg, dyn
}

func obj(kind, name string, spec map[string]any) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{"apiVersion": "karpenter.sh/v1", "kind": kind,
		"metadata": map[string]any{"name": name}, "spec": spec}}
}

// create creates u (cluster-scoped, deleted when the test ends) and writes status through the status subresource.
func create(t *testing.T, dyn dynamic.Interface, gvr schema.GroupVersionResource, u *unstructured.Unstructured, status map[string]any) {
	t.Helper()
	ctx := context.Background()
	got, err := dyn.Resource(gvr).Create(ctx, u, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create %s %s: %v", u.GetKind(), u.GetName(), err)
	}
	t.Cleanup(func() { _ = dyn.Resource(gvr).Delete(context.Background(), u.GetName(), metav1.DeleteOptions{}) })
	if status != nil {
		got.Object["status"] = status
		if _, err := dyn.Resource(gvr).UpdateStatus(ctx, got, metav1.UpdateOptions{}); err != nil {
			t.Fatalf("status of %s %s: %v", u.GetKind(), u.GetName(), err)
		}
	}
}

// TestReadKarpenter: Read reads real NodePools and NodeClaims as Karpenter's CRDs serve them (its v1 schema:
// requirements with minValues, startupTaints, status.resources and conditions) and Waits filters a pod's Events on
// the API server by the field selector it sends.
func TestReadKarpenter(t *testing.T) {
	kube, ns := testkit.RealCluster(t, "autoscale")
	_, dyn := withKarpenterCRDs(t)
	pool, claim := ns+"-pool", ns+"-claim"
	// A node class of no cloud provider: a Karpenter running on the cluster (KARPENTER=1) leaves the pool and its
	// NodeClaim alone (it manages only its own provider's), so the status written here stays.
	classRef := map[string]any{"group": "test.jobsched.io", "kind": "TestNodeClass", "name": "none"}
	requirements := []any{map[string]any{"key": "karpenter.sh/capacity-type", "operator": "In", "values": []any{"on-demand"}, "minValues": int64(1)}}
	now := time.Now().UTC().Format(time.RFC3339)
	create(t, dyn, autoscaler.NodePools, obj("NodePool", pool, map[string]any{
		"limits": map[string]any{"cpu": "12"},
		"template": map[string]any{
			"metadata": map[string]any{"labels": map[string]any{"team": "a"}},
			"spec": map[string]any{"nodeClassRef": classRef, "requirements": requirements,
				"taints":        []any{map[string]any{"key": "batch", "effect": "NoSchedule"}},
				"startupTaints": []any{map[string]any{"key": "starting", "effect": "NoSchedule"}}}},
	}), map[string]any{"resources": map[string]any{"cpu": "4", "nodes": "1"},
		"conditions": []any{map[string]any{"type": "Ready", "status": "True", "reason": "Ready", "message": "", "lastTransitionTime": now}}})
	c := obj("NodeClaim", claim, map[string]any{"nodeClassRef": classRef, "requirements": requirements})
	c.SetLabels(map[string]string{"karpenter.sh/nodepool": pool})
	create(t, dyn, autoscaler.NodeClaims, c, map[string]any{"allocatable": map[string]any{"cpu": "3900m", "pods": "110"}, "capacity": map[string]any{"cpu": "4", "pods": "110"},
		"conditions": []any{map[string]any{"type": "Launched", "status": "True", "reason": "Launched", "message": "", "lastTransitionTime": now}}})

	st, err := autoscaler.Read(context.Background(), dyn, kube.Kube)
	if err != nil {
		t.Fatal(err)
	}
	var got *autoscaler.Pool
	for i := range st.Pools {
		if st.Pools[i].Name == pool {
			got = &st.Pools[i]
		}
	}
	if st.Source != autoscaler.Karpenter || got == nil {
		t.Fatalf("state %+v: want Karpenter with NodePool %s", st, pool)
	}
	cpu := got.Limits[corev1.ResourceCPU]
	used := got.Used[corev1.ResourceCPU]
	if cpu.String() != "12" || used.String() != "4" || len(got.Launching) != 1 || got.Labels["team"] != "a" ||
		len(got.Taints) != 1 || len(got.Requirements) != 1 || got.Unavailable != "" || got.Shape == nil || got.Shape.From != claim {
		t.Errorf("NodePool read as %+v", got)
	}
	if why := got.Excluded(&corev1.PodSpec{Tolerations: []corev1.Toleration{{Key: "batch", Operator: corev1.TolerationOpExists}},
		NodeSelector: map[string]string{"team": "a"}}); why != "" {
		t.Errorf("a pod that tolerates the taint and selects the label is excluded: %s", why)
	}

	for _, e := range []struct{ pod, kind, reason, msg string }{
		{"waiting", "Pod", "Nominated", "Pod should schedule on: nodeclaim/" + claim},
		{"waiting-too", "Pod", "FailedScheduling", "Failed to schedule pod, all available instance types exceed limits for nodepool"},
		{"waiting", "Job", "FailedScheduling", "Failed to schedule pod, all available instance types exceed limits for nodepool"},
	} {
		ev := &corev1.Event{ObjectMeta: metav1.ObjectMeta{GenerateName: e.pod + "."},
			InvolvedObject: corev1.ObjectReference{Kind: e.kind, Namespace: ns, Name: e.pod}, Reason: e.reason, Message: e.msg,
			Type: corev1.EventTypeNormal, FirstTimestamp: metav1.Now(), LastTimestamp: metav1.Now(),
			Source: corev1.EventSource{Component: "karpenter"}}
		if _, err := kube.CoreV1().Events(ns).Create(context.Background(), ev, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	waits, err := autoscaler.Waits(context.Background(), kube.Kube, ns, []string{"waiting"}, config.DefaultAutoscalerEvents)
	if err != nil {
		t.Fatal(err)
	}
	if w := waits["waiting"]; len(waits) != 1 || !w.Provided || !strings.Contains(w.Event, "nodeclaim/"+claim) {
		t.Errorf("waits %+v: want the pod's Nominated only (the Job's Event and another pod's are not its)", waits)
	}
}

// rulesOf reads the rules of the Role or ClusterRole in file of manifests/autoscale.
func rulesOf(t *testing.T, file string) []rbacv1.PolicyRule {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "..", "manifests", "autoscale", file))
	if err != nil {
		t.Fatal(err)
	}
	var role rbacv1.ClusterRole
	if err := yaml.UnmarshalStrict(data, &role); err != nil {
		t.Fatal(err)
	}
	return role.Rules
}

// TestGrants: a ServiceAccount with exactly the rules of manifests/autoscale reads what the mode reads (NodePools,
// NodeClaims, a pod's Events, the cluster-autoscaler's ConfigMap and no other); one without them reads nothing,
// and the mode says so instead of failing.
func TestGrants(t *testing.T) {
	kube, ns := testkit.RealCluster(t, "autoscale-rbac")
	cfg, _ := withKarpenterCRDs(t)
	ctx := context.Background()
	as := func(sa string) (kubernetes.Interface, dynamic.Interface) {
		c := rest.CopyConfig(cfg)
		c.Impersonate = rest.ImpersonationConfig{UserName: "system:serviceaccount:" + ns + ":" + sa}
		k, err := kubernetes.NewForConfig(c)
		if err != nil {
			t.Fatal(err)
		}
		d, err := dynamic.NewForConfig(c)
		if err != nil {
			t.Fatal(err)
		}
		return k, d
	}
	name := ns + "-autoscale"
	subject := []rbacv1.Subject{{Kind: "ServiceAccount", Name: "jobsched", Namespace: ns}}
	if _, err := kube.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: name}, Rules: rulesOf(t, "clusterrole.yaml")}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = kube.RbacV1().ClusterRoles().Delete(context.Background(), name, metav1.DeleteOptions{}) })
	if _, err := kube.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name}, Subjects: subject,
		RoleRef: rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: name}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = kube.RbacV1().ClusterRoleBindings().Delete(context.Background(), name, metav1.DeleteOptions{})
	})
	if _, err := kube.RbacV1().Roles(ns).Create(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "autoscale"}, Rules: rulesOf(t, "role.yaml")}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := kube.RbacV1().RoleBindings(ns).Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "autoscale"}, Subjects: subject,
		RoleRef: rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: "autoscale"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	granted, grantedDyn := as("jobsched")
	var st *autoscaler.State
	// RBAC takes effect once the API server's authorizer has seen the bindings: wait for that, not for a time.
	var err error
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		st, err = autoscaler.Read(ctx, grantedDyn, testkit.Kube(granted))
		return err == nil && st.Source == autoscaler.Karpenter, err
	})
	if err != nil {
		t.Fatalf("with the grant: %+v, %v", st, err)
	}
	if _, err := autoscaler.Waits(ctx, testkit.Kube(granted), ns, []string{"some-pod"}, config.DefaultAutoscalerEvents); err != nil {
		t.Errorf("Events with the grant: %v", err)
	}
	if _, err := granted.CoreV1().ConfigMaps(metav1.NamespaceSystem).Get(ctx, "cluster-autoscaler-status", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("get the cluster-autoscaler's ConfigMap with the grant: %v, want NotFound (none runs here)", err)
	}
	if _, err := granted.CoreV1().ConfigMaps(metav1.NamespaceSystem).Get(ctx, "kube-root-ca.crt", metav1.GetOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("get another ConfigMap: %v, want Forbidden", err)
	}

	none, noneDyn := as("nobody")
	st, err = autoscaler.Read(ctx, noneDyn, testkit.Kube(none))
	if err != nil || st.Source != "" || !strings.Contains(st.Note, "cannot read Karpenter's NodePools") || !strings.Contains(st.Note, "cannot get ConfigMap") {
		t.Errorf("without the grant: %+v, %v; want no source and why", st, err)
	}
	if _, err := autoscaler.Waits(ctx, testkit.Kube(none), ns, []string{"some-pod"}, config.DefaultAutoscalerEvents); !apierrors.IsForbidden(err) {
		t.Errorf("Events without the grant: %v, want Forbidden", err)
	}
}
