package main

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"unicode"
)

// TestNoReferencesOutsideTheRepository: the README is the reference; no file may send a reader to a document that
// is not in the repository (the design notes that preceded it are not shipped).
func TestNoReferencesOutsideTheRepository(t *testing.T) {
	outside := []string{"SPEC.md", "CONVENTIONS.md", "CLUSTER-FACTS.md", "../shared/", "the SPEC"}
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if name := d.Name(); name == ".git" || name == "testdata" {
				return filepath.SkipDir
			}
			return nil
		}
		if path == "main_test.go" {
			return nil
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, ref := range outside {
			if strings.Contains(string(data), ref) {
				t.Errorf("%s refers to %q, which is not in the repository", path, ref)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// markdownLink is a Markdown link's target: [text](target).
var markdownLink = regexp.MustCompile(`\]\(([^)\s]+)\)`)

// TestMarkdownLinksResolve: every relative link of the repository's Markdown files names a file or directory that
// is there, and every #anchor a heading of its file (GitHub's rule: lower case, spaces to dashes, punctuation
// dropped). A reader sent to a results file finds it.
func TestMarkdownLinksResolve(t *testing.T) {
	anchors := func(path string) map[string]bool {
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]bool{}
		inCode := false
		for _, line := range strings.Split(string(data), "\n") {
			if strings.HasPrefix(line, "```") {
				inCode = !inCode
			}
			if inCode || !strings.HasPrefix(line, "#") {
				continue
			}
			h := strings.ToLower(strings.TrimSpace(strings.TrimLeft(line, "#")))
			var b strings.Builder
			for _, r := range h {
				switch {
				case r == ' ':
					b.WriteRune('-')
				case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
					b.WriteRune(r)
				}
			}
			out[b.String()] = true
		}
		return out
	}
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == ".git" || d.Name() == "testdata") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".md") {
			return nil
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, m := range markdownLink.FindAllStringSubmatch(string(data), -1) {
			target := m[1]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			file, anchor, _ := strings.Cut(target, "#")
			resolved := path
			if file != "" {
				resolved = filepath.Join(filepath.Dir(path), file)
				if _, err := os.Stat(resolved); err != nil {
					t.Errorf("%s links to %s, which is not in the repository", path, target)
					continue
				}
			}
			if anchor != "" && strings.HasSuffix(resolved, ".md") && !anchors(resolved)[anchor] {
				t.Errorf("%s links to %s: %s has no heading #%s", path, target, resolved, anchor)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
