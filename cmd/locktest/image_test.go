package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/locktest/locktest/history"
)

// locktestImage is the image of locktest itself
// (scripts/build-images.sh locktest).
const locktestImage = "locktest/locktest:bookworm"

// TestLocktestImageWithCaps runs the locktest image as docs/campaigns.md
// says to on an engine that refuses --privileged: docker run --cap-add
// NET_ADMIN --cap-add SYS_ADMIN. The two capabilities must be enough for
// the fault that needs the most (partition: network namespaces and
// iptables): the run injects partitions that take effect and heal. The
// image is built on demand only (it is ~1 GB), so the test skips without
// it.
func TestLocktestImageWithCaps(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root (the docker socket)")
	}
	if err := exec.Command("docker", "image", "inspect", locktestImage).Run(); err != nil {
		t.Skipf("no %s (sudo ./scripts/build-images.sh locktest builds it)", locktestImage)
	}
	out := t.TempDir()
	name := "locktest-test-image-" + strconv.Itoa(os.Getpid())
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "docker", "run", "--rm", "--name", name,
		"--cap-add", "NET_ADMIN", "--cap-add", "SYS_ADMIN", "-v", out+":/out", locktestImage,
		"run", "--lock", "redis-lua", "--nemesis", "partition", "--param", "partition=isolate-server,split",
		"--time-limit", "6s", "--seed", "1", "--store", "/out", "--quiet")
	t.Cleanup(func() { _ = exec.Command("docker", "rm", "-f", name).Run() })
	b, err := cmd.CombinedOutput()
	code := cmd.ProcessState.ExitCode()
	require.Contains(t, []int{0, 1}, code, "exit %d (%v): %s", code, err, b)

	h, err := history.Load(filepath.Join(out, "latest", "history.jsonl"))
	require.NoError(t, err)
	require.NotEmpty(t, h.Faults, "no partition in 6 s: %s", b)
	for _, f := range h.Faults {
		require.Equal(t, "partition", f.Name)
		require.NotEqual(t, history.Never, f.End, "%s on %s never healed", f.Detail, f.Target)
		require.False(t, f.Failed, "%s on %s did not take effect", f.Detail, f.Target)
	}
	t.Logf("exit %d, %d partitions: %s", code, len(h.Faults), b)
}
