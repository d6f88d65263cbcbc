package integration

import (
	"testing"

	"github.com/locktest/locktest/harness"
	"github.com/locktest/locktest/harness/harnesstest"
)

// These tests were written inside package harness; the names below let
// them read as they did (the shared helpers are in harness/harnesstest).
type (
	Options    = harness.Options
	Outcome    = harness.Outcome
	UsageError = harness.UsageError
)

var (
	Run = harness.Run

	baseOptions       = harnesstest.BaseOptions
	clientCmdOptions  = harnesstest.ClientCmdOptions
	failoverShape     = harnesstest.FailoverShape
	kinds             = harnesstest.Kinds
	missedFailover    = harnesstest.MissedFailover
	runCell           = harnesstest.RunCell
	requireKinds      = harnesstest.RequireKinds
	assertNothingLeft = harnesstest.AssertNothingLeft
	alive             = harnesstest.Alive
	readFile          = harnesstest.ReadFile
	dockerImages      = harnesstest.DockerImages
	needServer        = harnesstest.NeedServer
	needSentinel      = harnesstest.NeedSentinel
	needTopology      = harnesstest.NeedTopology
	needMariaDB       = harnesstest.NeedTopology
	needNet           = harnesstest.NeedNet
	needFaketime      = harnesstest.NeedFaketime
	needDocker        = harnesstest.NeedDocker
	slot              = harnesstest.Slot
	quietSlot         = harnesstest.QuietSlot
	needImage         = harnesstest.NeedImage
)

func TestMain(m *testing.M) { harnesstest.Main(m) }
