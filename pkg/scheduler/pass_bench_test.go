package scheduler

import (
	"context"
	"fmt"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/jobsched/jobsched/pkg/config"
	"github.com/jobsched/jobsched/pkg/render"
	"github.com/jobsched/jobsched/pkg/testkit"
)

// BenchmarkDryRunPass is one dry-run pass over 10,000 Jobs of one queue (9,000 succeeded and kept, 1,000 failed and
// due for their next attempt) and 200 rows (100 of them the due tasks'), on the fake clientset: what the plan's
// steps cost beside the list (which a real pass streams). Run with -benchmem.
func BenchmarkDryRunPass(b *testing.B) {
	cfg := testConfig(b, func(c *config.Config) { c.GC.SucceededRetention.Duration = 24 * time.Hour })
	var objects []runtime.Object
	var keys []string
	for i := range 10000 {
		key := fmt.Sprintf("k%05d", i)
		if i < 9000 {
			objects = append(objects, makeJob(key).Finished(batchv1.JobComplete, ago(time.Minute)).Obj())
			continue
		}
		objects = append(objects, makeJob(key).Finished(batchv1.JobFailed, ago(time.Hour)).Obj())
		if i < 9100 {
			keys = append(keys, key)
		}
	}
	for i := range 100 {
		keys = append(keys, fmt.Sprintf("new%03d", i))
	}
	client := testkit.NewFake(objects...)
	s := &Scheduler{Config: cfg, Kube: client, Source: &source{Rows: rowsFor(keys...)}, Renderer: render.New(cfg, nil),
		Now: func() time.Time { return now }}
	b.ResetTimer()
	for b.Loop() {
		if _, err := s.Run(context.Background(), DryRun); err != nil {
			b.Fatal(err)
		}
	}
}
