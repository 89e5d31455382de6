package model

import (
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"
)

// CT migration between nodes: POST/GET /nodes/{node}/lxc/{vmid}/migrate
// (pve-container API2/LXC.pm migrate_vm, migrate_vm_precondition;
// LXC/Migrate.pm; pve-guest-common AbstractMigrate.pm), behaviour.md
// (i.1), (i.2). Only offline (stopped, or restart mode) migration exists
// for containers. Local volumes are copied to the target node's instance
// of their storage and freed on the source after success; volumes of
// shared storages are not copied, the same volid names the same data on
// every node.

// migrateLockTimeout is guest_migration_lock's flock timeout.
const migrateLockTimeout = 10 * time.Second

// migrateLogTime is AbstractMigrate.pm log's timestamp.
const migrateLogTime = "2006-01-02 15:04:05"

// migration is one vzmigrate task, Migrate.pm's object: the accepted
// request and the state its phases share. run reads top-down: prepare,
// phase1 (copy the volumes, move the config), phase3 (drop the source
// copies), final cleanup, each a method.
type migration struct {
	c               *Cluster
	w               *Worker // set when the task starts
	vmid            int
	source, target  string
	restart, online bool
	timeout         time.Duration
	storageMap      *storageMap
	startedAt       time.Time
	wasRunning      bool
	copies          []migCopy // local volumes whose copy was started, in order
}

// migCopy is one local volume's copy to the target node.
type migCopy struct {
	volid, newVolid string
	done            bool
}

// storageMap is pve-common parse_idmap's result for target-storage.
type storageMap struct {
	identity bool
	def      string
	entries  map[string]string
}

// parseStorageMap is parse_idmap (the schema has already checked each
// entry's format).
func parseStorageMap(s string) (*storageMap, error) {
	m := &storageMap{entries: map[string]string{}}
	for _, e := range splitList(s) {
		switch src, dst, ok := strings.Cut(e, ":"); {
		case e == "1":
			m.identity = true
		case ok:
			if _, dup := m.entries[src]; dup {
				return nil, fmt.Errorf("duplicate mapping for source '%s'\n", src)
			}
			m.entries[src] = dst
		default:
			if m.def != "" {
				return nil, fmt.Errorf("default target ID can only be provided once\n")
			}
			m.def = e
		}
	}
	if m.identity && (m.def != "" || len(m.entries) > 0) {
		return nil, fmt.Errorf("identity mapping cannot be combined with other mappings\n")
	}
	return m, nil
}

// mapID is map_id: the target storage for source storage sid.
func (m *storageMap) mapID(sid string) string {
	if m == nil || m.identity {
		return sid
	}
	if t, ok := m.entries[sid]; ok {
		return t
	}
	if m.def != "" {
		return m.def
	}
	return sid
}

// targets lists the map's target storages: the entries' values, then the
// default, as migrate_vm checks them.
func (m *storageMap) targets() []string {
	var out []string
	for _, k := range slices.Sorted(maps.Keys(m.entries)) {
		out = append(out, m.entries[k])
	}
	if m.def != "" {
		out = append(out, m.def)
	}
	return out
}

// splitList is PVE::Tools::split_list: items separated by commas,
// semicolons or whitespace.
func splitList(s string) []string {
	return strings.FieldsFunc(s, func(r rune) bool {
		return r == ',' || r == ';' || r == ' ' || r == '\t' || r == '\n' || r == '\x00'
	})
}

// ctMigrator migrates CTs between nodes: the request, its precondition
// check (GET .../migrate) and the task, whose steps are a migration's.
// Cluster embeds it. It holds no *Cluster: the State's lock and the
// State, and one field per part it calls; the migration task gets the
// Cluster from its Worker, as every task's steps do.
type ctMigrator struct {
	// stateMu guards the State; state is the State (nil until loaded).
	stateMu *stateMutex
	state   func() *State
	guests  interface {
		checkNodeLocked(node string) error
		guestLocked(node string, vmid int) (*Guest, error)
	}
	// storage checks a target storage is enabled on the target node.
	storage interface {
		storageCheckEnabledLocked(sid, node string) (*Storage, error)
	}
	// starter (ctPower) marks a CT restarted after the move running.
	starter interface{ markRunningLocked(g *Guest) }
	tasks   taskStarter
	// admit is memory admission (admission.go, the Cluster's own),
	// which a restart passes.
	admit func(w *Worker, node string, g *Guest) error
	// ha (haGuest) turns the move of an HA-managed CT into a request
	// to the CRM (ha_guest.go).
	ha interface {
		haMigrateRequestLocked(auth Auth, node string, vmid int, target string) (upid string, ok bool)
	}
}

