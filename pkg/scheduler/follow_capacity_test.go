package scheduler

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	k8stesting "k8s.io/client-go/testing"

	"github.com/jobsched/jobsched/pkg/config"
	"github.com/jobsched/jobsched/pkg/render"
	"github.com/jobsched/jobsched/pkg/testkit"
)

// TestFollowedCapacitySeesTheBinding: in a fill run the pass reads its own Pending pods and capacity reads every
// pod from two watches of their own, and a pod counts once: unbound, as the pass's (it will take room), bound, on its
// node (capacity's). When the pass's watch has delivered a binding that capacity's has not yet, the pod would be
// counted by neither and its room given twice; the pass reads capacity only once its watch has got as far (or
// lists the pods afresh when it does not within a bound). The node holds 2 pods of the template; one is ours.
func TestFollowedCapacitySeesTheBinding(t *testing.T) {
	pods := schema.GroupVersionResource{Version: "v1", Resource: "pods"}
	for _, tc := range []struct {
		name  string
		later bool // capacity's watch delivers the binding while the pass waits (else never: the pass lists)
	}{
		{"capacity's watch delivers it later", true},
		{"capacity's watch never delivers it", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := testConfig(t, func(c *config.Config) {
				c.Limits.Capacity = config.CapacityNodes
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
			var mu sync.Mutex
			watchers := map[bool]*watch.FakeWatcher{} // by all namespaces (capacity's) or not (the pass's)
			opened := make(chan struct{}, 4)
			c.PrependWatchReactor("pods", func(a k8stesting.Action) (bool, watch.Interface, error) {
				w := watch.NewFake()
				mu.Lock()
				watchers[a.GetNamespace() == ""] = w
				mu.Unlock()
				opened <- struct{}{}
				return true, w, nil
			})
			watcher := func(all bool) *watch.FakeWatcher {
				mu.Lock()
				defer mu.Unlock()
				return watchers[all]
			}
			s := &Scheduler{workers: 1, Config: cfg, Kube: c, Source: &source{Rows: rowsFor("b", "c", "d")}, Renderer: render.New(cfg, nil),
				Now: func() time.Time { return now }, Follow: NewFollow()}
			defer s.Follow.Stop()
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
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
			<-opened
			<-opened
			bound := pod.DeepCopy()
			bound.Spec.NodeName, bound.ResourceVersion = "n1", "20"
			if err := c.Tracker().Update(pods, bound, bound.Namespace); err != nil {
				t.Fatal(err)
			}
			watcher(false).Modify(bound)
			if err := s.Follow.changes.Until(ctx, func() bool { return s.Follow.pods.Reached("20") }); err != nil {
				t.Fatal(err)
			}
			delivered := make(chan struct{})
			go func() {
				defer close(delivered)
				if tc.later {
					watcher(true).Modify(bound)
				}
			}()
			if n, limit := slots(); n != 1 || !strings.Contains(limit, "n1") {
				t.Errorf("after the binding: %d slot(s) (%s), want 1 (on n1): the bound pod counted once", n, limit)
			}
			<-delivered
		})
	}
}
