package cmd

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestPassthroughOfTheDatabasePassword (issue 58, finding 6): env.passthrough names the variables it copies, and
// the DSN's own variable is never copied; a variable that holds the DSN under another name (APP_DB) put the
// database's password into every Job, dry-run -o yaml and status KEY. A passthrough value that holds the DSN's
// password (as written, or percent-encoded) is refused by value, naming the variable: exit 2 before anything is
// contacted, and the password shown nowhere.
func TestPassthroughOfTheDatabasePassword(t *testing.T) {
	const password = "S3cr3t/pw"
	dir := t.TempDir()
	data, err := os.ReadFile("testdata/jobsched.yaml")
	if err != nil {
		t.Fatal(err)
	}
	tpl, err := os.ReadFile("testdata/job.yaml")
	if err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(dir, "jobsched.yaml")
	if err := os.WriteFile(cfg, []byte(strings.Replace(string(data), `passthrough: ["S3_*"]`, `passthrough: ["S3_*", "APP_*"]`, 1)), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "job.yaml"), tpl, 0o600); err != nil {
		t.Fatal(err)
	}
	rowsFile, err := filepath.Abs("testdata/rows.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("DATABASE_URL", "postgres://jobsched:S3cr3t%2Fpw@db.example:5432/app")
	t.Setenv("S3_BUCKET", "bucket")
	for _, tc := range []struct{ name, value string }{
		{"the DSN as it is", "postgres://jobsched:S3cr3t%2Fpw@db.example:5432/app"},
		{"the password alone", "S3cr3t/pw"},
		{"in a key=value DSN", "host=db.example password=S3cr3t/pw"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("APP_DB", tc.value)
			code, out, stderr := runCmd(t, "dry-run", "--offline", "--rows", rowsFile, "--config", cfg, "-o", "yaml")
			if code != 2 || !strings.Contains(stderr, "env.passthrough: APP_DB holds the database's password") {
				t.Errorf("exit %d, want 2 naming APP_DB:\n%s", code, stderr)
			}
			if strings.Contains(out+stderr, password) || strings.Contains(out+stderr, "S3cr3t%2Fpw") {
				t.Errorf("the output shows the password:\n%s\n%s", out, stderr)
			}
		})
	}
	t.Run("a value without it is copied", func(t *testing.T) {
		t.Setenv("APP_DB", "postgres://reports@db.example:5432/app")
		if code, _, stderr := runCmd(t, "dry-run", "--offline", "--rows", rowsFile, "--config", cfg, "-o", "yaml"); code != 0 {
			t.Errorf("exit %d, want 0:\n%s", code, stderr)
		}
	})
}