// quorateLocked reports whether more than half of the nodes are online
// (corosync votequorum with one vote per node).
func (mg *ctMigrator) quorateLocked() bool {
	st := mg.state()
	online := 0
	for _, n := range st.Nodes {
		if n.Online {
			online++
		}
	}
	return online*2 > len(st.Nodes)
}

// MigrateCT is POST /nodes/{node}/lxc/{vmid}/migrate: the synchronous
// checks of migrate_vm in PVE's order, then a vzmigrate task on the
// source node. params: target, online, restart, timeout, bwlimit,
// target-storage. VM.Migrate on /vms/{vmid} is the schema's check (the
// HTTP layer); the target-storage checks are here.
func (mg *ctMigrator) MigrateCT(auth Auth, node string, vmid int, params map[string]string) (string, error) {
	mg.stateMu.Lock()
	defer mg.stateMu.Unlock()
	st := mg.state()
	if err := mg.guests.checkNodeLocked(node); err != nil {
		return "", err
	}
	target := params["target"]
	if target == node {
		return "", ParamError(map[string]string{"target": "target is local node."})
	}
	if !mg.quorateLocked() {
		return "", Failf("cluster not ready - no quorum?\n")
	}
	if st.node(target) == nil {
		return "", Failf("no such cluster node '%s'\n", target)
	}
	g, err := mg.guests.guestLocked(node, vmid)
	if err != nil {
		return "", err
	}
	m := &migration{vmid: vmid, source: node, target: target, online: isTrue(params["online"]), restart: isTrue(params["restart"]), timeout: 180 * time.Second}
	if g.Running && !m.online && !m.restart {
		return "", Failf("can't migrate running container without --online or --restart\n")
	}
	if upid, ok := mg.ha.haMigrateRequestLocked(auth, node, vmid, target); ok {
		return upid, nil
	}
	if ts := params["target-storage"]; ts != "" {
		sm, err := parseStorageMap(ts)
		if err != nil {
			return "", ParamError(map[string]string{"target-storage": "failed to parse storage map: " + err.Error()})
		}
		if !sm.identity && !auth.IsRoot() {
			if err := st.Access.Check(auth, fmt.Sprintf("/vms/%d", vmid), []string{"VM.Config.Disk"}, false); err != nil {
				return "", err
			}
		}
		for _, dst := range sm.targets() {
			s, err := mg.storage.storageCheckEnabledLocked(dst, target)
			if err != nil {
				return "", err
			}
			if !auth.IsRoot() {
				if err := st.Access.Check(auth, "/storage/"+dst, []string{"Datastore.AllocateSpace"}, false); err != nil {
					return "", err
				}
			}
			if !s.HasContent("rootdir") {
				return "", Failf("storage '%s' does not support CT rootdirs\n", dst)
			}
		}
		m.storageMap = sm
	}
	if t, err := strconv.Atoi(params["timeout"]); err == nil {
		m.timeout = time.Duration(t) * time.Second
	}
	return mg.tasks.spawn(auth, node, "vzmigrate", strconv.Itoa(vmid), func(w *Worker) error {
		m.c, m.w = w.c, w
		return m.run()
	}), nil
}

// MigratePrecondition is GET /nodes/{node}/lxc/{vmid}/migrate (PVE 9):
// whether the CT runs and the nodes it may go to: every other cluster
// node, with no online or storage check (migrate_vm_precondition).
type MigratePrecondition struct {
	Running         bool
	AllowedNodes    []string
	NotAllowedNodes map[string]any
}

