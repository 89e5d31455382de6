package model

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/corralhq/corral/internal/lazyre"
)

const (
	kib = int64(1024)
	mib = 1024 * kib
	gib = 1024 * mib
)

// storageLayer is PVE::Storage for the cluster: storages and their
// status, volumes (paths, allocation, freeing), content lists, appliance
// and URL downloads (storage.go, storage_content.go, shared_storage.go).
// It alone writes the State's Storages and Volumes. They stay in the
// State, under the one lock every part shares (docs/architecture.md), so
// that a change spanning parts (a restore's volumes, guest and task) is
// one atomic step and one journal line. It reaches the rest of the
// cluster only through the fields below. Cluster holds it as c.storage
// and embeds only its exported methods (storageAPI), so c.Content is
// the Cluster's and c.storage.allocImageLocked says whose it is.
type storageLayer struct {
	// stateMu guards the State; state is the State (nil until loaded).
	stateMu *stateMutex
	state   func() *State
	// dataDir is the root of the data plane (Cluster.DataDir).
	dataDir string
	clock   func() time.Time
	// ctx is the cluster's life: a wait for a task ends with it.
	ctx context.Context
	// realTemplate is Options.RealTemplate.
	realTemplate string

	journal    volumeJournal
	tasks      taskStarter
	nodes      nodeChecker
	appliances applianceWriter
}

// storageAPI is storageLayer's exported methods: Cluster embeds it (the
// interface, not the layer), so that these are the Cluster's methods
// and the layer's own workings are not; the other parts call those by
// name (c.storage.allocImageLocked).
type storageAPI interface {
	VolumePath(node, volid string) (string, error)
	Storages(node string) ([]StorageUsage, error)
	StorageStatus(node, sid string) (StorageUsage, error)
	StorageConfig(sid string) *Storage
	StorageIDs() []string
	SharedStorages() []string
	Content(node, sid, content string, vmid int) ([]ContentEntry, error)
	VolumeInfo(node, volid string) (ContentEntry, error)
	AllocVolume(auth Auth, node, storage string, params map[string]string) (string, error)
	DeleteVolume(auth Auth, node, storage, volume string, params map[string]string) (string, error)
	Aplinfo(node string) []Appliance
	DownloadAppliance(auth Auth, node string, params map[string]string) (string, error)
	DownloadURL(auth Auth, node, storage string, params map[string]string) (string, error)
	URLMetadata(node, rawURL string) (map[string]any, error)
}

// volumeJournal is what storageLayer needs of persistence: to mark a
// volume changed and to save a change it made itself.
type volumeJournal interface {
	markVolume(node, volid string)
	saveLocked() error
}

// taskStarter is what the parts that start tasks need of taskRunner.
type taskStarter interface {
	spawn(auth Auth, node, typ, id string, fn func(w *Worker) error) string
	WaitTask(ctx context.Context, node, upid string) (Task, error)
}

// nodeChecker answers whether a node exists and is online, with PVE's
// messages (guests.checkNodeLocked).
type nodeChecker interface {
	CheckNode(node string) error
	checkNodeLocked(node string) error
}

// applianceWriter writes and sizes the catalogue's appliances
// (realtpl.go), which the cluster keeps with their checksums.
type applianceWriter interface {
	writeAppliance(dst string, a Appliance, mtime time.Time) (int64, error)
	applianceSize(a Appliance) (int64, error)
}

// volumePath is the directory (thin volumes) or file (dir storage content)
// that holds a volume's data on the emulator's disk.
func (sl *storageLayer) volumePath(node, storage, name string) string {
	st := sl.state()
	node = st.homeNode(node, storage)
	return filepath.Join(sl.dataDir, node, storage, filepath.FromSlash(cloneOwnName(name)))
}

// cloneOwnName is where a linked clone's data lives: pve-storage names
// the clone after its base ("base-100-disk-0/vm-101-disk-0" on RBD,
// "100/base-100-disk-0.qcow2/101/vm-101-disk-0.qcow2" on a dir storage),
// the emulator keeps its data under the clone's own part of the name.
func cloneOwnName(name string) string {
	if m := linkedCloneRE.FindStringSubmatch(name); m != nil {
		return m[1]
	}
	return name
}

// linkedCloneRE matches a linked clone's volume name: its base's name,
// then its own.
var linkedCloneRE = lazyre.New(`^(?:\d+/)?base-\d+-disk-\d+(?:\.(?:raw|qcow2|vmdk))?/(.+)$`)

