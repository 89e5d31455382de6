package model

import (
	"fmt"
	"os"
	"sort"
	"strconv"
	"time"
)

// ctSnapshots takes, lists, rolls back and deletes a CT's snapshots. It
// holds no *Cluster: the State's lock and the State, the clock, and one
// interface per part it calls. Cluster embeds it, so its methods are the
// Cluster's (c.SnapshotCT, and vzdump's c.snapshotCreateLocked).
type ctSnapshots struct {
	// stateMu guards the State; state is the State (nil until loaded).
	stateMu *stateMutex
	state   func() *State
	clock   func() time.Time
	guests  snapshotGuests
	// stopper (ctPower) and starter (ctCreator): a rollback stops the
	// CT first and, with "start": 1, starts it after.
	stopper interface{ markStoppedLocked(g *Guest) }
	starter interface {
		createStartLocked(w *Worker, node string, g *Guest) error
	}
	storage snapshotStorage
	tasks   taskStarter
	journal volumeJournal
}

// snapshotGuests is what ctSnapshots needs of guests: the node check, a
// CT's lookup and its config flock.
type snapshotGuests interface {
	checkNodeLocked(node string) error
	guestLocked(node string, vmid int) (*Guest, error)
	lockConfig(node string, vmid int) (g *Guest, unlock func(), err error)
}

// snapshotStorage is what ctSnapshots needs of storageLayer: where a
// volume and its snapshots keep their data.
type snapshotStorage interface {
	volumePath(node, storage, name string) string
	snapshotPath(node string, v *Volume, snap string) string
}

// Snapshots: /nodes/{node}/lxc/{vmid}/snapshot (pve-container
// API2/LXC/Snapshot.pm, pve-guest-common AbstractConfig snapshot_create,
// snapshot_delete, snapshot_rollback; behaviour.md "Snapshots"). A
// snapshot is a [snapname] section of the config plus, per volume, an
// LVM-thin snapshot LV snap_<volname>_<snapname>; the emulator keeps the
// LV as a copy of the volume's directory, so a rollback brings files back.
// Only LVM-thin volumes can be snapshotted; a dir storage, a bind or a
// device mount makes "snapshot feature is not available".

// snapshotCopyConfig is __snapshot_copy_config: the config without
// snapshot bookkeeping, its description and unused volumes.
func snapshotCopyConfig(conf map[string]string) map[string]string {
	out := map[string]string{}
	for k, v := range conf {
		switch {
		case k == "snapstate" || k == "snaptime" || k == "vmstate" || k == "lock" || k == "digest" || k == "description":
			continue
		case ctKeyIs(k, "unused"):
			continue
		}
		out[k] = v
	}
	return out
}

// snapshotMounts lists conf's rootfs and mpN in foreach_volume order;
// with backupOnly (vzdump's snapshot) only those vzdump includes.
func snapshotMounts(conf map[string]string, backupOnly bool) []MountPoint {
	var out []MountPoint
	for _, key := range ctVolumeKeys(conf) {
		if ctKeyIs(key, "unused") {
			continue
		}
		mp, err := ParseMountPoint(key, conf[key])
		if err != nil {
			continue
		}
		if backupOnly && (mp.Type() != "volume" || key != "rootfs" && !mp.Backup()) {
			continue
		}
		out = append(out, mp)
	}
	return out
}

// snapshotFeatureLocked is has_feature('snapshot'): every mount point
// (with backupOnly: every one vzdump includes) is a volume on a storage
// that can snapshot.
func (sn *ctSnapshots) snapshotFeatureLocked(conf map[string]string, backupOnly bool) bool {
	st := sn.state()
	for _, mp := range snapshotMounts(conf, backupOnly) {
		if mp.Type() != "volume" {
			return false
		}
		sid, _, ok := ParseVolID(mp.Volume())
		if !ok {
			return false
		}
		if s := st.storage(sid); s == nil || !s.CanSnapshot() {
			return false
		}
	}
	return true
}

