package model

import (
	"encoding/json"
	"fmt"
	"io/fs"
	"maps"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/corralhq/corral/internal/pvesize"
)

// clusterView holds the read-only views of the whole datacenter: GET
// /cluster/nextid, /cluster/resources, /cluster/status, /nodes and
// /nodes/{node}/status (pve-manager PVE/API2/Cluster.pm,
// PVE/API2/Nodes.pm, PVE/API2Tools.pm), and Visible (visible.go). Who
// may see which entry is the HTTP layer's business. They read the State
// under the lock the parts share and write none of it; they reach the
// rest of the cluster only through the fields below. Cluster embeds
// clusterView, so its methods are the Cluster's (c.Resources, c.Nodes).
type clusterView struct {
	// stateMu guards the State; state is the State (nil until loaded).
	stateMu *stateMutex
	state   func() *State
	clock   func() time.Time
	// scaled applies the time scale (rrdExpiry scales like a task).
	scaled func(time.Duration) time.Duration
	// version is the emulated release (Options.Version).
	version string
	storage storageUsage
	guests  guestReader
}

// storageUsage is what the views need of storageLayer: a storage's use
// on a node.
type storageUsage interface {
	usageLocked(node string, s *Storage) StorageUsage
}

// guestReader is what the views need of guests: the node check with
// PVE's message, and a running CT's root filesystem and its use.
type guestReader interface {
	checkNodeLocked(node string) error
	rootfsDirLocked(g *Guest) (string, bool)
	guestDiskLocked(g *Guest, dir string) int64
}

// The default datacenter.cfg next-id range (API2/Cluster.pm nextid: lower
// 100, upper 1000000 exclusive).
const (
	nextIDLower = 100
	nextIDUpper = 1000 * 1000
)

// Figures the emulator reports for a host and its guests. Nothing runs in
// an emulated CT, so these are fixed baselines rather than measurements.
const (
	hostBaseMem    = 1702 * 1000 * 1000 // seed 004: host RAM used with every guest stopped
	hostBaseDisk   = 3 * gib            // the PVE installation on the root filesystem
	guestIdleMem   = 32 * mib           // an idle container's resident memory
	hostRootfsSize = 100 * gib          // root filesystem when no dir storage lives on it
)

// NextID is GET /cluster/nextid. Without vmid it returns the lowest VMID
// no guest uses in the next-id range; with vmid it returns vmid if free,
// else PVE's 400 {vmid: "VM <vmid> already exists"} (raise_param_exc).
func (cv *clusterView) NextID(vmid string) (int, error) {
	st := cv.state()
	cv.stateMu.RLock()
	defer cv.stateMu.RUnlock()
	if vmid != "" {
		id, err := strconv.Atoi(vmid)
		if err != nil {
			return 0, ParamError(map[string]string{"vmid": fmt.Sprintf("type check ('integer') failed - got '%s'", vmid)})
		}
		if st.Guests[id] == nil && st.VMs[id] == nil {
			return id, nil
		}
		return 0, ParamError(map[string]string{"vmid": fmt.Sprintf("VM %d already exists", id)})
	}
	for id := nextIDLower; id < nextIDUpper; id++ {
		if st.Guests[id] == nil && st.VMs[id] == nil {
			return id, nil
		}
	}
	return 0, Failf("unable to get any free VMID in range [%d, %d]\n", nextIDLower, nextIDUpper)
}

// poolResources are the "pool" entries of /cluster/resources (pve-manager
// API2/Cluster.pm), by pool id: each with its running guests' uptime
// (the longest), memory, and CPU weighted by their CPUs.
func poolResources(a *Access, guests []Resource) []Resource {
	byPool := map[string]*Resource{}
	var out []Resource
	for _, id := range slices.Sorted(maps.Keys(a.Pools)) {
		out = append(out, Resource{ID: "/pool/" + id, Type: "pool", Pool: id})
	}
	for i := range out {
		byPool[out[i].Pool] = &out[i]
	}
	for _, g := range guests {
		pe := byPool[g.Pool]
		if pe == nil || g.Uptime == 0 {
			continue
		}
		pe.PoolStats = true
		pe.Uptime = max(pe.Uptime, g.Uptime)
		pe.Mem += g.Mem
		pe.MaxMem += g.MaxMem
		if total := pe.MaxCPU + g.MaxCPU; total > 0 {
			pe.CPU = (pe.CPU*float64(pe.MaxCPU) + g.CPU*float64(g.MaxCPU)) / float64(total)
		}
		pe.MaxCPU += g.MaxCPU
	}
	return out
}

