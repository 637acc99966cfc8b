// Package rate is the arithmetic of limits.rate: at most N creates in any window of length per, a sliding window
// over the times of the creates (not a token bucket, which lets nearly 2N through in one window), and the compact
// record of those times that the scheduler's Lease carries between passes (see Record).
//
// A Window holds create times rounded up to its tick (per/1000, at least 1ms): a time recorded later than it was is
// counted longer, so the rounding only ever makes the limit stricter (at most N in any window of per + tick), and a
// window holds at most min(N, 1001) distinct times whatever N is, which bounds its record (MaxWindowBytes).
package rate

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Limit is limits.rate: at most Creates creates in any window of length Per.
type Limit struct {
	Creates int
	Per     time.Duration
}

func (l Limit) String() string { return fmt.Sprintf("%d per %s", l.Creates, ShortDuration(l.Per)) }

// ShortDuration is d as a user writes it: 1m, not 1m0s; 25h, not 25h0m0s.
func ShortDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

// ticks is how many ticks a window of length per spans: a window holds at most ticks+1 distinct times.
const ticks = 1000

// TickOf is the tick a window of length per rounds its times up to: per/1000, at least 1ms, in whole ms.
func TickOf(per time.Duration) time.Duration {
	return max((per / ticks).Truncate(time.Millisecond), time.Millisecond)
}

// Window is the create times of one scope (the install, a queue, a group), each rounded up to the window's tick, in
// ascending order. The zero Window is empty, with the tick of the first Add.
type Window struct {
	tick  int64 // ms
	slots []slot
}

type slot struct {
	at int64 // in ticks since the Unix epoch: the time at·tick ms, the create time rounded up
	n  int   // creates at that time
}

// NewWindow is an empty window for limit l.
func NewWindow(l Limit) *Window { return &Window{tick: TickOf(l.Per).Milliseconds()} }

// Full is a window that is full for l from now: l.Creates creates at now (a record lost or unreadable).
func Full(l Limit, now time.Time) *Window {
	w := NewWindow(l)
	w.Add(now, l.Creates)
	return w
}

// Add records n creates at t (rounded up to the tick).
func (w *Window) Add(t time.Time, n int) {
	if n <= 0 {
		return
	}
	ms := t.UnixMilli()
	if t.Sub(time.UnixMilli(ms)) > 0 {
		ms++ // round the sub-millisecond part up too
	}
	at := (ms + w.tick - 1) / w.tick // times are after 1970: this is the ceiling
	i, found := slices.BinarySearchFunc(w.slots, at, func(s slot, at int64) int { return cmpInt(s.at, at) })
	if found {
		w.slots[i].n = satAdd(w.slots[i].n, n)
		return
	}
	w.slots = slices.Insert(w.slots, i, slot{at: at, n: n})
}

