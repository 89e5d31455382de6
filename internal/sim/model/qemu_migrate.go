package model

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
)

// Offline VM migration: POST /nodes/{node}/qemu/{vmid}/migrate
// (qemu-server API2/Qemu.pm migrate_vm, QemuMigrate.pm). Task qmigrate
// locks the VM "migrate", copies each local disk to the target node
// (with targetstorage's map), moves the config there and frees the
// source's copies. A running VM needs online, and online (live)
// migration is not served by the emulator: it refuses it by name.

// vmMigration is one migrate_vm call's parameters and progress.
type vmMigration struct {
	w            *Worker
	node, target string
	vmid         int
	smap         *storageMap
	started      int64
	volumes      []vmMigVolume // the local volumes, by volid
	volmap       map[string]string
}

// vmMigVolume is one local volume a migration copies, and why.
type vmMigVolume struct {
	volid, ref string
}

// vmMigrator migrates a stopped VM between nodes (qmigrate): it needs
// no other VM part, only what every one holds.
type vmMigrator struct {
	vmParts
	// ha turns the migrate of an HA-managed VM into an HA request.
	ha interface {
		haMigrateRequestLocked(auth Auth, node string, vmid int, target string) (upid string, ok bool)
	}
}

// MigrateVM is migrate_vm's checks and the qmigrate task.
func (q *vmMigrator) MigrateVM(auth Auth, node string, vmid int, params map[string]string) (string, error) {
	q.stateMu.Lock()
	defer q.stateMu.Unlock()
	st := q.state()
	if err := q.nodes.checkNodeLocked(node); err != nil {
		return "", err
	}
	target := params["target"]
	if target == node {
		return "", ParamError(map[string]string{"target": "target is local node."})
	}
	if st.node(target) == nil {
		return "", Failf("no such cluster node '%s'\n", target)
	}
	for _, k := range []string{"force", "migration_type", "migration_network"} {
		if params[k] != "" && params[k] != "0" && !auth.IsRoot() {
			return "", ParamError(map[string]string{k: "Only root may use this option."})
		}
	}
	vm, err := q.vmLocked(node, vmid)
	if err != nil {
		return "", err
	}
	if err := vmCheckLock(vm); err != nil {
		return "", err
	}
	if vm.Running && !isTrue(params["online"]) {
		return "", Failf("can't migrate running VM without --online\n")
	}
	if upid, ok := q.ha.haMigrateRequestLocked(auth, node, vmid, target); ok {
		return upid, nil
	}
	if vm.Running {
		return "", Failf("online migration of a running VM is not served by the emulator: shut the VM down and migrate it offline\n")
	}
	m := &vmMigration{node: node, target: target, vmid: vmid, volmap: map[string]string{}}
	if err := q.migrateStorageCheckLocked(auth, vm, m, params["targetstorage"]); err != nil {
		return "", err
	}
	return q.tasks.spawn(auth, node, "qmigrate", strconv.Itoa(vmid), func(w *Worker) error {
		m.w = w
		release, err := q.vmLocks.acquire(w.ctx, vmid, configLockTimeout)
		if err != nil {
			return err
		}
		defer release()
		return q.migrateRun(m)
	}), nil
}

// migrateStorageCheckLocked is migrate_vm's targetstorage checks, or
// check_storage_availability without one.
func (q *vmMigrator) migrateStorageCheckLocked(auth Auth, vm *VM, m *vmMigration, targetstorage string) error {
	st := q.state()
	if targetstorage == "" {
		for _, d := range q.vmVolumeDrivesOrCloudInitLocked(vm.Node, vm.Config) {
			if s := st.storage(d.vol.Storage); s == nil || !s.OnNode(m.target) || s.Disable {
				return Failf("storage '%s' is not available on node '%s'\n", d.vol.Storage, m.target)
			}
		}
		return nil
	}
	sm, err := parseStorageMap(targetstorage)
	if err != nil {
		return ParamError(map[string]string{"targetstorage": "failed to parse storage map: " + err.Error()})
	}
	if !sm.identity {
		if err := st.Access.Check(auth, fmt.Sprintf("/vms/%d", vm.VMID), []string{"VM.Config.Disk"}, false); err != nil {
			return err
		}
	}
	for _, sid := range sm.targets() {
		if err := st.Access.Check(auth, "/storage/"+sid, []string{"Datastore.AllocateSpace"}, false); err != nil {
			return err
		}
		s, err := q.storage.storageCheckEnabledLocked(sid, m.target)
		if err != nil {
			return err
		}
		if !s.HasContent("images") {
			return Failf("storage '%s' does not support vm images\n", sid)
		}
	}
	m.smap = sm
	return nil
}

