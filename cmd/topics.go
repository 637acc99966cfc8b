package cmd

import (
	"embed"
	"encoding"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"reflect"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/jobsched/jobsched/pkg/capacity"
	"github.com/jobsched/jobsched/pkg/metrics"
	"github.com/jobsched/jobsched/pkg/report"
	"github.com/jobsched/jobsched/pkg/scheduler"
)

// helpFiles are the written help topics, one Markdown file each: help/NAME.md is `jobsched help NAME`. They are the
// rules a user relies on that do not fit a command's help, for people with the binary and no clone (a Helm install);
// `jobsched --help` lists them under "Additional help topics", and the package docs say how the code keeps these
// rules. Tests check that every file makes a topic, that every topic the Markdown files name exists and that each
// line fits a terminal.
//
//go:embed help/*.md
var helpFiles embed.FS

// topic is one help topic: `jobsched help NAME` prints long.
type topic struct{ name, short, long string }

// allTopics are the written topics (helpFiles) and the generated ones.
func allTopics() []topic {
	topics, err := writtenTopics(helpFiles)
	if err != nil {
		panic(err) // the files are built in; TestHelpTopicFiles reads each
	}
	return append(topics, documentsTopic(), metricsTopic())
}

// writtenTopics reads the topics in dir help of files, by file name.
func writtenTopics(files fs.FS) ([]topic, error) {
	names, err := fs.Glob(files, "help/*.md")
	if err != nil {
		return nil, err
	}
	out := make([]topic, 0, len(names))
	for _, name := range names {
		data, err := fs.ReadFile(files, name)
		if err != nil {
			return nil, err
		}
		t, err := parseTopic(strings.TrimSuffix(path.Base(name), ".md"), string(data))
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		out = append(out, t)
	}
	return out, nil
}

// parseTopic is the topic of a help file: a first line "# SHORT" (the line `jobsched --help` lists), a blank line,
// then the text `jobsched help NAME` prints, as it is printed.
func parseTopic(name, md string) (topic, error) {
	heading, long, ok := strings.Cut(md, "\n\n")
	short, isHeading := strings.CutPrefix(heading, "# ")
	long = strings.TrimSuffix(long, "\n")
	switch {
	case !ok || !isHeading || strings.Contains(short, "\n") || strings.TrimSpace(short) == "":
		return topic{}, errors.New(`want a first line "# SHORT" (what jobsched --help lists), then a blank line`)
	case strings.TrimSpace(long) == "":
		return topic{}, errors.New("no text after the first line")
	}
	return topic{name: name, short: short, long: long}, nil
}

// metricsTopic lists the metrics a pass pushes, made from the ones this build pushes (pkg/metrics), so it cannot
// drift from them.
func metricsTopic() topic {
	var b strings.Builder
	b.WriteString("The metrics each pass pushes to a Pushgateway (metrics.pushgateway or --pushgateway), from this build.\n\n")
	b.WriteString(wrap(`Each pass pushes the group job="jobsched" (tick) or job="jobsched-gc" (gc), with labels scheduler
and namespace; a push replaces the metrics of the names it sends and keeps the others. Values are the last pass's;
what it could not learn is NaN. A failed pass leaves jobsched_last_success_timestamp_seconds as it was; an unreadable
config pushes nothing; a failed push is logged and never fails the pass. The backlog costs one more read, made only
when pushing. gc pushes the duration, failed, deleted, failed writes, Jobs by state (`+strings.Join(stateNames(), ", ")+`)
and last success. The jobsched_queue_* series come with queues: only, one per queue (label queue). Scrape the
Pushgateway with honor_labels: true.`, "", 110))
	for _, m := range metrics.All() {
		b.WriteString("\n\n" + m.Name)
		if len(m.Labels) > 0 {
			b.WriteString("{" + strings.Join(m.Labels, ",") + "}")
		}
		b.WriteString("\n" + wrap(m.Help, "    ", 106))
	}
	return topic{"metrics", "The metrics each pass pushes to a Pushgateway, and what they mean", b.String()}
}

func stateNames() []string {
	var out []string
	for _, st := range scheduler.States {
		out = append(out, string(st))
	}
	return out
}

// wrap breaks s into lines of at most width characters, each begun with indent.
func wrap(s, indent string, width int) string {
	var lines []string
	line := indent
	for _, w := range strings.Fields(s) {
		if line != indent && len(line)+1+len(w) > width {
			lines, line = append(lines, line), indent
		}
		if line != indent {
			line += " "
		}
		line += w
	}
	return strings.Join(append(lines, line), "\n")
}

