package cli

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/corralhq/corral/internal/apply"
	"github.com/corralhq/corral/internal/plan"
)

// powerCmd is `corral start|stop|restart APP`: under corral's lock on
// the app's node, like every command that changes the cluster.
func powerCmd(verb, short string, do func(*apply.Executor, context.Context, string, *plan.CT) error) func(*streams) *cobra.Command {
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
				j, err := openBackupJob(cmd, st, ff, cf)
				if err != nil {
					return err
				}
				defer j.Close()
				ctx := cmd.Context()
				obs, ct, err := j.appCT(ctx, args[0])
				if err != nil {
					return err
				}
				lock, ct, err := j.lockApp(ctx, st, obs, args[0], ct, verb, lf)
				if err != nil {
					return err
				}
				defer lock.release()
				ctx = lock.ctx
				if err := do(j.ex, ctx, args[0], ct); err != nil {
					return j.err(err)
				}
				_, ct, err = j.appCT(ctx, args[0])
				if err != nil {
					return err
				}
				if j.asJSON {
					return writeJSON(st, map[string]any{"app": args[0], "vmid": ct.VMID, "node": ct.Node, "status": ct.Status})
				}
				fmt.Fprintf(st.out, "App %s (ct %d on %s) is %s.\n", args[0], ct.VMID, ct.Node, ct.Status)
				return nil
			},
		}
		ff.add(cmd.Flags())
		cf.add(cmd.Flags())
		lf.add(cmd.Flags())
		return cmd
	}
}
