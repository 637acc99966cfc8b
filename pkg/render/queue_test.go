package render

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/jobsched/jobsched/pkg/config"
	"github.com/jobsched/jobsched/pkg/jobmeta"
	"github.com/jobsched/jobsched/pkg/rows"
)

// queueConfig is testConfig as the view of an explicit queue "exports" (config.QueueConfig), with perGroup when
// group is set.
func queueConfig(group *config.PerGroup) *config.Config {
	cfg := testConfig()
	cfg.QueueName = "exports"
	cfg.Queues = []config.Queue{{Name: "exports", Limits: config.QueueLimits{PerGroup: group}}}
	return cfg
}

// TestQueueAndGroupMeta: an explicit queue's Jobs and pods carry its label; with limits.perGroup they carry the
// group exactly in an annotation, and as a label when it is a valid label value, else hashed.
func TestQueueAndGroupMeta(t *testing.T) {
	long := strings.Repeat("t", 64)
	tests := []struct {
		name       string
		group      *config.PerGroup
		rowGroup   string
		wantLabels map[string]string // jobsched's queue and group labels on Job and pod
		wantAnnot  *string           // the group annotation; nil: none
		wantRowErr string
	}{
		{"queue, no perGroup", nil, "ignored", map[string]string{jobmeta.LabelQueue: "exports"}, nil, ""},
		{"a group that is a label value", &config.PerGroup{Column: "tenant", MaxActive: 2}, "acme",
			map[string]string{jobmeta.LabelQueue: "exports", jobmeta.LabelGroup: "acme"}, ptr("acme"), ""},
		{"NULL is the empty group", &config.PerGroup{Column: "tenant", MaxActive: 2}, "",
			map[string]string{jobmeta.LabelQueue: "exports", jobmeta.LabelGroup: ""}, ptr(""), ""},
		{"not a label value: hashed", &config.PerGroup{Column: "tenant", MaxActive: 2}, "Acme Corp/EU",
			map[string]string{jobmeta.LabelQueue: "exports", jobmeta.LabelGroup: GroupLabel("Acme Corp/EU")}, ptr("Acme Corp/EU"), ""},
		{"too long for a label: hashed", &config.PerGroup{Column: "tenant", MaxActive: 2}, long,
			map[string]string{jobmeta.LabelQueue: "exports", jobmeta.LabelGroup: GroupLabel(long)}, ptr(long), ""},
		{"not UTF-8", &config.PerGroup{Column: "tenant", MaxActive: 2}, "a\xffb", nil, nil, "the group (column tenant) is not valid UTF-8"},
		{"exactly 1024 bytes: hashed", &config.PerGroup{Column: "tenant", MaxActive: 2}, strings.Repeat("x", 1024),
			map[string]string{jobmeta.LabelQueue: "exports", jobmeta.LabelGroup: GroupLabel(strings.Repeat("x", 1024))}, ptr(strings.Repeat("x", 1024)), ""},
		{"over 1024 bytes", &config.PerGroup{Column: "tenant", MaxActive: 2}, strings.Repeat("x", 1025), nil, nil,
			"the group (column tenant) is 1025 bytes; it may hold at most 1024"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := New(queueConfig(tc.group), nil)
			job, err := r.Job(rows.Row{Key: "42", Columns: []rows.Column{{Name: "id", Value: "42"}}, Group: tc.rowGroup}, 1)
			var rowErr *RowError
			if tc.wantRowErr != "" {
				if !errors.As(err, &rowErr) || rowErr.Reason != tc.wantRowErr {
					t.Fatalf("error %v, want the row skipped: %s", err, tc.wantRowErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			for _, labels := range []map[string]string{job.Labels, job.Spec.Template.Labels} {
				got := map[string]string{}
				for _, k := range []string{jobmeta.LabelQueue, jobmeta.LabelGroup} {
					if v, ok := labels[k]; ok {
						got[k] = v
					}
				}
				if diff := cmp.Diff(tc.wantLabels, got); diff != "" {
					t.Errorf("labels (-want +got):\n%s", diff)
				}
			}
			for _, annots := range []map[string]string{job.Annotations, job.Spec.Template.Annotations} {
				v, ok := annots[jobmeta.AnnotationGroup]
				if ok != (tc.wantAnnot != nil) || ok && v != *tc.wantAnnot {
					t.Errorf("group annotation %q (%v), want %v", v, ok, tc.wantAnnot)
				}
			}
		})
	}
}

// TestGroupLabel: a hashed group label is a valid label value, "h-" and 16 hex digits, the same for the same group.
func TestGroupLabel(t *testing.T) {
	got := GroupLabel("Acme Corp/EU")
	if len(got) != 18 || !strings.HasPrefix(got, "h-") || got != GroupLabel("Acme Corp/EU") || got == GroupLabel("Acme Corp/US") {
		t.Errorf("GroupLabel = %q", got)
	}
}

// TestImplicitQueueHasNoQueueLabel: a configuration without queues: renders today's Jobs: no queue label.
func TestImplicitQueueHasNoQueueLabel(t *testing.T) {
	job, err := New(testConfig(), nil).Job(rows.Row{Key: "42", Columns: []rows.Column{{Name: "id", Value: "42"}}}, 1)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := job.Labels[jobmeta.LabelQueue]; ok {
		t.Errorf("labels %v: the implicit queue has no queue label", job.Labels)
	}
}

func ptr(s string) *string { return &s }