// MigratePrecondition answers GET …/migrate for CT vmid on node.
func (mg *ctMigrator) MigratePrecondition(node string, vmid int) (MigratePrecondition, error) {
	mg.stateMu.RLock()
	defer mg.stateMu.RUnlock()
	if err := mg.guests.checkNodeLocked(node); err != nil {
		return MigratePrecondition{}, err
	}
	if !mg.quorateLocked() {
		return MigratePrecondition{}, Failf("cluster not ready - no quorum?\n")
	}
	g, err := mg.guests.guestLocked(node, vmid)
	if err != nil {
		return MigratePrecondition{}, err
	}
	if err := checkLock(g); err != nil {
		return MigratePrecondition{}, err
	}
	out := MigratePrecondition{Running: g.Running, AllowedNodes: []string{}, NotAllowedNodes: map[string]any{}}
	for _, n := range mg.state().Nodes {
		if n.Name != node {
			out.AllowedNodes = append(out.AllowedNodes, n.Name)
		}
	}
	return out, nil
}

// log is AbstractMigrate.pm log at level info or warn: the line with its
// timestamp.
func (m *migration) log(format string, args ...any) {
	msg := strings.TrimRight(fmt.Sprintf(format, args...), "\n")
	ts := m.c.now().Format(migrateLogTime)
	for _, line := range strings.Split(msg, "\n") {
		m.w.Log("%s %s", ts, line)
	}
}

// logErr is log at level err: " ERROR: " after the timestamp.
func (m *migration) logErr(format string, args ...any) {
	m.log("ERROR: "+format, args...)
}

// duration is AbstractMigrate's HH:MM:SS since the start.
func (m *migration) duration() string {
	d := int(m.c.now().Sub(m.startedAt).Seconds())
	if d < 0 {
		d = 0
	}
	return fmt.Sprintf("%02d:%02d:%02d", d/3600, d/60%60, d%60)
}

// run is the vzmigrate worker: guest_migration_lock, the config
// flock for the whole run, then prepare, phase1, phase3 and
// final_cleanup with AbstractMigrate's outcome rules.
func (m *migration) run() error {
	c, w := m.c, m.w
	release, err := c.migLocks.acquire(w.ctx, m.vmid, migrateLockTimeout)
	if err != nil {
		return err
	}
	w.held = append(w.held, release)
	if err := w.LockConfig(m.vmid); err != nil {
		return err
	}
	m.startedAt = c.now()
	if err := m.prepare(); err != nil {
		m.logErr("migration aborted (duration %s): %s", m.duration(), strings.TrimRight(errText(err), "\n"))
		return Failf("migration aborted\n")
	}
	if err := m.phase1(); err != nil {
		return m.abortPhase1(err)
	}
	problems := m.phase3()
	return m.finalCleanup(problems)
}

// abortPhase1 is phase1_cleanup and final_cleanup after a failed phase1:
// the stale copies are reported, the lock goes and a CT stopped for the
// migration starts again on the source node.
func (m *migration) abortPhase1(err error) error {
	c, w := m.c, m.w
	m.logErr("%s", strings.TrimRight(errText(err), "\n"))
	m.log("aborting phase 1 - cleanup resources")
	for _, cp := range m.copies {
		volid := cp.volid
		if cp.done {
			volid = cp.newVolid
		}
		m.logErr("found stale volume copy '%s' on node '%s'", volid, m.target)
	}
	m.log("start final cleanup")
	w.cleanup(func(st *State) {
		if g := st.Guests[m.vmid]; g != nil && g.Node == m.source && g.Lock() == "migrate" {
			delete(g.Config, "lock")
		}
	})
	if m.wasRunning {
		m.log("start container on source node")
		if err := c.migrateStart(w, m.source, m.vmid); err != nil {
			m.logErr("%s", strings.TrimRight(errText(err), "\n"))
		}
	}
	m.logErr("migration aborted (duration %s): %s", m.duration(), strings.TrimRight(errText(err), "\n"))
	return Failf("migration aborted\n")
}

