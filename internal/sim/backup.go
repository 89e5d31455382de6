package sim

import "strconv"

// Backup, restore and snapshot routes (pve-manager API2/VZDump.pm,
// pve-container API2/LXC/Snapshot.pm). Restore is POST /nodes/{node}/lxc
// with restore=1, served by postLXC.

func (s *Server) postVzdump(r *request) (any, error) {
	return s.cluster.Vzdump(r.auth, r.params["node"], bodyParams(r, "node"))
}

func (s *Server) getVzdumpExtractConfig(r *request) (any, error) {
	return s.cluster.ExtractConfig(r.auth, r.params["node"], r.params["volume"])
}

func (s *Server) getSnapshots(r *request) (any, error) {
	snaps, err := s.cluster.Snapshots(r.params["node"], intParam(r, "vmid"))
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

func (s *Server) postSnapshot(r *request) (any, error) {
	return s.cluster.SnapshotCT(r.auth, r.params["node"], intParam(r, "vmid"), bodyParams(r, "node", "vmid"))
}

func (s *Server) getSnapshotIndex(r *request) (any, error) {
	return []map[string]string{{"cmd": "rollback"}, {"cmd": "config"}}, nil
}

func (s *Server) deleteSnapshot(r *request) (any, error) {
	return s.cluster.DeleteSnapshot(r.auth, r.params["node"], intParam(r, "vmid"), r.params["snapname"], bodyParams(r, "node", "vmid", "snapname"))
}

func (s *Server) postSnapshotRollback(r *request) (any, error) {
	return s.cluster.RollbackSnapshot(r.auth, r.params["node"], intParam(r, "vmid"), r.params["snapname"], bodyParams(r, "node", "vmid", "snapname"))
}

func (s *Server) getSnapshotConfig(r *request) (any, error) {
	conf, err := s.cluster.SnapshotConfig(r.params["node"], intParam(r, "vmid"), r.params["snapname"])
	if err != nil {
		return nil, err
	}
	// Values carry the types GET config gives them; snaptime is a number.
	cm, _, _ := s.api.Lookup("GET", "/nodes/"+r.params["node"]+"/lxc/"+r.params["vmid"]+"/config")
	out := typedConfig(cm, conf)
	if t, err := strconv.ParseInt(conf["snaptime"], 10, 64); err == nil {
		out["snaptime"] = t
	}
	return out, nil
}

func (s *Server) putSnapshotConfig(r *request) (any, error) {
	return nil, s.cluster.UpdateSnapshotConfig(r.auth, r.params["node"], intParam(r, "vmid"), r.params["snapname"], bodyParams(r, "node", "vmid", "snapname"))
}