// Resource is one entry of GET /cluster/resources. Which fields go on the
// wire depends on Type (PVE::API2Tools extract_vm_stats,
// extract_node_stats, extract_storage_stats); MarshalJSON writes exactly
// those, numbers as numbers.
type Resource struct {
	ID     string // lxc/101, node/pve, storage/pve/local-lvm, sdn/pve/localnetwork
	Type   string // lxc | node | storage | sdn
	Node   string
	Status string // running/stopped, online/offline, available, ok

	// lxc
	VMID     int
	Name     string
	Template bool
	Tags     string
	Lock     string
	// HAState is the CT's HA service state, or a node's HA node state
	// (hastate, ha.go); "" when HA knows none.
	HAState string

	// lxc and node
	CPU    float64
	MaxCPU int
	Mem    int64
	MaxMem int64
	Uptime int64

	// lxc, node and storage
	Disk    int64
	MaxDisk int64

	// storage
	Storage    string
	Content    string // sorted, comma separated
	PluginType string
	Shared     bool

	// sdn
	SDN string

	// Pool is a guest's pool (lxc), or the pool a "pool" entry stands
	// for; PoolStats says whether that entry carries its running members'
	// cpu, mem and uptime (extract: only when one runs).
	Pool      string
	PoolStats bool

	// NoStats leaves a node's figures out, as extract_node_stats does for
	// a caller without Sys.Audit on /nodes/<node>: the entry is listed
	// all the same.
	NoStats bool
}

// MarshalJSON renders the fields PVE sends for the resource's type.
func (r Resource) MarshalJSON() ([]byte, error) {
	return r.AppendJSON(nil), nil
}

// AppendJSON appends the resource's JSON object to b. A list of a
// thousand containers is encoded without reflection (issue 13: encoding
// was most of /cluster/resources' time); the bytes are what json.Marshal
// makes of the same map.
func (r Resource) AppendJSON(b []byte) []byte {
	if r.Type != "lxc" {
		return appendObject(b, r.fields())
	}
	// The members of fields() for a CT, in json.Marshal's (sorted) order.
	w := objWriter{b: append(b, '{')}
	stats := !r.NoStats
	if stats {
		w.num("cpu", r.CPU)
		w.int("disk", r.Disk)
		w.int("diskread", 0)
		w.int("diskwrite", 0)
	}
	if r.HAState != "" {
		w.str("hastate", r.HAState)
	}
	w.str("id", r.ID)
	if r.Lock != "" {
		w.str("lock", r.Lock)
	}
	if stats {
		w.int("maxcpu", int64(r.MaxCPU))
		w.int("maxdisk", r.MaxDisk)
		w.int("maxmem", r.MaxMem)
		w.int("mem", r.Mem)
		w.str("name", r.Name)
		w.int("netin", 0)
		w.int("netout", 0)
	}
	w.str("node", r.Node)
	if r.Pool != "" {
		w.str("pool", r.Pool)
	}
	w.str("status", r.Status)
	if r.Tags != "" {
		w.str("tags", r.Tags)
	}
	if stats {
		w.int("template", int64(boolInt(r.Template)))
	}
	w.str("type", r.Type)
	if stats {
		w.int("uptime", r.Uptime)
	}
	w.int("vmid", int64(r.VMID))
	return append(w.b, '}')
}

// objWriter appends the members of a JSON object.
type objWriter struct {
	b []byte
	n int
}

func (w *objWriter) key(k string) {
	if w.n > 0 {
		w.b = append(w.b, ',')
	}
	w.n++
	w.b = appendJSONString(w.b, k)
	w.b = append(w.b, ':')
}

func (w *objWriter) str(k, v string) { w.key(k); w.b = appendJSONString(w.b, v) }
func (w *objWriter) int(k string, v int64) {
	w.key(k)
	w.b = strconv.AppendInt(w.b, v, 10)
}
func (w *objWriter) num(k string, v float64) {
	w.key(k)
	if v == 0 {
		w.b = append(w.b, '0')
		return
	}
	enc, _ := json.Marshal(v)
	w.b = append(w.b, enc...)
}