// documentsTopic is the topic that lists the fields of the documents jobsched prints, made from the types the
// commands encode, so it is this build's and cannot drift from them.
func documentsTopic() topic {
	var b strings.Builder
	b.WriteString(`The fields of the documents that -o json and -o yaml print, from this build's types. A name with []
is a list, one with {} a map by name or resource; "omitted": left out when empty; "as X": the fields listed
under X.`)
	for _, d := range []struct {
		title string
		v     any
	}{
		{"jobsched status -o json|yaml (kind: Status)", report.Status{}},
		{"jobsched status KEY -o json|yaml (kind: Task)", report.TaskView{}},
		{"jobsched dry-run -o json|yaml (kind: Plan)", planDocument{}},
	} {
		b.WriteString("\n\n" + d.title)
		writeFields(&b, reflect.TypeOf(d.v), "", map[reflect.Type]string{})
	}
	return topic{"documents", "The fields of the -o json|yaml documents of status and dry-run", b.String()}
}

// writeFields writes the JSON fields of t, one a line, under path; listed holds the struct types written so far
// (by path), which are named rather than written again.
func writeFields(b *strings.Builder, t reflect.Type, path string, listed map[reflect.Type]string) {
	depth := 1
	if path != "" {
		depth += strings.Count(path, ".") + 1
	}
	indent := strings.Repeat("  ", depth)
	for i := range t.NumField() {
		f := t.Field(i)
		name, opts, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "-" || !f.IsExported() {
			continue
		}
		ft := f.Type
		for ft.Kind() == reflect.Pointer {
			ft = ft.Elem()
		}
		if as, ok := writtenAs[ft]; ok {
			ft = as
		}
		if f.Anonymous && name == "" && ft.Kind() == reflect.Struct {
			writeFields(b, ft, path, listed) // embedded: its fields are the parent's
			continue
		}
		if name == "" {
			name = f.Name
		}
		kind, inner := jsonKind(ft)
		switch {
		case ft.Kind() == reflect.Slice && ft.Elem().Kind() != reflect.Uint8:
			name += "[]"
		case ft.Kind() == reflect.Map:
			name += "{}"
		}
		here := strings.TrimPrefix(path+"."+name, ".")
		if first, ok := listed[inner]; ok && inner != nil {
			kind, inner = "object, as "+first, nil
		}
		if strings.Contains(opts, "omitempty") || strings.Contains(opts, "omitzero") {
			kind += ", omitted"
		}
		fmt.Fprintf(b, "\n%s%-*s %s", indent, max(24-len(indent), len(name)), name, kind)
		if inner != nil {
			listed[inner] = here
			writeFields(b, inner, here, listed)
		}
	}
}

// jsonKind names how a value of t is encoded, and the struct whose fields follow it (nil: none).
func jsonKind(t reflect.Type) (string, reflect.Type) {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch {
	case t == reflect.TypeOf(time.Time{}) || t == reflect.TypeOf(metav1.Time{}):
		return "time (RFC 3339)", nil
	case strings.HasPrefix(t.PkgPath(), "k8s.io/api/"): // a Kubernetes object or field: the API's reference has it
		return "Kubernetes " + strings.TrimPrefix(t.PkgPath(), "k8s.io/api/") + " " + t.Name(), nil
	case t.Implements(jsonMarshaler) || reflect.PointerTo(t).Implements(jsonMarshaler),
		t.Implements(textMarshaler) || reflect.PointerTo(t).Implements(textMarshaler):
		return "string (" + t.String() + ")", nil
	}
	switch t.Kind() {
	case reflect.Struct:
		return "object", t
	case reflect.Slice, reflect.Array:
		if t.Elem().Kind() == reflect.Uint8 {
			return "string (base64)", nil
		}
		return jsonKind(t.Elem())
	case reflect.Map:
		return jsonKind(t.Elem())
	case reflect.String:
		return "string", nil
	case reflect.Bool:
		return "boolean", nil
	case reflect.Float32, reflect.Float64:
		return "number", nil
	case reflect.Interface:
		return "any", nil
	default:
		return "integer", nil
	}
}

// writtenAs are the types whose MarshalJSON writes another type's document (a node's free room, held in a few
// numbers, writes a ResourceList).
var writtenAs = map[reflect.Type]reflect.Type{
	reflect.TypeFor[capacity.Free](): reflect.TypeFor[corev1.ResourceList](),
}

var (
	jsonMarshaler = reflect.TypeOf((*json.Marshaler)(nil)).Elem()
	textMarshaler = reflect.TypeOf((*encoding.TextMarshaler)(nil)).Elem()
)
