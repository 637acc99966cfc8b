package rows

import (
	"strings"

	"github.com/lib/pq"

	"github.com/jobsched/jobsched/pkg/config"
)

// Share is a Postgres that reads src's query (a queue's) on p's connection pool: the queues of one install share one
// *sql.DB, its one connection and its turn (one read at a time), so a pass opens one connection however many queues
// it reads. opts may give the queue's PerGroup. Closing p closes the pool of both; a shared one need not be closed.
func (p *Postgres) Share(src config.Source, opts ...Option) (*Postgres, error) {
	o, err := buildOptions(opts)
	if err != nil {
		return nil, err
	}
	q := &Postgres{
		db:      p.db,
		query:   strings.TrimRight(strings.TrimSpace(src.Query), "; \t\n"),
		key:     pq.QuoteIdentifier(src.Key),
		keyName: src.Key,
		timeout: src.Timeout.Duration,
		guard:   p.guard,
		secrets: p.secrets,
		connect: p.connect,
		turn:    p.turn,
		group:   o.group,
	}
	if o.group != nil {
		q.groupCol = pq.QuoteIdentifier(o.group.Column)
	}
	return q, nil
}
