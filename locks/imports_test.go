package locks_test

import (
	"go/parser"
	"go/token"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestNoClusterImports keeps locks apart from the servers: a scheme gets
// addresses and settings (Config), never a cluster. It fails when a file of
// the package (tests aside, which start real servers) imports clusters or
// one of its subpackages.
func TestNoClusterImports(t *testing.T) {
	t.Parallel()
	files, err := filepath.Glob("*.go")
	require.NoError(t, err)
	fset := token.NewFileSet()
	checked := 0
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		af, err := parser.ParseFile(fset, f, nil, parser.ImportsOnly)
		require.NoError(t, err)
		for _, imp := range af.Imports {
			path, err := strconv.Unquote(imp.Path.Value)
			require.NoError(t, err)
			require.False(t, path == "github.com/locktest/locktest/clusters" || strings.HasPrefix(path, "github.com/locktest/locktest/clusters/"),
				"%s imports %s: a scheme gets addresses and settings in locks.Config, not a cluster", f, path)
		}
		checked++
	}
	require.Greater(t, checked, 10, "the package's files were not found")
}
