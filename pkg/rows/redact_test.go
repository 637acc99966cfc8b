package rows

import (
	"errors"
	"strings"
	"testing"

	"github.com/jobsched/jobsched/pkg/config"
	"github.com/jobsched/jobsched/pkg/pgdsn"
)

// TestDSNErrorsAreConfigurationErrors checks that the errors pgdsn says of a DSN reach the caller as configuration
// errors (exit 2), before anything is contacted, and that a configuration error stays one when redacted.
func TestDSNErrorsAreConfigurationErrors(t *testing.T) {
	for _, dsn := range []string{"postgress://u:S3cr3tPw@db/app", "host=db port=abc password=S3cr3tPw"} {
		p, err := OpenPostgres(dsn, config.Source{Query: "SELECT 1 AS id", Key: "id"})
		if err == nil {
			p.Close()
			t.Fatalf("OpenPostgres(%q) succeeded, want an error", dsn)
		}
		if !config.IsConfigError(err) || strings.Contains(err.Error(), "S3cr3tPw") {
			t.Errorf("OpenPostgres(%q) = %v (configuration error: %v); want a configuration error without the password",
				dsn, err, config.IsConfigError(err))
		}
	}
	dsn := "postgres://app:S3cr3t%2FPw@db.example:5432/app"
	p := &Postgres{pool: &pool{secrets: pgdsn.Secrets(dsn, "S3cr3t/Pw")}}
	if got := p.redact(&config.Error{Err: errors.New("source.query: S3cr3t%2FPw")}); got.Error() != "source.query: …" || !config.IsConfigError(got) {
		t.Errorf("redact of a configuration error = %q (configuration error: %v); want it redacted and still one", got, config.IsConfigError(got))
	}
	if got := p.redact(errors.New("dial tcp: lookup S3cr3t/Pw: no such host")); got.Error() != "dial tcp: lookup …: no such host" || config.IsConfigError(got) {
		t.Errorf("redact = %q (configuration error: %v); want it redacted, not a configuration error", got, config.IsConfigError(got))
	}
}
