package rows

import (
	"context"
	"database/sql"
	"time"
)

// Listening counts the sessions whose application_name is appName (a fill run's listening connection:
// listen.AppName) and when the oldest of them connected: pg_stat_activity shows every session's application_name
// to any role, so the SELECT-only role sees its runs. One statement, in a READ ONLY transaction.
func (p *Postgres) Listening(ctx context.Context, appName string) (n int, since time.Time, err error) {
	err = p.readOnly(ctx, func(tx *sql.Tx) error {
		var oldest sql.NullTime
		if err := tx.QueryRowContext(ctx, `SELECT count(*), min(backend_start) FROM pg_stat_activity WHERE application_name = $1`,
			appName).Scan(&n, &oldest); err != nil {
			return err
		}
		since = oldest.Time
		return nil
	})
	return n, since, err
}
