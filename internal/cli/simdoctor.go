package cli

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/corralhq/corral/internal/sim/prereq"
	"github.com/corralhq/corral/internal/ui"
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
				ui.WriteSimDoctor(st.out, r)
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
