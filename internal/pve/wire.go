package pve

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/corralhq/corral/internal/propstr"
)

// This file models the awkward JSON types PVE puts on the wire, once, and
// the response bodies built from them. JSON tags are PVE's names, byte for
// byte. Fields PVE omits when unset are omitempty or pointers.

// Bool01 is a PVE boolean. PVE sends 1/0 integers (the fixtures'
// "unprivileged": 1), but some code paths send strings ("1") or, rarely,
// JSON true/false; all of them decode. It encodes as 1 or 0.
type Bool01 bool

// UnmarshalJSON accepts 0/1, "0"/"1", true/false and PVE's boolean
// words (on/off, yes/no, true/false, as JSONSchema parse_boolean does).
func (b *Bool01) UnmarshalJSON(data []byte) error {
	s := string(bytes.Trim(data, `"`))
	if s == "null" || s == "" {
		*b = false
		return nil
	}
	v, ok := parseBool(s)
	if !ok {
		return fmt.Errorf("decode boolean: unexpected value %s", data)
	}
	*b = Bool01(v)
	return nil
}

// MarshalJSON encodes b as PVE does: 1 or 0.
func (b Bool01) MarshalJSON() ([]byte, error) {
	if b {
		return []byte("1"), nil
	}
	return []byte("0"), nil
}

// parseBool reads a PVE boolean word (see propstr.ParseBool).
func parseBool(s string) (value, ok bool) { return propstr.ParseBool(s) }

// IntOrString is an integer that PVE sends either as a JSON number or as a
// string of digits: LVM content lists carry ctime as a string
// (fixtures/storage-content-lvmthin.json), dir storages as a number
// (storage-content-backup.json), and /cluster/nextid answers "100".
type IntOrString int64

// UnmarshalJSON accepts 42, "42" and null (zero).
func (n *IntOrString) UnmarshalJSON(data []byte) error {
	s := string(bytes.Trim(data, `"`))
	if s == "null" || s == "" {
		*n = 0
		return nil
	}
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		// Perl may print a large integer as a float (1e+15).
		f, ferr := strconv.ParseFloat(s, 64)
		if ferr != nil || f >= math.MaxInt64 || f < math.MinInt64 {
			return fmt.Errorf("decode integer: unexpected value %s", data)
		}
		v = int64(f)
	}
	*n = IntOrString(v)
	return nil
}

// MarshalJSON encodes n as a JSON number.
func (n IntOrString) MarshalJSON() ([]byte, error) {
	return strconv.AppendInt(nil, int64(n), 10), nil
}

// FloatOrString is a number that PVE may send as a string: the pressure*
// fields of LXC status are regex captures and travel as "0.00" although
// the schema calls them numbers (fixtures/lxc-list.json).
type FloatOrString float64

// UnmarshalJSON accepts 0.5, "0.5" and null (zero).
func (f *FloatOrString) UnmarshalJSON(data []byte) error {
	s := string(bytes.Trim(data, `"`))
	if s == "null" || s == "" {
		*f = 0
		return nil
	}
	v, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return fmt.Errorf("decode number: unexpected value %s", data)
	}
	*f = FloatOrString(v)
	return nil
}

// MarshalJSON encodes f as a JSON number.
func (f FloatOrString) MarshalJSON() ([]byte, error) {
	return strconv.AppendFloat(nil, float64(f), 'f', -1, 64), nil
}

// Scalar is a config value as text, whatever JSON type PVE chose for it:
// CT config and pending entries mix strings ("hostname") with integers
// ("cores": 2). Numbers keep their literal text; booleans become "1"/"0".
type Scalar string

// UnmarshalJSON accepts any JSON scalar.
func (s *Scalar) UnmarshalJSON(data []byte) error {
	v, err := scalarText(data)
	if err != nil {
		return err
	}
	*s = Scalar(v)
	return nil
}

// scalarText renders one JSON scalar as PVE's config text.
func scalarText(data []byte) (string, error) {
	data = bytes.TrimSpace(data)
	switch {
	case len(data) == 0:
		return "", fmt.Errorf("decode value: empty")
	case data[0] == '"':
		var s string
		if err := json.Unmarshal(data, &s); err != nil {
			return "", fmt.Errorf("decode value: %w", err)
		}
		return s, nil
	case string(data) == "true":
		return "1", nil
	case string(data) == "false":
		return "0", nil
	case string(data) == "null":
		return "", nil
	case data[0] == '-' || (data[0] >= '0' && data[0] <= '9'):
		return string(data), nil
	}
	return "", fmt.Errorf("decode value: want a string or number, got %.40s", data)
}

