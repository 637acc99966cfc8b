package rate

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"
)

// Annotation is the key of the record on the scheduler's Lease.
const Annotation = "jobsched.io/rate-windows"

// MaxRecordBytes bounds the record: the API server takes at most 256 KiB of annotations on an object, and the
// Lease's other annotations (kubectl's, say) keep the rest. The install's and the queues' windows take at most half
// of it (config checks MaxWindowBytes at load); the groups' windows get what is left, and those that do not fit are
// left out (Encode).
const MaxRecordBytes = 128 << 10

// record is the annotation's JSON: a version, and each scope's window as Encode writes it.
type record struct {
	Version int               `json:"v"`
	Windows map[string]string `json:"windows"`
}

const version = 1

// Record is the windows of every scope of an install, as the Lease carries them between passes.
type Record struct {
	windows map[string]*Window
}

// Scopes of a record.
const (
	ScopeInstall = "install"
	queuePrefix  = "queue/"
	groupPrefix  = "group/"
)

// QueueScope is the scope of queue's limits.rate.
func QueueScope(queue string) string { return queuePrefix + queue }

// GroupScope is the scope of a group's limits.perGroup.rate in queue: the group's value as it is when it is at most
// MaxGroupKey bytes and does not begin with #, else # and a hash of it, so that the record's size does not depend
// on what a row puts in a column. (The read names the groups it bounds by value: a hashed group whose value no Job
// shows cannot be named, and its queue's groups are taken as unknown while its window lasts: Unresolved.)
func GroupScope(queue, group string) string {
	if len(group) > MaxGroupKey || strings.HasPrefix(group, "#") {
		sum := sha256.Sum256([]byte(group))
		group = "#" + hex.EncodeToString(sum[:16])
	}
	return groupPrefix + queue + "/" + group
}

// MaxGroupKey is the longest group value a scope holds as it is.
const MaxGroupKey = 64

// leftOutKey is the key of the scope that stands for the groups of a queue a full record left out (Encode): # and
// no hash, so that no group's value maps to it.
const leftOutKey = "#left-out"

// Unresolved says the group key of a scope (GroupOf) is not a group's value: a hash, or the groups a full record
// left out.
func Unresolved(key string) bool { return strings.HasPrefix(key, "#") }

// GroupOf is the queue and the group of a group's scope (ok false for another scope). Queue names are DNS labels:
// the group is what follows the queue's slash.
func GroupOf(scope string) (queue, group string, ok bool) {
	rest, ok := strings.CutPrefix(scope, groupPrefix)
	if !ok {
		return "", "", false
	}
	return strings.Cut(rest, "/")
}

// Scopes are the scopes of r's windows, sorted.
func (r *Record) Scopes() []string { return slices.Sorted(maps.Keys(r.windowsOrNil())) }

// Last is the latest time of r's windows (zero when none).
func (r *Record) Last() time.Time {
	var last time.Time
	for _, w := range r.windowsOrNil() {
		if t := w.Last(); t.After(last) {
			last = t
		}
	}
	return last
}

// Window is scope's window (nil: none recorded).
func (r *Record) Window(scope string) *Window {
	if r == nil {
		return nil
	}
	return r.windows[scope]
}

// Set makes w scope's window (an empty one removes it).
func (r *Record) Set(scope string, w *Window) {
	if w.Empty() {
		delete(r.windows, scope)
		return
	}
	if r.windows == nil {
		r.windows = map[string]*Window{}
	}
	r.windows[scope] = w
}

// Clone is a deep copy of r.
func (r *Record) Clone() *Record {
	c := &Record{}
	if r == nil {
		return c
	}
	for scope, w := range r.windows {
		c.Set(scope, &Window{tick: w.tick, slots: slices.Clone(w.slots)})
	}
	return c
}

// DecodeRecord reads the annotation's value; an error means it is not a record this version wrote (the caller
// takes every window as full).
func DecodeRecord(s string) (*Record, error) {
	var rec record
	d := json.NewDecoder(strings.NewReader(s))
	d.DisallowUnknownFields()
	if err := d.Decode(&rec); err != nil {
		return nil, fmt.Errorf("the rate record is not JSON of its shape: %w", err)
	}
	if rec.Version != version {
		return nil, fmt.Errorf("the rate record has version %d, not %d", rec.Version, version)
	}
	r := &Record{}
	for scope, text := range rec.Windows {
		w, err := Decode(text)
		if err != nil {
			return nil, fmt.Errorf("the rate record's window %q: %w", scope, err)
		}
		r.Set(scope, w)
	}
	return r, nil
}

// Encode is the annotation's value, at most budget bytes: every install and queue window, and the group windows
// that fit, smallest first. Dropped are the group scopes left out; for each queue with some, the record holds one
// window in their stead (scope group/QUEUE/#left-out: all their creates at the latest of their times), so that a
// reader takes that queue's groups as unknown until then + per. An install and queues whose windows alone do not
// fit (config keeps them within half of MaxRecordBytes) is an error.
func (r *Record) Encode(budget int) (value string, dropped []string, err error) {
	rec := record{Version: version, Windows: map[string]string{}}
	size := len(`{"v":1,"windows":{}}`)
	entry := func(scope, text string) int { return len(scope) + len(text) + len(`"":"",`) }
	var groups []string
	texts := map[string]string{}
	for _, scope := range slices.Sorted(maps.Keys(r.windowsOrNil())) {
		text := r.windows[scope].Encode()
		texts[scope] = text
		if strings.HasPrefix(scope, groupPrefix) {
			groups = append(groups, scope)
			continue
		}
		rec.Windows[scope] = text
		size += entry(scope, text)
	}
	if size > budget {
		return "", nil, errors.New("the install's and the queues' rate windows do not fit in the Lease's record")
	}
	slices.SortStableFunc(groups, func(a, b string) int { return len(texts[a]) - len(texts[b]) })
	// Room for a left-out window per queue with groups: its scope, a tick, a time and a count.
	queues := map[string]bool{}
	for _, scope := range groups {
		q, _, _ := GroupOf(scope)
		queues[q] = true
	}
	reserve := 0
	for q := range queues {
		reserve += entry(groupPrefix+q+"/"+leftOutKey, "") + 20 + 1 + 20 + 1 + 20
	}
	left := map[string]*Window{}
	for _, scope := range groups {
		if e := entry(scope, texts[scope]); size+e+reserve <= budget {
			rec.Windows[scope] = texts[scope]
			size += e
			continue
		}
		dropped = append(dropped, scope)
		q, _, _ := GroupOf(scope)
		w := r.windows[scope]
		last := w.slots[len(w.slots)-1]
		total := 0
		for _, s := range w.slots {
			total = satAdd(total, s.n)
		}
		if l := left[q]; l == nil || w.time(last).After(l.time(l.slots[0])) {
			n := total
			if l != nil {
				n = satAdd(n, l.slots[0].n)
			}
			left[q] = &Window{tick: w.tick, slots: []slot{{at: last.at, n: n}}}
		} else {
			l.slots[0].n = satAdd(l.slots[0].n, total)
		}
	}
	for q, w := range left {
		scope, text := groupPrefix+q+"/"+leftOutKey, w.Encode()
		rec.Windows[scope] = text
		if size += entry(scope, text); size > budget {
			return "", nil, errors.New("the rate record has no room to say which groups it leaves out")
		}
	}
	b, err := json.Marshal(rec)
	return string(b), dropped, err
}

func (r *Record) windowsOrNil() map[string]*Window {
	if r == nil {
		return nil
	}
	return r.windows
}
