package cli

import (
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/corralhq/corral/internal/sim/prereq"
)

// newSimDoctorCmd is `corral sim doctor`: this machine's prerequisites
// for the local emulator (package sim/prereq).
func newSimDoctorCmd(st *streams) *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:         "doctor",
		Annotations: jsonForm(),
		Short:       "Check this machine's prerequisites for the local emulator's real containers",
		Long: `doctor checks what the emulator (corral sim serve, or the embedded one)
needs from this machine to run CTs as real LXC containers of a real
Debian 12: root, Debian's lxc package, user namespaces with root's
subordinate ids 100000-165535 (/etc/subuid, /etc/subgid) as on a PVE
node, mmdebstrap and zstd for the template, cgroup v2, and memory. Each
line says ok or missing, what was found, and the command that fixes it.

The required checks are those without which the emulator refuses to
start a CT; the others degrade what it gives (a stand-in template that
boots no init, CTs without a user namespace) and say so.

EXIT STATUS
  0   every required prerequisite is there
  1   one is missing, or an error`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if output != "text" && output != "json" {
				return fmt.Errorf("--output %q: want text or json", output)
			}
			r := prereq.Run()
			if output == "json" {
				if err := writeJSON(st, r); err != nil {
					return err
				}
			} else {
				writeSimDoctor(st.out, r)
			}
			if !r.OK {
				return &exitError{code: ExitError}
			}
			return nil
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", "text", "output format: text or json")
	return cmd
}

// writeSimDoctor renders the report: one line per check, its fix below
// a missing one, then what the emulator will give.
func writeSimDoctor(w io.Writer, r prereq.Report) {
	for _, c := range r.Checks {
		state := "ok"
		switch {
		case !c.OK && c.Required:
			state = "MISSING"
		case !c.OK:
			state = "missing"
		}
		fmt.Fprintf(w, "%-8s %-11s %s\n", state, c.Name, c.Found)
		if !c.OK {
			fmt.Fprintf(w, "%-8s %-11s needed for %s\n", "", "", c.For)
			fmt.Fprintf(w, "%-8s %-11s fix: %s\n", "", "", c.Fix)
		}
	}
	fmt.Fprintln(w)
	fmt.Fprintf(w, "containers: %s\n", r.Containers)
	if r.RealTemplates {
		fmt.Fprintln(w, "template:   the real Debian 12 (corral sim serve uses it by default)")
	} else {
		fmt.Fprintln(w, "template:   a stand-in that boots no init (fix the lines above for the real Debian 12)")
	}
	switch {
	case r.OK:
	case strings.HasPrefix(r.Containers, "unisolated"):
		fmt.Fprintln(w, "MISSING: CTs run unisolated here (you opted in): guest commands run directly on this host and can see and kill its processes; fix the required prerequisites above for LXC containers")
	default:
		fmt.Fprintln(w, "MISSING: the emulator refuses to start CTs on this machine until the required prerequisites above are fixed")
		fmt.Fprintln(w, "         (or run it with --unisolated-guests: guest commands then run directly on this host and can see and kill its processes)")
	}
}
