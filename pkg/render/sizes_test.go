package render

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/jobsched/jobsched/pkg/config"
	"github.com/jobsched/jobsched/pkg/rows"
)

func q(s string) resource.Quantity { return resource.MustParse(s) }

// sizedConfig is testConfig with the worker's cpu, memory and GPU from the row, its template asking
// cpu 500m (limit 500m: equal), memory 1Gi (limit 4Gi: larger) and ephemeral-storage 1Gi (no limit).
func sizedConfig() *config.Config {
	cfg := testConfig()
	cfg.Job.Container = "worker"
	cfg.Job.RequestsFrom = map[corev1.ResourceName]string{"cpu": "cpus", "memory": "mem", "ephemeral-storage": "disk", "nvidia.com/gpu": "gpus"}
	cfg.Job.MaxRequests = map[corev1.ResourceName]resource.Quantity{"cpu": q("4"), "memory": q("16Gi"), "ephemeral-storage": q("10Gi"), "nvidia.com/gpu": q("2")}
	cfg.Template.Spec.Template.Spec.Containers[0].Resources = corev1.ResourceRequirements{
		Requests: corev1.ResourceList{"cpu": q("500m"), "memory": q("1Gi"), "ephemeral-storage": q("1Gi")},
		Limits:   corev1.ResourceList{"cpu": q("500m"), "memory": q("4Gi")},
	}
	return cfg
}

// TestSizedJob pins what a row's sizes make of the worker's resources: the row's quantities, NULL or an absent column
// the template's, and the limits rule; the sidecar is never changed.
func TestSizedJob(t *testing.T) {
	tpl := sizedConfig().Template.Spec.Template.Spec.Containers[0].Resources
	tests := []struct {
		name string
		cols []rows.Column
		want corev1.ResourceRequirements
	}{
		{"no sizing column: the template's", nil, tpl},
		{"NULL: the template's", []rows.Column{{Name: "cpus", Null: true}, {Name: "mem", Null: true}}, tpl},
		{"an equal limit follows, a larger one is kept, none stays none",
			[]rows.Column{{Name: "cpus", Value: "2"}, {Name: "mem", Value: "2Gi"}, {Name: "disk", Value: "5Gi"}},
			corev1.ResourceRequirements{
				Requests: corev1.ResourceList{"cpu": q("2"), "memory": q("2Gi"), "ephemeral-storage": q("5Gi")},
				Limits:   corev1.ResourceList{"cpu": q("2"), "memory": q("4Gi")},
			}},
		{"a larger limit below the row's request is raised to it",
			[]rows.Column{{Name: "mem", Value: "8Gi"}},
			corev1.ResourceRequirements{
				Requests: corev1.ResourceList{"cpu": q("500m"), "memory": q("8Gi"), "ephemeral-storage": q("1Gi")},
				Limits:   corev1.ResourceList{"cpu": q("500m"), "memory": q("8Gi")},
			}},
		{"smaller than the template: an equal limit follows down",
			[]rows.Column{{Name: "cpus", Value: "0.25"}},
			corev1.ResourceRequirements{
				Requests: corev1.ResourceList{"cpu": q("250m"), "memory": q("1Gi"), "ephemeral-storage": q("1Gi")},
				Limits:   corev1.ResourceList{"cpu": q("250m"), "memory": q("4Gi")},
			}},
		{"an extended resource: limit equal to the request",
			[]rows.Column{{Name: "gpus", Value: "1"}},
			corev1.ResourceRequirements{
				Requests: corev1.ResourceList{"cpu": q("500m"), "memory": q("1Gi"), "ephemeral-storage": q("1Gi"), "nvidia.com/gpu": q("1")},
				Limits:   corev1.ResourceList{"cpu": q("500m"), "memory": q("4Gi"), "nvidia.com/gpu": q("1")},
			}},
		{"rounded up to what the API server keeps",
			[]rows.Column{{Name: "cpus", Value: "0.0001"}, {Name: "mem", Value: "1.5"}},
			corev1.ResourceRequirements{
				Requests: corev1.ResourceList{"cpu": q("1m"), "memory": q("2"), "ephemeral-storage": q("1Gi")},
				Limits:   corev1.ResourceList{"cpu": q("1m"), "memory": q("4Gi")},
			}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := New(sizedConfig(), nil)
			job, err := r.Job(rows.Row{Key: "k", Columns: append([]rows.Column{{Name: "id", Value: "k"}}, tc.cols...)}, 1)
			if err != nil {
				t.Fatal(err)
			}
			cs := job.Spec.Template.Spec.Containers
			if diff := cmp.Diff(tc.want, cs[0].Resources); diff != "" {
				t.Errorf("worker resources (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(corev1.ResourceRequirements{}, cs[1].Resources); diff != "" {
				t.Errorf("sidecar resources changed:\n%s", diff)
			}
		})
	}
}

