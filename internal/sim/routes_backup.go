package sim

// registerBackupRoutes adds the backup, extract-config and snapshot
// routes to the table registerRoutes builds.
func (s *Server) registerBackupRoutes() {
	s.route("POST", "/nodes/{node}/vzdump", s.postVzdump)
	s.route("GET", "/nodes/{node}/vzdump/extractconfig", s.getVzdumpExtractConfig)

	s.route("GET", "/nodes/{node}/lxc/{vmid}/snapshot", s.getSnapshots)
	s.route("POST", "/nodes/{node}/lxc/{vmid}/snapshot", s.postSnapshot)
	s.route("GET", "/nodes/{node}/lxc/{vmid}/snapshot/{snapname}", s.getSnapshotIndex)
	s.route("DELETE", "/nodes/{node}/lxc/{vmid}/snapshot/{snapname}", s.deleteSnapshot)
	s.route("POST", "/nodes/{node}/lxc/{vmid}/snapshot/{snapname}/rollback", s.postSnapshotRollback)
	s.route("GET", "/nodes/{node}/lxc/{vmid}/snapshot/{snapname}/config", s.getSnapshotConfig)
	s.route("PUT", "/nodes/{node}/lxc/{vmid}/snapshot/{snapname}/config", s.putSnapshotConfig)
}