// fields are the members of the resource's JSON object.
func (r Resource) fields() map[string]any {
	if r.Type == "pool" {
		m := map[string]any{"id": r.ID, "type": r.Type, "pool": r.Pool}
		if r.PoolStats {
			m["cpu"], m["maxcpu"], m["mem"], m["maxmem"], m["uptime"] = r.CPU, r.MaxCPU, r.Mem, r.MaxMem, r.Uptime
		}
		return m
	}
	m := map[string]any{"id": r.ID, "type": r.Type, "node": r.Node, "status": r.Status}
	switch r.Type {
	case "lxc", "qemu": // pve-manager's extract_vm_stats gives both kinds the same keys
		m["vmid"] = r.VMID
		if r.Tags != "" {
			m["tags"] = r.Tags
		}
		if r.Lock != "" {
			m["lock"] = r.Lock
		}
		if r.HAState != "" {
			m["hastate"] = r.HAState
		}
		if r.NoStats {
			break // no RRD entry: only what the vmlist and config say
		}
		m["name"] = r.Name
		m["template"] = boolInt(r.Template)
		m["cpu"], m["maxcpu"] = r.CPU, r.MaxCPU
		m["mem"], m["maxmem"] = r.Mem, r.MaxMem
		m["disk"], m["maxdisk"] = r.Disk, r.MaxDisk
		m["uptime"] = r.Uptime
		m["netin"], m["netout"], m["diskread"], m["diskwrite"] = 0, 0, 0, 0
	case "node":
		m["cgroup-mode"] = 2
		if r.HAState != "" {
			m["hastate"] = r.HAState
		}
		nodeStats(m, r.Status, r.NoStats, r.CPU, r.MaxCPU, r.Mem, r.MaxMem, r.Disk, r.MaxDisk, r.Uptime)
	case "storage":
		m["storage"] = r.Storage
		m["content"] = r.Content
		m["plugintype"] = r.PluginType
		m["shared"] = boolInt(r.Shared)
		m["disk"], m["maxdisk"] = r.Disk, r.MaxDisk
	case "sdn":
		m["sdn"] = r.SDN
	}
	return m
}

// appendObject appends m as json.Marshal would write it: keys sorted,
// strings escaped the same way (anything unusual goes through
// encoding/json itself).
func appendObject(b []byte, m map[string]any) []byte {
	b = append(b, '{')
	for i, k := range slices.Sorted(maps.Keys(m)) {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendJSONString(b, k)
		b = append(b, ':')
		switch v := m[k].(type) {
		case string:
			b = appendJSONString(b, v)
		case int:
			b = strconv.AppendInt(b, int64(v), 10)
		case int64:
			b = strconv.AppendInt(b, v, 10)
		default:
			enc, err := json.Marshal(v)
			if err != nil {
				enc = []byte("null")
			}
			b = append(b, enc...)
		}
	}
	return append(b, '}')
}

// appendJSONString writes s quoted; only plain printable ASCII without
// the characters encoding/json escapes is written directly.
func appendJSONString(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < 0x20 || c >= 0x7f || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			enc, _ := json.Marshal(s)
			return append(b, enc...)
		}
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"')
}

// ResourceList encodes a list of resources in one pass.
type ResourceList []Resource

// MarshalJSON writes the list as a JSON array.
func (l ResourceList) MarshalJSON() ([]byte, error) {
	b := make([]byte, 0, 320*len(l)+2)
	b = append(b, '[')
	for i, r := range l {
		if i > 0 {
			b = append(b, ',')
		}
		b = r.AppendJSON(b)
	}
	return append(b, ']'), nil
}