// VolumePath is volumePath for tests and the guest layer: where volid's
// data lives on node.
func (sl *storageLayer) VolumePath(node, volid string) (string, error) {
	st := sl.state()
	sid, name, ok := ParseVolID(volid)
	if !ok {
		return "", fmt.Errorf("unable to parse volume ID '%s'", volid)
	}
	sl.stateMu.RLock()
	defer sl.stateMu.RUnlock()
	if st.Volumes[st.volKey(node, volid)] == nil {
		return "", fmt.Errorf("no such volume '%s'", volid)
	}
	return sl.volumePath(node, sid, name), nil
}

// nextDiskName is pve-storage's get_next_vm_diskname: the lowest free
// vm-<vmid>-disk-N on the storage (behaviour.md §f 1).
func (st *State) nextDiskName(node, storage string, vmid int, prefix string) string {
	for n := 0; ; n++ {
		name := fmt.Sprintf("%s-%d-disk-%d", prefix, vmid, n)
		if st.Volumes[st.volKey(node, storage+":"+name)] == nil {
			return name
		}
	}
}

// allocVolume creates a new image volume of size bytes for vmid and its
// (empty, formatted) data directory. The storage must hold content ct.
func (sl *storageLayer) allocVolumeLocked(node, sid string, vmid int, size int64, ct string) (*Volume, error) {
	st := sl.state()
	s := st.storage(sid)
	if s == nil || !s.OnNode(node) {
		return nil, Failf("storage '%s' does not exist\n", sid)
	}
	if !s.HasContent(ct) {
		return nil, Failf("content type '%s' is not available or configured on storage '%s'\n", ct, sid)
	}
	prefix := "vm"
	if s.Type == "dir" {
		prefix = "subvol"
	}
	name := st.nextDiskName(node, sid, vmid, prefix)
	v := &Volume{Node: st.homeNode(node, sid), Storage: sid, Name: name, Owner: vmid, Size: size, Format: "raw", Content: "images", Ctime: sl.clock().Unix()}
	if s.Type == "dir" {
		v.Format = "subvol"
		v.Name = fmt.Sprintf("images/%d/%s", vmid, name)
	}
	if err := os.MkdirAll(sl.volumePath(node, sid, v.Name), 0o755); err != nil {
		return nil, fmt.Errorf("allocate %s: %w", v.VolID(), err)
	}
	st.Volumes[st.volKey(node, v.VolID())] = v
	sl.journal.markVolume(node, v.VolID())
	return v, nil
}

// addVolumeLocked records v, whose data the caller has made, as a volume
// seen from node (a migration's copy, a backup archive).
func (sl *storageLayer) addVolumeLocked(node string, v *Volume) {
	st := sl.state()
	st.Volumes[st.volKey(node, v.VolID())] = v
	sl.journal.markVolume(node, v.VolID())
}

// renameVolumeLocked renames volume volid of node to newName, owned by
// owner, once the caller has moved its data; it returns the new volid.
func (sl *storageLayer) renameVolumeLocked(node, volid, newName string, owner int) string {
	st := sl.state()
	v := st.Volumes[st.volKey(node, volid)]
	delete(st.Volumes, st.volKey(node, volid))
	sl.journal.markVolume(node, volid)
	v.Name, v.Owner = newName, owner
	st.Volumes[st.volKey(node, v.VolID())] = v
	sl.journal.markVolume(node, v.VolID())
	return v.VolID()
}

// freeVolumeLocked is vdisk_free: drop the volume, its snapshots and data.
func (sl *storageLayer) freeVolumeLocked(node, volid string) error {
	st := sl.state()
	v := st.Volumes[st.volKey(node, volid)]
	if v == nil {
		return Failf("no such volume '%s'\n", volid)
	}
	for _, o := range st.Volumes {
		if o.Node == v.Node && o.Storage == v.Storage && strings.HasPrefix(o.Name, v.Name+"/") {
			return Failf("base volume '%s' is still in use by linked cloned\n", v.Name)
		}
	}
	delete(st.Volumes, st.volKey(node, volid))
	sl.journal.markVolume(node, volid)
	p := sl.volumePath(node, v.Storage, v.Name)
	for _, snap := range v.Snapshots {
		os.RemoveAll(sl.snapshotPath(node, v, snap))
	}
	if err := os.RemoveAll(p); err != nil {
		return fmt.Errorf("free %s: %w", volid, err)
	}
	return nil
}

// snapshotPath is where an LVM-thin snapshot LV snap_<vol>_<snap> keeps its data.
func (sl *storageLayer) snapshotPath(node string, v *Volume, snap string) string {
	st := sl.state()
	return filepath.Join(sl.dataDir, st.homeNode(node, v.Storage), v.Storage, "snap_"+v.Name+"_"+snap)
}

// StorageUsage is what /nodes/{node}/storage/{storage}/status reports.
type StorageUsage struct {
	Storage *Storage
	Total   int64
	Used    int64
	Active  bool
}

