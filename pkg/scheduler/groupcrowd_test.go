package scheduler

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jobsched/jobsched/pkg/jobmeta"
	"github.com/jobsched/jobsched/pkg/rate"
)

// TestGroupsCrowdingFailsClosed (issue 58, finding 4): 135 rows with unique 1,000-byte tenant values pushed 7 of 20
// real tenants out of the Lease's record, which switched their perGroup.rate off. A group's scope in the record is
// bounded whatever its value (a long value is keyed by its hash), and the groups a full record leaves out are not
// forgotten: the record says until when its queue's groups are unknown, and the queue creates nothing until then.
func TestGroupsCrowdingFailsClosed(t *testing.T) {
	if scope := rate.GroupScope("a", strings.Repeat("x", 1000)); len(scope) > 80 {
		t.Errorf("a 1,000-byte group's scope is %d bytes: %.90s…", len(scope), scope)
	}
	cfg := queuesConfig(t, "maxActive: 20", queue("a", "  limits: {perGroup: {column: tenant, maxActive: 5, rate: {creates: 1, per: 5m}}}\n"))
	gl := rate.Limit{Creates: 1, Per: 5 * time.Minute}
	rec := &rate.Record{}
	for i := range 40 {
		w := rate.NewWindow(gl)
		w.Add(now.Add(-time.Duration(i)*time.Second), 1)
		rec.Set(rate.GroupScope("a", fmt.Sprintf("tenant-%02d", i)), w)
	}
	value, dropped, err := rec.Encode(1 << 10) // room for some of the 40 groups only
	if err != nil {
		t.Fatal(err)
	}
	if len(dropped) == 0 || len(value) > 1<<10 {
		t.Fatalf("%d groups left out of a %d-byte record: the test wants some left out", len(dropped), len(value))
	}
	read, err := rate.DecodeRecord(value)
	if err != nil {
		t.Fatal(err)
	}
	p := Decide(cfg, &Observation{Now: now, Windows: Windows{Record: read}})
	if p.Queues[0].Slots != 0 {
		t.Errorf("the queue's slots %d (%s) with groups left out of the record, want 0 until their windows end", p.Queues[0].Slots, p.Queues[0].Limit)
	}
	var newest time.Time
	for _, scope := range dropped {
		if l := rec.Window(scope).Last(); l.After(newest) {
			newest = l
		}
	}
	if next := p.parts[0].nextCreate; !next.Equal(newest.Add(gl.Per)) {
		t.Errorf("next create %v, want when the newest left-out group's window ends (%v)", next, newest.Add(gl.Per))
	}
	// A long value is recorded by its hash: a Job that names it resolves it, else its queue waits for its window.
	long := strings.Repeat("x", 1000)
	hashed := recordOf(t, gl, rate.GroupScope("a", long), 1, now.Add(-time.Second))
	if p := Decide(cfg, &Observation{Now: now, Windows: Windows{Record: hashed}}); p.Queues[0].Slots != 0 {
		t.Errorf("a hashed group no Job names: the queue's slots %d, want 0", p.Queues[0].Slots)
	}
	job := SummarizeJob(makeJob("x").Queue("a").Annotation(jobmeta.AnnotationGroup, long).Obj())
	job.Created = now.Add(-time.Second)
	p = Decide(cfg, &Observation{Now: now, Jobs: []JobSummary{job}, Windows: Windows{Record: hashed}})
	if p.Queues[0].Slots == 0 || p.parts[0].groupRoom[long] != 0 {
		t.Errorf("a hashed group a Job names: the queue's slots %d, its room %v; want the queue open and the group full", p.Queues[0].Slots, p.parts[0].groupRoom)
	}
}
