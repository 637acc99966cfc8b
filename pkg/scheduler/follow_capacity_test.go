package scheduler

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	k8stesting "k8s.io/client-go/testing"

	"github.com/jobsched/jobsched/pkg/config"
	"github.com/jobsched/jobsched/pkg/render"
	"github.com/jobsched/jobsched/pkg/testkit"
)

// TestFollowedPodsOneWatch: in a fill run whose capacity mode follows every pod in the cluster (nodes, autoscale),
// the pass reads its own Pending pods from that one watch, not from a list and a watch of its own (each of their
// events was sent, forwarded and decoded twice), and a pod counts once: unbound, as the pass's (it will take room),
// bound, on its node (capacity's), the pass and capacity seeing the binding together. With quota, which reads no
// pod, the pass lists and watches its Pending pods in its namespace. The node holds 2 pods of the template; one is
// ours.
func TestFollowedPodsOneWatch(t *testing.T) {
	pods := schema.GroupVersionResource{Version: "v1", Resource: "pods"}
	for _, mode := range []config.Capacity{config.CapacityNodes, config.CapacityAutoscale, config.CapacityQuota} {
		t.Run(string(mode), func(t *testing.T) {
			cfg := testConfig(t, func(c *config.Config) {
				c.Limits.Capacity = mode
				c.Template.Spec.Template.Spec.Containers[0].Resources.Requests = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1900m")}
			})
			job := makeJob("a").Active(1).Obj()
			pod := makePod(job).Obj()
			pod.Spec = *cfg.Template.Spec.Template.Spec.DeepCopy()
			pod.ResourceVersion = "5"
			node := makeNode("n1").Allocatable(corev1.ResourceCPU, "3900m").Allocatable(corev1.ResourcePods, "110").Obj()
			c := testkit.NewFake(job, pod, node)
			c.PrependReactor("list", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
				obj, err := c.Tracker().List(pods, corev1.SchemeGroupVersion.WithKind("Pod"), a.GetNamespace())
				if err == nil {
					obj.(*corev1.PodList).ResourceVersion = "10" // the fake sets none, and a watch needs one
				}
				return true, obj, err
			})
			watcher := make(chan *watch.FakeWatcher, 2)
			c.PrependWatchReactor("pods", func(a k8stesting.Action) (bool, watch.Interface, error) {
				w := watch.NewFake()
				watcher <- w
				return true, w, nil
			})
			s := &Scheduler{workers: 1, Config: cfg, Kube: c, Source: &source{Rows: rowsFor("b", "c", "d")}, Renderer: render.New(cfg, nil),
				Now: func() time.Time { return now }, Follow: NewFollow()}
			defer s.Follow.Stop()
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			if _, err := s.Run(ctx, DryRun); err != nil {
				t.Fatal(err)
			}
			var lists []string // the namespaces pods were listed in ("" all)
			for _, a := range c.Actions() {
				if a.GetVerb() == "list" && a.GetResource() == pods {
					lists = append(lists, a.GetNamespace())
				}
			}
			want := []string{""}
			if mode == config.CapacityQuota {
				want = []string{cfg.Namespace}
			}
			if !slices.Equal(lists, want) {
				t.Errorf("the first pass listed pods in %q, want %q", lists, want)
			}
			if mode == config.CapacityQuota {
				return
			}
			if s.Follow.pods.Watching() {
				t.Error("the pass watches its Pending pods itself, beside capacity's watch of every pod")
			}
			slots := func() (int, string) {
				t.Helper()
				res, err := s.Run(ctx, DryRun)
				if err != nil {
					t.Fatal(err)
				}
				return res.Plan.Slots, res.Plan.Limit
			}
			if n, limit := slots(); n != 1 || !strings.Contains(limit, "n1") {
				t.Fatalf("before the binding: %d slot(s) (%s), want 1 (on n1)", n, limit)
			}
			bound := pod.DeepCopy()
			bound.Spec.NodeName, bound.ResourceVersion = "n1", "20"
			(<-watcher).Modify(bound)
			if err := s.Follow.changes.Until(ctx, func() bool {
				obs, err := s.observe(ctx, true)
				return err == nil && len(obs.Pods) == 1 && obs.Pods[0].Bound
			}); err != nil {
				t.Fatal("the pass never saw its pod bound:", err)
			}
			if n, limit := slots(); n != 1 || !strings.Contains(limit, "n1") {
				t.Errorf("after the binding: %d slot(s) (%s), want 1 (on n1): the bound pod counted once", n, limit)
			}
		})
	}
}

// TestFollowedPodsForbidden: in a fill run with capacity nodes but no grant to list pods cluster-wide, the pass
// reads its Pending pods in its namespace (capacity counts as quota, and says why), from its first pass on.
func TestFollowedPodsForbidden(t *testing.T) {
	cfg := testConfig(t, func(c *config.Config) { c.Limits.Capacity = config.CapacityNodes })
	job := makeJob("a").Active(1).Obj()
	c := testkit.NewFake(job, makePod(job).Unschedulable("0/1 nodes are available").Obj())
	c.PrependReactor("list", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if a.GetNamespace() == "" {
			return true, nil, apierrors.NewForbidden(schema.GroupResource{Resource: "pods"}, "", errors.New("no ClusterRole"))
		}
		return false, nil, nil
	})
	s := &Scheduler{workers: 1, Config: cfg, Kube: c, Source: &source{Rows: rowsFor("b")}, Renderer: render.New(cfg, nil),
		Now: func() time.Time { return now }, Follow: NewFollow()}
	defer s.Follow.Stop()
	for pass := 1; pass <= 2; pass++ {
		res, err := s.Run(context.Background(), DryRun)
		if err != nil {
			t.Fatal(err)
		}
		if res.Plan.Unschedulable != 1 {
			t.Errorf("pass %d: %d Unschedulable, want 1: the pass did not read its Pending pod", pass, res.Plan.Unschedulable)
		}
	}
}
