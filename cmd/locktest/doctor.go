package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"

	"github.com/spf13/cobra"

	"github.com/locktest/locktest/clusters"
	"github.com/locktest/locktest/clusters/docker"
	"github.com/locktest/locktest/locks"
	"github.com/locktest/locktest/matrix"
	"github.com/locktest/locktest/nemesis"
)

func newDoctorCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "doctor",
		Short: "Say what is missing to run every scheme and fault, with the install command",
		Long: `Say what is missing to run every scheme and fault on the local backend, with
the install command (exit 1 when something is). It also says whether a Docker
engine answers (DOCKER_HOST, else the default socket), which compose command
this machine has, and which images of each kind of server the engine has: the
local build (scripts/build-images.sh), the official one, and the one runs take
now (LOCKTEST_IMAGE_<KIND>). --cluster docker and compose are optional: what
they lack is noted, not an error.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			out := cmd.OutOrStdout()
			var topologies []string
			for t := range clusters.Requirements {
				topologies = append(topologies, t)
			}
			sort.Strings(topologies)
			var missing []clusters.Requirement
			for _, t := range topologies {
				for _, r := range clusters.Requirements[t] {
					if p, err := clusters.Find(r); err == nil {
						fmt.Fprintf(out, "ok       %-16s %s (for %s)\n", r.Binary, p, t)
					} else {
						fmt.Fprintf(out, "MISSING  %-16s package %s (for %s)\n", r.Binary, r.Package, t)
						missing = append(missing, r)
					}
				}
			}
			if os.Geteuid() == 0 {
				fmt.Fprintln(out, "ok       root             every fault is available")
			} else {
				fmt.Fprintln(out, "note     not root         pause, pause-server, kill and crash-client work without root")
			}
			doctorFaults(out)
			doctorDocker(cmd.Context(), out)
			if len(missing) > 0 {
				return exitCode{exitError, clusters.MissingError(missing)}
			}
			fmt.Fprintln(out, "everything locktest needs is installed")
			return nil
		},
	}
}

// doctorFaults says, for each fault, whether this machine can inject it
// on the local backend (matrix.Applicable on the first scheme and
// topology it can matter to; the servers are reported above).
func doctorFaults(out io.Writer) {
	m := matrix.Probe()
	m.Missing = nil
	for _, name := range nemesis.Names() {
		a, ok := firstApplying(name, m)
		switch {
		case !ok:
		case a.Status == matrix.Skipped:
			fmt.Fprintf(out, "note     fault %-13s cannot run here: %s\n", name, a.Reason())
		default:
			fmt.Fprintf(out, "ok       fault %-13s can run here\n", name)
		}
	}
}

// firstApplying is the answer for fault name on the first scheme and
// topology it is not n/a to; ok false when it is n/a everywhere.
func firstApplying(name string, m matrix.Machine) (matrix.Answer, bool) {
	for _, s := range locks.Schemes {
		for _, t := range append([]string{s.Topology}, s.Topologies...) {
			a := matrix.Applicable(matrix.Cell{Scheme: s, Topology: t, Faults: []string{name}}, m)
			if a.Status != matrix.NotApplicable {
				return a, true
			}
		}
	}
	return matrix.Answer{}, false
}

// doctorDocker says what the container backends have here.
func doctorDocker(ctx context.Context, out io.Writer) {
	e := docker.Survey(ctx)
	host := "DOCKER_HOST unset"
	if e.FromEnv {
		host = "DOCKER_HOST=" + os.Getenv("DOCKER_HOST")
	}
	if e.Err != nil {
		fmt.Fprintf(out, "note     docker engine    none answers at %s (%s): --cluster docker and compose cannot run (%s)\n", e.Host, host, firstLine(e.Err.Error()))
		return
	}
	fmt.Fprintf(out, "ok       docker engine    %s, Docker %s (%s)\n", e.Host, e.Version, host)
	if cmd, v2 := docker.ComposeCommand(); v2 {
		fmt.Fprintf(out, "ok       compose          %s (v2) for docker-compose.yml\n", cmd)
	} else {
		fmt.Fprintf(out, "ok       compose          %s (v1: no --wait; the harness waits for the servers)\n", cmd)
	}
	for _, k := range e.Images {
		state := func(has bool) string {
			if has {
				return "present"
			}
			return "missing"
		}
		line := fmt.Sprintf("%s (local build) %s, %s (official) %s", k.Local, state(k.HasLocal), k.Official, state(k.HasOfficial))
		if k.Uses != k.Local && k.Uses != k.Official {
			line += fmt.Sprintf(", %s %s", k.Uses, state(k.OK))
		}
		how := "runs use " + k.Uses
		if k.Uses != k.Official {
			how += " (" + docker.ImageEnv(k.Kind) + ")"
		}
		status := "ok      "
		if !k.OK {
			status = "note    "
			switch {
			case k.Uses == k.Local:
				how += ": build it with `sudo ./scripts/build-images.sh " + k.Kind + "`"
			case k.Uses == k.Official && k.HasLocal:
				how += ", pulled at the first run; without a registry set " + docker.ImageEnv(k.Kind) + "=" + k.Local
			case k.Uses == k.Official:
				how += ", pulled at the first run; without a registry build " + k.Local + " with `sudo ./scripts/build-images.sh " + k.Kind + "`"
			default:
				how += ", pulled at the first run"
			}
		}
		fmt.Fprintf(out, "%s image %-10s %s; %s\n", status, k.Kind, line, how)
	}
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(s, "\n")
	return s
}
