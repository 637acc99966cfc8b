//go:build integration

package rows

import (
	"fmt"
	"net/url"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/jobsched/jobsched/pkg/testkit/tcpkit"
)

// TestOversizedRowNeverRead: a row over MaxRowBytes as text (here 20 MB, made by the server) is measured by
// PostgreSQL and comes back as its key and its size only, in its place in the query's order; the rows around it
// come whole (its size is within a few bytes of the value's: the row's text). What crosses the wire proves the value never reached the process: every read of the test receives
// less than one bound's worth of bytes. Select, the per-group Select and Lookup all go through the bound.
func TestOversizedRowNeverRead(t *testing.T) {
	s := newSchema(t)
	const big = 20 << 20
	exec(t, "CREATE TABLE "+s+".tasks (id int8 PRIMARY KEY, tenant text, payload text)",
		"INSERT INTO "+s+".tasks VALUES (1, 'a', repeat('x', 20 << 20)), (2, 'a', 'small'), (3, 'b', repeat('y', 1000))")
	u, err := url.Parse(testDSN)
	if err != nil || u.Host == "" {
		t.Fatalf("%s is not a URL with a host", dsnEnv)
	}
	proxy := tcpkit.NewProxy(t, u.Host, nil)
	u.Host = proxy.Addr()
	query := "SELECT id, tenant, payload FROM " + s + ".tasks ORDER BY id"
	// The size is the row's text as sent: (1,a,xxx…) and the read's own columns, a few bytes.
	oversize := func(rs []Row) []Row {
		if len(rs) > 0 && rs[0].Oversize >= big && rs[0].Oversize < big+64 {
			rs[0].Oversize = big
		}
		return rs
	}
	want := []Row{
		{Key: "1", Oversize: big},
		{Key: "2", Columns: []Column{{Name: "id", Value: "2"}, {Name: "tenant", Value: "a"}, {Name: "payload", Value: "small"}}},
	}
	p := open(t, u.String(), query, "id", 30*time.Second)
	got, err := p.Select(t.Context(), Selection{Limit: 2})
	if err != nil || !reflect.DeepEqual(oversize(got), want) {
		t.Errorf("Select = %s, %v\nwant %s", brief(got), err, brief(want))
	}
	got, err = p.Lookup(t.Context(), []string{"1", "2"})
	if err != nil || !reflect.DeepEqual(oversize(got), want) {
		t.Errorf("Lookup = %s, %v\nwant %s", brief(got), err, brief(want))
	}
	g := openGroup(t, u.String(), query, "id", PerGroup{Column: "tenant", Max: 2})
	want[1].Group = "a"
	for _, read := range []func() ([]Row, error){
		func() ([]Row, error) { return g.Select(t.Context(), Selection{Limit: 2, Held: map[string]int{"b": 2}}) },
		func() ([]Row, error) { return g.Lookup(t.Context(), []string{"1", "2"}) },
	} {
		got, err = read()
		if err != nil || !reflect.DeepEqual(oversize(got), want) {
			t.Errorf("per group: %s, %v\nwant %s", brief(got), err, brief(want))
		}
	}
	if n := proxy.Received(); n >= MaxRowBytes {
		t.Errorf("the reads received %d bytes from the server; the oversized row's value crossed the wire", n)
	}
}

// brief is rows as a failure prints them: each value cut to 20 bytes, so that a 20 MB one does not flood the log.
func brief(rs []Row) string {
	var b strings.Builder
	for _, r := range rs {
		fmt.Fprintf(&b, "{key %q group %q oversize %d:", r.Key, r.Group, r.Oversize)
		for _, c := range r.Columns {
			v := c.Value
			if len(v) > 20 {
				v = fmt.Sprintf("%s… (%d bytes)", v[:20], len(v))
			}
			fmt.Fprintf(&b, " %s=%q", c.Name, v)
		}
		b.WriteString("} ")
	}
	return b.String()
}
