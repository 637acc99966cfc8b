// Package apitext makes a text another party wrote in the API server safe for every output jobsched has: a pod's
// Unschedulable message, an Event's reason and message, a Job's or a NodePool's condition, a Lease's holder.
// Anyone with the matching write in the namespace (pod status, events, leases) chooses those bytes; jobsched's own
// Event notes, log lines, metrics and terminal output carry them. Each such text is quoted where it enters the pass,
// once, so that no later output needs to know where it came from.
package apitext

import (
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Quote is s as it is when every character is printable (the usual message reads unchanged), else s Go-quoted:
// control characters (ESC, BEL), format characters (U+202E turns a line around), invalid UTF-8 and line breaks
// as their escapes, within double quotes that say the text was changed.
func Quote(s string) string {
	if !utf8.ValidString(s) || strings.IndexFunc(s, func(r rune) bool { return !unicode.IsPrint(r) && r != ' ' }) >= 0 {
		return strconv.Quote(s)
	}
	return s
}
