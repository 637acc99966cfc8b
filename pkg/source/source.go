// Package source opens the row sources a configuration's queues read from.
package source

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/jobsched/jobsched/pkg/config"
	"github.com/jobsched/jobsched/pkg/input"
	"github.com/jobsched/jobsched/pkg/pgdsn"
	"github.com/jobsched/jobsched/pkg/rows"
)

// Postgres opens a source per queue of cfg (in the order of cfg.AllQueues), all on one pool (one *sql.DB), with the
// DSN that DSN reads; the close func releases the pool.
func Postgres(ctx context.Context, cfg *config.Config) ([]rows.Source, func(), error) {
	dsn, err := DSN(ctx, cfg)
	if err != nil {
		return nil, nil, err
	}
	srcs := make([]rows.Source, len(cfg.AllQueues()))
	var pool *rows.Postgres
	for i := range srcs {
		src := cfg.QueueConfig(i).Source
		var pg *rows.Postgres
		if pool == nil {
			pg, err = rows.OpenPostgres(dsn, src, perGroup(cfg, i)...)
			pool = pg
		} else {
			pg, err = pool.Share(src, perGroup(cfg, i)...)
		}
		if err != nil {
			if pool != nil {
				_ = pool.Close()
			}
			return nil, nil, err
		}
		srcs[i] = pg
	}
	return srcs, func() { _ = pool.Close() }, nil
}

// File reads queue i's rows from file, or from stdin when file is rows.Stdin, under ctx (rows.ReadFileContext).
func File(ctx context.Context, cfg *config.Config, i int, file string, stdin io.Reader) (rows.Source, error) {
	f, err := rows.ReadFileContext(ctx, file, stdin, cfg.QueueConfig(i).Source.Key, perGroup(cfg, i)...)
	if err != nil {
		return nil, err
	}
	return f, nil
}

// maxDSN bounds source.dsnFile: a DSN is a line (its certificates are files it names).
const maxDSN = 64 << 10

// DSN reads the PostgreSQL DSN from the variable or file the config names, trimmed of surrounding white space (a Secret
// made with --from-file ends in a newline). A relative source.dsnFile is read next to the config file, like
// job.template. It is never logged.
func DSN(ctx context.Context, cfg *config.Config) (string, error) {
	src := cfg.Source
	if src.DSNFile != "" {
		file := src.DSNFile
		if !filepath.IsAbs(file) {
			file = filepath.Join(filepath.Dir(cfg.File), file)
		}
		data, err := input.ReadFile(ctx, file, maxDSN)
		if err != nil {
			err = fmt.Errorf("source.dsnFile: %w", err)
			if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
				return "", err
			}
			return "", &config.Error{Err: err}
		}
		dsn := strings.TrimSpace(string(data))
		if dsn == "" {
			return "", &config.Error{Err: fmt.Errorf("source.dsnFile: %s is empty: it must hold the PostgreSQL DSN, e.g. postgres://user:password@host:5432/db", file)}
		}
		return dsn, nil
	}
	dsn := strings.TrimSpace(os.Getenv(src.DSNEnv))
	if dsn == "" {
		return "", &config.Error{Err: fmt.Errorf("source.dsnEnv: the environment variable %s is empty or not set", src.DSNEnv)}
	}
	return dsn, nil
}

// Password is the password of the DSN the config names, "" when there is none or no DSN can be read (a dry-run
// with --rows needs none): what env.passthrough must never copy into a Job.
func Password(ctx context.Context, cfg *config.Config) string {
	dsn, err := DSN(ctx, cfg)
	if err != nil {
		return ""
	}
	c, err := pgdsn.Parse(dsn)
	if err != nil {
		return ""
	}
	return c.Password
}

// perGroup is queue i's limits.perGroup as a source option (none without one).
func perGroup(cfg *config.Config, i int) []rows.Option {
	if g := cfg.AllQueues()[i].Limits.PerGroup; g != nil {
		return []rows.Option{rows.PerGroup{Column: g.Column, Max: g.PassMax()}}
	}
	return nil
}
