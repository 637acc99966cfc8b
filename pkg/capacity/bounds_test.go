package capacity

import (
	"math"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	"github.com/jobsched/jobsched/pkg/config"
)

// TestPlacerHugeCounts: counts the API server allows (a Job's parallelism is an int32; the podless pods of many
// such Jobs add up) neither overflow the placer's products nor keep it counting pods that fit nowhere: a pod
// beyond the quota or the nodes does not fit, and the placer is made at once.
func TestPlacerHugeCounts(t *testing.T) {
	wide := func(j *batchv1.Job) { j.Spec.Parallelism = ptr.To[int32](math.MaxInt32) }
	big := func(s *corev1.PodSpec) { s.Containers[0].Resources.Requests = rl("cpu", "1", "memory", "64Gi") }
	memQuota := func() *Snapshot {
		return withQuotas(&Snapshot{Mode: config.CapacityQuota}, quota("mem", rl("requests.memory", "100Gi"), rl("requests.memory", "0")))
	}
	tests := []struct {
		name   string
		snap   *Snapshot
		claims []Claim
	}{
		{"the podless pods of many Jobs on a node that holds two", nodes(node("n1")),
			[]Claim{{Template: job(cpus("2")), Podless: math.MaxInt}}},
		{"a Job of MaxInt32 pods of 64Gi against a 100Gi quota", memQuota(), []Claim{{Template: job(spec(big), wide)}}},
		{"podless pods of 64Gi past a 100Gi quota", memQuota(), []Claim{{Template: job(spec(big)), Podless: math.MaxInt32}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := NewPlacer(tt.snap, tt.claims)
			if p.Place(0) {
				t.Errorf("a Job was placed; report %+v", p.Report(0))
			}
			if r := p.Report(0); r.Fit != 0 {
				t.Errorf("report %+v, want 0 fit", r)
			}
		})
	}
}
