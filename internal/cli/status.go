package cli

import (
	"errors"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/corralhq/corral/internal/apply"
	"github.com/corralhq/corral/internal/plan"
	"github.com/corralhq/corral/internal/ui"
)

func newStatusCmd(st *streams) *cobra.Command {
	var ff fileFlags
	var cf connFlags
	var exitCode bool
	cmd := &cobra.Command{
		Use:         "status",
		Annotations: jsonForm(),
		Short:       "Show each app's container, volumes and drift from the manifest",
		Args:        cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ff.lazy = true // status compares provisioning only when its values are at hand
			j, err := openJob(cmd.Context(), st, ff, cf)
			if err != nil {
				return err
			}
			defer j.Close()
			r, err := apply.Status(cmd.Context(), j.s.client, plan.FromManifest(j.f), j.f.Redact)
			if err != nil {
				return redactErr(j.f, err)
			}
			if j.asJSON {
				err = writeJSON(st, r)
			} else {
				ui.WriteStatus(st.out, r)
			}
			switch {
			case err != nil:
				return err
			case r.CannotSeeGuests:
				// Not in sync, nor drifted: unknown, which is an error.
				return errors.New("status unknown: the token cannot see guests (it lacks VM.Audit on /vms); run corral doctor")
			case exitCode && !r.InSync:
				// --exit-code: 2 when the cluster drifted from the
				// manifest, as plan says it (a refused plan is drift too).
				return &exitError{code: ExitChanges}
			}
			return nil
		},
	}
	ff.add(cmd.Flags())
	cf.add(cmd.Flags())
	cmd.Flags().BoolVar(&exitCode, "exit-code", false, "exit 2 when the cluster differs from the manifest (0 in sync, 1 error), like plan")
	return cmd
}

func newVolumesCmd(st *streams) *cobra.Command {
	var output string
	var cf connFlags
	cmd := &cobra.Command{
		Use:         "volumes",
		Annotations: jsonForm(),
		Short:       "List every volume corral keeps, on every node, and where it is attached",
		Args:        cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ff := fileFlags{output: output}
			asJSON, err := ff.json()
			if err != nil {
				return err
			}
			s, err := connect(cmd.Context(), st, cf)
			if err != nil {
				return err
			}
			defer s.Close()
			obs, err := apply.Observe(cmd.Context(), s.client)
			if err != nil {
				return err
			}
			inv := plan.Inventory(obs)
			if inv == nil {
				inv = []plan.VolumeInfo{}
			}
			if asJSON {
				return writeJSON(st, map[string]any{"volumes": inv})
			}
			if len(inv) == 0 {
				fmt.Fprintln(st.out, "No volumes: corral keeps none on this cluster yet.")
				return nil
			}
			ui.WriteVolumes(st.out, inv)
			return nil
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", "text", "output format: text or json")
	cf.add(cmd.Flags())
	cmd.AddCommand(newVolumesRmCmd(st), newVolumesPruneCmd(st))
	return cmd
}
