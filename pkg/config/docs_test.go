package config

import (
	"encoding/json"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hookinbox/hookinbox/pkg/worker"
)

// configurationDoc is the configuration reference whose table
// TestConfigurationDoc keeps equal to the Config structs.
const configurationDoc = "../../docs/configuration.md"

// The generated table sits between these markers.
const (
	docTableBegin = "<!-- BEGIN GENERATED: go test ./pkg/config -run TestConfigurationDoc (UPDATE_CONFIGURATION_DOC=1 rewrites it) -->"
	docTableEnd   = "<!-- END GENERATED -->"
)

// TestConfigurationDoc fails when docs/configuration.md's table, or the
// "config" section of the chart's values.schema.json (configSchema), disagrees
// with the Config structs: one row per key, in the structs' order, with the
// default ApplyDefaults applies (for the scalar keys, as
// TestDocumentedDefaultsMatchTheConstants checks config/hookinbox.yaml
// against) and the field's doc comment. Run it with UPDATE_CONFIGURATION_DOC=1
// to rewrite the table after changing a field.
func TestConfigurationDoc(t *testing.T) {
	t.Parallel()

	comments := fieldComments(t)
	checkValuesSchema(t, comments, os.Getenv("UPDATE_CONFIGURATION_DOC") == "1")
	defaults := &Config{Sources: []SourceConfig{{}}}
	defaults.ApplyDefaults()
	documented := map[string]string{}
	for _, key := range scalarKeys(reflect.TypeFor[Config]()) {
		if key != "database.url" {
			documented[key] = documentedValue(key, fieldByKey(defaults, key).Interface())
		}
	}
	documented["worker.rescue_after"] = "job_timeout + " + formatDuration(worker.RescueAfterMarginDefault)
	for _, key := range []string{"tolerance", "queue"} {
		f, _ := fieldNamed(reflect.ValueOf(&defaults.Sources[0]).Elem(), key)
		documented["sources[]."+key] = documentedValue("sources[]."+key, f.Interface())
	}

	var table strings.Builder
	table.WriteString("| Key | Default | Meaning |\n|---|---|---|\n")
	var rows func(typ reflect.Type, prefix string)
	rows = func(typ reflect.Type, prefix string) {
		for _, field := range settingFields(typ) {
			name := tagName(field)
			key := prefix + name
			ft := field.Type
			switch {
			case ft.Kind() == reflect.Struct:
				rows(ft, key+".")
				continue
			case isStructPointer(ft):
				rows(ft.Elem(), key+".")
				continue
			case ft.Kind() == reflect.Slice && ft.Elem().Kind() == reflect.Struct:
				rows(ft.Elem(), key+"[].")
				continue
			case ft.Kind() == reflect.Map && ft.Elem().Kind() == reflect.Struct:
				rows(ft.Elem(), key+".<name>.")
				continue
			}
			def := "see meaning"
			if d, ok := documented[key]; ok {
				def = "`" + d + "`"
			}
			owner := typ
			if len(field.Index) > 1 { // A squashed struct's field.
				owner = typ.FieldByIndex(field.Index[:len(field.Index)-1]).Type
			}
			comment := comments[path.Base(owner.PkgPath())+"."+owner.Name()+"."+field.Name]
			require.NotEmpty(t, comment, "%s.%s (%s) has no doc comment", typ.Name(), field.Name, key)
			fmt.Fprintf(&table, "| `%s` | %s | %s |\n", key, def, strings.ReplaceAll(comment, "|", `\|`))
		}
	}
	rows(reflect.TypeFor[Config](), "")
	want := docTableBegin + "\n" + table.String() + docTableEnd

	data, err := os.ReadFile(configurationDoc)
	require.NoError(t, err)
	doc := string(data)
	begin, end := strings.Index(doc, docTableBegin), strings.Index(doc, docTableEnd)
	require.True(t, begin >= 0 && end > begin, "%s has no generated table markers", configurationDoc)
	got := doc[begin : end+len(docTableEnd)]
	if os.Getenv("UPDATE_CONFIGURATION_DOC") == "1" && got != want {
		require.NoError(t, os.WriteFile(configurationDoc, []byte(doc[:begin]+want+doc[end+len(docTableEnd):]), 0o644))
		return
	}
	require.Equal(t, want, got, "%s's table disagrees with the Config structs; rerun with UPDATE_CONFIGURATION_DOC=1", configurationDoc)

	// Every documented default appears in the table as it does in
	// config/hookinbox.yaml's comments.
	keys := slices.Sorted(func(yield func(string) bool) {
		for key := range documented {
			if !yield(key) {
				return
			}
		}
	})
	for _, key := range keys {
		require.Contains(t, got, "| `"+key+"` | `"+documented[key]+"` |", key)
	}
}

