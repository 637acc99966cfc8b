package rows

import (
	"context"
	"errors"
	"net"
	"net/url"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/lib/pq"

	"github.com/jobsched/jobsched/pkg/config"
)

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

// dsnSecrets lists what of dsn may be its password, for redacting errors at connect and query time: the password
// lib/pq read, and in a URL the text between the scheme's user name and the last @ (the password the user meant,
// also when a / # or ? in it made the URL say something else), raw and unescaped. Text shorter than 4 bytes is not
// redacted (it would take letters out of every word).
func dsnSecrets(dsn, password string) []string {
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

// redact returns err, or when its text holds a secret of the DSN, an error with that text redacted (a configuration
// error stays one). The redacted error does not unwrap: nothing can print the original. The server's own errors
// are left alone: they never held the DSN (the password goes in a message of its own, which no error echoes), and
// redacting a user name equal to the password would tell the reader the password.
func (p *Postgres) redact(err error) error {
	var pqErr *pq.Error
	if err == nil || errors.As(err, &pqErr) {
		return err
	}
	msg := err.Error()
	red := msg
	for _, s := range p.secrets {
		red = strings.ReplaceAll(red, s, "…")
	}
	if red == msg {
		return err
	}
	var out error = &redactedError{red}
	if config.IsConfigError(err) {
		out = &config.Error{Err: out}
	}
	return out
}

type redactedError struct{ msg string }

func (e *redactedError) Error() string { return e.msg }

// connGuard is the pool's dialer: it keeps the connections it made, so that when a read's context ends every one of
// them fails its blocked read or write at once. lib/pq alone sends a cancel request (on a new connection, which
// this does not touch: a server that answers stops the statement) and goes on waiting for the server to answer,
// which one that hangs never does. A connection made while the context ends is bounded by the connect timeout.
type connGuard struct {
	mu     sync.Mutex
	conns  map[*guardedConn]struct{}
	dialer net.Dialer
}

// watch makes the end of ctx abort the connections, until the returned stop is called; stop waits for an abort that
// has begun, so that it cannot reach the next read's connection.
func (g *connGuard) watch(ctx context.Context) (stop func()) {
	done := make(chan struct{})
	after := context.AfterFunc(ctx, func() {
		defer close(done)
		g.abort()
	})
	return func() {
		if !after() {
			<-done
		}
	}
}

func (g *connGuard) abort() {
	g.mu.Lock()
	defer g.mu.Unlock()
	for c := range g.conns {
		_ = c.SetDeadline(time.Unix(1, 0))
	}
}

// Dial, DialTimeout and DialContext implement pq.Dialer and pq.DialerContext.
func (g *connGuard) Dial(network, address string) (net.Conn, error) {
	return g.DialContext(context.Background(), network, address)
}

func (g *connGuard) DialTimeout(network, address string, timeout time.Duration) (net.Conn, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	return g.DialContext(ctx, network, address)
}

func (g *connGuard) DialContext(ctx context.Context, network, address string) (net.Conn, error) {
	c, err := g.dialer.DialContext(ctx, network, address)
	if err != nil {
		return nil, err
	}
	gc := &guardedConn{Conn: c, guard: g}
	g.mu.Lock()
	defer g.mu.Unlock()
	g.conns[gc] = struct{}{}
	return gc, nil
}

type guardedConn struct {
	net.Conn
	guard *connGuard
}

func (c *guardedConn) Close() error {
	c.guard.mu.Lock()
	delete(c.guard.conns, c)
	c.guard.mu.Unlock()
	return c.Conn.Close()
}
