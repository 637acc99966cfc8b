// Package pgdsn keeps a PostgreSQL DSN's password out of every error.
//
// A DSN that lib/pq cannot read (or reads as its author did not mean) gets an error that says what is wrong and how
// the form is written, without any of the DSN's text; an error of a later connection or read has what may be the
// password redacted.
package pgdsn

import (
	"errors"
	"fmt"
	"net/url"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/lib/pq"
)

// Parse reads dsn as lib/pq does. A DSN it cannot read, or a URL whose host part a / ? or # in the password cut
// short, gets an error that holds none of the DSN's text; the caller reports it as a configuration error.
func Parse(dsn string) (pq.Config, error) {
	cfg, err := pq.NewConfig(dsn)
	if err == nil {
		err = misreadURL(dsn)
	}
	if err != nil {
		return pq.Config{}, invalid(err, dsn)
	}
	return cfg, nil
}

// Connector is pq.NewConnectorConfig(cfg), its error said as Parse says one; dsn is the text cfg was read from.
func Connector(cfg pq.Config, dsn string) (*pq.Connector, error) {
	c, err := pq.NewConnectorConfig(cfg)
	if err != nil {
		return nil, invalid(err, dsn)
	}
	return c, nil
}

func invalid(err error, dsn string) error {
	return fmt.Errorf("source: the PostgreSQL DSN is not valid: %s", dsnErrorText(err, dsn))
}

// The two forms of a DSN, as the error names them, with what a user most often gets wrong in each.
const (
	urlForm = "URL form postgres://user:password@host:port/dbname?param=value; percent-encode any / # ? @ : % " +
		"or space in the user name or password (e.g. %2F for /)"
	keyValueForm = "key=value form host=... port=... user=... password=... dbname=...; put a value that holds a " +
		`space or is empty in single quotes, and escape ' and \ in it with \`
)

// quotedText is a Go-quoted string in an error message: net/url and lib/pq quote the part of the DSN they reject,
// which may be (part of) the password.
var quotedText = regexp.MustCompile(`"(?:[^"\\]|\\.)*"`)

// pqParams are the names of lib/pq's connection parameters and environment variables: the only quoted text an error
// about the DSN keeps, because it names what is wrong.
var pqParams = func() map[string]bool {
	names := map[string]bool{}
	t := reflect.TypeFor[pq.Config]()
	for i := range t.NumField() {
		for _, tag := range []string{"postgres", "env"} {
			if v := t.Field(i).Tag.Get(tag); v != "" && v != "-" {
				names[v] = true
			}
		}
	}
	return names
}()

// dsnErrorText says why dsn is not valid without any of its text: every quoted part of the parser's message (the
// port, the escape, the word it could not read: any of which may be the password) is replaced by …, except the name
// of a known parameter; and it says which form the DSN was read as and how that form is written.
func dsnErrorText(err error, dsn string) string {
	msg := err.Error()
	var urlErr *url.Error
	if errors.As(err, &urlErr) {
		msg = urlErr.Err.Error() // url.Error quotes the whole URL
	}
	msg = strings.TrimPrefix(msg, "pq: ")
	msg = quotedText.ReplaceAllStringFunc(msg, func(q string) string {
		if s, err := strconv.Unquote(q); err == nil && pqParams[s] {
			return q
		}
		return "…"
	})
	for _, j := range dsnJargon {
		msg = j.re.ReplaceAllString(msg, j.say)
	}
	form := keyValueForm
	switch {
	case strings.HasPrefix(dsn, "postgres://") || strings.HasPrefix(dsn, "postgresql://"):
		form = urlForm
	case strings.Contains(dsn, "://"):
		form = "a URL must start with postgres:// or postgresql://; read as the " + keyValueForm
	}
	return msg + " (" + form + ")"
}

// dsnJargon turns the parsers' words (strconv, netip, net/url) into the user's.
var dsnJargon = []struct {
	re  *regexp.Regexp
	say string
}{
	{regexp.MustCompile(`wrong value for "port": strconv\.Parse\w+: .*`), `"port" is not a port number (1-65535), e.g. port=5432`},
	{regexp.MustCompile(`wrong value for ("\w+"): strconv\.Parse\w+: .*`), `$1 is not a number`},
	{regexp.MustCompile(`wrong value for ("\w+"): ParseAddr\(.*`), `$1 is not an IP address, e.g. hostaddr=10.0.0.5`},
	{regexp.MustCompile(`missing … after ("\w+") in connection info string`), `$1 has no value: write $1=value, or $1='' for an empty one`},
	{regexp.MustCompile(`missing … after … in connection info string`), `a word has no = value`},
	{regexp.MustCompile(`net/url: invalid control character in URL`), `the URL holds a control character (a newline inside it?)`},
}