// snapshotPrepareLocked is __snapshot_prepare: the checks, then the
// snapshot section with snapstate "prepare" and lock "snapshot".
func (sn *ctSnapshots) snapshotPrepareLocked(g *Guest, name, description string) error {
	if err := checkLock(g); err != nil {
		return err
	}
	if g.Snapshots[name] != nil {
		return Failf("snapshot name '%s' already used\n", name)
	}
	if g.IsTemplate() {
		return Failf("you can't take a snapshot if it's a template\n")
	}
	if !sn.snapshotFeatureLocked(g.Config, name == "vzdump") {
		return Failf("snapshot feature is not available\n")
	}
	conf := snapshotCopyConfig(g.Config)
	conf["snapstate"] = "prepare"
	conf["snaptime"] = strconv.FormatInt(sn.clock().Unix(), 10)
	if description != "" {
		conf["description"] = description
	}
	if g.Snapshots == nil {
		g.Snapshots = map[string]*Snapshot{}
	}
	g.Snapshots[name] = &Snapshot{Name: name, Config: conf, SnapTime: sn.clock().Unix(), Description: description,
		Parent: g.Config["parent"], SnapState: "prepare"}
	g.Config["lock"] = "snapshot"
	return nil
}

// snapshotCommitLocked takes the volume snapshots and commits the section
// (__snapshot_commit): snapstate and lock go, the config's parent becomes
// the new snapshot.
func (sn *ctSnapshots) snapshotCommitLocked(w *Worker, g *Guest, name string) error {
	st := sn.state()
	s := g.Snapshots[name]
	if s == nil {
		return Failf("snapshot '%s' does not exist\n", name)
	}
	for _, mp := range snapshotMounts(s.Config, name == "vzdump") {
		v := st.Volumes[st.volKey(g.Node, mp.Volume())]
		if v == nil {
			return Failf("volume '%s' does not exist\n", mp.Volume())
		}
		dst := sn.storage.snapshotPath(g.Node, v, name)
		os.RemoveAll(dst)
		if err := os.MkdirAll(dst, 0o755); err != nil {
			return fmt.Errorf("snapshot %s: %w", v.VolID(), err)
		}
		if _, err := copyTree(sn.storage.volumePath(g.Node, v.Storage, v.Name), dst); err != nil {
			return fmt.Errorf("snapshot %s: %w", v.VolID(), err)
		}
		v.Snapshots = append(v.Snapshots, name)
		w.logLocked("  Logical volume \"snap_%s_%s\" created.", v.Name, name)
	}
	delete(s.Config, "snapstate")
	s.SnapState = ""
	if g.Config["lock"] == "snapshot" {
		delete(g.Config, "lock")
	}
	g.Config["parent"] = name
	return nil
}

// snapshotCreateLocked is snapshot_create in one step (vzdump's temporary
// snapshot).
func (sn *ctSnapshots) snapshotCreateLocked(w *Worker, g *Guest, name, description string) error {
	if err := sn.snapshotPrepareLocked(g, name, description); err != nil {
		return err
	}
	if err := sn.snapshotCommitLocked(w, g, name); err != nil {
		sn.snapshotDropLocked(g, name)
		delete(g.Config, "lock")
		return err
	}
	return nil
}

// snapshotDropLocked removes a snapshot's volume snapshots and section,
// re-parenting its children (snapshot_delete's bookkeeping).
func (sn *ctSnapshots) snapshotDropLocked(g *Guest, name string) []string {
	st := sn.state()
	s := g.Snapshots[name]
	if s == nil {
		return nil
	}
	var lines []string
	for _, mp := range snapshotMounts(s.Config, false) {
		if mp.Type() != "volume" {
			continue
		}
		v := st.Volumes[st.volKey(g.Node, mp.Volume())]
		if v == nil {
			continue
		}
		kept := v.Snapshots[:0]
		found := false
		for _, sn := range v.Snapshots {
			if sn == name {
				found = true
				continue
			}
			kept = append(kept, sn)
		}
		v.Snapshots = kept
		// Marked here: once the section is gone, the guest's marks no
		// longer reach a volume only this snapshot named.
		sn.journal.markVolume(g.Node, v.VolID())
		os.RemoveAll(sn.storage.snapshotPath(g.Node, v, name))
		if found {
			lines = append(lines, fmt.Sprintf("  Logical volume \"snap_%s_%s\" successfully removed.", v.Name, name))
		}
	}
	parent := s.Config["parent"]
	for _, other := range g.Snapshots {
		if other.Config["parent"] == name {
			if parent == "" {
				delete(other.Config, "parent")
			} else {
				other.Config["parent"] = parent
			}
			other.Parent = parent
		}
	}
	if g.Config["parent"] == name {
		if parent == "" {
			delete(g.Config, "parent")
		} else {
			g.Config["parent"] = parent
		}
	}
	delete(g.Snapshots, name)
	if len(g.Snapshots) == 0 {
		g.Snapshots = nil
	}
	return lines
}

