package campaigns_test

import (
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rhysd/actionlint"
	"github.com/stretchr/testify/require"
)

// workflowLinter is actionlint as a library: its own checks of syntax,
// expressions, contexts, matrix, needs, action inputs and runner labels.
// The external shellcheck and pyflakes stay off (empty paths), so that
// the verdict does not depend on what the machine has installed.
func workflowLinter(t *testing.T) *actionlint.Linter {
	t.Helper()
	l, err := actionlint.NewLinter(io.Discard, &actionlint.LinterOptions{})
	require.NoError(t, err)
	return l
}

// TestWorkflowsActionlint: every workflow under .github/workflows passes
// actionlint (github.com/rhysd/actionlint, the version go.mod names).
func TestWorkflowsActionlint(t *testing.T) {
	var files []string
	for _, pattern := range []string{"*.yml", "*.yaml"} {
		m, err := filepath.Glob(filepath.Join("..", ".github", "workflows", pattern))
		require.NoError(t, err)
		files = append(files, m...)
	}
	require.NotEmpty(t, files, "no workflow under .github/workflows")
	errs, err := workflowLinter(t).LintFiles(files, nil)
	require.NoError(t, err)
	for _, e := range errs {
		t.Errorf("%s:%d:%d: %s [%s]", e.Filepath, e.Line, e.Column, e.Message, e.Kind)
	}
}

// TestActionlintFindsErrors: the linter of TestWorkflowsActionlint does
// report what it is there for (a job that needs a job that does not
// exist, an unknown context, an action input that does not exist), so
// that its silence on the real workflows means something.
func TestActionlintFindsErrors(t *testing.T) {
	bad := []byte(`name: bad
on: push
jobs:
  merge:
    needs: shards
    runs-on: ubuntu-latest
    steps:
      - uses: actions/checkout@v4
        with:
          no-such-input: true
      - run: echo "${{ matrixx.shard }}"
`)
	errs, err := workflowLinter(t).Lint("bad.yml", bad, nil)
	require.NoError(t, err)
	kinds := map[string]bool{}
	for _, e := range errs {
		kinds[e.Kind] = true
	}
	require.True(t, kinds["job-needs"], "missing job not reported: %v", errs)
	require.True(t, kinds["expression"], "unknown context not reported: %v", errs)
	require.True(t, kinds["action"], "unknown action input not reported: %v", errs)

	// The real nightly workflow with its merge job needing a job it does
	// not have.
	path := filepath.Join("..", ".github", "workflows", "nightly.yml")
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	broken := strings.Replace(string(b), "needs: shard\n", "needs: shards\n", 1)
	require.NotEqual(t, string(b), broken, "nightly.yml has no 'needs: shard' line")
	errs, err = workflowLinter(t).Lint(path, []byte(broken), nil)
	require.NoError(t, err)
	require.NotEmpty(t, errs)
	require.Equal(t, "job-needs", errs[0].Kind, "%v", errs)
}
