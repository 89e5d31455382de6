package cli

import (
	"fmt"
	"slices"

	"github.com/spf13/cobra"

	"github.com/corralhq/corral/internal/apply"
	"github.com/corralhq/corral/internal/plan"
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
			ctx := cmd.Context()
			s, err := connect(ctx, st, cf)
			if err != nil {
				return err
			}
			defer s.Close()
			obs, err := apply.Observe(ctx, s.client)
			if err != nil {
				return err
			}
			if len(nodes) == 0 {
				for _, n := range obs.Nodes {
					if ks := obs.Keepers[n]; len(ks) > 0 && ks[0].Lease != nil {
						nodes = append(nodes, n)
					}
				}
			}
			ex := &apply.Executor{Client: s.client}
			type row struct {
				Node   string      `json:"node"`
				Broken *plan.Lease `json:"broken"`
			}
			rows := []row{}
			for _, n := range nodes {
				if !slices.Contains(obs.Nodes, n) {
					return fmt.Errorf("node %q does not exist (nodes: %v)", n, obs.Nodes)
				}
				l, err := ex.BreakLease(ctx, obs, n, force)
				if err != nil {
					return err
				}
				rows = append(rows, row{n, l})
				if output == "text" {
					if l == nil {
						fmt.Fprintf(st.out, "node %s: not locked\n", n)
					} else {
						fmt.Fprintf(st.out, "node %s: broke the lock of %s\n", n, l)
					}
				}
			}
			if output == "json" {
				return writeJSON(st, rows)
			}
			if len(rows) == 0 {
				fmt.Fprintln(st.out, "no node is locked")
			}
			return nil
		},
	}
	cf.add(cmd.Flags())
	cmd.Flags().StringSliceVar(&nodes, "node", nil, "node whose lock to break (default: every locked node)")
	cmd.Flags().BoolVar(&force, "force", false, "break a lease whose holder may still be running")
	cmd.Flags().StringVarP(&output, "output", "o", "text", "output format: text or json")
	return cmd
}
