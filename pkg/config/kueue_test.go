package config

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

const kueueMinimal = minimal + `limits:
  capacity: kueue
kueue:
  localQueue: team-a
`

// suspended and multiKueue are templates only limits.capacity: kueue accepts.
const (
	suspended = `apiVersion: batch/v1
kind: Job
spec:
  suspend: true
  template:
    spec:
      restartPolicy: Never
      containers: [{name: w, image: i}]
`
	multiKueue = `apiVersion: batch/v1
kind: Job
spec:
  managedBy: kueue.x-k8s.io/multikueue
  template:
    spec:
      restartPolicy: Never
      containers: [{name: w, image: i}]
`
	queueLabel = `apiVersion: batch/v1
kind: Job
metadata:
  labels:
    kueue.x-k8s.io/queue-name: other
spec:
  template:
    spec:
      restartPolicy: Never
      containers: [{name: w, image: i}]
`
)

func TestKueueLoad(t *testing.T) {
	tests := []struct {
		name      string
		config    string
		job       string
		want      Kueue
		maxQueued int
	}{
		{"defaults", kueueMinimal, "", Kueue{LocalQueue: "team-a"}, 10},
		{"maxQueued and priority", strings.Replace(kueueMinimal, "capacity: kueue", "capacity: kueue\n  maxQueued: 3", 1) +
			"  priorityClass: high\n  priorityColumn: prio\n", "", Kueue{LocalQueue: "team-a", PriorityClass: "high", PriorityColumn: "prio"}, 3},
		{"maxQueued follows maxPerTick", strings.Replace(kueueMinimal, "capacity: kueue", "capacity: kueue\n  maxPerTick: 4", 1), "", Kueue{LocalQueue: "team-a"}, 4},
		{"a suspended template", kueueMinimal, suspended, Kueue{LocalQueue: "team-a"}, 10},
		{"MultiKueue's managedBy", kueueMinimal, multiKueue, Kueue{LocalQueue: "team-a"}, 10},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			files := map[string]string{"jobsched.yaml": tc.config}
			if tc.job != "" {
				files["job.yaml"] = tc.job
			}
			cfg, err := Load(write(t, files), "")
			if err != nil {
				t.Fatal(err)
			}
			if !cfg.KueueMode() {
				t.Error("KueueMode() is false")
			}
			if diff := cmp.Diff(&tc.want, cfg.Kueue); diff != "" {
				t.Errorf("kueue (-want +got):\n%s", diff)
			}
			if got := cfg.MaxQueued(); got != tc.maxQueued {
				t.Errorf("MaxQueued() = %d, want %d", got, tc.maxQueued)
			}
		})
	}
}

func TestKueueErrors(t *testing.T) {
	tests := []struct {
		name   string
		config string
		job    string
		want   []string
	}{
		{"no localQueue", minimal + "limits:\n  capacity: kueue\n", "", []string{"kueue.localQueue: required with limits.capacity: kueue"}},
		{"kueue keys in another mode", minimal + "limits:\n  maxQueued: 3\nkueue:\n  localQueue: q\n", "",
			[]string{"kueue: is read only with limits.capacity: kueue (it is nodes)", "limits.maxQueued: is read only with limits.capacity: kueue"}},
		{"negative maxQueued", strings.Replace(kueueMinimal, "capacity: kueue", "capacity: kueue\n  maxQueued: -1", 1), "", []string{"limits.maxQueued: must not be negative"}},
		{"bad names", strings.Replace(kueueMinimal, "team-a", "Team_A", 1) + "  priorityClass: " + strings.Repeat("p", 64) + "\n", "",
			[]string{`kueue.localQueue: "Team_A" is not a valid name`, "kueue.priorityClass: ", "is not a valid label value"}},
		{"unknown kueue key", kueueMinimal + "  clusterQueue: x\n", "", []string{"unknown key(s): kueue.clusterQueue"}},
		{"suspended template without kueue", minimal, suspended, []string{"spec.suspend: must not be true"}},
		{"MultiKueue without kueue", minimal, multiKueue, []string{"spec.managedBy: must be empty or kubernetes.io/job-controller"}},
		{"another managedBy with kueue", kueueMinimal, strings.Replace(multiKueue, "kueue.x-k8s.io/multikueue", "example.com/mine", 1), []string{"spec.managedBy:"}},
		{"queue label in the template", kueueMinimal, queueLabel, []string{"metadata.labels: must not set kueue.x-k8s.io/queue-name"}},
		{"queue label without kueue", minimal, queueLabel, []string{"metadata.labels: must not set kueue.x-k8s.io/queue-name"}},
		{"mode named in the capacity error", minimal + "limits:\n  capacity: lots\n", "", []string{"not one of nodes, quota, off, kueue"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			loadFails(t, tc.config, tc.job, tc.want)
		})
	}
}