// snapshotDeleteLocked deletes a snapshot in one step (vzdump's cleanup).
func (sn *ctSnapshots) snapshotDeleteLocked(w *Worker, g *Guest, name string) error {
	if g.Snapshots[name] == nil {
		return Failf("snapshot '%s' does not exist\n", name)
	}
	for _, l := range sn.snapshotDropLocked(g, name) {
		w.logLocked("%s", l)
	}
	return nil
}

// SnapshotCT is POST /nodes/{node}/lxc/{vmid}/snapshot: task vzsnapshot.
// Only the reserved names fail the request; everything else (a missing CT,
// a lock, a used name, a template, a volume that cannot be snapshotted)
// fails the task. A running CT is snapshotted as it runs.
func (sn *ctSnapshots) SnapshotCT(auth Auth, node string, vmid int, params map[string]string) (string, error) {
	sn.stateMu.Lock()
	defer sn.stateMu.Unlock()
	if err := sn.guests.checkNodeLocked(node); err != nil {
		return "", err
	}
	name, description := params["snapname"], params["description"]
	if name == "current" || name == "vzdump" {
		return "", Failf("unable to use snapshot name '%s' (reserved name)\n", name)
	}
	return sn.tasks.spawn(auth, node, "vzsnapshot", strconv.Itoa(vmid), func(w *Worker) error {
		if err := w.LockConfig(vmid); err != nil {
			return err
		}
		err := w.doGuest(node, vmid, func(st *State, g *Guest) error {
			return sn.snapshotPrepareLocked(g, name, description)
		})
		if err != nil {
			return err
		}
		if err := w.Phase("vzsnapshot", 1); err != nil {
			return err
		}
		return w.doGuest(node, vmid, func(st *State, g *Guest) error {
			if err := sn.snapshotCommitLocked(w, g, name); err != nil {
				// The section stays with snapstate "prepare" and the lock
				// stays, as on PVE after a failed volume snapshot.
				return err
			}
			return nil
		})
	}), nil
}

// DeleteSnapshot is DELETE /nodes/{node}/lxc/{vmid}/snapshot/{snapname}:
// task vzdelsnapshot. With force the section goes even if removing a
// volume snapshot fails.
func (sn *ctSnapshots) DeleteSnapshot(auth Auth, node string, vmid int, name string, params map[string]string) (string, error) {
	sn.stateMu.Lock()
	defer sn.stateMu.Unlock()
	if err := sn.guests.checkNodeLocked(node); err != nil {
		return "", err
	}
	return sn.tasks.spawn(auth, node, "vzdelsnapshot", strconv.Itoa(vmid), func(w *Worker) error {
		if err := w.LockConfig(vmid); err != nil {
			return err
		}
		err := w.doGuest(node, vmid, func(st *State, g *Guest) error {
			s := g.Snapshots[name]
			if s == nil {
				return Failf("snapshot '%s' does not exist\n", name)
			}
			if err := checkLock(g); err != nil {
				return err
			}
			s.Config["snapstate"] = "delete"
			s.SnapState = "delete"
			g.Config["lock"] = "snapshot-delete"
			return nil
		})
		if err != nil {
			return err
		}
		if err := w.Phase("vzdelsnapshot", 1); err != nil {
			return err
		}
		return w.doGuest(node, vmid, func(st *State, g *Guest) error {
			for _, l := range sn.snapshotDropLocked(g, name) {
				w.logLocked("%s", l)
			}
			if g.Config["lock"] == "snapshot-delete" {
				delete(g.Config, "lock")
			}
			return nil
		})
	}), nil
}

