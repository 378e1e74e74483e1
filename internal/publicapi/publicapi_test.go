// Package publicapi_test checks the public API's one rule (issue 41): an
// exported name of a package under pkg/ never names a type of an
// .../internal/... package in its signature or type, so an embedder can
// name every result it is handed. Like River's root, which names internal
// packages only in the values of constants, the value of a constant may
// come from an internal package; its type may not.
package publicapi_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"go/importer"
	"go/token"
	"go/types"
	"io"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// stillNamingInternal are the exported names that named an internal type
// when this check came (issue 41), which are still to be given public
// types. The list may only shrink: a name found that is not on it fails
// the test, and so does a name on it that no longer names one.
var stillNamingInternal = map[string]bool{}

// listed is the part of `go list -json` the check reads.
type listed struct {
	ImportPath string
	Export     string
	DepOnly    bool
}

func TestPublicSignaturesNameNoInternalType(t *testing.T) {
	t.Parallel()

	public, exports := publicPackages(t)
	require.NotEmpty(t, public)

	// The compiler's export data of each package (from the build cache),
	// read by go/types: what an embedder's compiler sees.
	fset := token.NewFileSet()
	imp := importer.ForCompiler(fset, "gc", func(path string) (io.ReadCloser, error) {
		file, ok := exports[path]
		if !ok || file == "" {
			return nil, fmt.Errorf("no export data for %s", path)
		}
		return os.Open(file)
	})
	found := map[string]string{} // name → the internal types it names
	for _, path := range public {
		pkg, err := imp.Import(path)
		require.NoError(t, err)
		maps.Copy(found, internalNames(pkg))
	}
	var named, gone []string
	for _, name := range slices.Sorted(maps.Keys(found)) {
		if !stillNamingInternal[name] {
			named = append(named, name+" names "+found[name])
		}
	}
	for _, name := range slices.Sorted(maps.Keys(stillNamingInternal)) {
		if _, ok := found[name]; !ok {
			gone = append(gone, name)
		}
	}
	t.Logf("%d exported names of pkg/ name an internal type (%d of them known)", len(found), len(found)-len(named))
	if len(named) > 0 {
		t.Errorf("%d exported names of pkg/ name an internal type:\n%s", len(named), strings.Join(named, "\n"))
	}
	if len(gone) > 0 {
		t.Errorf("no longer naming an internal type, take them off stillNamingInternal:\n%s", strings.Join(gone, "\n"))
	}
}

// publicPackages returns the module's packages under pkg/ (tests left
// out), and the export data file of each of them and their dependencies.
func publicPackages(t *testing.T) (public []string, exports map[string]string) {
	t.Helper()
	// -trimpath, as make test and proctest build: the export data then
	// comes from the build cache a clean clone in another folder filled.
	cmd := exec.Command("go", "list", "-trimpath", "-export", "-deps", "-json=ImportPath,Export,DepOnly", "./pkg/...")
	cmd.Dir = filepath.Join("..", "..")
	out, err := cmd.Output()
	require.NoError(t, err, "go list: %s", stderrOf(err))
	exports = map[string]string{}
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var p listed
		err := dec.Decode(&p)
		if errors.Is(err, io.EOF) {
			return public, exports
		}
		require.NoError(t, err)
		exports[p.ImportPath] = p.Export
		if !p.DepOnly {
			require.False(t, isInternal(p.ImportPath), "%s: ./pkg/... listed an internal package", p.ImportPath)
			public = append(public, p.ImportPath)
		}
	}
}

func stderrOf(err error) string {
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		return string(exit.Stderr)
	}
	return ""
}

// module is the import path of this module, left out of the names reported.
const module = "github.com/hookinbox/hookinbox/"

func shorten(path string) string { return strings.TrimPrefix(path, module) }

// isInternal says whether an import path is, or is under, an internal
// directory (Go's own rule for what other modules cannot import).
func isInternal(path string) bool {
	return path == "internal" || strings.HasPrefix(path, "internal/") ||
		strings.HasSuffix(path, "/internal") || strings.Contains(path, "/internal/")
}

