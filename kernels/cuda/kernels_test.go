package cuda

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
)

// TestKernelNamesExist: every kernel the Go code can launch is an extern "C"
// __global__ function of the embedded source.
func TestKernelNamesExist(t *testing.T) {
	defined := map[string]bool{}
	for _, n := range entryPoints(Source()) {
		defined[n] = true
	}
	if len(defined) < 30 {
		t.Fatalf("only %d entry points parsed: %v", len(defined), entryPoints(Source()))
	}
	for _, k := range allKernels() {
		if !defined[string(k)] {
			t.Errorf("kernel %q is launched but not defined in kernels/*.cu", k)
		}
	}
	// And every literal or constant name used at a launch site is known.
	for _, name := range launchSiteNames(t) {
		if !defined[name] {
			t.Errorf("launch site names %q, not in the source", name)
		}
	}
}

// launchSiteNames collects the kernelName constants declared in the
// package's non-test Go files and string literals passed to launch.
func launchSiteNames(t *testing.T) []string {
	fset := token.NewFileSet()
	pkgs, err := parser.ParseDir(fset, ".", func(fi fs.FileInfo) bool { return !strings.HasSuffix(fi.Name(), "_test.go") }, 0)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, p := range pkgs {
		for _, f := range p.Files {
			ast.Inspect(f, func(n ast.Node) bool {
				switch x := n.(type) {
				case *ast.ValueSpec:
					if id, ok := x.Type.(*ast.Ident); ok && id.Name == "kernelName" {
						for _, v := range x.Values {
							if bl, ok := v.(*ast.BasicLit); ok {
								s, _ := strconv.Unquote(bl.Value)
								names = append(names, s)
							}
						}
					}
				case *ast.CallExpr:
					if sel, ok := x.Fun.(*ast.SelectorExpr); ok && sel.Sel.Name == "launch" && len(x.Args) > 0 {
						if bl, ok := x.Args[0].(*ast.BasicLit); ok {
							s, _ := strconv.Unquote(bl.Value)
							names = append(names, s)
						}
					}
				}
				return true
			})
		}
	}
	if len(names) < 10 {
		t.Fatalf("found only %d kernel names in the Go sources", len(names))
	}
	return names
}

func TestEntryPointParser(t *testing.T) {
	src := `
extern "C" __global__ void plain_one(int a) {}
extern  "C"   __global__   void spaced (float* x) {}
__global__ void not_extern(int a) {}
#define ENTRIES(SUF, Q) \
    extern "C" __global__ void gemv_##SUF(int a) { g<Q>(a); } \
    extern "C" __global__ void rows_##SUF(int a) { r<Q>(a); }
ENTRIES(f16, QF16)
ENTRIES(q8_0, QQ8_0)
`
	got := entryPoints(src)
	want := []string{"gemv_f16", "gemv_q8_0", "plain_one", "rows_f16", "rows_q8_0", "spaced"}
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("got %v, want %v", got, want)
	}
}

// TestEveryCUFileIsCompiled: each embedded .cu file is compiled, common.cu
// first, and no listed file is missing.
func TestEveryCUFileIsCompiled(t *testing.T) {
	ents, err := kernelFS.ReadDir("kernels")
	if err != nil {
		t.Fatal(err)
	}
	var files []string
	for _, e := range ents {
		files = append(files, e.Name())
	}
	order := sourceOrder()
	if order[0] != "common.cu" {
		t.Fatalf("compile order %v: common.cu must come first", order)
	}
	sort.Strings(order)
	sort.Strings(files)
	if strings.Join(files, ",") != strings.Join(order, ",") {
		t.Fatalf("embedded %v, compiled %v", files, order)
	}
	// The on-disk folder matches the embedded one (no stray file forgotten by go:embed).
	disk, _ := os.ReadDir("kernels")
	if len(disk) != len(files) {
		t.Fatalf("kernels/ has %d files, %d embedded", len(disk), len(files))
	}
	src := Source()
	if strings.Count(src, "{") != strings.Count(src, "}") {
		t.Fatal("unbalanced braces in the kernel source")
	}
	if regexp.MustCompile(`(?m)^\s*#\s*include`).MatchString(src) {
		t.Fatal("kernels must not #include (NVRTC has no CUDA headers here)")
	}
}
