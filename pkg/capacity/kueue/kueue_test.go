package kueue

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/jobsched/jobsched/pkg/capacity"
	"github.com/jobsched/jobsched/pkg/config"
	kueueapi "github.com/jobsched/jobsched/pkg/kueue"
)

// TestKueueModeStatus: the Kueue mode's section of status counts the queued Jobs against limits.maxQueued, with the
// LocalQueue and why Kueue could not be read from what Inspect read, if anything; Inspect reads with the dynamic
// client (without one it says so) and wraps a failure to read.
func TestKueueModeStatus(t *testing.T) {
	cfg := &config.Config{Namespace: "ns", Limits: config.Limits{MaxQueued: new(int)}, Kueue: &config.Kueue{LocalQueue: "team-a"}}
	*cfg.Limits.MaxQueued = 3
	var m Mode
	lq := &kueueapi.LocalQueue{Name: "team-a", Found: true, Admitted: 1}
	tests := []struct {
		name string
		d    capacity.Details
		want *Status
	}{
		{"nothing read", nil, &Status{MaxQueued: 3, Queued: 2}},
		{"the LocalQueue", &kueueapi.Snapshot{LocalQueue: lq}, &Status{MaxQueued: 3, Queued: 2, LocalQueue: lq}},
		{"unavailable", &kueueapi.Snapshot{Unavailable: "no RBAC"}, &Status{MaxQueued: 3, Queued: 2, Unavailable: "no RBAC"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			want := capacity.Section{Fields: []capacity.Field{{Key: "kueue", Value: tc.want}},
				Lines:  []capacity.Line{{Label: "Kueue", Text: tc.want.Line()}},
				Queued: "Queued in Kueue (suspended until their Workload is admitted)"}
			if diff := cmp.Diff(want, m.Status(cfg, capacity.Counts{Queued: 2}, tc.d)); diff != "" {
				t.Errorf("section (-want +got):\n%s", diff)
			}
		})
	}

	d, err := m.Inspect(context.Background(), capacity.Clients{}, cfg)
	if snap, ok := d.(*kueueapi.Snapshot); err != nil || !ok || !strings.Contains(snap.Unavailable, "no client") {
		t.Errorf("Inspect without a dynamic client: %+v, %v; want it said unavailable", d, err)
	}
	dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(),
		map[schema.GroupVersionResource]string{kueueapi.WorkloadsResource: "WorkloadList"})
	dyn.PrependReactor("list", "*", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, errors.New("connection refused")
	})
	if _, err := m.Inspect(context.Background(), capacity.Clients{Dynamic: dyn}, cfg); err == nil || !strings.Contains(err.Error(), "observing Kueue: ") {
		t.Errorf("Inspect when the list fails: %v, want the error wrapped", err)
	}
}