// internalNames returns each exported name of pkg (function, variable,
// constant, type, field, method), as pkg/path.Name, whose type or
// signature names a type of an internal package, with the types it names.
func internalNames(pkg *types.Package) map[string]string {
	out := map[string]string{}
	report := func(name string, typ types.Type) {
		if names := namedInternal(typ); len(names) > 0 {
			out[shorten(pkg.Path())+"."+name] = strings.Join(names, ", ")
		}
	}
	scope := pkg.Scope()
	for _, name := range scope.Names() {
		obj := scope.Lookup(name)
		if !obj.Exported() {
			continue
		}
		switch obj := obj.(type) {
		case *types.Const, *types.Var, *types.Func:
			report(name, obj.Type())
		case *types.TypeName:
			if obj.IsAlias() {
				report(name, obj.Type())
				continue
			}
			named, ok := obj.Type().(*types.Named)
			if !ok {
				continue
			}
			report(name+" (type parameters)", typeParamConstraints(named.TypeParams()))
			switch u := named.Underlying().(type) {
			case *types.Struct:
				eachField(u, nil, func(f *types.Var) { report(name+"."+f.Name(), f.Type()) })
			default:
				report(name, u)
			}
			ms := types.NewMethodSet(types.NewPointer(named))
			for sel := range ms.Methods() {
				if m := sel.Obj(); m.Exported() {
					report(name+"."+m.Name(), m.Type())
				}
			}
		}
	}
	return out
}

// typeParamConstraints gathers the constraints of a type parameter list
// into one tuple, to be walked like a signature's.
func typeParamConstraints(tps *types.TypeParamList) types.Type {
	var vars []*types.Var
	for tp := range tps.TypeParams() {
		vars = append(vars, types.NewParam(token.NoPos, nil, "", tp.Constraint()))
	}
	return types.NewTuple(vars...)
}

// eachField calls fn for every exported field of s, and for the exported
// fields promoted through its embedded structs (exported or not).
func eachField(s *types.Struct, seen map[*types.Struct]bool, fn func(*types.Var)) {
	if seen == nil {
		seen = map[*types.Struct]bool{}
	}
	if seen[s] {
		return
	}
	seen[s] = true
	for f := range s.Fields() {
		if f.Exported() {
			fn(f)
		}
		if !f.Embedded() {
			continue
		}
		typ := types.Unalias(f.Type())
		if p, ok := typ.(*types.Pointer); ok {
			typ = p.Elem()
		}
		if inner, ok := typ.Underlying().(*types.Struct); ok {
			eachField(inner, seen, fn)
		}
	}
}

// namedInternal returns the internal types typ names, as pkgpath.Name, in
// the order met. A named type is a leaf: what it is made of is checked
// where it is declared, if it is public.
func namedInternal(typ types.Type) []string {
	var out []string
	seen := map[types.Type]bool{}
	var walk func(types.Type)
	walk = func(typ types.Type) {
		if typ == nil || seen[typ] {
			return
		}
		seen[typ] = true
		switch typ := typ.(type) {
		case *types.Alias:
			walk(types.Unalias(typ))
		case *types.Named:
			if obj := typ.Obj(); obj.Pkg() != nil && isInternal(obj.Pkg().Path()) {
				out = append(out, shorten(obj.Pkg().Path())+"."+obj.Name())
			}
			for arg := range typ.TypeArgs().Types() {
				walk(arg)
			}
		case *types.Pointer:
			walk(typ.Elem())
		case *types.Slice:
			walk(typ.Elem())
		case *types.Array:
			walk(typ.Elem())
		case *types.Chan:
			walk(typ.Elem())
		case *types.Map:
			walk(typ.Key())
			walk(typ.Elem())
		case *types.Signature:
			walk(typeParamConstraints(typ.TypeParams()))
			walk(typ.Params())
			walk(typ.Results())
		case *types.Tuple:
			for v := range typ.Variables() {
				walk(v.Type())
			}
		case *types.Struct:
			eachField(typ, nil, func(f *types.Var) { walk(f.Type()) })
		case *types.Interface:
			for m := range typ.Methods() {
				if m.Exported() {
					walk(m.Type())
				}
			}
			for e := range typ.EmbeddedTypes() {
				walk(e)
			}
		case *types.Union:
			for term := range typ.Terms() {
				walk(term.Type())
			}
		case *types.TypeParam:
			walk(typ.Constraint())
		}
	}
	walk(typ)
	return out
}
