package model

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
)

// VM status and listing: GET /nodes/{node}/qemu (vmlist) and
// .../status/current (vm_status), with PVE's keys. Nothing measures a
// VM's load: cpu, disk and the network counters are 0, and mem is the
// whole memory of a running VM (QEMU allocates it at start).

// vmStatusLocked is one VM's vmstatus entry.
func (q *vmConfig) vmStatusLocked(vm *VM) map[string]any {
	conf := vm.Config
	cpus, _ := strconv.Atoi(conf["cores"])
	if s, _ := strconv.Atoi(conf["sockets"]); s > 1 {
		cpus *= s
	}
	out := map[string]any{
		"vmid": vm.VMID, "status": "stopped", "name": conf["name"],
		"cpus": max(cpus, 1), "maxmem": vmMaxMem(conf), "mem": 0, "maxdisk": vmBootDiskSize(q.state(), vm),
		"disk": 0, "cpu": 0, "uptime": 0, "netin": 0, "netout": 0, "diskread": 0, "diskwrite": 0,
	}
	if out["name"] == "" {
		out["name"] = fmt.Sprintf("VM %d", vm.VMID)
	}
	if t := conf["tags"]; t != "" {
		out["tags"] = t
	}
	if l := vm.Lock(); l != "" {
		out["lock"] = l
	}
	if isTrue(conf["template"]) {
		out["template"] = 1
	}
	if vm.Running {
		out["status"], out["pid"], out["mem"] = "running", vm.PID, vmMaxMem(conf)
		out["uptime"] = max(q.clock().Unix()-vm.StartedAt, 0)
	}
	return out
}

// vmBootDiskSize is maxdisk: the size of the first disk in the
// boot order (else of the first disk). The caller holds the state lock.
func vmBootDiskSize(st *State, vm *VM) int64 {
	for _, k := range slices.Sorted(maps.Keys(vm.Config)) {
		if !vmBusDriveRE.MatchString(k) { // efidisk0 sorts first and never boots
			continue
		}
		p, err := ParseProp(vm.Config[k], "file")
		if err != nil || p["media"] == "cdrom" {
			continue
		}
		if v := st.Volumes[st.volKey(vm.Node, p["file"])]; v != nil {
			return v.Size
		}
	}
	return 0
}

// ListVMs is GET /nodes/{node}/qemu: the node's VMs the caller may
// audit (VM.Audit on /vms/<vmid>), by VMID.
func (q *vmConfig) ListVMs(auth Auth, node string) ([]map[string]any, error) {
	q.stateMu.RLock()
	defer q.stateMu.RUnlock()
	if err := q.nodes.checkNodeLocked(node); err != nil {
		return nil, err
	}
	st := q.state()
	out := []map[string]any{}
	for _, vmid := range slices.Sorted(maps.Keys(st.VMs)) {
		vm := st.VMs[vmid]
		if vm.Node != node || !st.Access.HasPriv(auth, fmt.Sprintf("/vms/%d", vmid), "VM.Audit") {
			continue
		}
		out = append(out, q.vmStatusLocked(vm))
	}
	return out, nil
}

// VMStatus is GET .../status/current: the vmlist entry plus qmpstatus,
// agent and ha, as vm_status answers.
func (q *vmConfig) VMStatus(auth Auth, node string, vmid int) (map[string]any, error) {
	q.stateMu.RLock()
	defer q.stateMu.RUnlock()
	vm, err := q.vmAuditLocked(auth, node, vmid)
	if err != nil {
		return nil, err
	}
	out := q.vmStatusLocked(vm)
	out["qmpstatus"] = out["status"]
	out["ha"] = vmHAStatusLocked(q.state(), vmid)
	if vmAgentEnabled(vm.Config) {
		out["agent"] = 1
	}
	if vm.Running {
		out["running-machine"] = "pc-i440fx-9.2+pve1"
		out["running-qemu"] = "9.2.0"
	}
	return out, nil
}

// vmHAStatusLocked is vm_status' ha (get_service_status): managed 1
// with the service's state while the VM is an HA resource not ignored,
// else managed 0.
func vmHAStatusLocked(st *State, vmid int) map[string]any {
	if !haManagedIn(st, vmid) {
		return map[string]any{"managed": 0}
	}
	out := map[string]any{"managed": 1}
	if s := st.HA.Services[st.sidOf(vmid)]; s != nil {
		out["state"] = s.State
	}
	return out
}

// vmAuditLocked is the lookup of a read: the node, VM.Audit, the VM.
func (q *vmConfig) vmAuditLocked(auth Auth, node string, vmid int) (*VM, error) {
	if err := q.nodes.checkNodeLocked(node); err != nil {
		return nil, err
	}
	if err := q.state().Access.Check(auth, fmt.Sprintf("/vms/%d", vmid), []string{"VM.Audit"}, false); err != nil {
		return nil, err
	}
	return q.vmLocked(node, vmid)
}

// vmResourcesLocked are the "qemu" entries of /cluster/resources.
func vmResourcesLocked(st *State, now int64) []Resource {
	var out []Resource
	for _, vmid := range slices.Sorted(maps.Keys(st.VMs)) {
		vm := st.VMs[vmid]
		cpus, _ := strconv.Atoi(vm.Config["cores"])
		r := Resource{
			ID: fmt.Sprintf("qemu/%d", vmid), Type: "qemu", Node: vm.Node, Status: "stopped",
			VMID: vmid, Name: vm.Config["name"], Template: isTrue(vm.Config["template"]),
			Tags: vm.Config["tags"], Lock: vm.Lock(), MaxCPU: max(cpus, 1), MaxMem: vmMaxMem(vm.Config),
			Pool: st.Access.poolOf(vmid), MaxDisk: vmBootDiskSize(st, vm), HAState: haStateIn(st, vmid),
		}
		if vm.Running {
			r.Status, r.Mem, r.Uptime = "running", r.MaxMem, max(now-vm.StartedAt, 0)
		}
		out = append(out, r)
	}
	return out
}