// RollbackSnapshot is POST .../snapshot/{snapname}/rollback: task
// vzrollback. A running CT is stopped hard first; each volume gets the
// snapshot's data back (LVM-thin may roll back to any snapshot), the
// config becomes the snapshot's (keeping the current description and
// unused volumes; volumes only the current config uses become unusedN)
// and with start=1 the CT starts again.
func (sn *ctSnapshots) RollbackSnapshot(auth Auth, node string, vmid int, name string, params map[string]string) (string, error) {
	sn.stateMu.Lock()
	defer sn.stateMu.Unlock()
	if err := sn.guests.checkNodeLocked(node); err != nil {
		return "", err
	}
	start := isTrue(params["start"])
	return sn.tasks.spawn(auth, node, "vzrollback", strconv.Itoa(vmid), func(w *Worker) error {
		if err := w.LockConfig(vmid); err != nil {
			return err
		}
		var wasRunning bool
		err := w.doGuest(node, vmid, func(st *State, g *Guest) (err error) {
			wasRunning, err = sn.rollbackPrepareLocked(g, name)
			return err
		})
		if err != nil {
			return err
		}
		if wasRunning {
			if err := w.Phase("vzstop", 1); err != nil {
				return err
			}
		}
		if err := w.Phase("vzrollback", 1); err != nil {
			return err
		}
		err = w.doGuest(node, vmid, func(st *State, g *Guest) error {
			s := g.Snapshots[name]
			if s == nil {
				return Failf("snapshot '%s' does not exist\n", name)
			}
			if err := sn.rollbackVolumesLocked(w, st, node, s, name); err != nil {
				return err
			}
			return snapshotApplyConfig(g, s, name)
		})
		if err != nil {
			return err
		}
		if !start {
			return nil
		}
		if err := w.Phase("vzstart", 1); err != nil {
			return err
		}
		return w.doGuest(node, vmid, func(st *State, g *Guest) error {
			return sn.starter.createStartLocked(w, node, g)
		})
	}), nil
}

// rollbackPrepareLocked is the rollback's first step: snapshot name must
// exist and be complete and the CT unlocked; a running CT is stopped and
// the CT locked "rollback". It reports whether the CT ran.
func (sn *ctSnapshots) rollbackPrepareLocked(g *Guest, name string) (wasRunning bool, err error) {
	s := g.Snapshots[name]
	if s == nil {
		return false, Failf("snapshot '%s' does not exist\n", name)
	}
	if s.SnapState != "" {
		return false, Failf("unable to rollback to incomplete snapshot (snapstate = %s)\n", s.SnapState)
	}
	if err := checkLock(g); err != nil {
		return false, err
	}
	if g.Running {
		wasRunning = true
		sn.stopper.markStoppedLocked(g)
	}
	g.Config["lock"] = "rollback"
	return wasRunning, nil
}

// rollbackVolumesLocked brings every volume of snapshot s back from its
// snapshot copy, logging as lvconvert's remove and create do.
func (sn *ctSnapshots) rollbackVolumesLocked(w *Worker, st *State, node string, s *Snapshot, name string) error {
	for _, mp := range snapshotMounts(s.Config, false) {
		if mp.Type() != "volume" {
			continue
		}
		v := st.Volumes[st.volKey(node, mp.Volume())]
		if v == nil {
			return Failf("volume '%s' does not exist\n", mp.Volume())
		}
		dir := sn.storage.volumePath(node, v.Storage, v.Name)
		if err := os.RemoveAll(dir); err != nil {
			return fmt.Errorf("rollback %s: %w", v.VolID(), err)
		}
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return fmt.Errorf("rollback %s: %w", v.VolID(), err)
		}
		if _, err := copyTree(sn.storage.snapshotPath(node, v, name), dir); err != nil {
			return fmt.Errorf("rollback %s: %w", v.VolID(), err)
		}
		w.logLocked("  Logical volume \"%s\" successfully removed.", v.Name)
		w.logLocked("  Logical volume \"%s\" created.", v.Name)
	}
	return nil
}

