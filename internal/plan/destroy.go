package plan

import (
	"fmt"
	"maps"
	"slices"
)

// Destroy plans `corral destroy`: every app's container is removed and its
// volumes are detached and kept in the keeper. With deleteVolumes, volumes
// whose reclaim is "delete" are freed; retained volumes never are.
//
// A container that owns volumes corral does not manage is refused
// (RefusedError): destroying it would free them. So is a container of
// another project than the app's.
func Destroy(apps []App, obs *Observed, deleteVolumes bool) (*Plan, error) {
	p := &Plan{}
	p.Recover, p.RecoverNodes = recoveries(obs)
	var refused []string
	if obs.CannotSeeGuests {
		for i := range apps {
			node := blindNode(&apps[i], obs)
			refused = append(refused, BlindReason(apps[i].Name, node))
		}
		return p, &RefusedError{Problems: refused}
	}
	for i := range apps {
		a := &apps[i]
		cts := obs.Apps[a.Name]
		c := Change{App: a.Name, Action: NoOp, Desired: a}
		for _, ct := range cts {
			if a.Project != "" && !ct.OwnedBy(a.Project, true) {
				refused = append(refused, fmt.Sprintf("app %s: container %d carries the tag %s%s: it is project %s's, and corral destroys only this project's (%s) containers; run corral destroy from that project's manifest",
					a.Name, ct.VMID, TagProjectPrefix, ct.Project, ct.Project, a.Project))
				continue
			}
			if why := destroyedElsewhere(a, ct); why != "" {
				refused = append(refused, why)
				continue
			}
			if slices.Contains(obs.Offline, ct.Node) {
				p.Warnings = append(p.Warnings, fmt.Sprintf("app %s: node %s is offline; container %d is left alone until the node is back", a.Name, ct.Node, ct.VMID))
				continue
			}
			refused = append(refused, unmanagedVolumes(a.Name, ct, "destroying")...)
			c.Node, c.OldVMID, c.VMID, c.Digest = ct.Node, ct.VMID, ct.VMID, ct.Digest
			c.Action = Delete
			c.Reasons = append(c.Reasons, fmt.Sprintf("destroy container %d (%s)", ct.VMID, ct.Status))
		}
		vols := a.Volumes
		if len(vols) == 0 && c.Node != "" {
			// An app removed from the manifest: its volumes are what the
			// keepers record for it, detached and kept.
			for _, k := range obs.Keepers[c.Node] {
				for _, vk := range sortedVolumeKeys(k.Records) {
					if vk.App == a.Name {
						vols = append(vols, Volume{Name: vk.Name, Reclaim: Retain})
					}
				}
			}
		}
		for _, v := range vols {
			key := VolumeKey{a.Name, v.Name}
			for _, node := range slices.Sorted(maps.Keys(obs.Keepers)) {
				k := obs.Holder(node, key)
				if k == nil {
					continue
				}
				volid := k.Records[key]
				// Not the desired size, backup flag or adopt source: the
				// volume in the keeper may differ, and destroy does not
				// read it.
				vc := VolumeChange{Volume: Volume{Name: v.Name, Storage: v.Storage, Mount: v.Mount, Reclaim: v.Reclaim}, VolID: volid, Action: VolDetach}
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
	// Stale copies of recovered apps go too, first.
	stale, warn, probs := staleChanges(apps, obs)
	p.Changes = append(stale, p.Changes...)
	p.Warnings = append(p.Warnings, warn...)
	refused = append(refused, probs...)
	refused = append(refused, damagedRefusals(p, obs)...)
	if len(refused) > 0 {
		return p, &RefusedError{Problems: refused}
	}
	return p, nil
}
