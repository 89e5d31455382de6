package sim

import "strconv"

// Backup, restore and snapshot routes (pve-manager API2/VZDump.pm,
// pve-container API2/LXC/Snapshot.pm). Restore is POST /nodes/{node}/lxc
// with restore=1, served by postLXC.

func (a *backupAPI) postVzdump(r *request) (any, error) {
	return a.cluster.Vzdump(r.auth, r.params["node"], bodyParams(r, "node"))
}

func (a *backupAPI) getVzdumpExtractConfig(r *request) (any, error) {
	return a.cluster.ExtractConfig(r.auth, r.params["node"], r.params["volume"])
}

func (a *backupAPI) getSnapshots(r *request) (any, error) {
	snaps, err := a.cluster.Snapshots(r.params["node"], intParam(r, "vmid"))
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

func (a *backupAPI) getSnapshotIndex(r *request) (any, error) {
	return []map[string]string{{"cmd": "rollback"}, {"cmd": "config"}}, nil
}

func (a *backupAPI) deleteSnapshot(r *request) (any, error) {
	return a.cluster.DeleteSnapshot(r.auth, r.params["node"], intParam(r, "vmid"), r.params["snapname"], bodyParams(r, "node", "vmid", "snapname"))
}

func (a *backupAPI) postSnapshotRollback(r *request) (any, error) {
	return a.cluster.RollbackSnapshot(r.auth, r.params["node"], intParam(r, "vmid"), r.params["snapname"], bodyParams(r, "node", "vmid", "snapname"))
}

func (a *backupAPI) getSnapshotConfig(r *request) (any, error) {
	conf, err := a.cluster.SnapshotConfig(r.params["node"], intParam(r, "vmid"), r.params["snapname"])
	if err != nil {
		return nil, err
	}
	// Values carry the types GET config gives them; snaptime is a number.
	cm, _, _ := a.api.Lookup("GET", "/nodes/"+r.params["node"]+"/lxc/"+r.params["vmid"]+"/config")
	out := typedConfig(cm, conf)
	if t, err := strconv.ParseInt(conf["snaptime"], 10, 64); err == nil {
		out["snaptime"] = t
	}
	return out, nil
}

func (a *backupAPI) putSnapshotConfig(r *request) (any, error) {
	return nil, a.cluster.UpdateSnapshotConfig(r.auth, r.params["node"], intParam(r, "vmid"), r.params["snapname"], bodyParams(r, "node", "vmid", "snapname"))
}
