package scheduler

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	k8stesting "k8s.io/client-go/testing"

	"github.com/jobsched/jobsched/pkg/config"
	"github.com/jobsched/jobsched/pkg/render"
	"github.com/jobsched/jobsched/pkg/testkit"
)

// TestPassAsksTheAutoscaler: with limits.capacity: autoscale a pass lists the Events of its Unschedulable pods (and
// only in that mode): a pod Karpenter nominated a NodeClaim for does not block; without list on Events every
// Unschedulable pod blocks, and the plan says why.
func TestPassAsksTheAutoscaler(t *testing.T) {
	job := makeJob("r").Obj()
	pod := makePod(job).Unschedulable("0/0 nodes are available").Obj()
	nominated := &corev1.Event{ObjectMeta: metav1.ObjectMeta{Namespace: pod.Namespace, Name: pod.Name + ".1"},
		InvolvedObject: corev1.ObjectReference{Kind: "Pod", Namespace: pod.Namespace, Name: pod.Name}, Reason: "Nominated",
		Message: "Pod should schedule on: nodeclaim/batch-x", LastTimestamp: metav1.NewTime(now),
		Source: corev1.EventSource{Component: "karpenter"}}
	tests := []struct {
		name       string
		mode       config.Capacity
		forbidden  bool
		listEvents bool
		blocked    string // in the plan's Blocked
		waiting    int
		note       string
	}{
		{"nodes: the pod blocks, no Event read", config.CapacityNodes, false, false, "1 pod(s) Unschedulable", 0, ""},
		{"autoscale: nominated, it waits and does not block", config.CapacityAutoscale, false, true, "capacity:", 1, ""},
		{"autoscale without list on Events: it blocks, said", config.CapacityAutoscale, true, true, "1 pod(s) Unschedulable", 0, "cannot list Events"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg := testConfig(t, func(c *config.Config) { c.Limits.Capacity = tc.mode })
			client := testkit.NewFake(job, pod, nominated)
			if tc.forbidden {
				client.PrependReactor("list", "events", func(k8stesting.Action) (bool, runtime.Object, error) {
					return true, nil, apierrors.NewForbidden(schema.GroupResource{Resource: "events"}, "", nil)
				})
			}
			s := &Scheduler{workers: 1, Config: cfg, Kube: client, Source: &source{Rows: rowsFor("a")}, Renderer: render.New(cfg, nil), Now: func() time.Time { return now }}
			res, err := s.Run(context.Background(), DryRun)
			if err != nil {
				t.Fatal(err)
			}
			p := res.Plan
			if !strings.Contains(p.Blocked, tc.blocked) || p.Waiting != tc.waiting || !strings.Contains(p.WaitsNote, tc.note) || (tc.note == "") != (p.WaitsNote == "") {
				t.Errorf("blocked %q, waiting %d, note %q; want …%s…, %d, …%s…", p.Blocked, p.Waiting, p.WaitsNote, tc.blocked, tc.waiting, tc.note)
			}
			if got := slices.Contains(actions(client), "list events"); got != tc.listEvents {
				t.Errorf("listed Events: %v, want %v (actions %v)", got, tc.listEvents, actions(client))
			}
		})
	}
}
