package sim

// putCloudInit is PUT .../cloudinit (cloudinit_update): null, no task.
func (a *qemuAPI) putCloudInit(r *request) (any, error) {
	return nil, a.cluster.RegenerateVMCloudInit(r.auth, r.params["node"], intParam(r, "vmid"))
}

// getCloudInit is GET .../cloudinit (cloudinit_pending): rows of key
// and, where set, value, pending and delete, every value a string as
// the schema declares them.
func (a *qemuAPI) getCloudInit(r *request) (any, error) {
	entries, err := a.cluster.VMCloudInitPending(r.auth, r.params["node"], intParam(r, "vmid"))
	if err != nil {
		return nil, err
	}
	out := make([]map[string]any, 0, len(entries))
	for _, e := range entries {
		row := map[string]any{"key": e.Key}
		if e.Value != nil {
			row["value"] = *e.Value
		}
		if e.Pending != nil {
			row["pending"] = *e.Pending
		}
		if e.Delete != 0 {
			row["delete"] = e.Delete
		}
		out = append(out, row)
	}
	return out, nil
}

// getCloudInitDump is GET .../cloudinit/dump?type=user|network|meta
// (cloudinit_generated_config_dump): the generated file as a string.
func (a *qemuAPI) getCloudInitDump(r *request) (any, error) {
	return a.cluster.VMCloudInitDump(r.auth, r.params["node"], intParam(r, "vmid"), r.params["type"])
}