// finalCleanup is final_cleanup after phase3: the lock goes on the
// target, a CT stopped for the migration starts there, and the outcome
// is logged (problems: phase3 or this cleanup had one).
func (m *migration) finalCleanup(problems bool) error {
	c, w := m.c, m.w
	m.log("start final cleanup")
	if err := w.Phase("vzmigrate", 0.2); err != nil {
		return err
	}
	if err := w.Do(func(st *State) error {
		g := st.Guests[m.vmid]
		if g == nil || g.Node != m.target {
			return Failf("Configuration file '%s' does not exist\n", configPath(m.target, m.vmid))
		}
		if g.Lock() == "migrate" {
			delete(g.Config, "lock")
		}
		return nil
	}); err != nil {
		m.logErr("failed to clear migrate lock: %s", strings.TrimRight(errText(err), "\n"))
		problems = true
	}
	if m.wasRunning {
		m.log("start container on target node")
		ip := m.target
		c.mu.RLock()
		if n := c.st.node(m.target); n != nil {
			ip = nodeAddress(n)
		}
		c.mu.RUnlock()
		m.log("# /usr/bin/ssh -e none -o 'BatchMode=yes' -o 'HostKeyAlias=%s' -o 'UserKnownHostsFile=/etc/pve/nodes/%s/ssh_known_hosts' -o 'GlobalKnownHostsFile=none' root@%s pct start %d", m.target, m.target, ip, m.vmid)
		if err := c.migrateStart(w, m.target, m.vmid); err != nil {
			m.logErr("%s", strings.TrimRight(errText(err), "\n"))
			problems = true
		}
	}
	if problems {
		m.logErr("migration finished with problems (duration %s)", m.duration())
		return Failf("migration problems\n")
	}
	m.log("migration finished successfully (duration %s)", m.duration())
	return nil
}

// migrateStart starts CT vmid on node for restart mode (vm_start with
// skiplock), taking the "vzstart" time.
func (mg *ctMigrator) migrateStart(w *Worker, node string, vmid int) error {
	if err := w.Phase("vzstart", 1); err != nil {
		return err
	}
	return w.doGuest(node, vmid, func(st *State, g *Guest) error {
		if g.Running {
			return nil
		}
		if err := mg.admit(w, node, g); err != nil {
			return err
		}
		mg.starter.markRunningLocked(g)
		return nil
	})
}

// prepare is Migrate.pm prepare: the lock, running and mount point
// checks, source and target storage checks for every volume of the
// current config (rootfs, mpN, unusedN), the target's reachability, and
// in restart mode the shutdown of a running CT.
func (m *migration) prepare() error {
	c, w := m.c, m.w
	var running bool
	err := w.doGuest(m.source, m.vmid, func(st *State, g *Guest) error {
		if err := checkLock(g); err != nil {
			return err
		}
		running = g.Running
		if running {
			if m.online {
				return Failf("lxc live migration is currently not implemented\n")
			}
			if !m.restart {
				return Failf("running container can only be migrated in restart mode\n")
			}
		}
		for _, key := range ctVolumeKeys(g.Config) {
			mp, err := migrateMountPoint(key, g.Config[key])
			if err != nil {
				return err
			}
			if t := mp.Type(); t != "volume" {
				if isTrue(mp.Props["shared"]) {
					continue
				}
				return Failf("cannot migrate local %s mount point '%s'\n", t, key)
			}
			volid := mp.Volume()
			if volid == "" {
				return Failf("missing volume for mount point '%s'\n", key)
			}
			sid, _, ok := ParseVolID(volid)
			if !ok {
				return Failf("can't determine assigned storage for mount point '%s'\n", key)
			}
			s, err := c.storage.storageCheckEnabledLocked(sid, m.source)
			if err != nil {
				return err
			}
			if !s.HasContent("rootdir") {
				return Failf("content type 'rootdir' is not available on storage '%s'\n", sid)
			}
			tsid := sid
			if !s.Shared {
				tsid = m.storageMap.mapID(sid)
			}
			ts, err := c.storage.storageCheckEnabledLocked(tsid, m.target)
			if err != nil {
				return err
			}
			if !ts.HasContent("rootdir") {
				return Failf("%s: content type 'rootdir' is not available on storage '%s'\n", volid, tsid)
			}
		}
		if n := st.node(m.target); n == nil || !n.Online {
			return Failf("Can't connect to destination address using public key\n")
		}
		return nil
	})
	if err != nil || !running {
		return err
	}
	m.log("shutdown CT %d", m.vmid)
	clean := c.unscaledDuration("vzshutdown")
	if m.timeout < clean {
		if err := w.Sleep(c.scale(m.timeout)); err != nil {
			return err
		}
		return Failf("container did not stop\n")
	}
	if err := w.Phase("vzshutdown", 1); err != nil {
		return err
	}
	m.wasRunning = true
	return w.doGuest(m.source, m.vmid, func(st *State, g *Guest) error {
		c.markStoppedLocked(g)
		return nil
	})
}