// nodeStats adds what PVE::API2Tools extract_node_stats adds to a node
// entry of /cluster/resources and /nodes: the support level always, the
// capacities unless noStats, the usage only for an online node and
// unless noStats.
func nodeStats(m map[string]any, status string, noStats bool, cpu float64, maxCPU int, mem, maxMem, disk, maxDisk, uptime int64) {
	m["level"] = ""
	if noStats {
		return
	}
	m["maxcpu"], m["maxmem"], m["maxdisk"] = maxCPU, maxMem, maxDisk
	if status == "online" {
		m["cpu"], m["mem"], m["disk"], m["uptime"] = cpu, mem, disk, uptime
	}
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// Resources is GET /cluster/resources for typ "" (all), "vm", "node",
// "storage" or "sdn", in PVE's order: guests, nodes, storages (one entry
// per node that can use it), then the localnetwork SDN zone per node.
func (cv *clusterView) Resources(typ string) []Resource {
	st := cv.state()
	cv.stateMu.RLock()
	defer cv.stateMu.RUnlock()
	var out []Resource
	if typ == "" || typ == "vm" {
		vmids := slices.Sorted(maps.Keys(st.Guests))
		for _, vmid := range vmids {
			r := cv.guestResourceLocked(st.Guests[vmid])
			r.Pool = st.Access.poolOf(vmid)
			out = append(out, r)
		}
		out = append(out, vmResourcesLocked(st, cv.clock().Unix())...)
		sort.SliceStable(out, func(i, j int) bool { return out[i].VMID < out[j].VMID })
	}
	if typ == "" {
		out = append(poolResources(st.Access, out), out...)
	}
	if typ == "" || typ == "node" {
		for _, n := range st.Nodes {
			out = append(out, cv.nodeResourceLocked(n))
		}
	}
	if typ == "" || typ == "storage" {
		for _, s := range st.Storages {
			if s.Disable {
				continue
			}
			for _, n := range st.Nodes {
				if !s.OnNode(n.Name) {
					continue
				}
				u := cv.storage.usageLocked(n.Name, s)
				content := append([]string(nil), s.Content...)
				sort.Strings(content)
				status := "available"
				if cv.rrdExpiredLocked(n.Name) {
					status = "unknown"
				}
				out = append(out, Resource{
					ID: "storage/" + n.Name + "/" + s.ID, Type: "storage", Node: n.Name, Status: status,
					Storage: s.ID, Content: strings.Join(content, ","), PluginType: s.Type, Shared: s.Shared,
					Disk: u.Used, MaxDisk: u.Total,
				})
			}
		}
	}
	if typ == "" || typ == "sdn" {
		for _, n := range st.Nodes {
			out = append(out, Resource{ID: "sdn/" + n.Name + "/" + DefaultSDNZone, Type: "sdn", Node: n.Name, Status: "ok", SDN: DefaultSDNZone})
		}
	}
	return out
}

// rrdExpiredLocked reports whether node's RRD data has expired: it has
// been offline for at least the scaled rrdExpiry.
func (cv *clusterView) rrdExpiredLocked(node string) bool {
	st := cv.state()
	n := st.node(node)
	if n == nil || n.Online {
		return false
	}
	return cv.clock().Sub(time.Unix(n.OfflineSince, 0)) >= cv.scaled(rrdExpiry)
}

// guestResourceLocked is extract_vm_stats for a CT.
func (cv *clusterView) guestResourceLocked(g *Guest) Resource {
	r := Resource{
		ID: fmt.Sprintf("lxc/%d", g.VMID), Type: "lxc", Node: g.Node, Status: "stopped",
		VMID: g.VMID, Name: g.Config["hostname"], Template: g.IsTemplate(),
		Tags: g.Config["tags"], Lock: g.Lock(), HAState: haStateIn(cv.state(), g.VMID),
		MaxCPU: cv.guestCPUsLocked(g), MaxMem: guestMaxMem(g), MaxDisk: guestRootfsSize(g),
	}
	if cv.rrdExpiredLocked(g.Node) {
		r.Status, r.NoStats = "unknown", true
		return r
	}
	if g.Running {
		r.Status = "running"
		r.Uptime = max(cv.clock().Unix()-g.StartedAt, 0)
		r.Mem = min(guestIdleMem, r.MaxMem)
		if dir, ok := cv.guests.rootfsDirLocked(g); ok {
			r.Disk = cv.guests.guestDiskLocked(g, dir)
		}
	}
	return r
}

// guestCPUsLocked is the CT's CPU count: cores, or all of the node's.
func (cv *clusterView) guestCPUsLocked(g *Guest) int {
	st := cv.state()
	if n, err := strconv.Atoi(g.Config["cores"]); err == nil && n > 0 {
		return n
	}
	if n := st.node(g.Node); n != nil {
		return n.CPUs
	}
	return 1
}

// guestMaxMem is memory (MiB, default 512) in bytes.
func guestMaxMem(g *Guest) int64 {
	mem := int64(512)
	if n, err := strconv.ParseInt(g.Config["memory"], 10, 64); err == nil {
		mem = n
	}
	return mem * mib
}

// guestRootfsSize is the size= of the CT's rootfs, 0 when unknown.
func guestRootfsSize(g *Guest) int64 {
	mp, err := ParseMountPoint("rootfs", g.Config["rootfs"])
	if err != nil || mp.Props["size"] == "" {
		return 0
	}
	size, err := pvesize.Parse(mp.Props["size"])
	if err != nil {
		return 0
	}
	return size
}

// usedBytesUnder sums the sizes of the regular files below dir.
func usedBytesUnder(dir string) int64 {
	var total int64
	filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			if info, err := d.Info(); err == nil {
				total += info.Size()
			}
		}
		return nil
	})
	return total
}

