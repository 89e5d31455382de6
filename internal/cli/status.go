package cli

import (
	"context"
	"errors"
	"time"

	"github.com/spf13/cobra"

	"github.com/corralhq/corral/internal/apply"
	"github.com/corralhq/corral/internal/plan"
	"github.com/corralhq/corral/internal/ui"
)

func newStatusCmd(st *streams) *cobra.Command {
	var ff fileFlags
	var cf connFlags
	var exitCode, noHealth bool
	cmd := &cobra.Command{
		Use:         "status",
		Annotations: jsonForm(),
		Short:       "Show each app's container, health, volumes and drift from the manifest",
		Args:        cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ff.lazy = true // status compares provisioning only when its values are at hand
			ctx, cancel := readOnly(cmd.Context())
			defer cancel()
			j, r, err := observeStatus(ctx, st, ff, cf, "")
			if err != nil {
				return err
			}
			defer j.Close()
			statusHealth(ctx, j, r, noHealth)
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
	cmd.Flags().BoolVar(&exitCode, "exit-code", false, "exit 2 when the cluster differs from the manifest (0 in sync, 1 error), like plan; health does not change it")
	cmd.Flags().BoolVar(&noHealth, "no-health", false, "do not run the apps' health checks (health shows unknown)")
	return cmd
}

// statusHealth runs the apps' health checks once for status, over SSH
// with the pinned host keys (never trusting a new one), unless noHealth.
func statusHealth(ctx context.Context, j *job, r *apply.StatusReport, noHealth bool) {
	if noHealth {
		r.NoHealth("not checked (--no-health)")
		return
	}
	works := plan.GuestWorks(j.f, nil)
	if len(works) == 0 {
		r.NoHealth("no health checks")
		return
	}
	sshc, err := sshConfig(j.s, false)
	if err != nil {
		r.NoHealth(j.f.Redact("not checked: " + err.Error()))
		return
	}
	sshc.ConnectTimeout = 10 * time.Second
	ex := &apply.Executor{Client: j.s.client, SSH: sshc, Guest: works}
	ex.Health().Status(ctx, r, j.f.Redact)
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
			ctx, cancel := readOnly(cmd.Context())
			defer cancel()
			s, err := connect(ctx, st, cf)
			if err != nil {
				return err
			}
			defer s.Close()
			obs, err := apply.Observe(ctx, s.client)
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
			ui.WriteVolumes(st.out, inv)
			return nil
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", "text", "output format: text or json")
	cf.add(cmd.Flags())
	cmd.AddCommand(newVolumesRmCmd(st), newVolumesPruneCmd(st))
	return cmd
}

// observeStatus opens a read-only job and observes the manifest's apps
// as status shows them (what status and output both start from). With
// app, that app must be in the manifest. The caller closes the job.
func observeStatus(ctx context.Context, st *streams, ff fileFlags, cf connFlags, app string) (*job, *apply.StatusReport, error) {
	j, err := openJobInterruptible(ctx, st, ff, cf)
	if err != nil {
		return nil, nil, err
	}
	if err := checkApp(j.f, app); err != nil {
		j.Close()
		return nil, nil, err
	}
	r, err := apply.Status(ctx, j.s.client, plan.FromManifest(j.f), j.f.Redact)
	if err != nil {
		j.Close()
		return nil, nil, redactErr(j.f, err)
	}
	return j, r, nil
}