// log is QemuMigrate's log: each line after its timestamp.
func (m *vmMigration) log(q *vmMigrator, format string, args ...any) {
	ts := q.clock().Format(migrateLogTime)
	for _, line := range strings.Split(strings.TrimRight(fmt.Sprintf(format, args...), "\n"), "\n") {
		m.w.logLocked("%s %s", ts, line)
	}
}

// duration is the migration's HH:MM:SS so far.
func (m *vmMigration) duration(q *vmMigrator) string {
	d := max(q.clock().Unix()-m.started, 0)
	return fmt.Sprintf("%02d:%02d:%02d", d/3600, d/60%60, d%60)
}

// migrateRun is QemuMigrate's phases for a stopped VM: prepare and scan
// (phase 1), copy the local disks, then move the config and free the
// source (phase 3); a failure before the config moves undoes the copies.
func (q *vmMigrator) migrateRun(m *vmMigration) error {
	err := m.w.Do(func(st *State) error { return q.migratePrepareLocked(m) })
	if err == nil {
		// QemuMigrate copies the disks through pvesm export/import over
		// SSH: seconds at least, with the VM locked "migrate" meanwhile.
		// The seeds timed no VM's migration; it takes a stopped CT's.
		err = m.w.Phase("vzmigrate", 1)
	}
	if err == nil {
		for _, mv := range m.volumes {
			if err = q.migrateCopy(m, mv); err != nil {
				break
			}
		}
	}
	if err != nil {
		m.w.cleanup(func(st *State) { q.migrateAbortLocked(m, err) })
		return Failf("migration aborted\n")
	}
	return m.w.Do(func(st *State) error { return q.migrateFinishLocked(m) })
}

// migratePrepareLocked locks the VM and lists its local volumes: the
// disks, the unused ones and those its snapshots name. A local volume
// with snapshots cannot move (storage_migrate exports no LVM snapshot).
func (q *vmMigrator) migratePrepareLocked(m *vmMigration) error {
	st := q.state()
	vm, err := q.vmLocked(m.node, m.vmid)
	if err != nil {
		return err
	}
	if err := vmCheckLock(vm); err != nil {
		return err
	}
	vm.Config["lock"] = "migrate"
	q.journal.markCore()
	m.started = q.clock().Unix()
	m.log(q, "starting migration of VM %d to node '%s' (%s)", m.vmid, m.target, nodeAddress(st.node(m.target)))
	refs := map[string]string{}
	for _, snap := range vm.Snapshots {
		for _, d := range q.vmVolumeDrivesLocked(m.node, snap.Config) {
			refs[d.drive["file"]] = "referenced by snapshot(s)"
		}
	}
	for k, v := range vm.Config {
		if ctKeyIs(k, "unused") {
			refs[v] = "unused"
		}
	}
	for _, d := range q.vmVolumeDrivesOrCloudInitLocked(m.node, vm.Config) {
		refs[d.drive["file"]] = "attached"
		if strings.Contains(d.vol.Name, "-cloudinit") {
			refs[d.drive["file"]] = "generated"
		}
	}
	for _, volid := range slices.Sorted(maps.Keys(refs)) {
		v := st.Volumes[st.volKey(m.node, volid)]
		if v == nil {
			continue
		}
		if s := st.storage(v.Storage); s == nil || s.Shared {
			continue
		}
		if len(v.Snapshots) > 0 {
			m.log(q, "ERROR: can't migrate local disk '%s': non-migratable snapshot exists", volid)
			return Failf("can't migrate VM - check log\n")
		}
		if refs[volid] == "generated" {
			m.log(q, "found generated disk '%s' (in current VM config)", volid)
		} else {
			m.log(q, "found local disk '%s' (%s)", volid, refs[volid])
		}
		m.volumes = append(m.volumes, vmMigVolume{volid: volid, ref: refs[volid]})
	}
	if len(m.volumes) > 0 {
		m.log(q, "copying local disk images")
	}
	return nil
}

