// Package pushurl checks a Pushgateway URL, never showing its user info.
package pushurl

import (
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"unicode"
)

// Validate checks a Pushgateway URL (metrics.pushgateway, --pushgateway): empty, or http(s) with a host
// and no query or fragment. Its errors show the URL as Redact does.
func Validate(s string) error {
	if s == "" {
		return nil
	}
	shown := strconv.Quote(Redact(s))
	u, err := url.Parse(s)
	switch {
	case err != nil && strings.ContainsFunc(s, unicode.IsControl):
		return fmt.Errorf("%s is not a URL: it holds a control character (a newline at the end?)", shown)
	case err != nil:
		return fmt.Errorf("%s is not a URL, e.g. http://pushgateway:9091", shown)
	case u.Scheme != "http" && u.Scheme != "https":
		return fmt.Errorf("%s is not an http or https URL, e.g. http://pushgateway:9091", shown)
	case u.Host == "":
		return fmt.Errorf("%s has no host, e.g. http://pushgateway:9091", shown)
	case u.Port() != "" && !isPort(u.Port()):
		return fmt.Errorf("%s has port %s, not a port number (1-65535)", shown, u.Port())
	case strings.Contains(u.EscapedPath(), "@"):
		// http://user:p@ss/word@host/ is host "ss": the password would go, in part, to the wrong host.
		return fmt.Errorf("%s has an @ after its host: percent-encode the user name and password (@ as %%40, / as %%2F)", shown)
	case u.RawQuery != "" || u.Fragment != "" || u.ForceQuery:
		return fmt.Errorf("%s has a query or fragment: give the Pushgateway's base URL, e.g. http://pushgateway:9091", shown)
	}
	return nil
}

func isPort(p string) bool {
	n, err := strconv.Atoi(p)
	return err == nil && n >= 1 && n <= 65535
}

// Redact is the URL s as jobsched prints it: the user info (everything before the last @ of the authority, so
// that a password with an unescaped / or @ is hidden whole) becomes user:xxxxx, or xxxxx when there is no password
// (a user name alone is often a token), and a query or fragment (?token=...) becomes ?xxxxx. It holds no part of
// the user info, query or fragment, even when s is not a valid URL.
func Redact(s string) string {
	prefix, rest := redactUserinfo(s)
	if i := strings.IndexAny(rest, "?#"); i >= 0 {
		rest = rest[:i+1] + "xxxxx"
	}
	return prefix + rest
}

// redactUserinfo is s with its user info redacted, split before what follows the host (its @, if any).
func redactUserinfo(s string) (string, string) {
	prefix := ""
	if i := strings.Index(s, "://"); i >= 0 {
		prefix, s = s[:i+3], s[i+3:]
	}
	at := strings.LastIndexByte(s, '@')
	if at < 0 {
		return prefix, s
	}
	userinfo := s[:at]
	if i := strings.IndexByte(userinfo, ':'); i >= 0 && !strings.ContainsAny(userinfo[:i], "/?#") {
		return prefix + userinfo[:i] + ":xxxxx", s[at:]
	}
	return prefix + "xxxxx", s[at:]
}
