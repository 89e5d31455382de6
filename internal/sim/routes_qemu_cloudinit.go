package sim

// putCloudInit is PUT .../cloudinit (cloudinit_update): null, no task.
func (a *qemuAPI) putCloudInit(r *request) (any, error) {
	return nil, a.cluster.RegenerateVMCloudInit(r.auth, r.params["node"], intParam(r, "vmid"))
}
