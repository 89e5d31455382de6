package model

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// State is everything the emulator persists: the datacenter as PVE's
// cluster filesystem and storages would hold it. Dir/state.json holds it
// whole as of journal line JournalSeq, Dir/state.journal the changes
// since (journal.go).
type State struct {
	Version  string              `json:"version"`
	Nodes    []*Node             `json:"nodes"`
	Storages []*Storage          `json:"storages"`
	Volumes  map[string]*Volume  `json:"volumes"` // key: volumeKey(node, volid)
	Guests   map[int]*Guest      `json:"guests"`
	Extra    map[int]*GuestExtra `json:"extra,omitempty"`
	// VMs are the QEMU guests (qemu_vm.go), in the same VMID space as
	// the CTs; journalled with the core (markCore).
	VMs    map[int]*VM `json:"vms,omitempty"`
	Access *Access     `json:"access"`
	// Firewall holds the guests' firewall configs (/etc/pve/firewall/
	// <vmid>.fw) by VMID; one may exist for a VMID without a guest, as
	// PVE's file does (firewall.go).
	Firewall map[int]*GuestFirewall `json:"firewall,omitempty"`
	// ClusterFirewall is the cluster's firewall config (its aliases).
	ClusterFirewall *ClusterFirewall `json:"cluster_firewall,omitempty"`
	// HA is /etc/pve/ha: HA resources, groups or rules, CRM status (ha.go).
	HA      *HA                 `json:"ha,omitempty"`
	Tasks   []*Task             `json:"tasks"`
	NextPID int                 `json:"next_pid"`
	Creds   BootstrapCredential `json:"creds"`
	Created int64               `json:"created"`
	// JournalSeq is the last journal line the snapshot includes.
	JournalSeq uint64 `json:"journal_seq,omitempty"`
}

// BootstrapCredential holds the secrets the emulator hands out in Dir/env.
// They live only in the state file (mode 0600), never in logs.
type BootstrapCredential struct {
	RootPassword  string `json:"root_password"`
	RootToken     string `json:"root_token"`     // "root@pam!sim=<secret>"
	OperatorToken string `json:"operator_token"` // "corral@pve!corral=<secret>"
}

// Node is one PVE host.
type Node struct {
	Name     string `json:"name"`
	ID       int    `json:"id"`
	CPUs     int    `json:"cpus"`
	MemBytes int64  `json:"mem_bytes"`
	Online   bool   `json:"online"`
	Booted   int64  `json:"booted"`
	// OfflineSince is when the node went offline (unix seconds), 0 while
	// it is online: its RRD entries expire rrdExpiry after that.
	OfflineSince int64 `json:"offline_since,omitempty"`
	// PoweredOff: the node went offline by a power cut (its guests
	// stopped with it), so its return is a boot (SetNodePower).
	PoweredOff bool `json:"powered_off,omitempty"`
	// IPPrefix is the loopback /24 from which the node's guests get their
	// addresses (127.<n>.x.y), so that guest endpoints stay on loopback.
}

// Storage is one entry of storage.cfg, present on every node (local
// storages) unless Nodes restricts it.
type Storage struct {
	ID      string   `json:"id"`
	Type    string   `json:"type"` // dir | lvmthin | nfs | rbd
	Content []string `json:"content"`
	Path    string   `json:"path,omitempty"`
	VGName  string   `json:"vgname,omitempty"`
	Pool    string   `json:"thinpool,omitempty"`
	Nodes   []string `json:"nodes,omitempty"`
	Disable bool     `json:"disable,omitempty"`
	Shared  bool     `json:"shared,omitempty"`
	// Total is the capacity per node in bytes.
	Total int64 `json:"total"`
}

// HasContent reports whether the storage is configured for content type ct.
func (s *Storage) HasContent(ct string) bool {
	for _, c := range s.Content {
		if c == ct {
			return true
		}
	}
	return false
}