func cmpInt(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func satAdd(a, b int) int {
	if a > int(^uint(0)>>1)-b {
		return int(^uint(0) >> 1)
	}
	return a + b
}

// time is slot s as a time.
func (w *Window) time(s slot) time.Time { return time.UnixMilli(s.at * w.tick) }

// counts says whether slot s is inside the window of length per that ends at now: its time is after now − per.
func (w *Window) counts(s slot, now time.Time, per time.Duration) bool {
	return w.time(s).Add(per).After(now)
}

// Count is the creates in the window of length per that ends at now (times after now − per, times to come included).
func (w *Window) Count(now time.Time, per time.Duration) int {
	n := 0
	if w == nil {
		return 0
	}
	for _, s := range w.slots {
		if w.counts(s, now, per) {
			n = satAdd(n, s.n)
		}
	}
	return n
}

// Allowed is how many creates l allows at now: N less the creates in the window that ends at now, at least 0.
func (w *Window) Allowed(now time.Time, l Limit) int {
	return max(l.Creates-w.Count(now, l.Per), 0)
}

// Next is the first time at or after now at which l allows one create more.
func (w *Window) Next(now time.Time, l Limit) time.Time {
	over := w.Count(now, l.Per) - (l.Creates - 1) // how many must leave the window
	if over <= 0 || w == nil {
		return now
	}
	for _, s := range w.slots {
		if !w.counts(s, now, l.Per) {
			continue
		}
		if over -= s.n; over <= 0 {
			return w.time(s).Add(l.Per)
		}
	}
	return now // not reached: the slots counted sum to more than over
}

// Prune drops what l no longer needs at now: the times out of the window, and all but the newest l.Creates creates
// (a window to come that holds an older one holds those too, so it is full without it).
func (w *Window) Prune(now time.Time, l Limit) {
	keep := l.Creates
	i := len(w.slots)
	for i > 0 && keep > 0 && w.counts(w.slots[i-1], now, l.Per) {
		i--
		if w.slots[i].n > keep {
			w.slots[i].n = keep
		}
		keep -= w.slots[i].n
	}
	w.slots = slices.Delete(w.slots, 0, i)
}

// Last is the window's latest time (zero when empty).
func (w *Window) Last() time.Time {
	if w.Empty() {
		return time.Time{}
	}
	return w.time(w.slots[len(w.slots)-1])
}

// Empty says the window holds no create.
func (w *Window) Empty() bool { return w == nil || len(w.slots) == 0 }

// Merge is w with the creates of o added (o in its own tick: each of its times, rounded up again to w's).
func (w *Window) Merge(o *Window) {
	if o == nil {
		return
	}
	for _, s := range o.slots {
		w.Add(o.time(s), s.n)
	}
}

// MaxWindowBytes bounds the encoded size of a window of limit l (see Encode): its tick, its first time, and at most
// min(N, 1001) slots, each a delta of at most 1001 ticks and a count of at most N.
func MaxWindowBytes(l Limit) int {
	slots := min(l.Creates, ticks+1)
	head := len(strconv.FormatInt(TickOf(l.Per).Milliseconds(), 10)) + 1 + 19 + 1 + len(strconv.Itoa(l.Creates))
	each := 1 + len(strconv.Itoa(ticks+1)) + 1 + len(strconv.Itoa(l.Creates))
	return head + max(slots-1, 0)*each
}

// Encode is the window as text: "TICK:AT[*N],DELTA[*N],…" with TICK in ms, AT the first time in ticks since the
// Unix epoch, each DELTA the ticks since the time before, and N the creates at that time when more than one.
func (w *Window) Encode() string {
	if w.Empty() {
		return ""
	}
	var b strings.Builder
	b.WriteString(strconv.FormatInt(w.tick, 10))
	b.WriteByte(':')
	prev := int64(0)
	for i, s := range w.slots {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.FormatInt(s.at-prev, 10))
		prev = s.at
		if s.n > 1 {
			b.WriteByte('*')
			b.WriteString(strconv.Itoa(s.n))
		}
	}
	return b.String()
}

// maxTotal bounds the creates a decoded window holds: a record that claims more is not one jobsched wrote.
const maxTotal = 1 << 40

// Decode reads a window Encode wrote; anything else is an error (the caller takes the window as full).
func Decode(s string) (*Window, error) {
	tick, rest, ok := strings.Cut(s, ":")
	if !ok {
		return nil, errors.New("no tick")
	}
	w := &Window{}
	var err error
	if w.tick, err = strconv.ParseInt(tick, 10, 64); err != nil || w.tick < 1 {
		return nil, fmt.Errorf("tick %q is not a positive number of ms", tick)
	}
	prev, total := int64(0), 0
	for i, f := range strings.Split(rest, ",") {
		d, count, hasCount := strings.Cut(f, "*")
		delta, err := strconv.ParseInt(d, 10, 64)
		if err != nil || delta < 0 || (i > 0 && delta < 1) || delta > (1<<62)/w.tick-prev {
			return nil, fmt.Errorf("time %d: %q is not a delta in ticks", i, d)
		}
		n := 1
		if hasCount {
			if n, err = strconv.Atoi(count); err != nil || n < 2 {
				return nil, fmt.Errorf("time %d: %q is not a count of 2 or more", i, count)
			}
		}
		if total += n; total > maxTotal {
			return nil, fmt.Errorf("more than %d creates", maxTotal)
		}
		prev += delta
		w.slots = append(w.slots, slot{at: prev, n: n})
	}
	return w, nil
}
