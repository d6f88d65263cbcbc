package campaigns_test

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	yaml "go.yaml.in/yaml/v3"
)

type workflowStep struct {
	Name            string            `yaml:"name"`
	Uses            string            `yaml:"uses"`
	Run             string            `yaml:"run"`
	If              string            `yaml:"if"`
	With            map[string]string `yaml:"with"`
	ContinueOnError bool              `yaml:"continue-on-error"`
}

type workflowJob struct {
	Needs     string `yaml:"needs"`
	If        string `yaml:"if"`
	Container struct {
		Image   string `yaml:"image"`
		Options string `yaml:"options"`
	} `yaml:"container"`
	Strategy struct {
		FailFast *bool `yaml:"fail-fast"`
		Matrix   struct {
			Shard []int `yaml:"shard"`
		} `yaml:"matrix"`
	} `yaml:"strategy"`
	Permissions map[string]string `yaml:"permissions"`
	Steps       []workflowStep    `yaml:"steps"`
}

// TestNightlyWorkflow keeps what the nightly workflow needs: the nightly
// campaign as a matrix of N shards (privileged debian:bookworm
// containers, each running --shard K/N and uploading its directory
// whatever happens) and a merge job that runs after them all, also when
// one failed, downloads every shard, merges the N of them and gives the
// verdict; in every job git trusts the checkout before anything builds
// (else go build fails with "error obtaining VCS status"), the servers
// come from the README's install script, and the JUnit step may write
// checks (or may fail without failing the job).
func TestNightlyWorkflow(t *testing.T) {
	path := filepath.Join("..", ".github", "workflows", "nightly.yml")
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	var wf struct {
		Permissions map[string]string      `yaml:"permissions"`
		Jobs        map[string]workflowJob `yaml:"jobs"`
	}
	require.NoError(t, yaml.Unmarshal(b, &wf))
	require.Len(t, wf.Jobs, 2)
	shard, ok := wf.Jobs["shard"]
	require.True(t, ok)
	merge, ok := wf.Jobs["merge"]
	require.True(t, ok)

	// The shards.
	n := len(shard.Strategy.Matrix.Shard)
	require.GreaterOrEqual(t, n, 2)
	for i, k := range shard.Strategy.Matrix.Shard {
		require.Equal(t, i+1, k, "the matrix lists shards 1..N")
	}
	require.NotNil(t, shard.Strategy.FailFast)
	require.False(t, *shard.Strategy.FailFast, "a failed shard must not cancel the others")
	require.Equal(t, "debian:bookworm", shard.Container.Image)
	require.Contains(t, shard.Container.Options, "--privileged")
	checkBuilds(t, "shard", shard, wf.Permissions, true)
	ranShard, uploaded := false, ""
	for _, st := range shard.Steps {
		if strings.Contains(st.Run, "locktest campaign") {
			require.Contains(t, st.Run, "--config campaigns/nightly.yaml")
			require.Contains(t, st.Run, fmt.Sprintf(`--shard "${{ matrix.shard }}/%d"`, n))
			require.Contains(t, st.Run, `--dir "shard-${{ matrix.shard }}"`)
			ranShard = true
		}
		if strings.HasPrefix(st.Uses, "actions/upload-artifact") {
			require.Equal(t, "always()", st.If)
			require.Equal(t, "shard-${{ matrix.shard }}/", st.With["path"])
			uploaded = st.With["name"]
		}
	}
	require.True(t, ranShard, "no step runs the shard")
	require.Equal(t, "locktest-shard-${{ matrix.shard }}", uploaded)

	// The merge.
	require.Equal(t, "shard", merge.Needs)
	require.Equal(t, "always()", merge.If, "the merge must run (and say which shard is missing) when a shard failed")
	checkBuilds(t, "merge", merge, wf.Permissions, false)
	downloaded, merged, verdict := "", -1, -1
	for i, st := range merge.Steps {
		switch {
		case strings.HasPrefix(st.Uses, "actions/download-artifact"):
			require.Equal(t, "locktest-shard-*", st.With["pattern"])
			downloaded = st.With["path"]
		case strings.Contains(st.Run, "report --merge"):
			require.NotEmpty(t, downloaded, "the merge runs before the download")
			for k := 1; k <= n; k++ {
				require.Contains(t, st.Run, fmt.Sprintf("%s/locktest-shard-%d", downloaded, k))
			}
			require.NotContains(t, st.Run, fmt.Sprintf("%s/locktest-shard-%d", downloaded, n+1))
			merged = i
		case strings.Contains(st.Run, "steps.campaign.outputs.code"):
			verdict = i
		}
	}
	require.GreaterOrEqual(t, merged, 0, "no step merges the shards")
	require.Greater(t, verdict, merged, "no step fails the job on the merged exit code")

}

// checkBuilds: git trusts the checkout before a step builds, the install
// script (it runs go build) comes after, and a JUnit step may write
// checks.
func checkBuilds(t *testing.T, name string, job workflowJob, perms map[string]string, installs bool) {
	t.Helper()
	trusted, installed := -1, -1
	build := regexp.MustCompile(`\bgo (build|test)\b`)
	for i, st := range job.Steps {
		switch {
		case strings.Contains(st.Run, "safe.directory") && strings.Contains(st.Run, "GITHUB_WORKSPACE"):
			trusted = i
		case strings.Contains(st.Run, "./scripts/install.sh"):
			installed = i
		case strings.HasPrefix(st.Uses, "mikepenz/action-junit-report"):
			checks := perms["checks"]
			if c, ok := job.Permissions["checks"]; ok {
				checks = c
			}
			require.True(t, checks == "write" || st.ContinueOnError, "%s: the JUnit report needs permissions: checks: write", name)
		}
		if build.MatchString(st.Run) || strings.Contains(st.Run, "./scripts/install.sh") {
			require.True(t, (trusted >= 0 && trusted < i) || strings.Contains(st.Run, "-buildvcs=false"), "%s: step %q builds before git trusts the checkout", name, st.Name)
		}
	}
	require.GreaterOrEqual(t, trusted, 0, "%s: no step marks the checkout a safe.directory", name)
	if installs {
		require.Greater(t, installed, trusted, "%s: the install script (it runs go build) must come after safe.directory", name)
	}
}
