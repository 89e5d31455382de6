package plan

import (
	"fmt"
	"slices"
)

// Destroy plans `corral destroy`: every app's container is removed and its
// volumes are detached and kept in the keeper. With deleteVolumes, volumes
// whose reclaim is "delete" are freed; retained volumes never are.
//
// A container that owns volumes corral does not manage is refused
// (RefusedError): destroying it would free them.
func Destroy(apps []App, obs *Observed, deleteVolumes bool) (*Plan, error) {
	p := &Plan{}
	p.Recover, p.RecoverNodes = recoveries(obs)
	var refused []string
	for i := range apps {
		a := &apps[i]
		cts := obs.Apps[a.Name]
		c := Change{App: a.Name, Action: NoOp, Desired: a}
		for _, ct := range cts {
			if slices.Contains(obs.Offline, ct.Node) {
				p.Warnings = append(p.Warnings, fmt.Sprintf("app %s: node %s is offline; container %d is left alone until the node is back", a.Name, ct.Node, ct.VMID))
				continue
			}
			refused = append(refused, unmanagedVolumes(a.Name, ct, "destroying")...)
			c.Node, c.OldVMID, c.VMID = ct.Node, ct.VMID, ct.VMID
			c.Action = Delete
			c.Reasons = append(c.Reasons, fmt.Sprintf("destroy container %d (%s)", ct.VMID, ct.Status))
		}
		for _, v := range a.Volumes {
			key := VolumeKey{a.Name, v.Name}
			for _, node := range sortedKeys(obs.Keepers) {
				k := obs.Holder(node, key)
				if k == nil {
					continue
				}
				volid := k.Records[key]
				vc := VolumeChange{Name: v.Name, VolID: volid, Storage: v.Storage, Mount: v.Mount, Reclaim: v.Reclaim, Action: VolDetach}
				if deleteVolumes && v.Reclaim == DeleteOnDrop {
					vc.Action = VolFree
					if c.Node == "" {
						c.Node = node
					}
					c.Action = Delete
					c.Reasons = append(c.Reasons, fmt.Sprintf("free volume %s (%s): reclaim: delete and --delete-volumes", v.Name, volid))
				}
				c.Volumes = append(c.Volumes, vc)
			}
		}
		p.Changes = append(p.Changes, c)
	}
	if len(refused) > 0 {
		return p, &RefusedError{Problems: refused}
	}
	return p, nil
}