// migrateMountPoint parses a volume key's value; unusedN holds a bare volid.
func migrateMountPoint(key, value string) (MountPoint, error) {
	if strings.HasPrefix(key, "unused") {
		return MountPoint{Key: key, Props: PropString{"volume": value}}, nil
	}
	return ParseMountPoint(key, value)
}

// migVolume is one local volume phase1 found.
type migVolume struct {
	ref       string // config | snapshot
	snapshots bool
	sid, tsid string
}

// phase1 is Migrate.pm phase1: lock the config "migrate", scan the
// volumes (snapshots, pending, current), refuse foreign or snapshotted
// local volumes, copy the local ones to the target (renamed when the
// name is taken there), rewrite the volids and move the config to the
// target node.
func (m *migration) phase1() error {
	c, w := m.c, m.w
	var targetIP string
	if err := w.Do(func(st *State) error {
		if n := st.node(m.target); n != nil {
			targetIP = nodeAddress(n)
		}
		return nil
	}); err != nil {
		return err
	}
	m.log("starting migration of CT %d to node '%s' (%s)", m.vmid, m.target, targetIP)
	sc := &migScan{m: m, vols: map[string]*migVolume{}, errs: map[string]string{}}
	err := w.doGuest(m.source, m.vmid, func(st *State, g *Guest) error {
		g.Config["lock"] = "migrate"
		sc.st = st
		for _, name := range slices.Sorted(maps.Keys(g.Snapshots)) {
			sc.scan(g.Snapshots[name].Config, name, false)
		}
		sc.scan(g.Pending, "", false)
		sc.scan(g.Config, "", true)
		return nil
	})
	if err != nil {
		return err
	}
	vols := sc.vols
	volids, err := sc.report()
	if err != nil {
		return err
	}
	if err := w.Phase("vzmigrate", 0.1); err != nil {
		return err
	}
	volmap := map[string]string{}
	for _, volid := range volids {
		newVolid, err := m.copyVolume(volid, vols[volid], len(volids))
		if err != nil {
			return err
		}
		volmap[volid] = newVolid
	}
	return w.doGuest(m.source, m.vmid, func(st *State, g *Guest) error {
		c.markGuestVolumes(g)
		updateVolumeIDs(g, volmap)
		g.Node = m.target
		c.markGuestVolumes(g)
		return nil
	})
}

// migScan is phase1's scan of a CT's volumes (Migrate.pm sync_disks'
// test_volid): the local volumes to copy, why some cannot be, and the
// scan's info lines in order. It runs under the cluster lock (st).
type migScan struct {
	m     *migration
	st    *State
	vols  map[string]*migVolume
	errs  map[string]string // by volid, the first reason only
	lines []string
}

// scan tests every volume key of conf (of snapshot snapname, "" for the
// current or pending config); unusedN only with unused.
func (sc *migScan) scan(conf map[string]string, snapname string, unused bool) {
	for _, key := range ctVolumeKeys(conf) {
		if !unused && strings.HasPrefix(key, "unused") {
			continue
		}
		sc.test(key, conf[key], snapname)
	}
}

// fail records why volid cannot migrate, unless a reason is known.
func (sc *migScan) fail(volid, msg string) {
	if sc.errs[volid] == "" {
		sc.errs[volid] = msg
	}
}

