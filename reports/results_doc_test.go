package reports

import (
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/locktest/locktest/checker"
)

// jsonFields walks the struct types reachable from t (through pointers,
// slices, arrays and map values) and returns, per struct type ("pkg.Name"),
// the JSON names of its serialised fields (embedded structs' fields count
// as the outer struct's, as encoding/json flattens them).
func jsonFields(t reflect.Type, out map[string][]string) {
	for t.Kind() == reflect.Pointer || t.Kind() == reflect.Slice || t.Kind() == reflect.Array || t.Kind() == reflect.Map {
		t = t.Elem()
	}
	if t.Kind() != reflect.Struct || t.PkgPath() == "" {
		return
	}
	name := t.String()
	if _, seen := out[name]; seen {
		return
	}
	out[name] = nil
	var walk func(t reflect.Type)
	walk = func(t reflect.Type) {
		for i := 0; i < t.NumField(); i++ {
			f := t.Field(i)
			tag := f.Tag.Get("json")
			if tag == "-" || (!f.IsExported() && !f.Anonymous) {
				continue
			}
			key, _, _ := strings.Cut(tag, ",")
			if f.Anonymous && key == "" && f.Type.Kind() == reflect.Struct {
				walk(f.Type)
				continue
			}
			if key == "" {
				key = f.Name
			}
			out[name] = append(out[name], key)
			jsonFields(f.Type, out)
		}
	}
	walk(t)
}

// docSections splits docs/results.md at its headings; a section belongs
// to the Go type its heading names in backquotes ("(`reports.Cell`)").
func docSections(t *testing.T) map[string]string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "docs", "results.md"))
	require.NoError(t, err)
	heading := regexp.MustCompile("(?m)^#{2,4} .*\\(`([a-z]+\\.[A-Za-z]+)`\\)\\s*$")
	doc := string(b)
	locs := heading.FindAllStringSubmatchIndex(doc, -1)
	out := map[string]string{}
	for i, l := range locs {
		end := len(doc)
		if i+1 < len(locs) {
			end = locs[i+1][0]
		}
		out[doc[l[2]:l[3]]] = doc[l[0]:end]
	}
	return out
}

// TestResultsDocCoversEveryField: every JSON field of a run's results.json
// (checker.Result) and of a campaign's (reports.Campaign), and of every
// struct inside them, has a row in its type's table in docs/results.md;
// and the doc documents no field that does not exist. shrink.json's
// (shrink.Report, which imports this package) is checked by
// TestResultsDocCoversShrinkReport.
func TestResultsDocCoversEveryField(t *testing.T) {
	fields := docCoversEveryField(t, checker.Result{}, Campaign{})
	require.Contains(t, fields, "reports.CellRun")
	require.Contains(t, fields, "checker.SearchStats")
}

// docCoversEveryField checks that docs/results.md documents every JSON
// field of the struct types reachable from roots, and no other, and
// returns those types' fields.
func docCoversEveryField(t *testing.T, roots ...any) map[string][]string {
	t.Helper()
	fields := map[string][]string{}
	for _, r := range roots {
		jsonFields(reflect.TypeOf(r), fields)
	}
	sections := docSections(t)
	row := regexp.MustCompile("(?m)^\\| `([a-z_]+)` \\|")
	for typ, names := range fields {
		sec, ok := sections[typ]
		require.True(t, ok, "docs/results.md has no section for %s (a heading ending in (`%s`))", typ, typ)
		documented := map[string]bool{}
		for _, m := range row.FindAllStringSubmatch(sec, -1) {
			documented[m[1]] = true
		}
		for _, n := range names {
			require.True(t, documented[n], "docs/results.md does not document %s's field %q (a table row starting | `%s` |)", typ, n, n)
			delete(documented, n)
		}
		require.Empty(t, documented, "docs/results.md documents fields %s does not have", typ)
	}
	return fields
}
