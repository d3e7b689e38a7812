package core_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// protocolPackages are the packages that must stay pure state machines or
// pure functions (docs/DESIGN.md, principle 1). A package listed here that does
// not exist yet is skipped.
var protocolPackages = []string{"core", "topo", "fd", "member", "stable", "vsync", "replica", "model", "wire"}

// forbiddenImports are packages whose mere import breaks purity.
var forbiddenImports = map[string]string{
	"net":         "does I/O",
	"os":          "does I/O",
	"os/exec":     "does I/O",
	"syscall":     "does I/O",
	"sync":        "takes locks",
	"sync/atomic": "shares memory",
	"math/rand":   "has a global source; use the Env's *rand.Rand (math/rand/v2)",
	"crypto/rand": "is not reproducible",
	"unsafe":      "escapes the type system",
	"log":         "does I/O",
	"log/slog":    "does I/O; emit an event instead",
	"runtime":     "depends on the scheduler",
}

// forbiddenTimeCalls read the wall clock or block.
var forbiddenTimeCalls = map[string]bool{
	"Now": true, "Since": true, "Until": true, "Sleep": true, "After": true,
	"AfterFunc": true, "Tick": true, "NewTimer": true, "NewTicker": true,
}

// allowedRandV2 are the math/rand/v2 names that do not touch the global
// source.
var allowedRandV2 = map[string]bool{
	"New": true, "NewPCG": true, "NewChaCha8": true, "NewZipf": true,
	"Rand": true, "PCG": true, "ChaCha8": true, "Source": true, "Zipf": true,
}

const modulePath = "github.com/cohort-mp/cohort/"

func TestProtocolPackagesArePure(t *testing.T) {
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	pure := map[string]bool{}
	for _, p := range protocolPackages {
		pure[p] = true
	}
	checked := 0
	for _, pkg := range protocolPackages {
		dir := filepath.Join(root, pkg)
		if _, err := os.Stat(dir); err != nil {
			continue
		}
		fset := token.NewFileSet()
		entries, err := os.ReadDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range entries {
			name := e.Name()
			if e.IsDir() || !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
				continue
			}
			f, err := parser.ParseFile(fset, filepath.Join(dir, name), nil, parser.SkipObjectResolution)
			if err != nil {
				t.Fatal(err)
			}
			checked++
			for _, v := range impurities(f, pure) {
				t.Errorf("%s/%s: %s", pkg, name, v)
			}
		}
	}
	if checked == 0 {
		t.Fatal("no protocol package source found; the check itself is broken")
	}
}

// impurities lists what makes file f impure.
func impurities(f *ast.File, pure map[string]bool) []string {
	var out []string
	local := map[string]string{} // local name -> import path
	for _, imp := range f.Imports {
		path, _ := strconv.Unquote(imp.Path.Value)
		if why, bad := forbiddenImports[path]; bad || strings.HasPrefix(path, "net/") {
			if !bad {
				why = "does I/O"
			}
			out = append(out, "imports "+path+": "+why)
		}
		if rest, ok := strings.CutPrefix(path, modulePath); ok {
			top := strings.Split(rest, "/")[0]
			if !pure[top] {
				out = append(out, "imports impure cohort package "+path)
			}
		}
		name := path[strings.LastIndex(path, "/")+1:]
		if path == "math/rand/v2" {
			name = "rand"
		}
		if imp.Name != nil {
			name = imp.Name.Name
		}
		local[name] = path
	}
	ast.Inspect(f, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.GoStmt:
			out = append(out, "starts a goroutine")
		case *ast.ChanType:
			out = append(out, "uses a channel")
		case *ast.SelectorExpr:
			id, ok := n.X.(*ast.Ident)
			if !ok {
				break
			}
			switch local[id.Name] {
			case "time":
				if forbiddenTimeCalls[n.Sel.Name] {
					out = append(out, "calls time."+n.Sel.Name+": use Env.Now and Env.SetTimer")
				}
			case "math/rand/v2":
				if !allowedRandV2[n.Sel.Name] {
					out = append(out, "uses the global rand."+n.Sel.Name+": use Env.Rand()")
				}
			}
		}
		return true
	})
	return out
}

// TestPurityCheckCatchesViolations makes sure the checker above can fail.
func TestPurityCheckCatchesViolations(t *testing.T) {
	src := `package bad
import (
	"net"
	"sync"
	"time"
	r "math/rand/v2"
	"github.com/cohort-mp/cohort/sim"
)
var _ net.Conn
var mu sync.Mutex
func f() { go f(); _ = time.Now(); time.Sleep(1); _ = r.IntN(3); _ = make(chan int); _ = sim.X }
`
	f, err := parser.ParseFile(token.NewFileSet(), "bad.go", src, 0)
	if err != nil {
		t.Fatal(err)
	}
	got := impurities(f, map[string]bool{"core": true})
	want := []string{"net", "sync", "impure cohort package", "goroutine", "time.Now", "time.Sleep", "rand.IntN", "channel"}
	joined := strings.Join(got, "\n")
	for _, w := range want {
		if !strings.Contains(joined, w) {
			t.Errorf("checker missed %q; it reported:\n%s", w, joined)
		}
	}
}