// test is test_volid for the mount point key: value: a bind or device
// mount, a volume on shared storage and a pending new disk stay; a local
// volume is listed to copy, or fails the migration.
func (sc *migScan) test(key, value, snapname string) {
	m, st := sc.m, sc.st
	mp, err := migrateMountPoint(key, value)
	if err != nil {
		return
	}
	volid := mp.Volume()
	if mp.Type() != "volume" {
		if snapname == "" {
			sc.lines = append(sc.lines, fmt.Sprintf("ignoring shared '%s' mount point '%s' ('%s')", mp.Type(), key, volid))
		}
		return
	}
	if volid == "" {
		return
	}
	if _, _, ok := ParseNewDisk(volid); ok && st.Volumes[st.volKey(m.source, volid)] == nil {
		sc.lines = append(sc.lines, fmt.Sprintf("volume '%s' does not exist (pending change?)", volid))
		return
	}
	sid, _, _ := ParseVolID(volid)
	s, err := m.c.storage.storageCheckEnabledLocked(sid, m.source)
	if err != nil {
		sc.fail(volid, errText(err))
		return
	}
	if s.Shared {
		if snapname == "" {
			sc.lines = append(sc.lines, fmt.Sprintf("volume '%s' is on shared storage '%s'", volid, sid))
		}
		return
	}
	v := sc.vols[volid]
	if v == nil {
		v = &migVolume{sid: sid, tsid: m.storageMap.mapID(sid)}
		sc.vols[volid] = v
	}
	v.ref = "config"
	if snapname != "" {
		v.ref = "snapshot"
		v.snapshots = true
	}
	if msg := sc.refusal(volid, v, s); msg != "" {
		sc.fail(volid, msg)
	}
}

// refusal is why local volume volid on s cannot migrate, "" when it can:
// another guest owns it, it has snapshots its storage cannot send, or
// its storage type cannot be copied.
func (sc *migScan) refusal(volid string, v *migVolume, s *Storage) string {
	_, _, _, owner, err := sc.m.c.storage.parseVolnameLocked(volid)
	if err != nil {
		return errText(err)
	}
	if owner == 0 || owner != sc.m.vmid {
		o := ""
		if owner != 0 {
			o = strconv.Itoa(owner)
		}
		return fmt.Sprintf("owned by other guest (owner = %s)\n", o)
	}
	if v.snapshots && s.Type != "zfspool" && s.Type != "btrfs" {
		return "non-migratable snapshot exists\n"
	}
	switch s.Type {
	case "dir", "zfspool", "lvmthin", "lvm", "btrfs":
		return ""
	}
	return fmt.Sprintf("storage type '%s' not supported\n", s.Type)
}

// report logs the scan as sync_disks does: its info lines, the local
// volumes found, then every volume that cannot migrate, which fails the
// migration. It returns the local volumes, sorted.
func (sc *migScan) report() ([]string, error) {
	m := sc.m
	for _, l := range sc.lines {
		m.log("%s", l)
	}
	volids := slices.Sorted(maps.Keys(sc.vols))
	for _, volid := range volids {
		if sc.vols[volid].ref == "config" {
			m.log("found local volume '%s' (in current VM config)", volid)
		} else {
			m.log("found local volume '%s' (referenced by snapshot(s))", volid)
		}
	}
	if len(sc.errs) > 0 {
		for _, volid := range slices.Sorted(maps.Keys(sc.errs)) {
			m.log("can't migrate local volume '%s': %s", volid, strings.TrimRight(sc.errs[volid], "\n"))
		}
		return nil, Failf("can't migrate CT - check log\n")
	}
	return volids, nil
}

