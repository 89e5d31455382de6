package cli

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/corralhq/corral/internal/bench"
)

func init() { extraCommands = append(extraCommands, newBenchCmd) }

func newBenchCmd(st *streams) *cobra.Command {
	var quick bool
	var output string
	cmd := &cobra.Command{
		Use:         "bench",
		Annotations: jsonForm(),
		Short:       "Measure corral's overhead, API calls and scale against the emulator",
		Long: `bench runs corral against fresh emulators and prints figures: the wall
time of create, update, destroy and recreate divided by the time the
emulated Proxmox tasks themselves took; API requests per operation; plan
and apply of many apps over several nodes; emulator throughput and
memory; and the seeds' recreate cycle modelled at real task durations.

It asserts nothing: figures on a shared machine vary. docs/benchmarks.md
records a run and how to reproduce it.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ff := fileFlags{output: output}
			asJSON, err := ff.json()
			if err != nil {
				return err
			}
			dir, err := os.MkdirTemp("", "corral-bench")
			if err != nil {
				return err
			}
			defer os.RemoveAll(dir)
			o := bench.Full(dir)
			if quick {
				o = bench.Quick(dir)
			}
			o.Progress = func(s string) { fmt.Fprintf(st.err, "bench: %s...\n", s) }
			r, err := bench.Run(cmd.Context(), o)
			if err != nil {
				return err
			}
			if asJSON {
				return writeJSON(st, r)
			}
			bench.WriteText(st.out, r)
			return nil
		},
	}
	cmd.Flags().BoolVar(&quick, "quick", false, "a small, fast run (20 apps instead of 1,000)")
	cmd.Flags().StringVarP(&output, "output", "o", "text", "output format: text or json")
	return cmd
}
