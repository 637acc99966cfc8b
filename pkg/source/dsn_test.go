package source

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/jobsched/jobsched/pkg/config"
)

// TestReadDSN: an empty dsnFile is exit 2 saying so (not lib/pq's defaults); a relative dsnFile is read next to the
// config file, like job.template; the variable's trailing newline (a Secret made --from-file) is trimmed like the
// file's.
func TestReadDSN(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("dsn", "postgres://u:pw@h/db\n")
	write("empty", " \n")
	t.Chdir(t.TempDir()) // the working directory is not the config's
	cfgFile := filepath.Join(dir, "jobsched.yaml")
	for _, tc := range []struct {
		name, file, env string
		want, err       string
	}{
		{name: "relative to the config file", file: "dsn", want: "postgres://u:pw@h/db"},
		{name: "absolute", file: filepath.Join(dir, "dsn"), want: "postgres://u:pw@h/db"},
		{name: "empty file", file: "empty", err: "source.dsnFile: " + filepath.Join(dir, "empty") + " is empty"},
		{name: "missing file", file: "none", err: filepath.Join(dir, "none")},
		{name: "variable with a newline", env: "postgres://u:pw@h/db\n", want: "postgres://u:pw@h/db"},
		{name: "variable of spaces", env: " \n", err: "DATABASE_URL is empty or not set"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("DATABASE_URL", tc.env)
			cfg := &config.Config{File: cfgFile, Source: config.Source{DSNEnv: "DATABASE_URL", DSNFile: tc.file}}
			if tc.file != "" {
				cfg.Source.DSNEnv = ""
			}
			got, err := DSN(context.Background(), cfg)
			if tc.err != "" {
				if err == nil || !config.IsConfigError(err) || !strings.Contains(err.Error(), tc.err) {
					t.Errorf("DSN = %q, %v; want a configuration error with %q", got, err, tc.err)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Errorf("DSN = %q, %v; want %q", got, err, tc.want)
			}
		})
	}
}
