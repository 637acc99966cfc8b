package main

import (
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
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
