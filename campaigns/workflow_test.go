package campaigns_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	yaml "go.yaml.in/yaml/v3"
)

// TestNightlyWorkflow keeps what the nightly workflow needs in a
// debian:bookworm container: the JUnit step may write checks (or may
// fail without failing the job), git trusts the checkout before anything
// builds (else go build fails with "error obtaining VCS status"), and the
// servers come from the README's install script.
func TestNightlyWorkflow(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", ".github", "workflows", "nightly.yml"))
	require.NoError(t, err)
	var wf struct {
		Permissions map[string]string `yaml:"permissions"`
		Jobs        map[string]struct {
			Container struct {
				Image string `yaml:"image"`
			} `yaml:"container"`
			Permissions map[string]string `yaml:"permissions"`
			Steps       []struct {
				Name            string `yaml:"name"`
				Uses            string `yaml:"uses"`
				Run             string `yaml:"run"`
				ContinueOnError bool   `yaml:"continue-on-error"`
			} `yaml:"steps"`
		} `yaml:"jobs"`
	}
	require.NoError(t, yaml.Unmarshal(b, &wf))
	job, ok := wf.Jobs["campaign"]
	require.True(t, ok)
	require.Equal(t, "debian:bookworm", job.Container.Image)
	trusted, installed := -1, -1
	for i, st := range job.Steps {
		switch {
		case strings.Contains(st.Run, "safe.directory") && strings.Contains(st.Run, "GITHUB_WORKSPACE"):
			trusted = i
		case strings.Contains(st.Run, "./scripts/install.sh"):
			installed = i
		case strings.HasPrefix(st.Uses, "mikepenz/action-junit-report"):
			checks := wf.Permissions["checks"]
			if c, ok := job.Permissions["checks"]; ok {
				checks = c
			}
			require.True(t, checks == "write" || st.ContinueOnError, "the JUnit report needs permissions: checks: write")
		}
		if strings.Contains(st.Run, "go build") || strings.Contains(st.Run, "go test") {
			require.True(t, trusted >= 0 || strings.Contains(st.Run, "-buildvcs=false"), "step %q builds before git trusts the checkout", st.Name)
		}
	}
	require.GreaterOrEqual(t, trusted, 0, "no step marks the checkout a safe.directory")
	require.Greater(t, installed, trusted, "the install script (it runs go build) must come after safe.directory")
}
