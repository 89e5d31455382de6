package cli

import (
	"context"

	"github.com/spf13/cobra"

	"github.com/corralhq/corral/internal/apply"
	"github.com/corralhq/corral/internal/plan"
	"github.com/corralhq/corral/internal/ui"
)

// powerCmd is `corral start|stop|restart APP`: under corral's lock on
// the app's node, like every command that changes the cluster.
func powerCmd(verb, short string, do func(*apply.Power, context.Context, string, *plan.CT) error) func(*streams) *cobra.Command {
	return func(st *streams) *cobra.Command {
		var ff fileFlags
		var cf connFlags
		var lf lockFlags
		cmd := &cobra.Command{
			Use:         verb + " APP",
			Annotations: jsonForm(),
			Short:       short,
			Args:        cobra.ExactArgs(1),
			RunE: func(cmd *cobra.Command, args []string) error {
				return withApp(cmd, st, ff, cf, args[0], func(ctx context.Context, j *backupJob, obs *plan.Observed, ct *plan.CT) error {
					lock, ct, err := j.lockApp(ctx, st, obs, args[0], ct, verb, lf)
					if err != nil {
						return err
					}
					defer lock.release()
					ctx = lock.ctx
					if err := do(j.ex.Power(), ctx, args[0], ct); err != nil {
						return j.err(err)
					}
					_, ct, err = j.appCT(ctx, args[0])
					if err != nil {
						return err
					}
					health := apply.HealthUnknown
					if verb != "stop" {
						if health, err = waitHealthy(ctx, j, args[0], ct); err != nil {
							return j.err(err)
						}
					}
					if j.asJSON {
						return writeJSON(st, map[string]any{"app": args[0], "vmid": ct.VMID, "node": ct.Node, "status": ct.Status, "health": health})
					}
					ui.WritePowerState(st.out, args[0], ct)
					return nil
				})
			},
		}
		ff.add(cmd.Flags())
		cf.add(cmd.Flags())
		lf.add(cmd.Flags())
		return cmd
	}
}

// waitHealthy waits, after start or restart, for app's health checks to
// pass as apply waits for them: the app's health (healthy, or unknown
// when it has no checks), or an error naming the failing check.
func waitHealthy(ctx context.Context, j *backupJob, app string, ct *plan.CT) (string, error) {
	m, ok := j.app(app)
	if !ok || len(m.Health) == 0 {
		return apply.HealthUnknown, nil
	}
	sshc, err := sshConfig(j.s, false)
	if err != nil {
		return "", err
	}
	j.ex.SSH, j.ex.Guest = sshc, map[string]apply.GuestWork{app: plan.GuestWorkOf(*m)}
	if err := j.ex.Health().Wait(ctx, app, ct); err != nil {
		return "", err
	}
	return apply.Healthy, nil
}
