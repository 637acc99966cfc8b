package rows

import (
	"context"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/jobsched/jobsched/pkg/config"
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

// dsnErrors is every error text a DSN can give: opening it, and when it opens, a Select (which fails: nothing
// listens on 127.0.0.1:1).
func dsnErrors(t testing.TB, dsn string) []string {
	p, err := OpenPostgres(dsn, config.Source{Query: "SELECT 1 AS id", Key: "id"})
	if err != nil {
		return []string{err.Error()}
	}
	defer p.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	var out []string
	if _, err := p.Select(ctx, Selection{Limit: 1}); err != nil {
		out = append(out, err.Error())
	}
	if _, err := p.Count(ctx, []string{"k"}, 1); err != nil {
		out = append(out, err.Error())
	}
	return out
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
		_, err := OpenPostgres(tt.dsn, config.Source{Query: "SELECT 1 AS id", Key: "id"})
		if err == nil {
			t.Errorf("OpenPostgres(%q) succeeded", tt.dsn)
			continue
		}
		if !config.IsConfigError(err) {
			t.Errorf("%v is not a configuration error", err)
		}
		for _, jargon := range []string{"strconv", "ParseAddr", "net/url", "connection info string"} {
			if strings.Contains(err.Error(), jargon) {
				t.Errorf("OpenPostgres(%q): error %q speaks a library's words (%s)", tt.dsn, err, jargon)
			}
		}
		for _, w := range tt.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("OpenPostgres(%q): error %q does not say %q", tt.dsn, err, w)
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