// Storages lists the storages available on node with their usage.
func (sl *storageLayer) Storages(node string) ([]StorageUsage, error) {
	st := sl.state()
	sl.stateMu.RLock()
	defer sl.stateMu.RUnlock()
	if st.node(node) == nil {
		return nil, Failf("no such node '%s'\n", node)
	}
	var out []StorageUsage
	for _, s := range st.Storages {
		if !s.OnNode(node) || s.Disable {
			continue
		}
		out = append(out, sl.usageLocked(node, s))
	}
	return out, nil
}

func (sl *storageLayer) usageLocked(node string, s *Storage) StorageUsage {
	st := sl.state()
	u := StorageUsage{Storage: cloneStorage(s), Total: s.Total, Active: true}
	for _, v := range st.Volumes {
		if st.volOn(v, node) && v.Storage == s.ID {
			u.Used += v.Size
		}
	}
	return u
}

// StorageStatus is one storage's usage on node.
func (sl *storageLayer) StorageStatus(node, sid string) (StorageUsage, error) {
	st := sl.state()
	sl.stateMu.RLock()
	defer sl.stateMu.RUnlock()
	s := st.storage(sid)
	if st.node(node) == nil {
		return StorageUsage{}, Failf("no such node '%s'\n", node)
	}
	if s == nil || !s.OnNode(node) {
		return StorageUsage{}, Failf("storage '%s' does not exist\n", sid)
	}
	return sl.usageLocked(node, s), nil
}

func cloneStorage(s *Storage) *Storage {
	cp := *s
	cp.Content = slices.Clone(s.Content)
	cp.Nodes = slices.Clone(s.Nodes)
	return &cp
}

// StorageConfig returns a copy of the storage's config, or nil.
func (sl *storageLayer) StorageConfig(sid string) *Storage {
	st := sl.state()
	sl.stateMu.RLock()
	defer sl.stateMu.RUnlock()
	if s := st.storage(sid); s != nil {
		return cloneStorage(s)
	}
	return nil
}

// ContentEntry is one line of a storage content listing, with "content"
// computed as PVE does: thin volumes show "rootdir" only while their owner
// exists as a CT, otherwise "images" (behaviour.md "Storage content").
type ContentEntry struct {
	Volume
	ContentType string
}

// Content lists a storage's volumes on node, optionally filtered by content
// type and owner vmid (0 = all).
func (sl *storageLayer) Content(node, sid, content string, vmid int) ([]ContentEntry, error) {
	st := sl.state()
	sl.stateMu.RLock()
	defer sl.stateMu.RUnlock()
	s := st.storage(sid)
	if st.node(node) == nil {
		return nil, Failf("no such node '%s'\n", node)
	}
	if s == nil || !s.OnNode(node) {
		return nil, Failf("storage '%s' does not exist\n", sid)
	}
	var out []ContentEntry
	for _, v := range st.Volumes {
		if !st.volOn(v, node) || v.Storage != sid {
			continue
		}
		ct := v.Content
		if ct == "images" || ct == "rootdir" {
			ct = "images"
			if g := st.Guests[v.Owner]; g != nil && (g.Node == node || s.Shared) {
				ct = "rootdir"
			}
		}
		if content != "" && ct != content {
			continue
		}
		if vmid != 0 && v.Owner != vmid {
			continue
		}
		out = append(out, ContentEntry{Volume: *v, ContentType: ct})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].VolID() < out[j].VolID() })
	return out, nil
}

// VolumeInfo returns one volume.
func (sl *storageLayer) VolumeInfo(node, volid string) (ContentEntry, error) {
	st := sl.state()
	sl.stateMu.RLock()
	defer sl.stateMu.RUnlock()
	v := st.Volumes[st.volKey(node, volid)]
	if v == nil {
		return ContentEntry{}, Failf("no such volume '%s'\n", volid)
	}
	return ContentEntry{Volume: *v, ContentType: v.Content}, nil
}

// volumeUsers lists the guests whose config (current, pending or
// snapshots) references volid, for reporting only: PVE itself never checks
// this before freeing (behaviour.md "Storage content").
func (st *State) volumeUsers(volid string) []int {
	var out []int
	for vmid, g := range st.Guests {
		for k, val := range g.Config {
			if isVolumeKey(k) && strings.HasPrefix(val, volid) && (len(val) == len(volid) || val[len(volid)] == ',') {
				out = append(out, vmid)
				break
			}
		}
	}
	sort.Ints(out)
	return out
}

// isVolumeKey reports keys whose value names a volume: rootfs, mpN, unusedN.
func isVolumeKey(k string) bool {
	if k == "rootfs" {
		return true
	}
	for _, p := range []string{"mp", "unused"} {
		if rest, ok := strings.CutPrefix(k, p); ok && rest != "" && strings.Trim(rest, "0123456789") == "" {
			return true
		}
	}
	return false
}
