package rows

import (
	"testing"
	"time"

	"github.com/jobsched/jobsched/pkg/config"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestShare: the queues' sources share one pool and its turn; each has its own query, key, timeout and group.
func TestShare(t *testing.T) {
	p, err := OpenPostgres("postgres://u:pw@127.0.0.1:1/db", config.Source{Query: "SELECT id FROM a;", Key: "id"})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	q, err := p.Share(config.Source{Query: "SELECT id, tenant FROM b ;", Key: "ID", Timeout: metav1.Duration{Duration: 7 * time.Second}},
		PerGroup{Column: "tenant", Max: 2})
	if err != nil {
		t.Fatal(err)
	}
	if q.pool != p.pool {
		t.Error("the shared source has a pool, turn or guard of its own")
	}
	if q.query != "SELECT id, tenant FROM b" || q.key != `"ID"` || q.keyName != "ID" || q.timeout != 7*time.Second ||
		q.group == nil || q.groupCol != `"tenant"` {
		t.Errorf("shared source = query %q key %q timeout %s group %v %q", q.query, q.key, q.timeout, q.group, q.groupCol)
	}
	if p.group != nil || p.query != "SELECT id FROM a" || p.timeout != 0 {
		t.Errorf("the pool's own source changed: query %q timeout %s group %v", p.query, p.timeout, p.group)
	}
	if _, err := p.Share(config.Source{Query: "q", Key: "id"}, PerGroup{Column: "tenant", Max: 0}); err == nil {
		t.Error("a PerGroup of Max 0 is accepted")
	}
}
