package pgdsn

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/netip"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/lib/pq"
)

// dsnShapes build DSNs around a password, as people write them right and wrong: URLs with the password raw
// (so / # ? @ : and spaces in it break the URL) or escaped, and key=value strings with the password bare, quoted
// or cut short. Everything else in them is loopback, so a DSN that parses connects nowhere but this machine.
var dsnShapes = []func(pw string) string{
	func(pw string) string { return "postgres://app:" + pw + "@127.0.0.1:1/app" },
	func(pw string) string { return "postgresql://app:" + pw + "@127.0.0.1:1/app?sslmode=disable" },
	func(pw string) string { return "postgres://app:" + url.PathEscape(pw) + "@127.0.0.1:1/app" },
	func(pw string) string { return "postgres://app:" + pw + "@127.0.0.1:notaport/app" },
	func(pw string) string { return "postgres://app:" + pw + "@127.0.0.1:1/app?sslmode=bogus" },
	func(pw string) string { return "postgress://app:" + pw + "@127.0.0.1:1/app" },
	func(pw string) string { return "postgres://127.0.0.1:" + pw + "@127.0.0.1:1/app" },
	func(pw string) string { return "host=127.0.0.1 port=1 user=app password=" + pw + " dbname=app" },
	func(pw string) string { return "host=127.0.0.1 port=1 password='" + pw + "' dbname=app" },
	func(pw string) string { return "host=127.0.0.1 port=1 password='" + pw },
	func(pw string) string { return "password=" + pw + " host=127.0.0.1 port=x" },
	func(pw string) string { return "host=127.0.0.1 port=1 password=" + pw + " sslmode=bogus" },
	func(pw string) string { return "password=" + pw },
}

// dsnErrors is every error text a DSN can give, as the PostgreSQL source (package rows) meets them: reading it, and
// when it reads, connecting with it (which fails: nothing listens on 127.0.0.1:1), redacted.
func dsnErrors(t testing.TB, dsn string) []string {
	cfg, err := Parse(dsn)
	if err != nil {
		return []string{err.Error()}
	}
	c, err := Connector(cfg, dsn)
	if err != nil {
		return []string{err.Error()}
	}
	db := sql.OpenDB(c)
	defer db.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := db.PingContext(ctx); err != nil {
		return []string{Redact(err, Secrets(dsn, cfg.Password)).Error()}
	}
	return nil
}

// checkRedacted fails when an error of dsn holds pw: a password of 4 bytes or more that the rest of the DSN does
// not hold (else the text cannot tell them apart). The passwords start with J and end with K, which no message
// holds otherwise, so a message with either letter shows part of the password.
func checkRedacted(t testing.TB, shape int, pw string) {
	dsn := dsnShapes[shape](pw)
	for _, msg := range dsnErrors(t, dsn) {
		if strings.Contains(msg, pw) || strings.ContainsAny(msg, "JK") {
			t.Errorf("shape %d: DSN %q: the error shows (part of) the password %q:\n%s", shape, dsn, pw, msg)
		}
	}
}

// TestDSNErrorsHideThePassword: no error shows the password, whatever in it breaks the DSN.
func TestDSNErrorsHideThePassword(t *testing.T) {
	passwords := []string{
		"JS3cr3tPw/xK", // the example: a / ends the URL's host part
		"JS3cr3t#PwK", "JS3cr3t?PwK", "JS3@cr3tPwK", "JS3:cr3tPwK", "JS3cr3t PwK", "JS3'cr3tPwK", `JS3"cr3tPwK`,
		"JS3%zzPwK", "JS3%2FPwK", `JS3\cr3tPwK`, "J12345#K", "J/K", "JnoportK", "J:1/K", "J=x y=K",
	}
	for shape := range dsnShapes {
		for _, pw := range passwords {
			checkRedacted(t, shape, pw)
		}
	}
}

// TestDSNErrorSaysWhatIsWrong: the error still says which form was read and what is wrong.
func TestDSNErrorSaysWhatIsWrong(t *testing.T) {
	tests := []struct {
		dsn  string
		want []string
	}{
		{"postgres://u:S3cr3tPw/x@db/app", []string{"DSN is not valid", "invalid port", "URL form", "percent-encode"}},
		{"host=db port=abc", []string{"DSN is not valid", `"port"`, "key=value form"}},
		{"host=db password='abc", []string{"DSN is not valid", "unterminated", "single quotes"}},
		{"postgress://u:pw@db/app", []string{"DSN is not valid", "must start with postgres://"}},
		{"postgres://u:pw@db:99999/app", []string{`"port" is not a port number (1-65535)`}},
		{"host=db hostaddr=notanip", []string{`"hostaddr" is not an IP address`}},
		{"host=db password", []string{`"password" has no value`}},
		{"postgres://u:pw@db/app\x01", []string{"holds a control character"}},
	}
	for _, tt := range tests {
		_, err := Parse(tt.dsn)
		if err == nil {
			t.Errorf("Parse(%q) succeeded", tt.dsn)
			continue
		}
		for _, jargon := range []string{"strconv", "ParseAddr", "net/url", "connection info string"} {
			if strings.Contains(err.Error(), jargon) {
				t.Errorf("Parse(%q): error %q speaks a library's words (%s)", tt.dsn, err, jargon)
			}
		}
		for _, w := range tt.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("Parse(%q): error %q does not say %q", tt.dsn, err, w)
			}
		}
	}
}