// copyVolume is storage_migrate for one local volume: a volume of the
// same name on the target's instance of the target storage (the lowest
// free vm-<vmid>-disk-N when that name is taken there, with the import's
// warning), the data copied. A failed copy frees the partial target
// volume; the copy stays listed as started.
func (m *migration) copyVolume(volid string, mv *migVolume, n int) (string, error) {
	c, w := m.c, m.w
	idx := len(m.copies)
	m.copies = append(m.copies, migCopy{volid: volid})
	fail := func(format string, args ...any) error {
		return Failf("storage migration for '%s' to storage '%s' failed - %s\n", volid, mv.tsid, strings.TrimRight(fmt.Sprintf(format, args...), "\n"))
	}
	var srcDir, dstDir, newVolid, warn string
	err := w.Do(func(st *State) error {
		src := st.Volumes[st.volKey(m.source, volid)]
		s, ts := st.storage(mv.sid), st.storage(mv.tsid)
		if s == nil || ts == nil {
			return fail("storage '%s' does not exist", mv.tsid)
		}
		if src == nil {
			_, name, _ := ParseVolID(volid)
			if s.Type == "lvmthin" {
				return fail("no such logical volume %s/%s", s.VGName, name)
			}
			return fail("volume '%s' does not exist", volid)
		}
		var v *Volume
		if s.Type == ts.Type {
			name := src.Name
			if st.Volumes[st.volKey(m.target, ts.ID+":"+name)] != nil {
				if ts.Type == "lvmthin" {
					warn = fmt.Sprintf("volume %s/%s already exists - importing with a different name", ts.VGName, name)
				} else {
					warn = fmt.Sprintf("file '%s' already exists - importing with a different name", c.storage.hostPath(ts, name))
				}
				free := c.storage.freeDiskNumberLocked(m.target, ts.ID, m.vmid)
				name = diskNumberRE.ReplaceAllStringFunc(name, func(s string) string {
					return s[:strings.LastIndex(s, "-")+1] + strconv.Itoa(free)
				})
			}
			v = &Volume{Node: st.homeNode(m.target, ts.ID), Storage: ts.ID, Name: name, Owner: src.Owner, Size: src.Size,
				Format: src.Format, Content: src.Content, Ctime: c.now().Unix()}
			if err := mkdirAll(c.storage.volumePath(m.target, ts.ID, name)); err != nil {
				return fail("%v", err)
			}
			c.storage.addVolumeLocked(m.target, v)
		} else {
			format := src.Format
			if format == "subvol" && !ts.DirLike() {
				return fail("cannot migrate from storage type '%s' to '%s'", s.Type, ts.Type)
			}
			if format != "subvol" {
				format = "raw"
			}
			nv, _, err := c.storage.allocImageLocked(m.target, ts, m.vmid, "", format, src.Size)
			if err != nil {
				return fail("%s", errText(err))
			}
			v = nv
		}
		newVolid = v.VolID()
		srcDir, dstDir = c.storage.volumePath(m.source, src.Storage, src.Name), c.storage.volumePath(m.target, v.Storage, v.Name)
		return nil
	})
	if err != nil {
		return "", err
	}
	if warn != "" {
		m.log("%s", warn)
	}
	if _, err := copyTree(srcDir, dstDir); err != nil {
		w.cleanup(func(st *State) { c.storage.freeVolumeLocked(m.target, newVolid) })
		return "", fail("%v", err)
	}
	if err := w.Phase("vzmigrate", 0.6/float64(n)); err != nil {
		return "", err
	}
	m.copies[idx].newVolid, m.copies[idx].done = newVolid, true
	m.log("successfully imported '%s'", newVolid)
	if newVolid != volid {
		m.log("volume '%s' is '%s' on the target", volid, newVolid)
	}
	return newVolid, nil
}

func mkdirAll(p string) error { return os.MkdirAll(filepath.Clean(p), 0o755) }

// updateVolumeIDs is update_volume_ids: every old volid in the current
// config, unusedN, pending and snapshots becomes its new volid.
func updateVolumeIDs(g *Guest, volmap map[string]string) {
	fix := func(conf map[string]string) {
		for key, value := range conf {
			if !isVolumeKey(key) {
				continue
			}
			if strings.HasPrefix(key, "unused") {
				if nv, ok := volmap[value]; ok {
					conf[key] = nv
				}
				continue
			}
			mp, err := ParseMountPoint(key, value)
			if err != nil {
				continue
			}
			if nv, ok := volmap[mp.Volume()]; ok {
				mp.Props["volume"] = nv
				conf[key] = mp.String()
			}
		}
	}
	fix(g.Config)
	fix(g.Pending)
	for _, s := range g.Snapshots {
		fix(s.Config)
	}
}

// phase3 is phase3: free every copied source volume (shared ones
// were never copied). A failure is logged and makes the migration end
// with problems; it reports whether one happened.
func (m *migration) phase3() bool {
	c, w := m.c, m.w
	problems := false
	if err := w.Phase("vzmigrate", 0.1); err != nil {
		return true
	}
	sorted := append([]migCopy(nil), m.copies...)
	sort.SliceStable(sorted, func(i, j int) bool { return sorted[i].volid < sorted[j].volid })
	for _, cp := range sorted {
		var ferr error
		w.Do(func(st *State) error {
			ferr = c.storage.freeImageLocked(w, m.source, cp.volid)
			return nil
		})
		if ferr != nil {
			m.logErr("removing local copy of '%s' failed - %s", cp.volid, strings.TrimRight(errText(ferr), "\n"))
			problems = true
		}
	}
	return problems
}
