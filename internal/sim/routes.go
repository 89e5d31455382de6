package sim

// registerRoutes is the emulator's route table. Each path is a template of
// the official schema; the conformance test checks every one of them and
// every parameter it accepts against apidoc.json. Endpoints the emulator
// does not serve answer 501 like an unknown method (see notServed for the
// ones deliberately left out, with reasons).
func (s *Server) registerRoutes() {
	s.route("GET", "/version", s.getVersion)

	s.route("GET", "/cluster/resources", s.getClusterResources)
	s.route("GET", "/cluster/nextid", s.getNextID)
	s.route("GET", "/cluster/status", s.getClusterStatus)

	s.route("GET", "/nodes", s.getNodes)
	s.route("GET", "/nodes/{node}/status", s.getNodeStatus)
	s.route("GET", "/nodes/{node}/network", s.getNetwork)

	s.route("GET", "/nodes/{node}/storage", s.getStorages)
	s.route("GET", "/nodes/{node}/storage/{storage}/status", s.getStorageStatus)
	s.route("GET", "/nodes/{node}/storage/{storage}/content", s.getContent)
	s.route("POST", "/nodes/{node}/storage/{storage}/content", s.postContent)
	s.route("GET", "/nodes/{node}/storage/{storage}/content/{volume}", s.getVolume)
	s.route("DELETE", "/nodes/{node}/storage/{storage}/content/{volume}", s.deleteVolume)
	s.route("POST", "/nodes/{node}/storage/{storage}/download-url", s.postDownloadURL)
	s.route("GET", "/nodes/{node}/query-url-metadata", s.getQueryURLMetadata)
	s.route("GET", "/nodes/{node}/aplinfo", s.getAplinfo)
	s.route("POST", "/nodes/{node}/aplinfo", s.postAplinfo)

	s.route("GET", "/nodes/{node}/lxc", s.getLXCList)
	s.route("POST", "/nodes/{node}/lxc", s.postLXC)
	s.route("GET", "/nodes/{node}/lxc/{vmid}", s.getLXCIndex)
	s.route("DELETE", "/nodes/{node}/lxc/{vmid}", s.deleteLXC)
	s.route("GET", "/nodes/{node}/lxc/{vmid}/config", s.getLXCConfig)
	s.route("PUT", "/nodes/{node}/lxc/{vmid}/config", s.putLXCConfig)
	s.route("GET", "/nodes/{node}/lxc/{vmid}/pending", s.getLXCPending)
	s.route("GET", "/nodes/{node}/lxc/{vmid}/status", s.getLXCStatusIndex)
	s.route("GET", "/nodes/{node}/lxc/{vmid}/status/current", s.getLXCStatus)
	s.route("POST", "/nodes/{node}/lxc/{vmid}/status/start", s.postLXCStart)
	s.route("POST", "/nodes/{node}/lxc/{vmid}/status/stop", s.postLXCStop)
	s.route("POST", "/nodes/{node}/lxc/{vmid}/status/shutdown", s.postLXCShutdown)
	s.route("POST", "/nodes/{node}/lxc/{vmid}/status/reboot", s.postLXCReboot)
	s.route("PUT", "/nodes/{node}/lxc/{vmid}/resize", s.putLXCResize)
	s.route("POST", "/nodes/{node}/lxc/{vmid}/move_volume", s.postLXCMoveVolume)
	s.route("GET", "/nodes/{node}/lxc/{vmid}/interfaces", s.getLXCInterfaces)
	s.route("POST", "/nodes/{node}/lxc/{vmid}/migrate", s.postLXCMigrate)
	if s.cluster.Version() != "8.4" {
		// The precondition check came with pve-container 6.0.8 (PVE 9.0);
		// on 8.4 the path answers 501 like any method PVE lacks.
		s.route("GET", "/nodes/{node}/lxc/{vmid}/migrate", s.getLXCMigrate)
	}

	s.route("GET", "/nodes/{node}/qemu", s.getQemuList)

	s.route("GET", "/nodes/{node}/tasks", s.getTasks)
	s.route("GET", "/nodes/{node}/tasks/{upid}/status", s.getTaskStatus)
	s.route("GET", "/nodes/{node}/tasks/{upid}/log", s.getTaskLog)

	s.route("POST", "/access/ticket", s.postTicket)
	s.route("GET", "/access/permissions", s.getPermissions)
	s.route("GET", "/access/users", s.getUsers)
	s.route("POST", "/access/users", s.postUser)
	s.route("GET", "/access/users/{userid}/token", s.getTokens)
	s.route("GET", "/access/users/{userid}/token/{tokenid}", s.getToken)
	s.route("POST", "/access/users/{userid}/token/{tokenid}", s.postToken)
	s.route("DELETE", "/access/users/{userid}/token/{tokenid}", s.deleteToken)
	s.route("GET", "/access/roles", s.getRoles)
	s.route("POST", "/access/roles", s.postRole)
	s.route("PUT", "/access/roles/{roleid}", s.putRole)
	s.route("DELETE", "/access/roles/{roleid}", s.deleteRole)
	s.route("GET", "/access/acl", s.getACL)
	s.route("PUT", "/access/acl", s.putACL)

	s.registerBackupRoutes()
}

// notServed names schema endpoints near the ones above that the emulator
// deliberately does not serve, with the reason. The conformance test
// prints them so a gap is visible, never silent.
var notServed = map[string]string{
	"POST /nodes/{node}/lxc/{vmid}/clone":          "clones are not part of corral's flows",
	"POST /nodes/{node}/lxc/{vmid}/template":       "templates are not part of corral's flows",
	"POST /nodes/{node}/lxc/{vmid}/termproxy":      "no console: PVE refuses it to API tokens anyway",
	"GET /nodes/{node}/lxc/{vmid}/vncwebsocket":    "no console: PVE refuses it to API tokens anyway",
	"POST /nodes/{node}/lxc/{vmid}/status/suspend": "suspend needs CRIU and is experimental in PVE",
	"POST /nodes/{node}/lxc/{vmid}/status/resume":  "suspend needs CRIU and is experimental in PVE",
}
