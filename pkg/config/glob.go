package config

import (
	"path"
	"regexp"
	"strings"
)

// passthroughProblem is what is wrong with the env.passthrough entry pat, or "". A glob must begin with a letter or
// _ (one that begins with * or ? copies nearly all of jobsched's own environment) and otherwise hold only what a
// portable variable name holds (letters, digits, _) and the glob characters * ? [...].
func passthroughProblem(pat string) string {
	if _, err := path.Match(pat, ""); err != nil || pat == "" {
		return "is not a name or glob"
	}
	if !portableGlob.MatchString(bracketExpr.ReplaceAllString(pat, "")) {
		return "is not a portable variable name or glob: letters, digits and _, with * ? [...], e.g. S3_*"
	}
	if matchesAll(pat) {
		return "would copy every variable of jobsched's own environment (credentials included): name the variables, " +
			"or a glob with a fixed part such as S3_*"
	}
	if c := pat[0]; !(c == '_' || c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z') {
		return "must begin with a letter or _: a glob that begins with * ? or [ copies nearly every variable of " +
			"jobsched's own environment (credentials included); name the variables, or a glob with a fixed start such as S3_*"
	}
	return ""
}

var portableGlob = regexp.MustCompile(`^[A-Za-z0-9_*?]*$`)

// matchesAll says whether the env.passthrough glob pat has no fixed character and a *, so that it copies every
// variable (*, **, *?, [A-Z]*, …).
func matchesAll(pat string) bool {
	rest := bracketExpr.ReplaceAllString(pat, "")
	return strings.Contains(rest, "*") && strings.Trim(rest, "*?") == ""
}

var bracketExpr = regexp.MustCompile(`\[[^\]]*\]`)
