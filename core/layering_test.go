package core_test

import (
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestPublicPackagesImportNoForeignInternal walks every package of the
// module: a public package (no "internal" element in its path) may import
// an internal package only below itself (comm may use comm/internal/coll),
// never one of another part of the tree (comm must not use
// internal/runner). Go's own rule allows any package of the module to
// import the module root's internal packages; cohort's layering does not
// (docs/DESIGN.md: what each layer may import). Tests count too: a test of
// a public package shows how that package is used. Separate modules under
// the tree (with their own go.mod) are skipped.
func TestPublicPackagesImportNoForeignInternal(t *testing.T) {
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	checked := 0
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		rel = filepath.ToSlash(rel)
		if d.IsDir() {
			base := d.Name()
			if rel != "." && (strings.HasPrefix(base, ".") || base == "testdata") {
				return filepath.SkipDir
			}
			if rel != "." {
				if _, err := os.Stat(filepath.Join(path, "go.mod")); err == nil {
					return filepath.SkipDir // another module
				}
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") {
			return nil
		}
		dir := filepath.ToSlash(filepath.Dir(rel))
		if isInternal(dir) || strings.HasPrefix(dir, "cmd/") || dir == "cmd" {
			return nil // internal packages and commands may use their module's internals
		}
		f, err := parser.ParseFile(fset, path, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		checked++
		for _, imp := range f.Imports {
			p, _ := strconv.Unquote(imp.Path.Value)
			rest, ok := strings.CutPrefix(p, modulePath)
			if !ok || !isInternal(rest) {
				continue
			}
			owner := rest[:internalIndex(rest)]
			if owner != "" && (dir == strings.TrimSuffix(owner, "/") || strings.HasPrefix(dir+"/", owner)) {
				continue // its own internal package
			}
			t.Errorf("%s: public package %s imports %s, an internal package of another part of the tree", rel, dir, p)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if checked < 50 {
		t.Fatalf("checked only %d files: is the walk rooted at the module?", checked)
	}
}

func isInternal(path string) bool { return internalIndex(path) >= 0 }

// internalIndex is the index of the "internal" element of path, or -1.
func internalIndex(path string) int {
	if path == "internal" || strings.HasPrefix(path, "internal/") {
		return 0
	}
	if i := strings.Index(path, "/internal/"); i >= 0 {
		return i + 1
	}
	if strings.HasSuffix(path, "/internal") {
		return len(path) - len("internal")
	}
	return -1
}
