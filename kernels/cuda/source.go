package cuda

import (
	"embed"
	"regexp"
	"sort"
	"strings"
)

// The kernels are CUDA C files under kernels/, embedded in the binary and
// compiled by NVRTC at start-up as one program: common.cu first (it defines
// the types and helpers the others use), then every other .cu file in name
// order. A new file of kernels needs no edit here.

//go:embed kernels/*.cu
var kernelFS embed.FS

// sourceOrder returns the embedded .cu files in compile order.
func sourceOrder() []string {
	ents, err := kernelFS.ReadDir("kernels")
	if err != nil {
		panic("cuda: embedded kernel sources unreadable: " + err.Error()) // build-time invariant
	}
	order := []string{"common.cu"}
	for _, e := range ents {
		if n := e.Name(); n != "common.cu" && strings.HasSuffix(n, ".cu") {
			order = append(order, n)
		}
	}
	sort.Strings(order[1:])
	return order
}

// Source returns the complete CUDA C program compiled by NVRTC.
func Source() string {
	var b strings.Builder
	for _, name := range sourceOrder() {
		data, err := kernelFS.ReadFile("kernels/" + name)
		if err != nil {
			panic("cuda: embedded kernel source missing: " + name) // build-time invariant
		}
		b.WriteString("// ---- " + name + " ----\n")
		b.Write(data)
		b.WriteString("\n")
	}
	return b.String()
}

// signatures returns each entry point's parameter classes (pointer, int,
// u64, float), parsed from src (macro entry points included).
func signatures(src string) map[string][]argKind {
	src = reContLine.ReplaceAllString(src, " ")
	out := map[string][]argKind{}
	re := regexp.MustCompile(`extern\s+"C"\s+__global__\s+void\s+` + launchBounds + `([A-Za-z_][A-Za-z0-9_#]*)\s*\(([^)]*)\)`)
	for _, m := range re.FindAllStringSubmatch(src, -1) {
		var kinds []argKind
		for _, p := range strings.Split(m[2], ",") {
			p = strings.TrimSpace(p)
			switch {
			case p == "":
				continue
			case strings.Contains(p, "*"):
				kinds = append(kinds, argPtr)
			case strings.HasPrefix(p, "u64") || strings.HasPrefix(p, "size_t"):
				kinds = append(kinds, argU64)
			case strings.HasPrefix(p, "float"):
				kinds = append(kinds, argF32)
			case strings.HasPrefix(p, "int") || strings.HasPrefix(p, "i32"):
				kinds = append(kinds, argI32)
			default:
				kinds = append(kinds, 0) // unknown: never matches
			}
		}
		out[m[1]] = kinds
	}
	// Macro templates: gemv_##SUF etc. apply to every expansion.
	for name, kinds := range out {
		if i := strings.Index(name, "##"); i >= 0 {
			delete(out, name)
			prefix := name[:i]
			for _, n := range entryPoints(src) {
				if strings.HasPrefix(n, prefix) {
					if _, ok := out[n]; !ok {
						out[n] = kinds
					}
				}
			}
		}
	}
	return out
}

// launchBounds matches an optional __launch_bounds__(...) between void and
// a kernel's name.
const launchBounds = `(?:__launch_bounds__\s*\([^)]*\)\s*)?`

var (
	reEntry    = regexp.MustCompile(`extern\s+"C"\s+__global__\s+void\s+` + launchBounds + `([A-Za-z_][A-Za-z0-9_#]*)\s*\(`)
	reDefine   = regexp.MustCompile(`(?m)^#define\s+([A-Za-z_][A-Za-z0-9_]*)\(([^)]*)\)`)
	reContLine = regexp.MustCompile(`\\\n`)
)

// entryPoints returns the extern "C" __global__ functions that src defines,
// sorted, with one level of macro expansion: a name such as gemv_##SUF inside
// `#define M(SUF, ...)` yields one name per invocation M(x, ...).
func entryPoints(src string) []string {
	src = reContLine.ReplaceAllString(src, " ")
	names := map[string]bool{}
	type macro struct {
		params []string
		names  []string // templates containing ##
	}
	macros := map[string]macro{}
	lines := strings.Split(src, "\n")
	var plain []string
	for _, ln := range lines {
		if m := reDefine.FindStringSubmatch(ln); m != nil {
			var mc macro
			for _, p := range strings.Split(m[2], ",") {
				mc.params = append(mc.params, strings.TrimSpace(p))
			}
			for _, e := range reEntry.FindAllStringSubmatch(ln, -1) {
				mc.names = append(mc.names, e[1])
			}
			macros[m[1]] = mc
			continue
		}
		plain = append(plain, ln)
	}
	body := strings.Join(plain, "\n")
	for _, e := range reEntry.FindAllStringSubmatch(body, -1) {
		if !strings.Contains(e[1], "##") {
			names[e[1]] = true
		}
	}
	for mname, mc := range macros {
		if len(mc.names) == 0 {
			continue
		}
		re := regexp.MustCompile(`(?m)^\s*` + regexp.QuoteMeta(mname) + `\(([^)]*)\)`)
		for _, inv := range re.FindAllStringSubmatch(body, -1) {
			args := strings.Split(inv[1], ",")
			for _, tmpl := range mc.names {
				n := tmpl
				for i, p := range mc.params {
					if i < len(args) {
						n = strings.ReplaceAll(n, "##"+p, strings.TrimSpace(args[i]))
					}
				}
				names[n] = true
			}
		}
	}
	out := make([]string, 0, len(names))
	for n := range names {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}
