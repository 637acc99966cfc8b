// Package source opens the row sources a configuration's queues read from.
package source

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/jobsched/jobsched/pkg/config"
	"github.com/jobsched/jobsched/pkg/rows"
)

// Postgres opens a source per queue of cfg (in the order of cfg.AllQueues), all on one pool (one *sql.DB), with the
// DSN that DSN reads; the close func releases the pool.
func Postgres(cfg *config.Config) ([]rows.Source, func(), error) {
	dsn, err := DSN(cfg)
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

// File reads queue i's rows from file, or from stdin when file is rows.Stdin.
func File(cfg *config.Config, i int, file string, stdin io.Reader) (rows.Source, error) {
	key := cfg.QueueConfig(i).Source.Key
	var f *rows.File
	var err error
	if file == rows.Stdin {
		f, err = rows.ReadFrom(stdin, "standard input", key, perGroup(cfg, i)...)
	} else {
		f, err = rows.ReadFile(file, key, perGroup(cfg, i)...)
	}
	if err != nil {
		return nil, err
	}
	return f, nil
}

// DSN reads the PostgreSQL DSN from the variable or file the config names, trimmed of surrounding white space (a Secret
// made with --from-file ends in a newline). A relative source.dsnFile is read next to the config file, like
// job.template. It is never logged.
func DSN(cfg *config.Config) (string, error) {
	src := cfg.Source
	if src.DSNFile != "" {
		file := src.DSNFile
		if !filepath.IsAbs(file) {
			file = filepath.Join(filepath.Dir(cfg.File), file)
		}
		data, err := os.ReadFile(file)
		if err != nil {
			return "", &config.Error{Err: fmt.Errorf("source.dsnFile: %w", err)}
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

// perGroup is queue i's limits.perGroup as a source option (none without one).
func perGroup(cfg *config.Config, i int) []rows.Option {
	if g := cfg.AllQueues()[i].Limits.PerGroup; g != nil {
		return []rows.Option{rows.PerGroup{Column: g.Column, Max: g.PassMax()}}
	}
	return nil
}
