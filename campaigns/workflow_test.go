package campaigns_test

import (
	"fmt"
	"io"
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

// k8sDocs reads the YAML documents of a manifest.
func k8sDocs(t *testing.T, name string) []map[string]any {
	t.Helper()
	f, err := os.Open(filepath.Join("..", "examples", "k8s", name))
	require.NoError(t, err)
	defer f.Close()
	dec := yaml.NewDecoder(f)
	var docs []map[string]any
	for {
		var d map[string]any
		if err := dec.Decode(&d); err != nil {
			require.ErrorIs(t, err, io.EOF)
			return docs
		}
		docs = append(docs, d)
	}
}

// at walks a decoded YAML document by keys and list indexes.
func at(t *testing.T, v any, path ...any) any {
	t.Helper()
	for _, p := range path {
		switch k := p.(type) {
		case string:
			m, ok := v.(map[string]any)
			require.True(t, ok, "%v: not a map at %q", path, k)
			v = m[k]
		case int:
			l, ok := v.([]any)
			require.True(t, ok, "%v: not a list at %d", path, k)
			require.Greater(t, len(l), k)
			v = l[k]
		}
	}
	return v
}

// netnsRights says whether a container's securityContext lets locktest
// make network namespaces and iptables rules: privileged, or the two
// capabilities that suffice (NET_ADMIN and SYS_ADMIN).
func netnsRights(sc any) bool {
	m, _ := sc.(map[string]any)
	if m["privileged"] == true {
		return true
	}
	caps, _ := m["capabilities"].(map[string]any)
	add, _ := caps["add"].([]any)
	has := map[any]bool{}
	for _, c := range add {
		has[c] = true
	}
	return has["NET_ADMIN"] && has["SYS_ADMIN"]
}

// TestK8sExample: the Indexed Job of examples/k8s runs N shards of the
// nightly campaign, shard JOB_COMPLETION_INDEX+1 of N in each pod
// (privileged, or with NET_ADMIN and SYS_ADMIN), into a directory of its own on a volume many nodes mount; a failed
// pod resumes its shard; the merge job reads shards 1..N from the same
// volume.
func TestK8sExample(t *testing.T) {
	docs := k8sDocs(t, "shards-job.yaml")
	require.Len(t, docs, 2)
	job, pvc := docs[0], docs[1]
	require.Equal(t, "Job", job["kind"])
	require.Equal(t, "batch/v1", job["apiVersion"])
	require.Equal(t, "Indexed", at(t, job, "spec", "completionMode"))
	n := at(t, job, "spec", "completions").(int)
	require.GreaterOrEqual(t, n, 2)
	require.Equal(t, n, at(t, job, "spec", "parallelism"))
	pod := at(t, job, "spec", "template", "spec")
	require.Equal(t, "Never", at(t, pod, "restartPolicy"))
	c := at(t, pod, "containers", 0)
	require.True(t, netnsRights(at(t, c, "securityContext")),
		"the shard container is neither privileged nor given NET_ADMIN and SYS_ADMIN")
	script := at(t, c, "args", 0).(string)
	require.Contains(t, script, "--config /config/nightly.yaml")
	require.Contains(t, script, fmt.Sprintf(`--shard "$((JOB_COMPLETION_INDEX + 1))/%d"`, n))
	require.Contains(t, script, `dir="/shards/shard-$k"`)
	require.Contains(t, script, "k=$((JOB_COMPLETION_INDEX + 1))")
	require.Contains(t, script, `--dir "$dir"`)
	require.Contains(t, script, `locktest campaign --resume "$dir"`)
	mounts := map[string]string{}
	for _, m := range at(t, c, "volumeMounts").([]any) {
		mounts[at(t, m, "name").(string)] = at(t, m, "mountPath").(string)
	}
	require.Equal(t, map[string]string{"shards": "/shards", "config": "/config"}, mounts)
	vols := map[string]any{}
	for _, v := range at(t, pod, "volumes").([]any) {
		vols[at(t, v, "name").(string)] = v
	}
	claim := at(t, vols["shards"], "persistentVolumeClaim", "claimName")
	require.Equal(t, "locktest-campaign", at(t, vols["config"], "configMap", "name"))
	require.Equal(t, "PersistentVolumeClaim", pvc["kind"])
	require.Equal(t, claim, at(t, pvc, "metadata", "name"))
	require.Equal(t, []any{"ReadWriteMany"}, at(t, pvc, "spec", "accessModes"))

	docs = k8sDocs(t, "merge-job.yaml")
	require.Len(t, docs, 1)
	merge := docs[0]
	require.Equal(t, "Job", merge["kind"])
	mpod := at(t, merge, "spec", "template", "spec")
	require.Equal(t, at(t, c, "image"), at(t, mpod, "containers", 0, "image"))
	require.Equal(t, claim, at(t, mpod, "volumes", 0, "persistentVolumeClaim", "claimName"))
	require.Equal(t, "/shards", at(t, mpod, "containers", 0, "volumeMounts", 0, "mountPath"))
	var cmd []string
	for _, a := range at(t, mpod, "containers", 0, "command").([]any) {
		cmd = append(cmd, a.(string))
	}
	want := []string{"locktest", "report", "--merge", "/shards/merged"}
	for k := 1; k <= n; k++ {
		want = append(want, fmt.Sprintf("/shards/shard-%d", k))
	}
	require.Equal(t, want, cmd)
}

// TestLocktestImagePackages: the locktest image (scripts/build-images.sh
// locktest) holds what scripts/install.sh installs for the servers and
// the faults: every package but the browser of the report tests and the
// Python clients of the examples.
func TestLocktestImagePackages(t *testing.T) {
	read := func(name string) string {
		b, err := os.ReadFile(filepath.Join("..", "scripts", name))
		require.NoError(t, err)
		return string(b)
	}
	m := regexp.MustCompile(`(?m)^PACKAGES=\(([^)]*)\)`).FindStringSubmatch(read("install.sh"))
	require.NotNil(t, m, "install.sh has no PACKAGES=(...)")
	var want []string
	for _, p := range strings.Fields(m[1]) {
		if p != "chromium" && !strings.HasPrefix(p, "python3-") {
			want = append(want, p)
		}
	}
	m = regexp.MustCompile(`(?m)^\s*build_image locktest (.*)$`).FindStringSubmatch(read("build-images.sh"))
	require.NotNil(t, m, "build-images.sh builds no locktest image")
	require.ElementsMatch(t, want, strings.Fields(m[1]))
}

// TestNetnsRights: the securityContext check accepts a privileged
// container or the two capabilities, and refuses one capability alone or
// nothing.
func TestNetnsRights(t *testing.T) {
	for _, sc := range []any{
		map[string]any{"privileged": true},
		map[string]any{"capabilities": map[string]any{"add": []any{"SYS_ADMIN", "NET_ADMIN"}}},
	} {
		require.True(t, netnsRights(sc), "refused %v", sc)
	}
	for _, sc := range []any{
		nil,
		map[string]any{},
		map[string]any{"privileged": false},
		map[string]any{"capabilities": map[string]any{"add": []any{"NET_ADMIN"}}},
	} {
		require.False(t, netnsRights(sc), "accepted %v", sc)
	}
}