// nodeResourceLocked is extract_node_stats.
func (cv *clusterView) nodeResourceLocked(n *Node) Resource {
	u := cv.hostUsageLocked(n)
	r := Resource{ID: "node/" + n.Name, Type: "node", Node: n.Name, Status: "offline",
		MaxCPU: n.CPUs, MaxMem: n.MemBytes, MaxDisk: u.rootTotal}
	if st := cv.state(); st.HA != nil {
		r.HAState = st.HA.NodeState[n.Name] // the HA manager's node_status
	}
	if n.Online {
		r.Status = "online"
		r.Mem, r.Disk = u.mem, u.rootUsed
		r.Uptime = max(cv.clock().Unix()-n.Booted, 0)
	}
	return r
}

// hostUsage is what a node's own counters would say.
type hostUsage struct {
	mem                 int64
	rootTotal, rootUsed int64
}

// hostUsageLocked computes a node's memory and root filesystem use: the
// host baseline plus its running guests, and the local dir storage that
// lives on the root filesystem (PVE's default layout).
func (cv *clusterView) hostUsageLocked(n *Node) hostUsage {
	st := cv.state()
	u := hostUsage{mem: hostBaseMem, rootTotal: hostRootfsSize, rootUsed: hostBaseDisk}
	for _, g := range st.Guests {
		if g.Node == n.Name && g.Running {
			u.mem += min(guestIdleMem, guestMaxMem(g))
		}
	}
	for _, s := range st.Storages {
		if s.Type == "dir" && s.Path == "/var/lib/vz" && s.OnNode(n.Name) {
			su := cv.storage.usageLocked(n.Name, s)
			u.rootTotal, u.rootUsed = su.Total, su.Used+hostBaseDisk
			break
		}
	}
	u.mem = min(u.mem, n.MemBytes)
	u.rootUsed = min(u.rootUsed, u.rootTotal)
	return u
}

// NodeInfo is one entry of GET /nodes (Nodes.pm index:
// extract_node_stats plus ssl_fingerprint); MarshalJSON writes the fields
// PVE sends.
type NodeInfo struct {
	ID     string  `json:"id"`
	Type   string  `json:"type"`
	Node   string  `json:"node"`
	Status string  `json:"status"`
	Level  string  `json:"level"`
	CPU    float64 `json:"cpu"`
	MaxCPU int     `json:"maxcpu"`
	Mem    int64   `json:"mem"`
	MaxMem int64   `json:"maxmem"`
	Disk   int64   `json:"disk"`
	// MaxDisk is the root filesystem size.
	MaxDisk int64 `json:"maxdisk"`
	Uptime  int64 `json:"uptime"`
	// SSLFingerprint is the node certificate's SHA-256 fingerprint; the
	// HTTP layer, which owns the certificate, fills it in.
	SSLFingerprint string `json:"ssl_fingerprint,omitempty"`
	// NoStats is Resource.NoStats: the caller may not audit the node.
	NoStats bool `json:"-"`
}

