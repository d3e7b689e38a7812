package core_test

import (
	"go/ast"
	"go/doc/comment"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// maxFileLines is the size past which a source file must say why it is one
// file (docs/DESIGN.md, "Packages": one job per file).
const maxFileLines = 900

// walkGo calls fn for every .go file of the module (not of nested modules,
// testdata or hidden directories), with its path relative to the root.
func walkGo(t *testing.T, fn func(path, rel string)) {
	t.Helper()
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		rel = filepath.ToSlash(rel)
		if d.IsDir() {
			if rel == "." {
				return nil
			}
			if strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata" {
				return filepath.SkipDir
			}
			if _, err := os.Stat(filepath.Join(path, "go.mod")); err == nil {
				return filepath.SkipDir
			}
			return nil
		}
		if strings.HasSuffix(path, ".go") {
			fn(path, rel)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestSourceFilesHaveOneJob checks that no source file (tests aside) grows
// past maxFileLines unless its opening comment says, in a sentence naming
// "one file", why it must stay whole.
func TestSourceFilesHaveOneJob(t *testing.T) {
	fset := token.NewFileSet()
	walkGo(t, func(path, rel string) {
		if strings.HasSuffix(path, "_test.go") {
			return
		}
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		lines := strings.Count(string(data), "\n")
		if lines <= maxFileLines {
			return
		}
		f, err := parser.ParseFile(fset, path, data, parser.ParseComments|parser.PackageClauseOnly)
		if err != nil {
			t.Fatal(err)
		}
		for _, g := range f.Comments {
			if g.Pos() < f.Package && strings.Contains(g.Text(), "one file") {
				return
			}
		}
		t.Errorf("%s has %d lines (more than %d): split it along its seams, or say in its opening comment why it must be one file", rel, lines, maxFileLines)
	})
}

// TestDocCodeIsNotProse checks that no package documentation puts Go code
// inside a list item, where go doc reflows it into running text: a code
// block must follow a paragraph, outside any list.
func TestDocCodeIsNotProse(t *testing.T) {
	fset := token.NewFileSet()
	walkGo(t, func(path, rel string) {
		if strings.HasSuffix(path, "_test.go") {
			return
		}
		f, err := parser.ParseFile(fset, path, nil, parser.ParseComments|parser.PackageClauseOnly)
		if err != nil {
			t.Fatal(err)
		}
		if f.Doc == nil {
			return
		}
		checkDocLists(t, rel, f.Doc)
	})
}

// goStatement matches Go code in running text: a short variable
// declaration from a call ("g, err := fd.NewGossip(") or an error check.
// Mathematics in the papers' notation ("M_i := R_i") does not match.
var goStatement = regexp.MustCompile(`\b[a-z][A-Za-z0-9]*(, ?[a-z][A-Za-z0-9]*)* := [A-Za-z][A-Za-z0-9.]*\(|\berr != nil\b`)

func checkDocLists(t *testing.T, rel string, doc *ast.CommentGroup) {
	var p comment.Parser
	d := p.Parse(doc.Text())
	for _, b := range d.Content {
		list, ok := b.(*comment.List)
		if !ok {
			continue
		}
		for _, item := range list.Items {
			for _, ib := range item.Content {
				para, ok := ib.(*comment.Paragraph)
				if !ok {
					continue
				}
				text := plain(para.Text)
				if goStatement.MatchString(text) {
					t.Errorf("%s: package doc has code inside list item %q, which go doc shows as prose; end the list and indent the code as a block after a paragraph", rel, item.Number)
				}
			}
		}
	}
}

func plain(texts []comment.Text) string {
	var b strings.Builder
	for _, x := range texts {
		switch x := x.(type) {
		case comment.Plain:
			b.WriteString(string(x))
		case comment.Italic:
			b.WriteString(string(x))
		case *comment.Link:
			b.WriteString(plain(x.Text))
		case *comment.DocLink:
			b.WriteString(plain(x.Text))
		}
	}
	return b.String()
}
