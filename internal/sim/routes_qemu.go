package sim

import (
	"strings"

	"github.com/corralhq/corral/internal/sim/model"
	"github.com/corralhq/corral/internal/sim/schema"
)

// qemuAPI serves the VM routes (docs/emulator.md "Virtual machines"):
// thin translations onto the model's VM parts (vmCreator, vmConfig,
// vmPower, …, promoted to Cluster), as lxcAPI is for CTs.
type qemuAPI struct {
	cluster *model.Cluster
	api     *schema.API // types the pending values as GET config does
}

func (a *qemuAPI) register(route routeFunc) {
	route("GET", "/nodes/{node}/qemu", a.getList)
	route("POST", "/nodes/{node}/qemu", a.postCreate)
	route("GET", "/nodes/{node}/qemu/{vmid}", a.getIndex)
	route("DELETE", "/nodes/{node}/qemu/{vmid}", ctTask(a.cluster.DestroyVM))
	route("GET", "/nodes/{node}/qemu/{vmid}/config", a.getConfig)
	route("PUT", "/nodes/{node}/qemu/{vmid}/config", a.putConfig)
	route("POST", "/nodes/{node}/qemu/{vmid}/config", a.postConfig)
	route("GET", "/nodes/{node}/qemu/{vmid}/pending", a.getPending)
	route("GET", "/nodes/{node}/qemu/{vmid}/cloudinit", a.getCloudInit)
	route("PUT", "/nodes/{node}/qemu/{vmid}/cloudinit", a.putCloudInit)
	route("GET", "/nodes/{node}/qemu/{vmid}/cloudinit/dump", a.getCloudInitDump)
	route("GET", "/nodes/{node}/qemu/{vmid}/status", a.getStatusIndex)
	route("GET", "/nodes/{node}/qemu/{vmid}/status/current", a.getStatus)
	route("POST", "/nodes/{node}/qemu/{vmid}/status/start", ctTask(a.cluster.StartVM))
	route("POST", "/nodes/{node}/qemu/{vmid}/status/stop", ctTask(a.cluster.StopVM))
	route("POST", "/nodes/{node}/qemu/{vmid}/status/shutdown", ctTask(a.cluster.ShutdownVM))
	route("POST", "/nodes/{node}/qemu/{vmid}/status/reboot", ctTask(a.cluster.RebootVM))
	route("POST", "/nodes/{node}/qemu/{vmid}/agent/ping", a.agent("ping"))
	route("GET", "/nodes/{node}/qemu/{vmid}/agent/network-get-interfaces", a.agent("network-get-interfaces"))
	route("GET", "/nodes/{node}/qemu/{vmid}/agent/get-fsinfo", a.agent("get-fsinfo"))
	route("POST", "/nodes/{node}/qemu/{vmid}/agent/fsfreeze-freeze", a.agent("fsfreeze-freeze"))
	route("POST", "/nodes/{node}/qemu/{vmid}/agent/fsfreeze-thaw", a.agent("fsfreeze-thaw"))
	route("POST", "/nodes/{node}/qemu/{vmid}/agent/fsfreeze-status", a.agent("fsfreeze-status"))
	route("POST", "/nodes/{node}/qemu/{vmid}/agent/exec", a.postExec)
	route("GET", "/nodes/{node}/qemu/{vmid}/agent/exec-status", a.getExecStatus)
	a.registerOps(route)
}

func (a *qemuAPI) getList(r *request) (any, error) {
	return a.cluster.ListVMs(r.auth, r.params["node"])
}

func (a *qemuAPI) postCreate(r *request) (any, error) {
	return a.cluster.CreateVM(r.auth, r.params["node"], bodyParams(r, "node"))
}

// getIndex is the VM's directory index (vmdiridx), after the audit.
func (a *qemuAPI) getIndex(r *request) (any, error) {
	if _, err := a.cluster.VMStatus(r.auth, r.params["node"], intParam(r, "vmid")); err != nil {
		return nil, err
	}
	var out []map[string]string
	for _, sub := range []string{"config", "cloudinit", "pending", "status", "agent", "firewall", "rrd", "rrddata", "migrate", "resize", "move", "snapshot", "clone", "template"} {
		out = append(out, map[string]string{"subdir": sub})
	}
	return out, nil
}

func (a *qemuAPI) getConfig(r *request) (any, error) {
	conf, digest, err := a.cluster.VMConfig(r.auth, r.params["node"], intParam(r, "vmid"), boolParam(r, "current"))
	if err != nil {
		return nil, err
	}
	out := typedConfig(r.m, conf)
	out["digest"] = digest
	return out, nil
}

// putConfig is the synchronous update: null, no task.
func (a *qemuAPI) putConfig(r *request) (any, error) {
	_, err := a.cluster.UpdateVM(r.auth, r.params["node"], intParam(r, "vmid"), bodyParams(r, "node", "vmid"), false)
	return nil, err
}

// postConfig is the asynchronous update: the qmconfig task's UPID.
func (a *qemuAPI) postConfig(r *request) (any, error) {
	return a.cluster.UpdateVM(r.auth, r.params["node"], intParam(r, "vmid"), bodyParams(r, "node", "vmid"), true)
}

func (a *qemuAPI) getPending(r *request) (any, error) {
	entries, err := a.cluster.VMPending(r.auth, r.params["node"], intParam(r, "vmid"))
	if err != nil {
		return nil, err
	}
	return pendingRows(a.api, "/nodes/"+r.params["node"]+"/qemu/"+r.params["vmid"]+"/config", entries), nil
}

func (a *qemuAPI) getStatusIndex(r *request) (any, error) {
	if _, err := a.cluster.VMStatus(r.auth, r.params["node"], intParam(r, "vmid")); err != nil {
		return nil, err
	}
	var out []map[string]string
	for _, sub := range []string{"current", "start", "stop", "shutdown", "reboot", "reset", "suspend", "resume"} {
		out = append(out, map[string]string{"subdir": sub})
	}
	return out, nil
}

func (a *qemuAPI) getStatus(r *request) (any, error) {
	return a.cluster.VMStatus(r.auth, r.params["node"], intParam(r, "vmid"))
}

// agent is the handler of one guest agent command: PVE wraps the
// agent's answer as {"result": …}.
// postExec is agent/exec: command is an array (its elements NUL-joined
// by the router; a single value is a one-element array, as PVE takes
// it), answered with the agent's {"pid": N} itself, not under "result".
func (a *qemuAPI) postExec(r *request) (any, error) {
	var input *string
	if v, ok := r.params["input-data"]; ok {
		input = &v
	}
	command := strings.Split(r.params["command"], "\x00")
	return a.cluster.VMExec(r.auth, r.params["node"], intParam(r, "vmid"), command, input)
}

// getExecStatus is agent/exec-status, also answered unwrapped.
func (a *qemuAPI) getExecStatus(r *request) (any, error) {
	return a.cluster.VMExecStatus(r.auth, r.params["node"], intParam(r, "vmid"), intParam(r, "pid"))
}

func (a *qemuAPI) agent(cmd string) handler {
	return func(r *request) (any, error) {
		res, err := a.cluster.VMAgent(r.auth, r.params["node"], intParam(r, "vmid"), cmd)
		if err != nil {
			return nil, err
		}
		return map[string]any{"result": res}, nil
	}
}