// migrateCopyLocked is storage_migrate of one volume: the same name on
// the target storage (the next free one if taken, except the cloud-init
// drive's); it returns the copy of the data.
func (q *vmMigrator) migrateCopyLocked(m *vmMigration, mv vmMigVolume) (vmCopyJob, error) {
	st := q.state()
	src := st.Volumes[st.volKey(m.node, mv.volid)]
	tsid := m.smap.mapID(src.Storage)
	s, err := q.storage.storageCheckEnabledLocked(tsid, m.target)
	if err != nil {
		return vmCopyJob{}, Failf("storage migration for '%s' to storage '%s' failed - %s", mv.volid, tsid, errText(err))
	}
	format, name := src.Format, src.Name
	if s.LVMLike() {
		format = "raw"
	}
	if i := strings.LastIndexByte(name, '/'); i >= 0 {
		name = name[i+1:]
	}
	if s.LVMLike() {
		name = strings.TrimSuffix(strings.TrimSuffix(name, ".raw"), ".qcow2")
	} else if !strings.HasSuffix(name, "."+format) {
		name += "." + format
	}
	if st.Volumes[st.volKey(m.target, tsid+":"+vmVolName(s, m.vmid, name))] != nil && mv.ref != "generated" {
		name = "" // allow_rename: the next free disk name
		if s.DirLike() {
			name = fmt.Sprintf("vm-%d-disk-%d.%s", m.vmid, q.storage.freeDiskNumberLocked(m.target, tsid, m.vmid), format)
		}
	}
	v, lines, err := q.storage.allocImageLocked(m.target, s, m.vmid, name, format, src.Size)
	if err != nil {
		return vmCopyJob{}, Failf("storage migration for '%s' to storage '%s' failed - %s", mv.volid, tsid, errText(err))
	}
	for _, l := range lines {
		m.log(q, "%s", l)
	}
	m.volmap[mv.volid] = v.VolID()
	return vmCopyJob{what: "copy " + mv.volid, dst: q.storage.volumePath(m.target, s.ID, v.Name),
		src: q.storage.volumePath(m.node, src.Storage, src.Name), size: src.Size}, nil
}

// migrateCopy copies one local volume: the target volume made under the
// State's lock, the data copied outside it.
func (q *vmMigrator) migrateCopy(m *vmMigration, mv vmMigVolume) error {
	var job vmCopyJob
	err := m.w.Do(func(st *State) error {
		var err error
		job, err = q.migrateCopyLocked(m, mv)
		return err
	})
	if err != nil {
		return err
	}
	if err := job.run(); err != nil {
		return Failf("storage migration for '%s' to storage '%s' failed - %v", mv.volid, strings.SplitN(m.volmap[mv.volid], ":", 2)[0], err)
	}
	return m.w.Do(func(st *State) error {
		m.log(q, "successfully imported '%s'", m.volmap[mv.volid])
		m.log(q, "volume '%s' is '%s' on the target", mv.volid, m.volmap[mv.volid])
		return nil
	})
}

// vmVolName is the name a volume called file gets on storage s: a dir
// storage's lives under <vmid>/.
func vmVolName(s *Storage, vmid int, file string) string {
	if s.DirLike() {
		return fmt.Sprintf("%d/%s", vmid, file)
	}
	return file
}

// migrateAbortLocked frees the copies made so far and unlocks the VM.
func (q *vmMigrator) migrateAbortLocked(m *vmMigration, err error) {
	m.log(q, "aborting phase 1 - cleanup resources")
	for _, volid := range m.volmap {
		q.storage.freeVolumeLocked(m.target, volid)
	}
	if vm, verr := q.vmLocked(m.node, m.vmid); verr == nil && vm.Lock() == "migrate" {
		delete(vm.Config, "lock")
	}
	m.log(q, "ERROR: migration aborted (duration %s): %s", m.duration(q), strings.TrimSuffix(errText(err), "\n"))
	q.journal.markCore()
}

