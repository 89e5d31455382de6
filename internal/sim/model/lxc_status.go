package model

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
)

// The read side of a CT's runtime state: GET /nodes/{node}/lxc and
// GET /nodes/{node}/lxc/{vmid}/status/current, both built by
// pve-container's PVE::LXC::vmstatus.

// ctDefaultMaxDisk is what vmstatus reports for a stopped CT whose rootfs
// has no size= ("use 4GB by default").
const ctDefaultMaxDisk = 4 * gib

// CTStatus is one CT as vmstatus reports it. Which fields go on the wire
// follows the fixtures lxc-list.json and lxc-status-current-*.json: pid and
// the pressure values only while running, lock, tags and template only
// when set; MarshalJSON writes exactly those. GET .../status/current adds
// {"ha":{"managed":0}}, which is the HTTP layer's business.
type CTStatus struct {
	VMID   int
	Node   string
	Name   string // hostname, or CT<vmid>; whitespace removed
	Status string // running | stopped
	Lock   string
	Tags   string
	// Template is template=1.
	Template bool
	// CPUs is cores, else cpulimit, else the node's CPU count.
	CPUs float64
	// CPU is the current load; nothing runs in an emulated CT, so 0.
	CPU float64

	MaxMem  int64 // memory (MiB, default 512) in bytes
	MaxSwap int64 // swap (MiB, default 0 here, as vmstatus) in bytes
	MaxDisk int64 // rootfs size=, 4 GiB when unknown
	Mem     int64
	Swap    int64
	Disk    int64 // bytes used on the rootfs while running

	DiskRead, DiskWrite, NetIn, NetOut int64

	Uptime int64 // seconds since start while running
	PID    int   // init's PID while running
	// HA is status/current's "ha" (get_service_status): whether the CT
	// is an HA resource and its service state ("" before the CRM saw it).
	HA struct {
		Managed bool
		State   string
	}
	// Pressure is whether vmstatus reports the cgroup's PSI values
	// (pressure*): from pve-container 6 (PVE 9) on, not on 8.4.
	Pressure bool
}

// Fields is the status as PVE's JSON object, for callers that add keys
// (status/current's "ha").
func (s CTStatus) Fields() map[string]any {
	m := map[string]any{
		"vmid": s.VMID, "type": "lxc", "status": s.Status, "name": s.Name,
		"cpus": s.CPUs, "cpu": s.CPU, "uptime": s.Uptime,
		"mem": s.Mem, "maxmem": s.MaxMem, "swap": s.Swap, "maxswap": s.MaxSwap,
		"disk": s.Disk, "maxdisk": s.MaxDisk,
		"diskread": s.DiskRead, "diskwrite": s.DiskWrite, "netin": s.NetIn, "netout": s.NetOut,
	}
	if s.Lock != "" {
		m["lock"] = s.Lock
	}
	if s.Tags != "" {
		m["tags"] = s.Tags
	}
	if s.Template {
		m["template"] = 1
	}
	if s.Status == "running" {
		m["pid"] = s.PID
	}
	if s.Status == "running" && s.Pressure {
		// PSI of the CT's cgroup, strings with two decimals.
		for _, k := range []string{"pressurecpusome", "pressurecpufull", "pressureiosome", "pressureiofull", "pressurememorysome", "pressurememoryfull"} {
			m[k] = "0.00"
		}
	}
	return m
}

// CTStatus is GET /nodes/{node}/lxc/{vmid}/status/current: the CT's
// vmstatus entry, or load_config's 500 for a CT that is not on node.
func (gs *guests) CTStatus(node string, vmid int) (CTStatus, error) {
	gs.stateMu.RLock()
	defer gs.stateMu.RUnlock()
	if err := gs.checkNodeLocked(node); err != nil {
		return CTStatus{}, err
	}
	g, err := gs.guestLocked(node, vmid)
	if err != nil {
		return CTStatus{}, err
	}
	st := gs.ctStatusLocked(g)
	if state := gs.state(); haManagedIn(state, vmid) {
		st.HA.Managed = true
		if s := state.HA.Services[haSID(vmid)]; s != nil {
			st.HA.State = s.State
		}
	}
	return st, nil
}

// ListCTs is GET /nodes/{node}/lxc: vmstatus for every CT on node, by
// VMID. Filtering by VM.Audit is the HTTP layer's business.
func (gs *guests) ListCTs(node string) ([]CTStatus, error) {
	st := gs.state()
	gs.stateMu.RLock()
	defer gs.stateMu.RUnlock()
	if err := gs.checkNodeLocked(node); err != nil {
		return nil, err
	}
	out := []CTStatus{}
	for _, g := range st.Guests {
		if g.Node == node {
			out = append(out, gs.ctStatusLocked(g))
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].VMID < out[j].VMID })
	return out, nil
}

// ctStatusLocked is vmstatus for one CT. A running CT reports what its
// rootfs directory holds as disk usage and an idle CT's memory; the
// rootfs size stands in for the filesystem's total.
func (gs *guests) ctStatusLocked(g *Guest) CTStatus {
	conf := g.Config
	s := CTStatus{
		VMID: g.VMID, Node: g.Node, Status: "stopped",
		Name:     ctStatusName(g.VMID, conf["hostname"]),
		Lock:     conf["lock"],
		Tags:     conf["tags"],
		Template: g.IsTemplate(),
		CPUs:     gs.ctStatusCPUsLocked(g),
		MaxMem:   guestMaxMem(g),
		MaxDisk:  guestRootfsSize(g),
		Pressure: gs.version != "8.4",
	}
	if s.MaxDisk == 0 {
		s.MaxDisk = ctDefaultMaxDisk
	}
	if swap, err := strconv.ParseInt(conf["swap"], 10, 64); err == nil {
		s.MaxSwap = swap * mib
	}
	if g.Running {
		s.Status = "running"
		s.PID = g.PID
		s.Uptime = max(gs.clock().Unix()-g.StartedAt, 0)
		s.Mem = min(guestIdleMem, s.MaxMem)
		if dir, ok := gs.rootfsDirLocked(g); ok {
			s.Disk = gs.guestDiskLocked(g, dir)
		}
	}
	return s
}

// ctStatusName is vmstatus's name: hostname or CT<vmid>, without spaces.
func ctStatusName(vmid int, hostname string) string {
	if hostname == "" {
		hostname = fmt.Sprintf("CT%d", vmid)
	}
	return strings.Join(strings.Fields(hostname), "")
}

// ctStatusCPUsLocked is vmstatus's cpus: cores || cpulimit || the host's
// CPU count.
func (gs *guests) ctStatusCPUsLocked(g *Guest) float64 {
	st := gs.state()
	for _, k := range []string{"cores", "cpulimit"} {
		if v, err := strconv.ParseFloat(g.Config[k], 64); err == nil && v > 0 {
			return v
		}
	}
	if n := st.node(g.Node); n != nil && n.CPUs > 0 {
		return float64(n.CPUs)
	}
	return 1
}