// misreadURL is an error when a URL DSN parses, but not as its author meant: a / ? or # in the password ends the
// host part early, so the text before it is read as host and port and the rest (password included) as path, query
// or fragment, and the @ comes after the host. lib/pq would connect to the wrong host and say where.
func misreadURL(dsn string) error {
	for _, scheme := range []string{"postgres://", "postgresql://"} {
		if rest, ok := strings.CutPrefix(dsn, scheme); ok {
			if u, err := url.Parse(dsn); err == nil && u.User == nil && strings.Contains(rest, "@") {
				return errors.New("the @ before the host comes after a / ? or #, which ends the host part: the user name " +
					"or password holds one that is not percent-encoded, or the path or query holds an @ (write it %40)")
			}
		}
	}
	return nil
}

// Secrets lists what of dsn may be its password, for redacting errors at connect and query time: the password
// lib/pq read, and in a URL the text between the scheme's user name and the last @ (the password the user meant,
// also when a / # or ? in it made the URL say something else), raw and unescaped. Text shorter than 4 bytes is not
// redacted (it would take letters out of every word).
func Secrets(dsn, password string) []string {
	cands := []string{password}
	for _, scheme := range []string{"postgres://", "postgresql://"} {
		rest, ok := strings.CutPrefix(dsn, scheme)
		if !ok {
			continue
		}
		if at := strings.LastIndex(rest, "@"); at >= 0 {
			userinfo := rest[:at]
			if _, pw, ok := strings.Cut(userinfo, ":"); ok {
				cands = append(cands, pw)
				if u, err := url.PathUnescape(pw); err == nil {
					cands = append(cands, u)
				}
				// Where a / ? or # cut the URL short, the pieces of the password became host, port, path or query.
				cands = append(cands, strings.FieldsFunc(pw, func(r rune) bool { return strings.ContainsRune("/?#", r) })...)
			}
		}
	}
	var out []string
	for _, c := range cands {
		if len(c) >= 4 {
			out = append(out, c)
		}
	}
	return out
}

// Redact returns err, or when its text holds one of secrets (see Secrets), an error with that text redacted. The
// redacted error does not unwrap: nothing can print the original. The server's own errors are left alone: they never held the DSN (the password goes in a message of its own, which no error
// echoes), and redacting a user name equal to the password would tell the reader the password.
func Redact(err error, secrets []string) error {
	var pqErr *pq.Error
	if err == nil || errors.As(err, &pqErr) {
		return err
	}
	msg := err.Error()
	red := msg
	for _, s := range secrets {
		red = strings.ReplaceAll(red, s, "…")
	}
	if red == msg {
		return err
	}
	return &redactedError{red}
}

type redactedError struct{ msg string }

func (e *redactedError) Error() string { return e.msg }

// Session is dsn in the key=value form, with connect_timeout set to timeout when cfg (what Parse read from dsn)
// has none, and application_name set to name: the DSN of a connection jobsched keeps open, which lib/pq opens from
// a string (pq.NewDialListener), so that it connects as the pool does (TLS, host, user: the same keys) within the
// same connect timeout, and shows in pg_stat_activity under name. A URL is converted as lib/pq converts it; the
// keys appended last override any the DSN had.
func Session(dsn string, cfg pq.Config, timeout time.Duration, name string) (string, error) {
	kv := dsn
	if strings.HasPrefix(dsn, "postgres://") || strings.HasPrefix(dsn, "postgresql://") {
		var err error
		if kv, err = pq.ParseURL(dsn); err != nil { //nolint:staticcheck // the conversion lib/pq itself applies to a URL
			return "", invalid(err, dsn)
		}
	}
	if cfg.ConnectTimeout <= 0 {
		kv += " connect_timeout=" + strconv.FormatInt(int64((timeout+time.Second-1)/time.Second), 10)
	}
	return kv + " application_name='" + strings.NewReplacer(`\`, `\\`, `'`, `\'`).Replace(name) + "'", nil
}
