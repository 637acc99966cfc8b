package rows

import (
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
	return p.pool.source(src, o), nil
}
