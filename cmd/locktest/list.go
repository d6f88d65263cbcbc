package main

import (
	"fmt"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/locktest/locktest/clusters/local"
	"github.com/locktest/locktest/locks"
	"github.com/locktest/locktest/matrix"
	"github.com/locktest/locktest/nemesis"
)

func newListCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "list",
		Short: "List the lock schemes and the faults",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			w := tabwriter.NewWriter(cmd.OutOrStdout(), 2, 4, 2, ' ', 0)
			fmt.Fprintln(w, "LOCK SCHEMES\tSERVERS\tLEASE\tFENCE\tN/A FAULTS\t")
			for _, s := range locks.Schemes {
				servers := strings.Join(append([]string{s.Topology}, s.Topologies...), ",")
				fmt.Fprintf(w, "  %s\t%s\t%s\t%s\t%s\t%s\n", s.Name, servers, yesNo(s.Lease), yesNo(s.Fencing), naFaults(s), s.Summary)
				if m, ok := locks.Mirrors[s.Name]; ok {
					fmt.Fprintf(w, "  \t\t\t\t\tmirrors: %s\n", m)
					if m.Differs != "" {
						fmt.Fprintf(w, "  \t\t\t\t\tdiffers: %s\n", m.Differs)
					}
				}
			}
			fmt.Fprintln(w, "\nHISTORICAL VARIANTS (--param KEY=VALUE)\tLOCK\t\t\t\t")
			for _, v := range locks.Variants {
				fmt.Fprintf(w, "  %s\t%s\t\t\t\tmirrors: %s; %s\n", v.Param(), v.Scheme, v.Mirror, v.Hole)
			}
			fmt.Fprintln(w, "\nFAULTS (--nemesis)\t\t\t\t\t")
			for _, n := range nemesis.All {
				fmt.Fprintf(w, "  %s\t\t\t\t\t%s\n", n.Name, n.Summary)
			}
			fmt.Fprintln(w, "\nSERVER SETTINGS (--param KEY=VALUE)\tFOR\tDEFAULT\t\t\t")
			for _, p := range local.Params {
				fmt.Fprintf(w, "  %s\t%s\t%s\t\t\t%s\n", p.Name, p.For, p.Default, p.Summary)
			}
			return w.Flush()
		},
	}
}

// naFaults lists the faults that cannot matter to scheme s on any
// topology it runs on (matrix.Applicable), "-" for none.
func naFaults(s locks.Scheme) string {
	var out []string
	for _, n := range nemesis.Names() {
		na := true
		for _, t := range append([]string{s.Topology}, s.Topologies...) {
			if matrix.Applicable(matrix.Cell{Scheme: s, Topology: t, Faults: []string{n}}, matrix.Machine{}).Status != matrix.NotApplicable {
				na = false
			}
		}
		if na {
			out = append(out, n)
		}
	}
	if len(out) == 0 {
		return "-"
	}
	return strings.Join(out, ",")
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}