// ---- /version

// Version is GET /version.
type Version struct {
	Version string `json:"version"`
	Release string `json:"release"`
	RepoID  string `json:"repoid"`
	Console string `json:"console,omitempty"`
}

// ---- /cluster

// ClusterResource is one entry of GET /cluster/resources. Which fields are
// set depends on Type (node, storage, pool, lxc, qemu, sdn, network).
type ClusterResource struct {
	ID         string  `json:"id"`
	Type       string  `json:"type"`
	Node       string  `json:"node,omitempty"`
	Status     string  `json:"status,omitempty"`
	Name       string  `json:"name,omitempty"`
	VMID       int     `json:"vmid,omitempty"`
	Storage    string  `json:"storage,omitempty"`
	Pool       string  `json:"pool,omitempty"`
	Content    string  `json:"content,omitempty"`
	PluginType string  `json:"plugintype,omitempty"`
	Shared     Bool01  `json:"shared,omitempty"`
	Template   Bool01  `json:"template,omitempty"`
	Lock       string  `json:"lock,omitempty"`
	Tags       string  `json:"tags,omitempty"`
	HAState    string  `json:"hastate,omitempty"`
	Level      string  `json:"level,omitempty"`
	CPU        float64 `json:"cpu,omitempty"`
	MaxCPU     float64 `json:"maxcpu,omitempty"`
	Mem        int64   `json:"mem,omitempty"`
	MaxMem     int64   `json:"maxmem,omitempty"`
	Disk       int64   `json:"disk,omitempty"`
	MaxDisk    int64   `json:"maxdisk,omitempty"`
	DiskRead   int64   `json:"diskread,omitempty"`
	DiskWrite  int64   `json:"diskwrite,omitempty"`
	NetIn      int64   `json:"netin,omitempty"`
	NetOut     int64   `json:"netout,omitempty"`
	Uptime     int64   `json:"uptime,omitempty"`
}

// ClusterStatusEntry is one entry of GET /cluster/status: one "cluster"
// entry (absent on a single node) and one "node" entry per member.
type ClusterStatusEntry struct {
	ID      string `json:"id"`
	Name    string `json:"name"`
	Type    string `json:"type"`
	IP      string `json:"ip,omitempty"`
	Level   string `json:"level,omitempty"`
	Local   Bool01 `json:"local,omitempty"`
	NodeID  int    `json:"nodeid,omitempty"`
	Nodes   int    `json:"nodes,omitempty"`
	Online  Bool01 `json:"online,omitempty"`
	Quorate Bool01 `json:"quorate,omitempty"`
	Version int    `json:"version,omitempty"`
}

// ---- /nodes

// Node is one entry of GET /nodes.
type Node struct {
	Node           string  `json:"node"`
	Status         string  `json:"status"`
	CPU            float64 `json:"cpu,omitempty"`
	MaxCPU         int     `json:"maxcpu,omitempty"`
	Mem            int64   `json:"mem,omitempty"`
	MaxMem         int64   `json:"maxmem,omitempty"`
	Uptime         int64   `json:"uptime,omitempty"`
	Level          string  `json:"level,omitempty"`
	SSLFingerprint string  `json:"ssl_fingerprint,omitempty"`
}

// NodeStatus is the part of GET /nodes/{node}/status corral reads.
type NodeStatus struct {
	CPU        float64  `json:"cpu"`
	Uptime     int64    `json:"uptime,omitempty"`
	PVEVersion string   `json:"pveversion"`
	KVersion   string   `json:"kversion,omitempty"`
	LoadAvg    []string `json:"loadavg,omitempty"`
	CPUInfo    struct {
		Cores   int    `json:"cores"`
		CPUs    int    `json:"cpus"`
		Model   string `json:"model"`
		Sockets int    `json:"sockets"`
	} `json:"cpuinfo"`
	Memory struct {
		Total     int64 `json:"total"`
		Used      int64 `json:"used"`
		Free      int64 `json:"free"`
		Available int64 `json:"available,omitempty"`
	} `json:"memory"`
	RootFS struct {
		Total int64 `json:"total"`
		Used  int64 `json:"used"`
		Free  int64 `json:"free"`
		Avail int64 `json:"avail"`
	} `json:"rootfs"`
}

// ---- /nodes/{node}/lxc

