package config

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// TestSizesProblems pins each error of job.requestsFrom and job.maxRequests: each names its key, in the file's words.
func TestSizesProblems(t *testing.T) {
	two := strings.Replace(tpl(""), "image: worker:1\n", "image: worker:1\n      - name: sidecar\n        image: side:1\n", 1)
	tests := []struct {
		name, sizes, job string
		want             []string
	}{
		{"a resource without maxRequests", "  requestsFrom: {cpu: cpus, memory: mem}\n  maxRequests: {cpu: 4}\n", "",
			[]string{"job.maxRequests.memory: required with job.requestsFrom.memory: the most one row may ask (e.g. memory: 16Gi)"}},
		{"not a resource name", "  requestsFrom: {gpu: g, kubernetes.io/x: x}\n  maxRequests: {gpu: 1, kubernetes.io/x: 1}\n", "",
			[]string{`job.requestsFrom: "gpu" is not a resource a container requests`,
				`job.requestsFrom: "kubernetes.io/x" is not a resource a container requests`}},
		{"a bad hugepages size", "  requestsFrom: {hugepages-big: h}\n  maxRequests: {hugepages-big: 1Gi}\n", "",
			[]string{`job.requestsFrom: "hugepages-big" is not a resource`}},
		{"maxRequests of a bad name without requestsFrom", "  maxRequests: {\"a b\": 1}\n", "",
			[]string{`job.maxRequests: "a b" is read only with job.requestsFrom naming it`}},
		{"maxRequests not a quantity", "  requestsFrom: {cpu: cpus}\n  maxRequests: {cpu: 4 cores}\n", "",
			[]string{`job.maxRequests.cpu: "4 cores" is not a quantity (e.g. 500m, 2Gi)`}},
		{"maxRequests zero", "  requestsFrom: {cpu: cpus}\n  maxRequests: {cpu: 0}\n", "",
			[]string{"job.maxRequests.cpu: must be more than 0, not 0"}},
		{"maxRequests negative", "  requestsFrom: {memory: mem}\n  maxRequests: {memory: -1Gi}\n", "",
			[]string{"job.maxRequests.memory: must be more than 0, not -1Gi"}},
		{"maxRequests out of range", "  requestsFrom: {cpu: cpus}\n  maxRequests: {cpu: 2E}\n", "",
			[]string{"job.maxRequests.cpu: 2E is more than 1E"}},
		{"maxRequests without requestsFrom", "  maxRequests: {cpu: 4}\n", "",
			[]string{"job.maxRequests.cpu: is read only with job.requestsFrom.cpu"}},
		{"an empty column name", "  requestsFrom: {cpu: \"\"}\n  maxRequests: {cpu: 4}\n", "",
			[]string{"job.requestsFrom.cpu: the column name is empty"}},
		{"backfill without requestsFrom", "  backfill: {since: created_at, maxWait: 10m}\n", "",
			[]string{"job.backfill: is read only with job.requestsFrom"}},
		{"backfill without its column or wait", "  requestsFrom: {cpu: cpus}\n  maxRequests: {cpu: 4}\n  backfill: {maxWait: 0s}\n", "",
			[]string{"job.backfill.since: name the column", "job.backfill.maxWait: must be more than 0"}},
		{"backfill with a negative wait", "  requestsFrom: {cpu: cpus}\n  maxRequests: {cpu: 4}\n  backfill: {since: t, maxWait: -1m}\n", "",
			[]string{"job.backfill.maxWait: must be more than 0"}},
		{"several containers and no job.container", "  requestsFrom: {cpu: cpus}\n  maxRequests: {cpu: 4}\n", two,
			[]string{"job.requestsFrom: the template has 2 containers: set job.container"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			loadFails(t, minimal+tc.sizes, tc.job, tc.want)
		})
	}
}

// TestSizesModes: every capacity mode takes job.requestsFrom, at the top level and in a queue.
func TestSizesModes(t *testing.T) {
	sized := minimal + "  requestsFrom: {cpu: cpus}\n  maxRequests: {cpu: 4}\n"
	queues := "name: reports\nlimits: {capacity: autoscale}\nqueues:\n- name: big\n  source: {query: SELECT id FROM t, key: id}\n" +
		"  job: {template: job.yaml, requestsFrom: {cpu: cpus}, maxRequests: {cpu: 4}}\n"
	if _, err := Load(write(t, map[string]string{"jobsched.yaml": queues}), ""); err != nil {
		t.Errorf("a sized queue with autoscale: %v", err)
	}
	for _, mode := range []string{"nodes", "quota", "off", "autoscale"} {
		if _, err := Load(write(t, map[string]string{"jobsched.yaml": sized + "limits: {capacity: " + mode + "}\n"}), ""); err != nil {
			t.Errorf("%s: %v", mode, err)
		}
	}
}

// TestSizesDecoded checks what a valid sizing decodes to, in a queue too (QueueConfig carries it), with
// job.container naming the worker among several containers.
func TestSizesDecoded(t *testing.T) {
	two := strings.Replace(tpl(""), "image: worker:1\n", "image: worker:1\n      - name: sidecar\n        image: side:1\n", 1)
	file := write(t, map[string]string{"job.yaml": two, "jobsched.yaml": "name: reports\nqueues:\n- name: big\n" +
		"  source: {query: SELECT id FROM t, key: id}\n" +
		"  job: {template: job.yaml, container: worker, requestsFrom: {cpu: cpus, nvidia.com/gpu: gpus}, maxRequests: {cpu: 8, nvidia.com/gpu: 2}}\n"})
	cfg, err := Load(file, "")
	if err != nil {
		t.Fatal(err)
	}
	job := cfg.QueueConfig(0).Job
	want := Job{Template: "job.yaml", Container: "worker", NamePrefix: "reports-big",
		RequestsFrom: map[corev1.ResourceName]string{"cpu": "cpus", "nvidia.com/gpu": "gpus"},
		MaxRequests:  map[corev1.ResourceName]resource.Quantity{"cpu": resource.MustParse("8"), "nvidia.com/gpu": resource.MustParse("2")}}
	if diff := cmp.Diff(want, job); diff != "" {
		t.Errorf("job (-want +got):\n%s", diff)
	}
	if got := job.SizedResources(); !cmp.Equal(got, []corev1.ResourceName{"cpu", "nvidia.com/gpu"}) {
		t.Errorf("SizedResources = %v", got)
	}
	if w := job.Worker(cfg.QueueConfig(0).Template.Spec.Template.Spec.Containers); w != 0 {
		t.Errorf("Worker = %d, want 0", w)
	}
}
