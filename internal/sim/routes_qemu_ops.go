package sim

import "strconv"

// registerOps adds the VM disk and lifecycle operations (docs/emulator.md
// "Virtual machines"): resize, move_disk, snapshots, template, clone and
// offline migrate, each a task as qemu-server runs it.
func (a *qemuAPI) registerOps(route routeFunc) {
	route("PUT", "/nodes/{node}/qemu/{vmid}/resize", ctTask(a.cluster.ResizeVM))
	route("POST", "/nodes/{node}/qemu/{vmid}/move_disk", ctTask(a.cluster.MoveVMDisk))
	route("GET", "/nodes/{node}/qemu/{vmid}/snapshot", a.getSnapshots)
	route("POST", "/nodes/{node}/qemu/{vmid}/snapshot", ctTask(a.cluster.SnapshotVM))
	route("GET", "/nodes/{node}/qemu/{vmid}/snapshot/{snapname}", a.getSnapshotIndex)
	route("DELETE", "/nodes/{node}/qemu/{vmid}/snapshot/{snapname}", a.deleteSnapshot)
	route("POST", "/nodes/{node}/qemu/{vmid}/snapshot/{snapname}/rollback", a.postRollback)
	route("GET", "/nodes/{node}/qemu/{vmid}/snapshot/{snapname}/config", a.getSnapshotConfig)
	route("PUT", "/nodes/{node}/qemu/{vmid}/snapshot/{snapname}/config", a.putSnapshotConfig)
	route("POST", "/nodes/{node}/qemu/{vmid}/template", ctTask(a.cluster.TemplateVM))
	route("POST", "/nodes/{node}/qemu/{vmid}/clone", ctTask(a.cluster.CloneVM))
	route("POST", "/nodes/{node}/qemu/{vmid}/migrate", ctTask(a.cluster.MigrateVM))
	route("GET", "/nodes/{node}/qemu/{vmid}/migrate", a.getMigrate)
}

// getSnapshots is snapshot_list: vmstate as 0/1 on each snapshot, the
// digest and running on "current".
func (a *qemuAPI) getSnapshots(r *request) (any, error) {
	snaps, err := a.cluster.VMSnapshots(r.auth, r.params["node"], intParam(r, "vmid"))
	if err != nil {
		return nil, err
	}
	out := make([]map[string]any, 0, len(snaps))
	for _, sn := range snaps {
		row := map[string]any{"name": sn.Name, "description": sn.Description}
		if sn.Current {
			row["digest"] = sn.Digest
			row["running"] = b2i(sn.Running)
		} else {
			row["snaptime"] = sn.SnapTime
			row["vmstate"] = b2i(sn.VMState)
			if sn.SnapState != "" {
				row["snapstate"] = sn.SnapState
			}
		}
		if sn.Parent != "" {
			row["parent"] = sn.Parent
		}
		out = append(out, row)
	}
	return out, nil
}

func (a *qemuAPI) getSnapshotIndex(r *request) (any, error) {
	return []map[string]string{{"cmd": "rollback"}, {"cmd": "config"}}, nil
}

func (a *qemuAPI) deleteSnapshot(r *request) (any, error) {
	return a.cluster.DeleteVMSnapshot(r.auth, r.params["node"], intParam(r, "vmid"), r.params["snapname"], bodyParams(r, "node", "vmid", "snapname"))
}

func (a *qemuAPI) postRollback(r *request) (any, error) {
	return a.cluster.RollbackVM(r.auth, r.params["node"], intParam(r, "vmid"), r.params["snapname"], bodyParams(r, "node", "vmid", "snapname"))
}

// getSnapshotConfig is the section with the types GET config gives its
// keys; snaptime is a number.
func (a *qemuAPI) getSnapshotConfig(r *request) (any, error) {
	conf, err := a.cluster.VMSnapshotConfig(r.auth, r.params["node"], intParam(r, "vmid"), r.params["snapname"])
	if err != nil {
		return nil, err
	}
	cm, _, _ := a.api.Lookup("GET", "/nodes/"+r.params["node"]+"/qemu/"+r.params["vmid"]+"/config")
	out := typedConfig(cm, conf)
	if t, err := strconv.ParseInt(conf["snaptime"], 10, 64); err == nil {
		out["snaptime"] = t
	}
	return out, nil
}

// putSnapshotConfig answers null.
func (a *qemuAPI) putSnapshotConfig(r *request) (any, error) {
	return nil, a.cluster.UpdateVMSnapshotConfig(r.auth, r.params["node"], intParam(r, "vmid"), r.params["snapname"], bodyParams(r, "node", "vmid", "snapname"))
}

// getMigrate is migrate_vm_precondition's answer: no local or mapped
// resources (the emulator serves no passthrough), no dbus-vmstate.
func (a *qemuAPI) getMigrate(r *request) (any, error) {
	p, err := a.cluster.VMMigratePrecondition(r.params["node"], intParam(r, "vmid"))
	if err != nil {
		return nil, err
	}
	disks := make([]map[string]any, 0, len(p.LocalDisks))
	for _, d := range p.LocalDisks {
		disks = append(disks, map[string]any{"volid": d.VolID, "size": d.Size, "is_unused": b2i(d.IsUnused), "cdrom": b2i(d.CDROM)})
	}
	return map[string]any{"running": b2i(p.Running), "allowed_nodes": p.AllowedNodes, "not_allowed_nodes": p.NotAllowedNodes,
		"local_disks": disks, "local_resources": []string{}, "mapped-resources": []string{}, "mapped-resource-info": map[string]any{},
		"has-dbus-vmstate": 0}, nil
}
