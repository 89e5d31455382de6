package sim

// getNodeVersion is GET /nodes/{node}/version (pve-manager Nodes.pm
// version): the node's pve-manager version_info, the same as /version
// on a cluster of one release; an unknown node fails as PVE's node
// parameter check does. go-proxmox's Node.Version reads it.
func (a *clusterAPI) getNodeVersion(r *request) (any, error) {
	if err := a.cluster.CheckNode(r.params["node"]); err != nil {
		return nil, err
	}
	return a.getVersion(r)
}