// TestSizedJobText: the quantity in the Job is written from the number, not the row's text.
func TestSizedJobText(t *testing.T) {
	job, err := New(sizedConfig(), nil).Job(rows.Row{Key: "k", Columns: []rows.Column{{Name: "cpus", Value: "1500m"}, {Name: "mem", Value: "+2048Mi"}}}, 1)
	if err != nil {
		t.Fatal(err)
	}
	res := job.Spec.Template.Spec.Containers[0].Resources.Requests
	if cpu, mem := res.Cpu().String(), res.Memory().String(); cpu != "1500m" || mem != "2Gi" {
		t.Errorf("cpu %s, memory %s; want 1500m, 2Gi", cpu, mem)
	}
}

// TestSizedSkips pins each reason a row's size skips it: a RowError with Size set, naming the resource and the
// column, the value quoted (control bytes escaped, at most 64 bytes of it).
func TestSizedSkips(t *testing.T) {
	tests := []struct {
		name, col, value, want string
	}{
		{"not a quantity", "cpus", "two", `the cpu request (column "cpus") "two" is not a quantity (e.g. 500m, 2Gi)`},
		{"empty", "cpus", "", `the cpu request (column "cpus") "" is not a quantity`},
		{"a control byte is escaped", "mem", "1Gi\x1b[2J", `the memory request (column "mem") "1Gi\x1b[2J" is not a quantity`},
		{"a long value is cut", "mem", strings.Repeat("9", 100) + "x", `(column "mem") "` + strings.Repeat("9", 64) + `"… is not a quantity`},
		{"zero", "cpus", "0", `the cpu request (column "cpus") 0 is not more than 0`},
		{"negative", "mem", "-1Gi", `the memory request (column "mem") -1Gi is not more than 0`},
		{"over maxRequests", "cpus", "4001m", `the cpu request (column "cpus") 4001m is over job.maxRequests.cpu (4)`},
		{"an extended resource over maxRequests", "gpus", "3", `the nvidia.com/gpu request (column "gpus") 3 is over job.maxRequests.nvidia.com/gpu (2)`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := New(sizedConfig(), nil).Job(rows.Row{Key: "k", Columns: []rows.Column{{Name: tc.col, Value: tc.value}}}, 1)
			var re *RowError
			if !errors.As(err, &re) || !re.Size || re.Key != "k" {
				t.Fatalf("error %v (%#v), want a size RowError of k", err, re)
			}
			if !strings.Contains(re.Reason, tc.want) {
				t.Errorf("reason %q, want %q in it", re.Reason, tc.want)
			}
			if strings.ContainsAny(re.Reason, "\x1b\x00\n") {
				t.Errorf("reason %q holds a control byte", re.Reason)
			}
		})
	}
	// At the bound is not over it.
	if _, err := New(sizedConfig(), nil).Job(rows.Row{Key: "k", Columns: []rows.Column{{Name: "cpus", Value: "4"}}}, 1); err != nil {
		t.Errorf("cpu 4 with maxRequests 4: %v", err)
	}
}

// TestSized: the shape of a size is the template with the worker's requests by the limits rule; nil is the template.
func TestSized(t *testing.T) {
	cfg := sizedConfig()
	if got := Sized(cfg.Job, cfg.Template, nil); got != cfg.Template {
		t.Error("Sized with no requests is not the template itself")
	}
	got := Sized(cfg.Job, cfg.Template, corev1.ResourceList{"cpu": q("3")})
	want := corev1.ResourceRequirements{
		Requests: corev1.ResourceList{"cpu": q("3"), "memory": q("1Gi"), "ephemeral-storage": q("1Gi")},
		Limits:   corev1.ResourceList{"cpu": q("3"), "memory": q("4Gi")},
	}
	if diff := cmp.Diff(want, got.Spec.Template.Spec.Containers[0].Resources); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	if cfg.Template.Spec.Template.Spec.Containers[0].Resources.Requests.Cpu().String() != "500m" {
		t.Error("Sized changed the template")
	}
}
