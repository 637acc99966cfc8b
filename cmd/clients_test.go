package cmd

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"k8s.io/client-go/dynamic"

	"github.com/jobsched/jobsched/pkg/kube"
	"github.com/jobsched/jobsched/pkg/testkit"
)

// TestDynamicClientOnlyForKueue: the client of Kueue's objects is built only for limits.capacity: kueue; a
// configuration that does not use Kueue pays nothing for it (issue 33).
func TestDynamicClientOnlyWhenTheModeNeedsIt(t *testing.T) {
	job, err := os.ReadFile(filepath.Join("testdata", "job.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		capacity string
		want     bool
	}{{"off", false}, {"nodes", false}, {"kueue", true}, {"autoscale", true}} {
		t.Run(tc.capacity, func(t *testing.T) {
			dir := t.TempDir()
			cfg := "name: reports\nnamespace: batch\nsource: {query: SELECT id FROM tasks, key: id}\njob: {template: job.yaml}\n" +
				"limits: {maxActive: 5, capacity: " + tc.capacity + "}\n"
			if tc.capacity == "kueue" {
				cfg += "kueue: {localQueue: team-a}\n"
			}
			for name, b := range map[string][]byte{"jobsched.yaml": []byte(cfg), "job.yaml": job} {
				if err := os.WriteFile(filepath.Join(dir, name), b, 0o600); err != nil {
					t.Fatal(err)
				}
			}
			built := false
			g := &globalOptions{configFile: filepath.Join(dir, "jobsched.yaml"),
				newKube:    func(kube.Options) (kube.Interface, string, error) { return testkit.NewFake(), "", nil },
				newDynamic: func(kube.Options) (dynamic.Interface, error) { built = true; return nil, nil }}
			s, closeFn, err := g.newScheduler(context.Background(), schedulerOptions{})
			if err != nil {
				t.Fatal(err)
			}
			defer closeFn()
			if s.Kube == nil || built != tc.want {
				t.Errorf("limits.capacity %s: the Kubernetes client built: %v, the dynamic client built: %v (want %v)", tc.capacity, s.Kube != nil, built, tc.want)
			}
		})
	}
}
