package rows

import (
	"testing"

	"github.com/jobsched/jobsched/pkg/config"
)

// TestShare: the queues' sources share one pool and its turn; each has its own query, key, timeout and group.
func TestShare(t *testing.T) {
	p, err := OpenPostgres("postgres://u:pw@127.0.0.1:1/db", config.Source{Query: "SELECT id FROM a;", Key: "id"})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	q, err := p.Share(config.Source{Query: "SELECT id, tenant FROM b ;", Key: "ID"}, PerGroup{Column: "tenant", Max: 2})
	if err != nil {
		t.Fatal(err)
	}
	if q.pool != p.pool {
		t.Error("the shared source has a pool, turn or guard of its own")
	}
	if q.query != "SELECT id, tenant FROM b" || q.key != `"ID"` || q.keyName != "ID" || q.group == nil || q.groupCol != `"tenant"` {
		t.Errorf("shared source = query %q key %q group %v %q", q.query, q.key, q.group, q.groupCol)
	}
	if p.group != nil || p.query != "SELECT id FROM a" {
		t.Errorf("the pool's own source changed: query %q group %v", p.query, p.group)
	}
	if _, err := p.Share(config.Source{Query: "q", Key: "id"}, PerGroup{Column: "tenant", Max: 0}); err == nil {
		t.Error("a PerGroup of Max 0 is accepted")
	}
}