// OnNode reports whether the storage is available on node.
func (s *Storage) OnNode(node string) bool {
	if len(s.Nodes) == 0 {
		return true
	}
	for _, n := range s.Nodes {
		if n == node {
			return true
		}
	}
	return false
}

// CanSnapshot reports whether the storage type can snapshot volumes
// (LVM-thin and RBD can, dir and NFS with raw files cannot).
func (s *Storage) CanSnapshot() bool { return s.Type == "lvmthin" || s.Type == "rbd" }

// LVMLike reports storage types whose image volumes are named
// vm-<vmid>-disk-N with no directory or extension (LVM-thin, RBD).
func (s *Storage) LVMLike() bool { return s.Type == "lvmthin" || s.Type == "rbd" }

// DirLike reports storage types that keep images as files under
// <path>/images/<vmid>/ (dir, NFS).
func (s *Storage) DirLike() bool { return s.Type == "dir" || s.Type == "nfs" }

// Volume is one volume on one node's storage: an LV on LVM-thin, a file on
// a dir storage. Owner is parsed from the name as PVE does (behaviour.md
// "Storage content / volume names").
type Volume struct {
	Node      string   `json:"node"`
	Storage   string   `json:"storage"`
	Name      string   `json:"name"` // vm-105-disk-0, vztmpl/x.tar.zst, backup/vzdump-...
	Owner     int      `json:"owner,omitempty"`
	Size      int64    `json:"size"`
	Format    string   `json:"format"`
	Content   string   `json:"content"` // images/rootdir (thin), vztmpl, backup, iso
	Ctime     int64    `json:"ctime"`
	Snapshots []string `json:"snapshots,omitempty"`
	Notes     string   `json:"notes,omitempty"`
	Protected bool     `json:"protected,omitempty"`
}

// VolID is "<storage>:<name>".
func (v *Volume) VolID() string { return v.Storage + ":" + v.Name }

func volumeKey(node, volid string) string { return node + "/" + volid }

// sharedNode is the pseudo node that holds the volumes of shared storages
// (shared=1: nfs, rbd): one copy of the data that every node the storage
// is enabled on sees under the same volid (behaviour.md (i.3)). Local
// storages are instantiated per node, so their volumes live under the
// real node's name.
const sharedNode = "_shared"

// homeNode is where a volume of storage sid, seen from node, lives:
// sharedNode for a shared storage, node itself otherwise.
func (st *State) homeNode(node, sid string) string {
	if st != nil {
		if s := st.storage(sid); s != nil && s.Shared {
			return sharedNode
		}
	}
	return node
}

// volKey is the Volumes key of volid as node sees it.
func (st *State) volKey(node, volid string) string {
	sid, _, _ := ParseVolID(volid)
	return volumeKey(st.homeNode(node, sid), volid)
}

// volOn reports whether node sees v: its own local volume, or a volume of
// a shared storage enabled on node.
func (st *State) volOn(v *Volume, node string) bool {
	if v.Node == node {
		return true
	}
	if v.Node != sharedNode {
		return false
	}
	s := st.storage(v.Storage)
	return s != nil && s.OnNode(node)
}

// Guest is one LXC container. Config holds PVE's config keys with their
// stored string values (property strings for rootfs, mpN, netN, …), exactly
// what /etc/pve/lxc/<vmid>.conf would hold.
type Guest struct {
	VMID          int                  `json:"vmid"`
	Node          string               `json:"node"`
	Config        map[string]string    `json:"config"`
	Pending       map[string]string    `json:"pending,omitempty"`
	PendingDelete map[string]bool      `json:"pending_delete,omitempty"` // key -> force
	Snapshots     map[string]*Snapshot `json:"snapshots,omitempty"`
	Running       bool                 `json:"running"`
	StartedAt     int64                `json:"started_at,omitempty"`
	PID           int                  `json:"pid,omitempty"`
	// SSHReadyAt is when the guest's sshd answers after a start (boot delay).
	SSHReadyAt int64 `json:"ssh_ready_at,omitempty"`
}

