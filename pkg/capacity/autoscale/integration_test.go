//go:build integration

package autoscale_test

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
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/jobsched/jobsched/pkg/capacity/autoscale"
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
	cfg, err := clientcmd.BuildConfigFromFlags("", os.Getenv("KUBECONFIG"))
	if err != nil {
		t.Fatal(err)
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	karpenterCRDs(t, dyn)
	pool, claim := ns+"-pool", ns+"-claim"
	// A node class of no cloud provider: a Karpenter running on the cluster (KARPENTER=1) leaves the pool and its
	// NodeClaim alone (it manages only its own provider's), so the status written here stays.
	classRef := map[string]any{"group": "test.jobsched.io", "kind": "TestNodeClass", "name": "none"}
	requirements := []any{map[string]any{"key": "karpenter.sh/capacity-type", "operator": "In", "values": []any{"on-demand"}, "minValues": int64(1)}}
	now := time.Now().UTC().Format(time.RFC3339)
	create(t, dyn, autoscale.NodePools, obj("NodePool", pool, map[string]any{
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
	create(t, dyn, autoscale.NodeClaims, c, map[string]any{"allocatable": map[string]any{"cpu": "3900m", "pods": "110"}, "capacity": map[string]any{"cpu": "4", "pods": "110"},
		"conditions": []any{map[string]any{"type": "Launched", "status": "True", "reason": "Launched", "message": "", "lastTransitionTime": now}}})

	st, err := autoscale.Read(context.Background(), dyn, kube)
	if err != nil {
		t.Fatal(err)
	}
	var got *autoscale.Pool
	for i := range st.Pools {
		if st.Pools[i].Name == pool {
			got = &st.Pools[i]
		}
	}
	if st.Source != autoscale.Karpenter || got == nil {
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
			Type: corev1.EventTypeNormal, FirstTimestamp: metav1.Now(), LastTimestamp: metav1.Now()}
		if _, err := kube.CoreV1().Events(ns).Create(context.Background(), ev, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	waits, err := autoscale.Waits(context.Background(), kube, ns, []string{"waiting"})
	if err != nil {
		t.Fatal(err)
	}
	if w := waits["waiting"]; len(waits) != 1 || !w.Provided || !strings.Contains(w.Event, "nodeclaim/"+claim) {
		t.Errorf("waits %+v: want the pod's Nominated only (the Job's Event and another pod's are not its)", waits)
	}
}