// MarshalJSON renders the entry as Nodes.pm index does.
func (n NodeInfo) MarshalJSON() ([]byte, error) {
	m := map[string]any{"id": n.ID, "type": n.Type, "node": n.Node, "status": n.Status}
	nodeStats(m, n.Status, n.NoStats, n.CPU, n.MaxCPU, n.Mem, n.MaxMem, n.Disk, n.MaxDisk, n.Uptime)
	if n.SSLFingerprint != "" {
		m["ssl_fingerprint"] = n.SSLFingerprint
	}
	return json.Marshal(m)
}

// Nodes is GET /nodes.
func (cv *clusterView) Nodes() []NodeInfo {
	st := cv.state()
	cv.stateMu.RLock()
	defer cv.stateMu.RUnlock()
	out := make([]NodeInfo, 0, len(st.Nodes))
	for _, n := range st.Nodes {
		r := cv.nodeResourceLocked(n)
		out = append(out, NodeInfo{
			ID: r.ID, Type: "node", Node: n.Name, Status: r.Status,
			CPU: r.CPU, MaxCPU: r.MaxCPU, Mem: r.Mem, MaxMem: r.MaxMem, Disk: r.Disk, MaxDisk: r.MaxDisk, Uptime: r.Uptime,
		})
	}
	return out
}

// NodeStatusInfo is GET /nodes/{node}/status.
type NodeStatusInfo struct {
	Uptime        int64        `json:"uptime"`
	CPU           float64      `json:"cpu"`
	Wait          float64      `json:"wait"`
	Idle          int          `json:"idle"`
	LoadAvg       []string     `json:"loadavg"`
	CPUInfo       NodeCPUInfo  `json:"cpuinfo"`
	Memory        NodeMemory   `json:"memory"`
	Swap          NodeMemory   `json:"swap"`
	RootFS        NodeFS       `json:"rootfs"`
	KSM           NodeKSM      `json:"ksm"`
	KVersion      string       `json:"kversion"`
	CurrentKernel NodeKernel   `json:"current-kernel"`
	BootInfo      NodeBootInfo `json:"boot-info"`
	PVEVersion    string       `json:"pveversion"`
}

// NodeCPUInfo is the "cpuinfo" object of a node's status.
type NodeCPUInfo struct {
	Model   string `json:"model"`
	CPUs    int    `json:"cpus"`
	Cores   int    `json:"cores"`
	Sockets int    `json:"sockets"`
	MHz     string `json:"mhz"`
	HVM     string `json:"hvm"`
	UserHz  int    `json:"user_hz"`
}

// NodeMemory is the "memory" and "swap" objects of a node's status.
type NodeMemory struct {
	Total     int64 `json:"total"`
	Used      int64 `json:"used"`
	Free      int64 `json:"free"`
	Available int64 `json:"available,omitempty"`
}

// NodeFS is the "rootfs" object of a node's status.
type NodeFS struct {
	Total int64 `json:"total"`
	Used  int64 `json:"used"`
	Free  int64 `json:"free"`
	Avail int64 `json:"avail"`
}

// NodeKSM is the "ksm" object of a node's status.
type NodeKSM struct {
	Shared int64 `json:"shared"`
}

// NodeKernel is the "current-kernel" object of a node's status.
type NodeKernel struct {
	SysName string `json:"sysname"`
	Release string `json:"release"`
	Version string `json:"version"`
	Machine string `json:"machine"`
}

// NodeBootInfo is the "boot-info" object of a node's status.
type NodeBootInfo struct {
	Mode       string `json:"mode"`
	SecureBoot int    `json:"secureboot"`
}

// Release strings of the emulated hosts, matching GET /version.
var nodeReleases = map[string]struct{ pve, kernel, kernelVersion string }{
	"9.1": {"pve-manager/9.1.9/ee7bad0a3d1546c7", "6.17.2-1-pve", "#1 SMP PREEMPT_DYNAMIC PMX 6.17.2-1 (2025-10-21T11:55Z)"},
	"8.4": {"pve-manager/8.4.14/b502d23c55afcba1", "6.8.12-9-pve", "#1 SMP PREEMPT_DYNAMIC PMX 6.8.12-9 (2025-03-16T19:18Z)"},
}