// migrateFinishLocked is phase 3: the config moves to the target with
// the new volume IDs, the source's volumes go, the lock goes.
func (q *vmMigrator) migrateFinishLocked(m *vmMigration) error {
	st := q.state()
	vm := st.VMs[m.vmid]
	rename := func(conf map[string]string) {
		for k, v := range conf {
			if !vmDriveRE.MatchString(k) && !ctKeyIs(k, "unused") {
				continue
			}
			if p, err := ParseProp(v, "file"); err == nil && m.volmap[p["file"]] != "" {
				p["file"] = m.volmap[p["file"]]
				conf[k] = p.Print("file")
			}
		}
	}
	rename(vm.Config)
	rename(vm.Pending)
	for _, s := range vm.Snapshots {
		rename(s.Config)
	}
	vm.Node = m.target
	delete(vm.Config, "lock")
	for _, mv := range m.volumes {
		v := st.Volumes[st.volKey(m.node, mv.volid)]
		if err := q.storage.freeVolumeLocked(m.node, mv.volid); err != nil {
			m.log(q, "WARN: %s", errText(err))
			continue
		}
		if s := st.storage(v.Storage); s != nil && s.Type == "lvmthin" {
			m.log(q, "  Logical volume \"%s\" successfully removed.", v.Name)
		}
	}
	q.journal.markCore()
	m.log(q, "migration finished successfully (duration %s)", m.duration(q))
	return nil
}

// VMMigratePrecondition is GET migrate (migrate_vm_precondition).
type VMMigratePrecondition struct {
	Running         bool
	AllowedNodes    []string
	NotAllowedNodes map[string]map[string][]string
	LocalDisks      []VMLocalDisk
}

// VMLocalDisk is one entry of local_disks.
type VMLocalDisk struct {
	VolID    string
	Size     int64
	IsUnused bool
	CDROM    bool
}

// VMMigratePrecondition answers GET migrate: whether the VM runs, the
// nodes where every storage it uses is available, and its local disks.
func (q *vmMigrator) VMMigratePrecondition(node string, vmid int) (VMMigratePrecondition, error) {
	q.stateMu.RLock()
	defer q.stateMu.RUnlock()
	st := q.state()
	if err := q.nodes.checkNodeLocked(node); err != nil {
		return VMMigratePrecondition{}, err
	}
	vm, err := q.vmLocked(node, vmid)
	if err != nil {
		return VMMigratePrecondition{}, err
	}
	if err := vmCheckLock(vm); err != nil {
		return VMMigratePrecondition{}, err
	}
	out := VMMigratePrecondition{Running: vm.Running, AllowedNodes: []string{}, NotAllowedNodes: map[string]map[string][]string{}, LocalDisks: []VMLocalDisk{}}
	drives := q.vmVolumeDrivesOrCloudInitLocked(node, vm.Config)
	for _, n := range st.Nodes {
		if n.Name == node {
			continue
		}
		var missing []string
		for _, d := range drives {
			if s := st.storage(d.vol.Storage); s == nil || !s.OnNode(n.Name) {
				missing = append(missing, d.vol.Storage)
			}
		}
		if len(missing) > 0 {
			out.NotAllowedNodes[n.Name] = map[string][]string{"unavailable_storages": missing}
			continue
		}
		out.AllowedNodes = append(out.AllowedNodes, n.Name)
	}
	for _, v := range st.Volumes {
		s := st.storage(v.Storage)
		if v.Owner != vmid || v.Content != "images" || !st.volOn(v, node) || s == nil || s.Shared {
			continue
		}
		unused := true
		for _, d := range drives {
			unused = unused && d.vol != v
		}
		out.LocalDisks = append(out.LocalDisks, VMLocalDisk{VolID: v.VolID(), Size: v.Size, IsUnused: unused})
	}
	slices.SortFunc(out.LocalDisks, func(a, b VMLocalDisk) int { return strings.Compare(a.VolID, b.VolID) })
	return out, nil
}
