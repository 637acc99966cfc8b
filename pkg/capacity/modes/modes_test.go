package modes_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"sigs.k8s.io/yaml"

	"github.com/jobsched/jobsched/pkg/capacity"
	_ "github.com/jobsched/jobsched/pkg/capacity/modes" // the shipped modes, registered
	"github.com/jobsched/jobsched/pkg/config"
	"github.com/jobsched/jobsched/pkg/testkit"
)

// TestModes: the registry holds one mode for each value config accepts for limits.capacity, in config's order, and
// ModeOf finds each; a name config would refuse is a mode whose Observe names the name.
func TestModes(t *testing.T) {
	var names []config.Capacity
	for _, m := range capacity.Modes() {
		names = append(names, m.Name())
		if got := capacity.ModeOf(m.Name()); got != m {
			t.Errorf("ModeOf(%s) = %#v, want %#v", m.Name(), got, m)
		}
	}
	if diff := cmp.Diff(config.Capacities(), names); diff != "" {
		t.Errorf("registered modes (-config.Capacities +Modes):\n%s", diff)
	}
	for _, m := range capacity.Modes() {
		if err := capacity.Check(m.Name()); err != nil {
			t.Errorf("Check(%s): %v, want nil", m.Name(), err)
		}
	}
	// An unknown name fails loudly wherever it is asked, and never fits.
	unknown := capacity.ModeOf("lots")
	c := testkit.NewFake()
	_, err := unknown.Observe(context.Background(), capacity.Clients{Kube: c}, "ns", capacity.Options{})
	_, ierr := unknown.(capacity.Inspector).Inspect(context.Background(), capacity.Clients{Kube: c}, &config.Config{})
	for _, err := range []error{err, ierr, capacity.Check("lots")} {
		if err == nil || !strings.Contains(err.Error(), `unknown mode "lots"`) {
			t.Errorf("an unknown mode: %v, want an error naming it", err)
		}
	}
	if r := unknown.Room(&capacity.Snapshot{}, []capacity.Claim{{}}); r != nil || len(c.Actions()) != 0 {
		t.Errorf("an unknown mode: Room %v, calls %v; want no Room (nothing fits) and no call", r, c.Actions())
	}
}

// TestModesThatCountNoRoom: off and kueue observe nothing (no call at all: a tick needs no grant for them), give no
// room to fit, and only kueue bounds the install (maxQueued − queued); nodes and quota observe and give a Room.
func TestModesThatCountNoRoom(t *testing.T) {
	cfg := &config.Config{Limits: config.Limits{MaxQueued: new(int), MaxPerTick: new(int)}}
	*cfg.Limits.MaxQueued = 5
	tests := []struct {
		mode      config.Capacity
		observes  bool
		bound     int // -1: none
		boundText string
	}{
		{config.CapacityNodes, true, -1, ""},
		{config.CapacityQuota, true, -1, ""},
		{config.CapacityOff, false, -1, ""},
		{config.CapacityKueue, false, 3, "limits.maxQueued: 2 of 5 queued"},
	}
	for _, tc := range tests {
		t.Run(string(tc.mode), func(t *testing.T) {
			m := capacity.ModeOf(tc.mode)
			c := testkit.NewFake()
			snap, err := m.Observe(context.Background(), capacity.Clients{Kube: c}, "ns", capacity.Options{})
			if err != nil {
				t.Fatal(err)
			}
			if got := snap != nil; got != tc.observes {
				t.Errorf("observed %v, want %v", got, tc.observes)
			}
			if got := len(c.Actions()) > 0; got != tc.observes {
				t.Errorf("calls %v, want calls: %v", c.Actions(), tc.observes)
			}
			if snap != nil {
				if m.Room(snap, []capacity.Claim{{Template: &batchv1.Job{Spec: batchv1.JobSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}}}}}}}}}}) == nil {
					t.Error("no Room on what it observed")
				}
			} else if r := m.Room(&capacity.Snapshot{}, nil); r != nil {
				t.Errorf("Room %v, want none", r)
			}
			var slots int
			var limit string
			b, ok := m.(capacity.Bounder)
			if ok {
				slots, limit = b.Bound(cfg, capacity.Counts{Queued: 2})
			}
			if tc.bound < 0 {
				if ok {
					t.Errorf("Bound %d (%s), want none", slots, limit)
				}
				return
			}
			if !ok || slots != tc.bound || limit != tc.boundText {
				t.Errorf("Bound = %d, %q, %v; want %d, %q", slots, limit, ok, tc.bound, tc.boundText)
			}
		})
	}
}

// TestModeNeeds: what each mode says it reads beyond the base Role is exactly what its kustomize component under
// manifests/ grants, and the chart has a value of the component's name (which grants the same, see pkg/e2e's chart
// tests); a mode without a component needs none.
func TestModeNeeds(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("..", "..", "..", "manifests", "chart", "values.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var values map[string]any
	if err := yaml.Unmarshal(data, &values); err != nil {
		t.Fatal(err)
	}
	for _, m := range capacity.Modes() {
		t.Run(string(m.Name()), func(t *testing.T) {
			n := m.Needs()
			if n.Component == "" {
				if len(n.Rules) > 0 {
					t.Errorf("rules %v but no component grants them", n.Rules)
				}
				return
			}
			if _, ok := values[n.Component].(bool); !ok {
				t.Errorf("the chart has no value %s: true/false (it has %v)", n.Component, values[n.Component])
			}
			dir := filepath.Join("..", "..", "..", "manifests", n.Component)
			files, err := filepath.Glob(filepath.Join(dir, "*role.yaml"))
			if err != nil {
				t.Fatal(err)
			}
			var rules []rbacv1.PolicyRule
			for _, f := range files {
				data, err := os.ReadFile(f)
				if err != nil {
					t.Fatal(err)
				}
				var role rbacv1.ClusterRole // a Role's rules have the same shape
				if err := yaml.UnmarshalStrict(data, &role); err != nil {
					t.Fatalf("%s: %v", f, err)
				}
				if role.Kind == "Role" || role.Kind == "ClusterRole" {
					rules = append(rules, role.Rules...)
				}
			}
			if diff := cmp.Diff(rules, n.Rules); diff != "" {
				t.Errorf("rules (-%s +Needs):\n%s", dir, diff)
			}
		})
	}
}

// TestModesThatShowNothing: nodes, quota and off show nothing in status beyond each template's Report.
func TestModesThatShowNothing(t *testing.T) {
	for _, name := range []config.Capacity{config.CapacityNodes, config.CapacityQuota, config.CapacityOff} {
		if _, ok := capacity.ModeOf(name).(capacity.Inspector); ok {
			t.Errorf("%s is an Inspector: it would show a section of status", name)
		}
	}
}
