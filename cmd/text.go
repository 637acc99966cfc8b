package cmd

import (
	"strconv"
	"strings"
	"unicode/utf8"
)

// printable is s for a table or text output: every character strconv would escape in a Go string (control
// characters, newlines, invalid UTF-8, bidirectional overrides, non-ASCII spaces) is written as its escape, the rest
// as is. A value from a row, a pod or the database can then neither move the cursor, clear the screen, nor forge a
// line. JSON and YAML outputs escape for themselves.
func printable(s string) string {
	clean := true
	for _, r := range s {
		if r == utf8.RuneError || (r != ' ' && !strconv.IsPrint(r)) {
			clean = false
			break
		}
	}
	if clean {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size <= 1:
			b.WriteString(`\x` + strconv.FormatUint(uint64(s[i])|0x100, 16)[1:])
		case r == ' ' || strconv.IsPrint(r):
			b.WriteString(s[i : i+size])
		default:
			q := strconv.QuoteRune(r)
			b.WriteString(q[1 : len(q)-1])
		}
		i += size
	}
	return b.String()
}

// bound says what bound a pass's slots: prefix and the limit, or "blocked: WHY" when the pass was blocked with no
// slot (no limit bound them: the pass stopped before using them).
func bound(prefix, limit, blocked string, slots int) string {
	if blocked != "" && slots == 0 {
		return "blocked: " + blocked
	}
	return prefix + limit
}
