package cli

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/corralhq/corral/internal/plan"
)

// planShape narrows a plan to the apps a move or a drain takes to other
// nodes: apps sets their node (and the consent to delete snapshots)
// before planning and names them in only; keep drops every other app's
// change, so corral move and drain change nothing else of the manifest.
type planShape struct {
	apps func(apps []plan.App, obs *plan.Observed) ([]plan.App, error)
	only map[string]bool
	why  map[string]string // placement reason per app (drain)
}

func (sh *planShape) keep(p *plan.Plan) {
	var kept []plan.Change
	for _, c := range p.Changes {
		if !sh.only[c.App] {
			continue
		}
		if w := sh.why[c.App]; w != "" && c.Action == plan.Move {
			c.Reasons = append(c.Reasons, w)
		}
		kept = append(kept, c)
	}
	p.Changes = kept
}

// moveFlags are the flags move and drain share with apply.
func addMoveFlags(fs *pflag.FlagSet, a *applyArgs, deleteSnapshots *bool) {
	a.ff.add(fs)
	a.cf.add(fs)
	a.lf.add(fs)
	fs.IntVar(&a.parallelism, "parallelism", 10, "how many apps to move at once (1: one after another)")
	fs.BoolVar(&a.failFast, "fail-fast", false, "start no further app once one failed (by default the others go on)")
	fs.BoolVar(&a.autoApprove, "auto-approve", false, "move without asking (needed when stdin is not a terminal)")
	fs.BoolVarP(&a.verbose, "verbose", "v", false, "show every Proxmox task log line")
	fs.DurationVar(&a.lockWait, "lock-wait", 2*time.Minute, "how long to wait for a container locked by another operation")
	fs.BoolVar(&a.noPreflight, "skip-preflight", false, "do not run doctor's checks before changing anything")
	fs.BoolVar(&a.trustHostKey, "trust-host-key", false, "accept a container's SSH host key when corral has none pinned")
	fs.BoolVar(deleteSnapshots, "delete-snapshots", false, "delete the snapshots of a container that moves (PVE migrates no container with snapshots on LVM-thin); without it such a move is refused")
}

func newMoveCmd(st *streams) *cobra.Command {
	a := &applyArgs{}
	var to string
	var delSnaps bool
	cmd := &cobra.Command{
		Use:         "move APP --to NODE",
		Annotations: jsonForm(),
		Short:       "Move an app and its retained volumes to another node",
		Long: `move takes an app's container (stopped, then started again) and its
retained volumes to another node of the cluster, as a change of node: in
the manifest would. The volumes travel in a protected carrier container
(PVE copies a volume only with the container that owns it), from the
source node's keeper to the target node's; docs/moving.md has the steps.
A kind: vm app's VM migrates stopped with its retained disks attached:
they are its own disks then, and PVE copies them with it.

It plans, shows the plan, asks (or takes --auto-approve), takes corral's
lock on both nodes and carries the move out like apply. Killed at any
point, the next corral move, drain or apply finishes it.

An app the manifest pins with node: is refused: change node: and apply.
An app without node: stays on the node it was moved to. A snapshot on
the container or VM refuses the move unless --delete-snapshots.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			app := args[0]
			if to == "" {
				return fmt.Errorf("--to NODE is required")
			}
			a.shape = &planShape{only: map[string]bool{app: true}, apps: func(apps []plan.App, obs *plan.Observed) ([]plan.App, error) {
				if !slices.Contains(obs.Nodes, to) {
					return nil, fmt.Errorf("node %q does not exist (nodes: %s)", to, strings.Join(obs.Nodes, ", "))
				}
				for i := range apps {
					if apps[i].Name != app {
						continue
					}
					if why := plan.HAMoveRefusal(app, obs); why != "" {
						return nil, errors.New(why)
					}
					if n := apps[i].Node; n != "" && n != to {
						return nil, fmt.Errorf("app %s: the manifest pins it to node %s (node:); set node: %s there and run corral apply, which moves it", app, n, to)
					}
					apps[i].Node, apps[i].DeleteSnapshots = to, delSnaps
					return apps, nil
				}
				return nil, fmt.Errorf("app %q is not in the manifest", app)
			}}
			return runApply(cmd, st, a)
		},
	}
	addMoveFlags(cmd.Flags(), a, &delSnaps)
	cmd.Flags().StringVar(&to, "to", "", "the node to move the app to")
	return cmd
}

func newDrainCmd(st *streams) *cobra.Command {
	a := &applyArgs{}
	var delSnaps bool
	cmd := &cobra.Command{
		Use:         "drain NODE",
		Annotations: jsonForm(),
		Short:       "Move every app of the project off a node",
		Long: `drain moves every app of the manifest's project whose container is on
NODE to another node, as corral move does for one app: each app's target
is chosen by its placement policy (placement: policy, nodes) among the
other online nodes, counting the apps already placed, so they spread.
Apps move in parallel (--parallelism); progress goes to stderr, and with
-o json stdout carries the same events as apply.

Apps the manifest pins to NODE (node:) are refused: change node: first.
There is no cordon: an app that exists is never moved by placement, so
the next apply leaves the drained apps where they are; to keep new apps
off the node, list the other nodes in placement: nodes (docs/moving.md).`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			node := args[0]
			sh := &planShape{only: map[string]bool{}, why: map[string]string{}}
			sh.apps = func(apps []plan.App, obs *plan.Observed) ([]plan.App, error) {
				d, err := plan.Drain(apps, obs, node, delSnaps)
				if err != nil {
					return nil, err
				}
				maps.Copy(sh.only, d.Only)
				maps.Copy(sh.why, d.Why)
				return apps, nil
			}
			a.shape = sh
			return runApply(cmd, st, a)
		},
	}
	addMoveFlags(cmd.Flags(), a, &delSnaps)
	return cmd
}