// FuzzDSNErrorRedaction builds DSNs of every shape around a random password and checks that no error shows it.
// The seed corpus (testdata/fuzz/FuzzDSNErrorRedaction) runs with every go test.
func FuzzDSNErrorRedaction(f *testing.F) {
	f.Add(uint8(0), "S3cr3tPw/x")
	f.Add(uint8(7), "a b")
	f.Fuzz(func(t *testing.T, shape uint8, pw string) {
		if len(pw) < 2 || strings.ContainsAny(pw, "JK\x00") {
			t.Skip()
		}
		pw = "J" + pw + "K"
		s := int(shape) % len(dsnShapes)
		if strings.Contains(strings.Replace(dsnShapes[s](pw), pw, "", 1), pw) {
			t.Skip()
		}
		checkRedacted(t, s, pw)
	})
}

// TestRedact pins the rule for the errors of a connection or a read: the text that may be the password goes, the
// original cannot be unwrapped, the server's own errors and errors without a secret are returned as they are (that a
// configuration error stays one is rows' TestDSNErrorsAreConfigurationErrors).
func TestRedact(t *testing.T) {
	dsn := "postgres://app:S3cr3t%2FPw@db.example:5432/app"
	secrets := Secrets(dsn, "S3cr3t/Pw")
	if want := []string{"S3cr3t/Pw", "S3cr3t%2FPw", "S3cr3t/Pw", "S3cr3t%2FPw"}; strings.Join(secrets, " ") != strings.Join(want, " ") {
		t.Errorf("Secrets = %q, want %q", secrets, want)
	}
	if got := Secrets("host=db password=abcd", "abcd"); len(got) != 1 || got[0] != "abcd" {
		t.Errorf("Secrets of a 4-byte password = %q, want it", got)
	}
	if got := Secrets("host=db password=abc", "abc"); len(got) != 0 {
		t.Errorf("Secrets of a 3-byte password = %q, want none (it would take letters out of every word)", got)
	}
	inner := errors.New("dial tcp: lookup S3cr3t/Pw: no such host")
	got := Redact(fmt.Errorf("connecting to PostgreSQL: %w", inner), secrets)
	if got.Error() != "connecting to PostgreSQL: dial tcp: lookup …: no such host" || errors.Is(got, inner) {
		t.Errorf("Redact = %q (unwraps to the original: %v); want the password as …, no unwrap", got, errors.Is(got, inner))
	}
	server := &pq.Error{Message: `password authentication failed for user "S3cr3t/Pw"`}
	if got := Redact(fmt.Errorf("wrapped: %w", server), secrets); !errors.Is(got, server) || !strings.Contains(got.Error(), "S3cr3t/Pw") {
		t.Errorf("Redact of the server's error = %q; want it as it is", got)
	}
	plain := errors.New("connection refused")
	if got := Redact(plain, secrets); got != plain {
		t.Errorf("Redact of an error without a secret = %v; want the same error", got)
	}
	if got := Redact(nil, secrets); got != nil {
		t.Errorf("Redact(nil) = %v", got)
	}
}

// TestSession: lib/pq reads the session DSN as it reads the DSN it came from (the same host, user, password, TLS
// keys), with a connect timeout where the DSN set none and the application name given.
func TestSession(t *testing.T) {
	tests := []struct {
		name, dsn string
		timeout   time.Duration // the connect timeout lib/pq reads from the result
	}{
		{"a URL", "postgres://app:pa%20ss@db.example:6432/app?sslmode=verify-full&sslrootcert=/ca.pem", 10 * time.Second},
		{"a URL with its own connect timeout", "postgresql://app:pw@db/app?connect_timeout=3", 3 * time.Second},
		{"a URL with connect_timeout 0 (none)", "postgres://app:pw@db/app?connect_timeout=0", 10 * time.Second},
		{"a URL with an application name", "postgres://app:pw@db/app?application_name=mine", 10 * time.Second},
		{"key=value with quotes", `host=db port=5433 user=app password='it\'s \\ x' sslmode=require`, 10 * time.Second},
		{"key=value with a connect timeout", "host=db user=app connect_timeout=7", 7 * time.Second},
		{"several hosts", "host=db1,db2 port=5432,5433 user=app target_session_attrs=read-write", 10 * time.Second},
		{"a socket directory", "host=/run/postgresql dbname=app", 10 * time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := Parse(tt.dsn)
			if err != nil {
				t.Fatal(err)
			}
			got, err := Session(tt.dsn, cfg, 10*time.Second, `jobsched/batch/it's`)
			if err != nil {
				t.Fatal(err)
			}
			read, err := pq.NewConfig(got)
			if err != nil {
				t.Fatalf("lib/pq cannot read %q: %v", got, err)
			}
			want := cfg
			want.ConnectTimeout, want.ApplicationName = tt.timeout, `jobsched/batch/it's`
			if diff := cmp.Diff(want, read, cmpopts.IgnoreUnexported(pq.Config{}), cmpopts.EquateComparable(netip.Addr{})); diff != "" {
				t.Errorf("lib/pq reads %q otherwise than the DSN (-want +got):\n%s", got, diff)
			}
		})
	}
}
