package sim

import (
	"strconv"

	"github.com/corralhq/corral/internal/sim/model"
	"github.com/corralhq/corral/internal/sim/schema"
)

// LXC routes: thin translations onto the model (behaviour.md §(a)-(h)).

func (a *lxcAPI) getLXCList(r *request) (any, error) {
	cts, err := a.cluster.ListCTs(r.params["node"])
	if err != nil {
		return nil, err
	}
	paths := make([]string, len(cts))
	for i, ct := range cts {
		paths[i] = "/vms/" + itoa(ct.VMID)
	}
	audit := a.cluster.Visible(r.auth, paths, "VM.Audit")
	out := make(model.CTStatusList, 0, len(cts))
	for i, ct := range cts {
		if !audit[i] {
			continue // PVE lists only guests the caller may audit
		}
		out = append(out, ct)
	}
	return out, nil
}

func (a *lxcAPI) postLXC(r *request) (any, error) {
	return a.cluster.CreateCT(r.auth, r.params["node"], bodyParams(r, "node"))
}

func (a *lxcAPI) getLXCIndex(r *request) (any, error) {
	if _, err := a.cluster.CTStatus(r.params["node"], intParam(r, "vmid")); err != nil {
		return nil, err
	}
	var out []map[string]string
	for _, sub := range []string{"config", "pending", "status", "interfaces", "resize", "move_volume", "snapshot", "firewall", "rrd", "rrddata", "vncproxy", "termproxy", "vncwebsocket", "spiceproxy", "migrate", "clone", "feature"} {
		out = append(out, map[string]string{"subdir": sub})
	}
	return out, nil
}

func (a *lxcAPI) getLXCConfig(r *request) (any, error) {
	conf, digest, err := a.cluster.CTConfig(r.auth, r.params["node"], intParam(r, "vmid"), boolParam(r, "current"), r.params["snapshot"])
	if err != nil {
		return nil, err
	}
	out := typedConfig(r.m, conf)
	out["digest"] = digest
	return out, nil
}

func (a *lxcAPI) putLXCConfig(r *request) (any, error) {
	// Synchronous: PUT config returns null, no task (behaviour.md §0).
	return nil, a.cluster.UpdateCTConfig(r.auth, r.params["node"], intParam(r, "vmid"), bodyParams(r, "node", "vmid"))
}

func (a *lxcAPI) getLXCPending(r *request) (any, error) {
	entries, err := a.cluster.CTPending(r.params["node"], intParam(r, "vmid"))
	if err != nil {
		return nil, err
	}
	return pendingRows(a.api, "/nodes/"+r.params["node"]+"/lxc/"+r.params["vmid"]+"/config", entries), nil
}

// pendingRows renders a guest's pending entries (CT or VM) with the
// values typed as GET config (configPath) types them (fixture
// lxc-pending-101.json).
func pendingRows(api *schema.API, configPath string, entries []model.PendingEntry) []map[string]any {
	cm, _, _ := api.Lookup("GET", configPath)
	out := make([]map[string]any, 0, len(entries))
	for _, e := range entries {
		row := map[string]any{"key": e.Key}
		if e.Value != nil {
			row["value"] = typedValue(cm, e.Key, *e.Value)
		}
		if e.Pending != nil {
			row["pending"] = typedValue(cm, e.Key, *e.Pending)
		}
		if e.Delete != 0 {
			row["delete"] = e.Delete
		}
		out = append(out, row)
	}
	return out
}

func (a *lxcAPI) getLXCStatusIndex(r *request) (any, error) {
	if _, err := a.cluster.CTStatus(r.params["node"], intParam(r, "vmid")); err != nil {
		return nil, err
	}
	var out []map[string]string
	for _, sub := range []string{"current", "start", "stop", "shutdown", "reboot", "suspend", "resume"} {
		out = append(out, map[string]string{"subdir": sub})
	}
	return out, nil
}

func (a *lxcAPI) getLXCStatus(r *request) (any, error) {
	st, err := a.cluster.CTStatus(r.params["node"], intParam(r, "vmid"))
	if err != nil {
		return nil, err
	}
	return model.CTStatusCurrent(st), nil
}

// ctTask is the handler of a CT route that starts a task from the
// request's body: the node and VMID come from the path (power, resize,
// move_volume, migrate, destroy, snapshot).
func ctTask(fn func(auth model.Auth, node string, vmid int, params map[string]string) (string, error)) handler {
	return func(r *request) (any, error) {
		return fn(r.auth, r.params["node"], intParam(r, "vmid"), bodyParams(r, "node", "vmid"))
	}
}

// postLXCTemplate is POST template: PVE answers null and runs the
// conversion as a vztemplate task nobody is told the UPID of.
func (a *lxcAPI) postLXCTemplate(r *request) (any, error) {
	_, err := a.cluster.TemplateCT(r.auth, r.params["node"], intParam(r, "vmid"), nil)
	return nil, err
}

// getLXCInterfaces is pve-container's get_interfaces over `ip -json a`:
// per interface its name, "hardware-address" (and the older "hwaddr"),
// "ip-addresses" with every address, and under the family's name
// ("inet", "inet6") the last address of that family as address/prefix.
//
// A request from inside a CT (through the bridge's forwarder to the API,
// guest.Manager.FromBridge) gets the addresses on the bridge, which that
// CT reaches; the host's clients get the loopback addresses the emulator
// forwards to each CT's sshd (model.CTBridgeInterfaces).
func (a *lxcAPI) getLXCInterfaces(r *request) (any, error) {
	list := a.cluster.CTInterfaces
	if a.guests != nil && a.guests.FromBridge(r.remote) {
		list = a.cluster.CTBridgeInterfaces
	}
	ifs, err := list(r.params["node"], intParam(r, "vmid"))
	if err != nil || ifs == nil {
		return nil, err // a stopped CT: get_interfaces returns undef
	}
	out := make([]map[string]any, 0, len(ifs))
	for _, i := range ifs {
		addrs := make([]map[string]any, 0, len(i.Addresses))
		row := map[string]any{"name": i.Name, "hwaddr": i.HWAddr, "hardware-address": i.HWAddr}
		for _, ad := range i.Addresses {
			addrs = append(addrs, map[string]any{"ip-address": ad.Address, "ip-address-type": ad.Type, "prefix": ad.Prefix})
			row[ad.Type] = ad.Address + "/" + itoa(ad.Prefix)
		}
		row["ip-addresses"] = addrs
		out = append(out, row)
	}
	return out, nil
}

// getLXCMigrate is the PVE 9 precondition check: allowed-nodes and
// not-allowed-nodes are always present, dependent-ha-resources only for
// HA-managed CTs (never, in the emulator).
func (a *lxcAPI) getLXCMigrate(r *request) (any, error) {
	p, err := a.cluster.MigratePrecondition(r.params["node"], intParam(r, "vmid"))
	if err != nil {
		return nil, err
	}
	running := 0
	if p.Running {
		running = 1
	}
	return map[string]any{"running": running, "allowed-nodes": p.AllowedNodes, "not-allowed-nodes": p.NotAllowedNodes}, nil
}

// bodyParams is the request's parameters without the path parameters
// named, as the model expects only the call's own options.
func bodyParams(r *request, pathParams ...string) map[string]string {
	out := make(map[string]string, len(r.params))
	for k, v := range r.params {
		out[k] = v
	}
	for _, p := range pathParams {
		delete(out, p)
	}
	return out
}

func itoa(n int) string { return strconv.Itoa(n) }
