package config

import (
	"regexp"
	"strings"
)

// matchesAll says whether the env.passthrough glob pat has no fixed character and a *, so that it copies every
// variable (*, **, *?, [A-Z]*, …).
func matchesAll(pat string) bool {
	rest := bracketExpr.ReplaceAllString(pat, "")
	return strings.Contains(rest, "*") && strings.Trim(rest, "*?") == ""
}

var bracketExpr = regexp.MustCompile(`\[[^\]]*\]`)
