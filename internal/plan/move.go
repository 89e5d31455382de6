package plan

import (
	"fmt"
	"maps"
	"slices"
	"strings"
)

// moveChange plans app a, whose container ct is on another node than
// the one it should be on (node: changed, corral move, corral drain): a
// Move. The container migrates stopped (PVE keeps its VMID, config and
// rootfs); its retained volumes travel in a carrier from the source
// node's keeper to the target node's (see Carrier); then the change goes
// on as an update on the target node: the volumes are attached again,
// in-place edits made, the container started and provisioned if its
// guest work changed.
func moveChange(a *App, ct *CT, to string, obs *Observed) (Change, []string) {
	from := ct.Node
	if slices.Contains(obs.Offline, from) {
		return Change{App: a.Name, Node: from, VMID: ct.VMID, Action: NoOp, Desired: a},
			[]string{fmt.Sprintf("app %s: its container %d is on node %s, which is offline: PVE can move a container only through its node (a migrate request to a dead node fails); wait for the node, or see docs/moving.md", a.Name, ct.VMID, from)}
	}
	// Plan as if the app stayed: what else changes, and which volumes
	// are recorded on the source node.
	c, probs := appChange(a, from, obs)
	if c.Action == Replace {
		probs = append(probs, fmt.Sprintf("app %s: moving it from %s to %s and replacing it (%s) in one apply is not done: apply the node change first, then the other", a.Name, from, to, strings.Join(c.Reasons, "; ")))
	}
	c.Action, c.Node, c.From = Move, to, from
	// Tags that record shared volumes name volids the move changes:
	// they are computed again after it (apply's afterMove).
	c.Desired = a
	c.VMID, c.OldVMID = ct.VMID, ct.VMID
	c.Restart, c.Start, c.FetchTemplate, c.Cleanup = false, true, false, nil
	var moving []string
	for i, v := range c.Volumes {
		switch v.Action {
		case VolKeep, VolAttach, VolRemount, VolGrow:
			c.Volumes[i].Action = VolMove
			c.Volumes[i].Key = ""
			moving = append(moving, v.Name)
			if sid, _, _ := strings.Cut(v.VolID, ":"); obs.Storages[to] != nil {
				if _, ok := obs.Storages[to][sid]; !ok {
					probs = append(probs, fmt.Sprintf("app %s: volume %s is on storage %s, which node %s does not have (or the token cannot use there): PVE migrates a volume only to the same storage; choose another node", a.Name, v.Name, sid, to))
				}
			}
		}
	}
	why := fmt.Sprintf("node changes %s → %s: the container migrates stopped (same VMID, config and rootfs)", from, to)
	if len(moving) > 0 {
		why += fmt.Sprintf(", and its retained volumes (%s) go through a carrier container from the keeper on %s to the keeper on %s", strings.Join(moving, ", "), from, to)
	}
	c.Reasons = append([]string{why}, c.Reasons...)
	if snap := ct.Config["parent"]; snap != "" {
		if a.DeleteSnapshots {
			c.Reasons = append(c.Reasons, fmt.Sprintf("its snapshots (the latest is %s) are deleted first (--delete-snapshots): PVE migrates no container with snapshots on LVM-thin", snap))
		} else {
			probs = append(probs, fmt.Sprintf("app %s: container %d has snapshots (the latest is %s); PVE cannot migrate a container whose snapshots reference LVM-thin volumes (non-migratable snapshot exists) nor hand a volume a snapshot uses to another container: delete them with corral snapshot %s NAME --delete (corral snapshots %s lists them) and run this again (corral move and drain also take --delete-snapshots; apply, for a change of node:, does not)", a.Name, ct.VMID, snap, a.Name, a.Name))
		}
	}
	if slices.Contains(obs.Offline, to) {
		probs = append(probs, fmt.Sprintf("app %s: node %s is offline; nothing can move there", a.Name, to))
	}
	return c, probs
}

// finishMove plans an app whose move was interrupted (a carrier exists):
// the move is finished to the node its carrier names, or to the node the
// carrier is still on when the manifest pins the app there (a rollback:
// the volumes go back to that node's keeper). The rest of the app's
// changes are planned once the move is done.
func finishMove(a *App, car *Carrier, obs *Observed) (Change, string) {
	to := car.Notes.To
	warn := ""
	if a.Node != "" && a.Node != to {
		if a.Node == car.Node {
			to = a.Node
		} else {
			warn = fmt.Sprintf("app %s: the interrupted move to %s is finished first; the manifest's node %s is planned after it", a.Name, to, a.Node)
		}
	}
	c := Change{App: a.Name, Node: to, From: car.Notes.From, Action: Move, Desired: a, Start: true, Finishing: true}
	if cts := obs.Apps[a.Name]; len(cts) == 1 {
		c.VMID, c.OldVMID = cts[0].VMID, cts[0].VMID
	}
	held := car.Holds()
	for _, vk := range slices.SortedFunc(maps.Keys(car.Notes.Carrying), func(x, y VolumeKey) int { return strings.Compare(x.String(), y.String()) }) {
		c.Volumes = append(c.Volumes, VolumeChange{Volume: Volume{Name: vk.Name}, Action: VolMove, VolID: held[vk]})
	}
	how := "finish"
	if to != car.Notes.To {
		how = "roll back"
	}
	c.Reasons = []string{fmt.Sprintf("%s the move of app %s from %s to %s, interrupted (carrier ct %d on %s holds %d of its volumes)", how, a.Name, car.Notes.From, car.Notes.To, car.VMID, car.Node, len(held))}
	if slices.Contains(obs.Offline, to) || slices.Contains(obs.Offline, car.Node) {
		c.Action = NoOp
		warn = fmt.Sprintf("app %s: its interrupted move (carrier ct %d on %s, to %s) waits for the offline node", a.Name, car.VMID, car.Node, to)
	}
	return c, warn
}