// snapshotApplyConfig is __snapshot_apply_config: g's config becomes
// snapshot s's, keeping the current description and unused volumes; a
// volume the snapshot does not use becomes an unusedN. Pending changes
// are dropped.
func snapshotApplyConfig(g *Guest, s *Snapshot, name string) error {
	newconf := map[string]string{}
	for k, v := range s.Config {
		switch k {
		case "snaptime", "snapstate", "vmstate", "description", "parent":
			continue
		}
		newconf[k] = v
	}
	for k, v := range g.Config {
		if k == "description" || ctKeyIs(k, "unused") {
			newconf[k] = v
		}
	}
	for _, mp := range mountPoints(g.Config) {
		if mp.Type() == "volume" && !volumeInUse(&Guest{Config: newconf}, mp.Volume(), false, false) {
			if _, err := configAddUnused(newconf, mp.Volume()); err != nil {
				return err
			}
		}
	}
	newconf["parent"] = name
	g.Config = newconf
	g.Pending, g.PendingDelete = nil, nil
	return nil
}

// SnapshotInfo is one entry of GET .../snapshot.
type SnapshotInfo struct {
	Name        string
	Description string
	SnapTime    int64
	Parent      string
	SnapState   string
	// Current is the "current" entry: the config now, with its digest
	// and whether the CT runs.
	Current bool
	Digest  string
	Running bool
}

// Snapshots is GET /nodes/{node}/lxc/{vmid}/snapshot: every snapshot
// (by snaptime, then name) and last the "current" entry ("You are here!").
func (sn *ctSnapshots) Snapshots(node string, vmid int) ([]SnapshotInfo, error) {
	sn.stateMu.RLock()
	defer sn.stateMu.RUnlock()
	g, err := sn.guests.guestLocked(node, vmid)
	if err != nil {
		return nil, err
	}
	var out []SnapshotInfo
	for name, s := range g.Snapshots {
		t, _ := strconv.ParseInt(s.Config["snaptime"], 10, 64)
		desc, _ := descriptionAsRead(s.Config["description"]) // snapshot_list: description || ''
		out = append(out, SnapshotInfo{Name: name, Description: desc, SnapTime: t,
			Parent: s.Config["parent"], SnapState: s.Config["snapstate"]})
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].SnapTime != out[j].SnapTime {
			return out[i].SnapTime < out[j].SnapTime
		}
		return out[i].Name < out[j].Name
	})
	out = append(out, SnapshotInfo{Name: "current", Description: "You are here!", Parent: g.Config["parent"],
		Current: true, Digest: g.Digest(), Running: g.Running})
	return out, nil
}

// SnapshotConfig is GET .../snapshot/{snapname}/config: the snapshot's
// section (its config keys, snaptime, description, parent).
func (sn *ctSnapshots) SnapshotConfig(node string, vmid int, name string) (map[string]string, error) {
	sn.stateMu.RLock()
	defer sn.stateMu.RUnlock()
	g, err := sn.guests.guestLocked(node, vmid)
	if err != nil {
		return nil, err
	}
	s := g.Snapshots[name]
	if s == nil {
		return nil, Failf("snapshot '%s' does not exist\n", name)
	}
	out := map[string]string{}
	for k, v := range s.Config {
		out[k] = v
	}
	setDescriptionAsRead(out)
	return out, nil
}

// UpdateSnapshotConfig is PUT .../snapshot/{snapname}/config: it sets the
// snapshot's description under the config lock. Without description it
// does nothing at all.
func (sn *ctSnapshots) UpdateSnapshotConfig(auth Auth, node string, vmid int, name string, params map[string]string) error {
	description, ok := params["description"]
	if !ok {
		return nil
	}
	g, unlock, err := sn.guests.lockConfig(node, vmid)
	if err != nil {
		return err
	}
	defer unlock()
	s := g.Snapshots[name]
	if s == nil {
		return Failf("snapshot '%s' does not exist\n", name)
	}
	if description == "" {
		delete(s.Config, "description")
	} else {
		s.Config["description"] = description
	}
	s.Description = description
	return sn.journal.saveLocked()
}
