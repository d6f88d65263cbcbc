package longfuncs

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// Over lists the functions and methods over the limit, longest first, with
// where they start, and leaves out test files and shorter functions.
func TestOver(t *testing.T) {
	dir := t.TempDir()
	src := "package p\n\ntype T struct{}\n\nfunc short() {}\n\n" +
		"func (t *T) five() {\n\t_ = 1\n\t_ = 2\n\t_ = 3\n}\n\n" +
		"func six() {\n\t_ = 1\n\t_ = 2\n\t_ = 3\n\t_ = 4\n}\n"
	require.NoError(t, os.WriteFile(filepath.Join(dir, "p.go"), []byte(src), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "p_test.go"), []byte("package p\n\nfunc long() {\n\n\n\n\n\n}\n"), 0o644))
	fs, err := Over(4, dir)
	require.NoError(t, err)
	require.Equal(t, []Func{
		{File: filepath.Join(dir, "p.go"), Line: 13, Name: "six", Lines: 6},
		{File: filepath.Join(dir, "p.go"), Line: 7, Name: "T.five", Lines: 5},
	}, fs)
	fs, err = Over(5, dir)
	require.NoError(t, err)
	require.Len(t, fs, 1)
}