// Container is one entry of GET /nodes/{node}/lxc (pve-container vmstatus).
// pid and the pressure fields appear only while running; template, lock and
// tags only when set (fixtures/lxc-list.json).
type Container struct {
	VMID               int           `json:"vmid"`
	Type               string        `json:"type"`
	Status             string        `json:"status"`
	Name               string        `json:"name,omitempty"`
	Tags               string        `json:"tags,omitempty"`
	Lock               string        `json:"lock,omitempty"`
	Template           Bool01        `json:"template,omitempty"`
	CPUs               float64       `json:"cpus,omitempty"`
	PID                IntOrString   `json:"pid,omitempty"`
	Uptime             int64         `json:"uptime"`
	CPU                float64       `json:"cpu"`
	Mem                int64         `json:"mem"`
	MaxMem             int64         `json:"maxmem"`
	Swap               int64         `json:"swap"`
	MaxSwap            int64         `json:"maxswap"`
	Disk               int64         `json:"disk"`
	MaxDisk            int64         `json:"maxdisk"`
	DiskRead           int64         `json:"diskread"`
	DiskWrite          int64         `json:"diskwrite"`
	NetIn              int64         `json:"netin"`
	NetOut             int64         `json:"netout"`
	PressureCPUSome    FloatOrString `json:"pressurecpusome,omitempty"`
	PressureCPUFull    FloatOrString `json:"pressurecpufull,omitempty"`
	PressureIOSome     FloatOrString `json:"pressureiosome,omitempty"`
	PressureIOFull     FloatOrString `json:"pressureiofull,omitempty"`
	PressureMemorySome FloatOrString `json:"pressurememorysome,omitempty"`
	PressureMemoryFull FloatOrString `json:"pressurememoryfull,omitempty"`
}

// Running reports whether the container's status is "running".
func (c Container) Running() bool { return c.Status == "running" }

// ContainerStatus is GET /nodes/{node}/lxc/{vmid}/status/current: the list
// entry plus the HA state (fixtures/lxc-status-current-*.json).
type ContainerStatus struct {
	Container
	HA HAStatus `json:"ha"`
}

// HAStatus is the "ha" object of a guest's current status.
type HAStatus struct {
	Managed Bool01 `json:"managed"`
	State   string `json:"state,omitempty"`
	Group   string `json:"group,omitempty"`
}

// PendingEntry is one entry of GET /nodes/{node}/lxc/{vmid}/pending
// (pve-guest-common config_with_pending_array). Value is the current value
// and Pending the value waiting for a restart; either may be absent.
// Delete is 1 for a pending deletion and 2 for a forced one.
type PendingEntry struct {
	Key     string  `json:"key"`
	Value   *Scalar `json:"value,omitempty"`
	Pending *Scalar `json:"pending,omitempty"`
	Delete  int     `json:"delete,omitempty"`
}

// Interface is one entry of GET /nodes/{node}/lxc/{vmid}/interfaces.
type Interface struct {
	Name            string      `json:"name"`
	HWAddr          string      `json:"hwaddr"`
	HardwareAddress string      `json:"hardware-address,omitempty"`
	Inet            string      `json:"inet,omitempty"`
	Inet6           string      `json:"inet6,omitempty"`
	IPAddresses     []IPAddress `json:"ip-addresses,omitempty"`
}

// IPAddress is one address of an Interface.
type IPAddress struct {
	Address string `json:"ip-address"`
	Type    string `json:"ip-address-type"`
	Prefix  int    `json:"prefix"`
}

// ---- /nodes/{node}/storage

// Storage is one entry of GET /nodes/{node}/storage: a storage's status
// (GET …/storage/{storage}/status) with its name and used fraction.
type Storage struct {
	Storage string `json:"storage"`
	StorageStatus
	UsedFraction float64 `json:"used_fraction,omitempty"`
}

// StorageStatus is GET /nodes/{node}/storage/{storage}/status.
type StorageStatus struct {
	Type    string `json:"type"`
	Content string `json:"content"`
	Active  Bool01 `json:"active,omitempty"`
	Enabled Bool01 `json:"enabled,omitempty"`
	Shared  Bool01 `json:"shared,omitempty"`
	Total   int64  `json:"total,omitempty"`
	Used    int64  `json:"used,omitempty"`
	Avail   int64  `json:"avail,omitempty"`
}

// HasContent reports whether the storage allows content type ct
// ("rootdir", "images", "vztmpl", "backup", …).
func (s StorageStatus) HasContent(ct string) bool { return hasContent(s.Content, ct) }