// fieldComments returns the doc comment of every struct field declared in
// the non-test files of this package and of the packages whose Configs it
// composes, keyed "package.Type.Field", on one line.
func fieldComments(t *testing.T) map[string]string {
	t.Helper()
	fset := token.NewFileSet()
	var names []string
	for _, pattern := range []string{"*.go", "../worker/*.go", "../effect/*.go", "../outbox/*.go", "../component/*.go", "../../internal/receiver/*.go", "../../internal/inboxstore/*.go", "../../internal/relay/*.go", "../../internal/tracing/*.go", "../../internal/rejection/*.go", "../../internal/replay/*.go", "../../internal/reconcile/*.go"} {
		matches, err := filepath.Glob(pattern)
		require.NoError(t, err)
		names = append(names, matches...)
	}
	out := map[string]string{}
	for _, name := range names {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		file, err := parser.ParseFile(fset, name, nil, parser.ParseComments)
		require.NoError(t, err)
		ast.Inspect(file, func(n ast.Node) bool {
			spec, ok := n.(*ast.TypeSpec)
			if !ok {
				return true
			}
			st, ok := spec.Type.(*ast.StructType)
			if !ok {
				return false
			}
			for _, f := range st.Fields.List {
				for _, name := range f.Names {
					out[file.Name.Name+"."+spec.Name.Name+"."+name.Name] = strings.Join(strings.Fields(f.Doc.Text()), " ")
				}
			}
			return false
		})
	}
	return out
}

// valuesSchema is the chart's values schema, whose "config" section
// TestConfigurationDoc keeps equal to the Config structs.
const valuesSchema = "../../charts/hookinbox/values.schema.json"

// schemaNode is a JSON Schema (draft-07) node of the chart's "config".
type schemaNode struct {
	Type                 any                    `json:"type,omitempty"`
	Description          string                 `json:"description,omitempty"`
	Properties           map[string]*schemaNode `json:"properties,omitempty"`
	AdditionalProperties any                    `json:"additionalProperties,omitempty"`
	Items                *schemaNode            `json:"items,omitempty"`
}

// configSchema returns the schema of a value of type typ: every struct (a
// section, a list entry, a named entry of a map) allows only its own keys,
// so that a typo fails `helm template` with its path. Scalars stay loose,
// as the daemons decode them weakly (a number may be a string, as an
// environment variable is); a duration must be a string ("30s"), as the
// daemons refuse a bare number. null is a key left out.
func configSchema(t *testing.T, typ reflect.Type, comments map[string]string) *schemaNode {
	t.Helper()
	switch {
	case typ.Kind() == reflect.Struct:
		node := &schemaNode{Type: []string{"object", "null"}, Properties: map[string]*schemaNode{}, AdditionalProperties: false}
		for _, field := range settingFields(typ) {
			owner := typ
			if len(field.Index) > 1 { // A squashed struct's field.
				owner = typ.FieldByIndex(field.Index[:len(field.Index)-1]).Type
			}
			child := configSchema(t, field.Type, comments)
			child.Description = comments[path.Base(owner.PkgPath())+"."+owner.Name()+"."+field.Name]
			node.Properties[tagName(field)] = child
		}
		return node
	case isStructPointer(typ):
		return configSchema(t, typ.Elem(), comments)
	case typ.Kind() == reflect.Slice && typ.Elem().Kind() == reflect.Struct:
		return &schemaNode{Type: []string{"array", "null"}, Items: configSchema(t, typ.Elem(), comments)}
	case typ.Kind() == reflect.Map && typ.Elem().Kind() == reflect.Struct:
		return &schemaNode{Type: []string{"object", "null"}, AdditionalProperties: configSchema(t, typ.Elem(), comments)}
	case typ == durationType:
		return &schemaNode{Type: []string{"string", "null"}}
	default:
		return &schemaNode{}
	}
}

// checkValuesSchema fails when values.schema.json's "config" section
// disagrees with the Config structs, or rewrites it when update is set.
func checkValuesSchema(t *testing.T, comments map[string]string, update bool) {
	t.Helper()
	node := configSchema(t, reflect.TypeFor[Config](), comments)
	node.Type = "object"
	node.Description = "hookinbox.yaml, every key the daemons accept (generated from pkg/config's structs by TestConfigurationDoc; docs/configuration.md lists them)."
	var buf strings.Builder
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("    ", "  ")
	require.NoError(t, enc.Encode(node))
	generated := strings.TrimSuffix(buf.String(), "\n")

	data, err := os.ReadFile(valuesSchema)
	require.NoError(t, err)
	schema := string(data)
	const key = "\n    \"config\": "
	begin := strings.Index(schema, key)
	require.GreaterOrEqual(t, begin, 0, "%s has no top-level \"config\"", valuesSchema)
	begin += len(key)
	dec := json.NewDecoder(strings.NewReader(schema[begin:]))
	var section json.RawMessage
	require.NoError(t, dec.Decode(&section))
	end := begin + int(dec.InputOffset())
	if update && schema[begin:end] != generated {
		require.NoError(t, os.WriteFile(valuesSchema, []byte(schema[:begin]+generated+schema[end:]), 0o644))
		return
	}
	require.Equal(t, generated, schema[begin:end], "%s's \"config\" disagrees with the Config structs; rerun with UPDATE_CONFIGURATION_DOC=1", valuesSchema)
}