// Snapshot is one [snapname] section of a guest config.
type Snapshot struct {
	Name        string            `json:"name"`
	Config      map[string]string `json:"config"`
	SnapTime    int64             `json:"snaptime"`
	Description string            `json:"description,omitempty"`
	Parent      string            `json:"parent,omitempty"`
	SnapState   string            `json:"snapstate,omitempty"`
}

// Lock is the guest's config lock property, "" when unlocked.
func (g *Guest) Lock() string { return g.Config["lock"] }

// IsTemplate reports template=1.
func (g *Guest) IsTemplate() bool { return g.Config["template"] == "1" }

// Task is a PVE worker task with its log.
type Task struct {
	UPID       string   `json:"upid"`
	Node       string   `json:"node"`
	Type       string   `json:"type"`
	ID         string   `json:"id"`
	User       string   `json:"user"`    // user@realm
	TokenID    string   `json:"tokenid"` // token part only, "" for users
	PID        int      `json:"pid"`
	PStart     int      `json:"pstart"`
	StartTime  int64    `json:"starttime"`
	EndTime    int64    `json:"endtime,omitempty"`
	Status     string   `json:"status"` // running | stopped
	ExitStatus string   `json:"exitstatus,omitempty"`
	Log        []string `json:"log"`
	Warnings   int      `json:"warnings,omitempty"`
	// Busy is how long the worker really ran (monotonic clock): what a
	// benchmark subtracts from a client's wall time to find its overhead.
	Busy time.Duration `json:"busy_ns,omitempty"`
	// BeganNS and EndedNS are the wall-clock start and end in Unix
	// nanoseconds: PVE's task list has whole seconds only, too coarse
	// for the critical path a benchmark builds from a run's tasks.
	BeganNS int64 `json:"began_ns,omitempty"`
	EndedNS int64 `json:"ended_ns,omitempty"`
	// listed is true while the task is in State.Tasks: a task rotated out
	// of the bounded list (spawn), or a synchronous call's log, is not
	// persisted by its later log lines (journal.go).
	listed bool
}

// fixup fills maps a decoded state may lack.
func (st *State) fixup() {
	if st.Volumes == nil {
		st.Volumes = map[string]*Volume{}
	}
	if st.Guests == nil {
		st.Guests = map[int]*Guest{}
	}
	if st.Extra == nil {
		st.Extra = map[int]*GuestExtra{}
	}
	for _, g := range st.Guests {
		if g.Config == nil {
			g.Config = map[string]string{}
		}
	}
}

// node returns the named node or nil.
func (st *State) node(name string) *Node {
	for _, n := range st.Nodes {
		if n.Name == name {
			return n
		}
	}
	return nil
}

// storage returns the storage config or nil.
func (st *State) storage(id string) *Storage {
	for _, s := range st.Storages {
		if s.ID == id {
			return s
		}
	}
	return nil
}

// ParseVolID splits "<storage>:<name>". ok is false without a storage id.
func ParseVolID(volid string) (storage, name string, ok bool) {
	i := strings.IndexByte(volid, ':')
	if i <= 0 || i == len(volid)-1 {
		return "", "", false
	}
	return volid[:i], volid[i+1:], true
}

// VolumeOwner parses the owner VMID from an image volume name:
// vm-<vmid>-disk-N, base-<vmid>-disk-N, subvol-<vmid>-disk-N. 0 when the
// name carries no owner (behaviour.md (a): ownership is by name only).
func VolumeOwner(name string) int {
	for _, p := range []string{"vm-", "base-", "subvol-", "basevol-"} {
		if rest, ok := strings.CutPrefix(name, p); ok {
			if i := strings.IndexByte(rest, '-'); i > 0 {
				if n, err := strconv.Atoi(rest[:i]); err == nil {
					return n
				}
			}
		}
	}
	return 0
}

// configPath is how PVE names a config file in its messages.
func configPath(node string, vmid int) string {
	return fmt.Sprintf("nodes/%s/lxc/%d.conf", node, vmid)
}