// NodeStatus is GET /nodes/{node}/status.
func (cv *clusterView) NodeStatus(node string) (NodeStatusInfo, error) {
	st := cv.state()
	cv.stateMu.RLock()
	defer cv.stateMu.RUnlock()
	if err := cv.guests.checkNodeLocked(node); err != nil {
		return NodeStatusInfo{}, err
	}
	n := st.node(node)
	u := cv.hostUsageLocked(n)
	rel := nodeReleases[cv.version]
	return NodeStatusInfo{
		Uptime:        max(cv.clock().Unix()-n.Booted, 0),
		LoadAvg:       []string{"0.00", "0.00", "0.00"},
		CPUInfo:       NodeCPUInfo{Model: "QEMU Virtual CPU (corral sim)", CPUs: n.CPUs, Cores: n.CPUs, Sockets: 1, MHz: "2400.000", HVM: "1", UserHz: 100},
		Memory:        NodeMemory{Total: n.MemBytes, Used: u.mem, Free: n.MemBytes - u.mem, Available: n.MemBytes - u.mem},
		Swap:          NodeMemory{Total: 8 * gib, Free: 8 * gib},
		RootFS:        NodeFS{Total: u.rootTotal, Used: u.rootUsed, Free: u.rootTotal - u.rootUsed, Avail: u.rootTotal - u.rootUsed},
		KVersion:      "Linux " + rel.kernel + " " + rel.kernelVersion + " x86_64",
		CurrentKernel: NodeKernel{SysName: "Linux", Release: rel.kernel, Version: rel.kernelVersion, Machine: "x86_64"},
		BootInfo:      NodeBootInfo{Mode: "efi"},
		PVEVersion:    rel.pve,
	}, nil
}

// ClusterStatusEntry is one entry of GET /cluster/status: the cluster
// itself (Type "cluster", only when there is more than one node) or a node.
type ClusterStatusEntry struct {
	Type    string // cluster | node
	ID      string // cluster, node/<name>
	Name    string
	Nodes   int  // cluster: node count
	Version int  // cluster: corosync config version
	Quorate bool // cluster
	NodeID  int  // node: corosync node id, 0 without a cluster
	IP      string
	Local   bool // node: the node answering the request
	Online  bool
}

// MarshalJSON renders the fields PVE sends for the entry's type, with
// its 0/1 booleans.
func (e ClusterStatusEntry) MarshalJSON() ([]byte, error) {
	m := map[string]any{"type": e.Type, "id": e.ID, "name": e.Name}
	if e.Type == "cluster" {
		m["nodes"], m["version"], m["quorate"] = e.Nodes, e.Version, boolInt(e.Quorate)
	} else {
		m["nodeid"], m["ip"], m["local"], m["online"], m["level"] = e.NodeID, e.IP, boolInt(e.Local), boolInt(e.Online), ""
	}
	return json.Marshal(m)
}

// ClusterName is the corosync cluster name of a multi-node emulator.
const ClusterName = "corral-sim"

// ClusterStatus is GET /cluster/status. A single node is not a cluster:
// PVE then reports only the local node, with nodeid 0. The first node is
// the one that answers.
func (cv *clusterView) ClusterStatus() []ClusterStatusEntry {
	st := cv.state()
	cv.stateMu.RLock()
	defer cv.stateMu.RUnlock()
	var out []ClusterStatusEntry
	if len(st.Nodes) == 1 {
		n := st.Nodes[0]
		return append(out, ClusterStatusEntry{Type: "node", ID: "node/" + n.Name, Name: n.Name, IP: nodeAddress(n), Local: true, Online: n.Online})
	}
	online := 0
	for _, n := range st.Nodes {
		if n.Online {
			online++
		}
	}
	out = append(out, ClusterStatusEntry{Type: "cluster", ID: "cluster", Name: ClusterName,
		Nodes: len(st.Nodes), Version: len(st.Nodes), Quorate: online*2 > len(st.Nodes)})
	for i, n := range st.Nodes {
		out = append(out, ClusterStatusEntry{Type: "node", ID: "node/" + n.Name, Name: n.Name,
			NodeID: n.ID, IP: nodeAddress(n), Local: i == 0, Online: n.Online})
	}
	return out
}

// nodeAddress is the node's cluster address; every emulated node lives on
// loopback (127.0.0.<id>).
func nodeAddress(n *Node) string { return fmt.Sprintf("127.0.0.%d", n.ID) }
