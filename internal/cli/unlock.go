package cli

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/corralhq/corral/internal/apply"
	"github.com/corralhq/corral/internal/ui"
)

func newUnlockCmd(st *streams) *cobra.Command {
	var cf connFlags
	var nodes []string
	var force bool
	var output string
	cmd := &cobra.Command{
		Use:         "unlock",
		Annotations: jsonForm(),
		Short:       "Break corral's lock on a node whose holder is gone",
		Long: `Commands that change the cluster hold corral's lock on the nodes they
change (a lease in the Notes of the node's first keeper, renewed while they
run). A corral that was killed leaves its lease until it runs out (2
minutes); unlock breaks it at once when it ran out or its holder is a
process of this machine that is gone. --force breaks a lease whose holder
may still run: only when you know it does not (another machine crashed).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if output != "text" && output != "json" {
				return fmt.Errorf("--output %q: want text or json", output)
			}
			s, err := connect(cmd.Context(), st, cf)
			if err != nil {
				return err
			}
			defer s.Close()
			rows, err := apply.Unlock(cmd.Context(), s.client, nodes, force)
			switch {
			case output == "json" && err == nil:
				return writeJSON(st, rows)
			case output == "text":
				ui.WriteUnlocked(st.out, rows)
			}
			if err == nil && len(rows) == 0 {
				ui.WriteNothingLocked(st.out)
			}
			return err
		},
	}
	cf.add(cmd.Flags())
	cmd.Flags().StringSliceVar(&nodes, "node", nil, "node whose lock to break (default: every locked node)")
	cmd.Flags().BoolVar(&force, "force", false, "break a lease whose holder may still be running")
	cmd.Flags().StringVarP(&output, "output", "o", "text", "output format: text or json")
	return cmd
}