func hasContent(list, ct string) bool {
	for c := range strings.SplitSeq(list, ",") {
		if strings.TrimSpace(c) == ct {
			return true
		}
	}
	return false
}

// Volume is one entry of GET /nodes/{node}/storage/{storage}/content.
// CTime is a string for LVM volumes and a number elsewhere
// (fixtures/storage-content-*.json); Content is "rootdir" only while the
// owning CT exists (behaviour.md "Storage content").
type Volume struct {
	VolID     string      `json:"volid"`
	Format    string      `json:"format"`
	Size      int64       `json:"size"`
	Used      int64       `json:"used,omitempty"`
	VMID      IntOrString `json:"vmid,omitempty"`
	CTime     IntOrString `json:"ctime,omitempty"`
	Content   string      `json:"content,omitempty"`
	Notes     string      `json:"notes,omitempty"`
	Protected Bool01      `json:"protected,omitempty"`
	Parent    string      `json:"parent,omitempty"`
	Subtype   string      `json:"subtype,omitempty"`
	Encrypted string      `json:"encrypted,omitempty"`
}

// VolumeInfo is GET /nodes/{node}/storage/{storage}/content/{volume}.
type VolumeInfo struct {
	Format    string `json:"format"`
	Path      string `json:"path"`
	Size      int64  `json:"size"`
	Used      int64  `json:"used"`
	Notes     string `json:"notes,omitempty"`
	Protected Bool01 `json:"protected,omitempty"`
}

// Appliance is one entry of GET /nodes/{node}/aplinfo: a template the node
// can download with DownloadAppliance.
type Appliance struct {
	Template     string `json:"template"`
	Package      string `json:"package"`
	Version      string `json:"version"`
	OS           string `json:"os"`
	Section      string `json:"section"`
	Type         string `json:"type"`
	Headline     string `json:"headline,omitempty"`
	Description  string `json:"description,omitempty"`
	Architecture string `json:"architecture,omitempty"`
	Source       string `json:"source,omitempty"`
	Location     string `json:"location,omitempty"`
	SHA512Sum    string `json:"sha512sum,omitempty"`
	MD5Sum       string `json:"md5sum,omitempty"`
	InfoPage     string `json:"infopage,omitempty"`
	Maintainer   string `json:"maintainer,omitempty"`
}

// ---- /access

// Permissions is GET /access/permissions: privileges by ACL path, each
// mapped to its propagate flag (fixtures/access-permissions-token.json).
// A privilege is granted whatever its flag; paths without privileges are
// omitted by PVE.
type Permissions map[string]map[string]Bool01

// Has reports whether priv is granted on exactly path.
func (p Permissions) Has(path, priv string) bool {
	_, ok := p[path][priv]
	return ok
}

// ---- /nodes/{node}/tasks

// Task is GET /nodes/{node}/tasks/{upid}/status (pve-manager Tasks.pm
// read_task_status). ExitStatus appears only once Status is "stopped"; for
// a token-owned task User is the user and TokenID the token name
// (fixtures/task-status-*.json).
type Task struct {
	UPID       string `json:"upid"`
	Node       string `json:"node"`
	PID        int64  `json:"pid"`
	PStart     int64  `json:"pstart"`
	StartTime  int64  `json:"starttime"`
	Type       string `json:"type"`
	ID         string `json:"id"`
	User       string `json:"user"`
	TokenID    string `json:"tokenid,omitempty"`
	Status     string `json:"status"`
	ExitStatus string `json:"exitstatus,omitempty"`
}

// Stopped reports whether the task has finished.
func (t Task) Stopped() bool { return t.Status == "stopped" }

// TaskListEntry is one entry of GET /nodes/{node}/tasks. Status holds the
// exit status of a finished task and is empty while it runs.
type TaskListEntry struct {
	UPID      string `json:"upid"`
	Node      string `json:"node"`
	PID       int64  `json:"pid"`
	PStart    int64  `json:"pstart"`
	StartTime int64  `json:"starttime"`
	EndTime   int64  `json:"endtime,omitempty"`
	Type      string `json:"type"`
	ID        string `json:"id"`
	User      string `json:"user"`
	Status    string `json:"status,omitempty"`
}

// LogLine is one line of GET /nodes/{node}/tasks/{upid}/log: N is the
// 1-based line number.
type LogLine struct {
	N int    `json:"n"`
	T string `json:"t"`
}
