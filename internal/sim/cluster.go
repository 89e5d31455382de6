package sim

import (
	"strings"

	"github.com/corralhq/corral/internal/sim/model"
)

// Version, cluster and node routes.

func (a *clusterAPI) getVersion(r *request) (any, error) {
	if a.cluster.Version() == "8.4" {
		return map[string]string{"version": "8.4.14", "release": "8.4", "repoid": "b502d23c55afcba1"}, nil
	}
	return map[string]string{"version": "9.1.9", "release": "9.1", "repoid": "ee7bad0a3d1546c7"}, nil
}

func (a *clusterAPI) getClusterResources(r *request) (any, error) {
	out := model.ResourceList{}
	all := a.cluster.Resources(r.params["type"])
	paths := make([]string, len(all))
	for i, res := range all {
		paths[i] = resourcePath(res.ID)
	}
	visible := a.cluster.Visible(r.auth, paths, "")
	// Guests are listed only with VM.Audit on /vms/<vmid> (pve-manager's
	// extract_vm_stats): a token with other privileges on a guest, such
	// as VM.PowerMgmt, still does not see it here.
	audit := a.cluster.Visible(r.auth, paths, "VM.Audit")
	for i, res := range all {
		guest := strings.HasPrefix(res.ID, "lxc/") || strings.HasPrefix(res.ID, "qemu/")
		if res.Pool != "" && !a.cluster.HasPriv(r.auth, "/pool/"+res.Pool, "Pool.Audit") {
			if res.Type == "pool" {
				continue // only the pools the caller may audit
			}
			res.Pool = "" // a guest's pool only with Pool.Audit on it
		}
		switch {
		case res.Type == "node":
			// Every node is listed; its figures need Sys.Audit.
			res.NoStats = !a.cluster.HasPriv(r.auth, "/nodes/"+res.Node, "Sys.Audit")
		case guest && !audit[i]:
			continue
		case paths[i] != "" && !visible[i]:
			continue // PVE shows only what the caller can see
		}
		out = append(out, res)
	}
	return out, nil
}

// resourcePath maps a resource id ("lxc/101", "storage/pve/local") to the
// ACL path that decides its visibility (nodes are always visible).
func resourcePath(id string) string {
	parts := strings.Split(id, "/")
	switch parts[0] {
	case "lxc", "qemu":
		return "/vms/" + parts[1]
	case "storage":
		if len(parts) == 3 {
			return "/storage/" + parts[2]
		}
	case "sdn":
		if len(parts) == 3 {
			return "/sdn/zones/" + parts[2]
		}
	}
	return ""
}

func (a *clusterAPI) getNextID(r *request) (any, error) {
	id, err := a.cluster.NextID(r.params["vmid"])
	if err != nil {
		return nil, err
	}
	// PVE returns the id as a string (API2/Cluster.pm nextid returns 'integer' but the JSON carries it quoted).
	return itoa(id), nil
}

func (a *clusterAPI) getClusterStatus(r *request) (any, error) {
	return a.cluster.ClusterStatus(), nil
}

// getNodes is Nodes.pm index: every node, its figures only for a caller
// with Sys.Audit on it, and its certificate's fingerprint (every emulated
// node serves the emulator's one certificate).
func (a *clusterAPI) getNodes(r *request) (any, error) {
	nodes := a.cluster.Nodes()
	for i := range nodes {
		nodes[i].NoStats = !a.cluster.HasPriv(r.auth, "/nodes/"+nodes[i].Node, "Sys.Audit")
		nodes[i].SSLFingerprint = a.certFP
	}
	return nodes, nil
}

func (a *clusterAPI) getNodeStatus(r *request) (any, error) {
	return a.cluster.NodeStatus(r.params["node"])
}
