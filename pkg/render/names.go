// Package render turns a row into its Job.
//
// The Job gets a deterministic name, the labels and annotations (package jobmeta) that tie it to its scheduler and
// task, and the environment built from the row's columns.
package render

import (
	"crypto/sha256"
	"encoding/base32"
	"encoding/hex"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
)

// MaxGroupBytes bounds a row's group value: a longer one (or one that is not valid UTF-8) gets no Job.
const MaxGroupBytes = 1024

// GroupLabel is the value of the jobsched.io/group label for group: group itself when it is a valid label value,
// else "h-" and the first 16 hex digits of its SHA-256.
func GroupLabel(group string) string {
	if len(validation.IsValidLabelValue(group)) == 0 {
		return group
	}
	sum := sha256.Sum256([]byte(group))
	return "h-" + hex.EncodeToString(sum[:])[:16]
}

// hashLen base32 characters of SHA-256 give 60 bits: distinct keys get distinct names (a collision among a million
// keys has odds of about 1 in 2 million, and is detected by the key annotation).
const hashLen = 12

var lowerBase32 = base32.NewEncoding("abcdefghijklmnopqrstuvwxyz234567").WithPadding(base32.NoPadding)

func hash(key string) string {
	sum := sha256.Sum256([]byte(key))
	return lowerBase32.EncodeToString(sum[:])[:hashLen]
}

// readable is the key lower-cased with every run of characters outside [a-z0-9] turned into one "-", trimmed, and
// cut to at most max characters; it may be empty.
func readable(key string, max int) string {
	var b strings.Builder
	dash := false
	for _, r := range strings.ToLower(key) {
		if b.Len() >= max {
			break
		}
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' {
			b.WriteRune(r)
			dash = false
		} else if !dash && b.Len() > 0 {
			b.WriteByte('-')
			dash = true
		}
	}
	return strings.TrimRight(b.String(), "-")
}

func join(parts ...string) string {
	var keep []string
	for _, p := range parts {
		if p != "" {
			keep = append(keep, p)
		}
	}
	return strings.Join(keep, "-")
}

// JobName is the Job's name for a task: a DNS-1123 label of at most 63 characters, prefix first, then as much of the
// key as is readable and fits, then a hash of the exact key. A pure function of (prefix, key).
func JobName(prefix, key string) string {
	room := 63 - len(prefix) - 1 - hashLen - 1
	return join(prefix, readable(key, room), hash(key))
}

// AttemptName is the name of attempt n of a task: attempt 1 is JobName (so Jobs made before retries existed are
// recognised), attempt n > 1 ends in "-a<n>" after the hash. A pure function of (prefix, key, n); no two (key, n)
// share a name, since a hash never holds "-".
func AttemptName(prefix, key string, attempt int) string {
	if attempt <= 1 {
		return JobName(prefix, key)
	}
	suffix := "a" + strconv.Itoa(attempt)
	room := 63 - len(prefix) - 1 - hashLen - 1 - len(suffix) - 1
	return join(prefix, readable(key, room), hash(key), suffix)
}

// TaskLabel is the value of the jobsched.io/task label: the readable form of the key and its hash, a valid label value.
func TaskLabel(key string) string {
	return join(readable(key, 63-hashLen-1), hash(key))
}
