package model

import (
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/corralhq/corral/internal/pvesize"
)

// Restoring a backup: POST /nodes/{node}/lxc with restore=1 and
// ostemplate=<backup volid> (pve-container API2/LXC.pm create_vm and
// LXC/Create.pm restore_archive, restore_configuration; behaviour.md
// "Create / restore", seed 004 §3.6, §4.4, §4.7). Without rootfs/mpN
// parameters every volume mount point of the backed-up config is
// recreated empty on "storage" with its backed-up size and the archive is
// extracted over the new mounts, so only what vzdump included comes back.
// The backed-up config is kept (MAC, hostname, features — keyctl too, as
// restore is exempt from the feature-flag rule) unless a parameter
// overrides it; unique=1 gives every NIC a new MAC.

// restoreSpec is a restore request after its synchronous checks.
type restoreSpec struct {
	haManaged bool // ha-managed=1 (haManageCreated)
	auth      Auth
	node      string
	vmid      int
	archive   string // backup volid
	storage   string
	conf      map[string]string // from the parameters, without volumes
	mounts    map[string]string // rootfs/mpN parameters, "" storage only
	unprivSet bool
	unique    bool
	// ignoreUnpack: ignore-unpack-errors
	ignoreUnpack bool
	start        bool
	sameExists   bool
	pool         string // the pool the CT joins, "" for none
}

// restoreCT is the restore=1 branch of CreateCT.
func (cr *ctCreator) restoreCT(auth Auth, node string, params map[string]string) (string, error) {
	st := cr.state()
	cr.stateMu.Lock()
	spec, err := cr.restorePrepareLocked(auth, node, params)
	cr.stateMu.Unlock()
	if err != nil {
		return "", err
	}
	// create_and_lock_config($vmid, $force): an existing config is kept
	// and locked "create" after check_lock.
	emsg := fmt.Sprintf("unable to restore CT %d -", spec.vmid)
	release, err := cr.guests.acquireFlock(spec.vmid, ctCreateLockTimeout)
	if err != nil {
		return "", Failf("%s %s", emsg, errText(err))
	}
	defer release()
	cr.stateMu.Lock()
	defer cr.stateMu.Unlock()
	g := st.Guests[spec.vmid]
	undo := func() { delete(st.Guests, spec.vmid) }
	switch {
	case g != nil && !(spec.sameExists && g.Node == node):
		return "", Failf("%s %s", emsg, errText(cr.ctCheckVMIDUnusedLocked(spec.vmid)))
	case g != nil:
		if l := g.Lock(); l != "" {
			return "", Failf("%s CT is locked (%s)\n", emsg, l)
		}
		g.Config["lock"] = "create"
		undo = func() { delete(g.Config, "lock") }
	default:
		if spec.sameExists {
			spec.sameExists = false // destroyed meanwhile
		}
		st.Guests[spec.vmid] = &Guest{VMID: spec.vmid, Node: node, Config: map[string]string{"lock": "create"}}
	}
	cr.journal.markGuest(spec.vmid)
	if err := cr.journal.saveLocked(); err != nil {
		undo() // the model stays as the disk has it
		return "", err
	}
	return cr.tasks.spawn(auth, node, "vzrestore", strconv.Itoa(spec.vmid), func(w *Worker) error {
		return cr.restoreTask(w, spec)
	}), nil
}

// restorePrepareLocked is create_vm's synchronous part for a restore.
func (cr *ctCreator) restorePrepareLocked(auth Auth, node string, params map[string]string) (restoreSpec, error) {
	st := cr.state()
	req, err := cr.ctReadCreateRequestLocked(node, params)
	if err != nil {
		return restoreSpec{}, err
	}
	p, take, vmid := req.p, req.take, req.vmid
	spec := restoreSpec{auth: auth, node: node, vmid: vmid, start: req.start, ignoreUnpack: req.ignoreUnpack, haManaged: req.haManaged}
	unprivStr, unprivSet := take("unprivileged")
	spec.unprivSet = unprivSet
	take("restore")
	unique, _ := take("unique")
	spec.unique = isTrue(unique)
	if err := cr.checkHAManagedLocked(auth, req); err != nil {
		return restoreSpec{}, err
	}
	force, _ := take("force")

	existing := st.Guests[vmid]
	spec.sameExists = existing != nil && existing.Node == node
	if !(spec.sameExists && isTrue(force)) {
		if err := cr.ctCheckVMIDUnusedLocked(vmid); err != nil {
			return restoreSpec{}, err
		}
	} else {
		if existing.Running {
			return restoreSpec{}, Failf("can't overwrite running container\n")
		}
		if isTrue(existing.Config["protection"]) {
			return restoreSpec{}, Failf("unable to restore CT %d - protection mode enabled\n", vmid)
		}
	}
	take("password") // only a fresh create sets up the guest's root password
	if keys, ok := take("ssh-public-keys"); ok {
		if err := ctValidateSSHKeys(keys); err != nil {
			return restoreSpec{}, err
		}
	}
	pool, hasPool := take("pool")
	if hasPool {
		if err := st.Access.PoolExists(pool); err != nil {
			return restoreSpec{}, err
		}
	}
	spec.pool = pool
	vmPath := fmt.Sprintf("/vms/%d", vmid)
	switch {
	case st.Access.HasPriv(auth, vmPath, "VM.Allocate"):
	case pool != "" && st.Access.HasPriv(auth, "/pool/"+pool, "VM.Allocate"):
	case spec.sameExists && isTrue(force) && st.Access.HasPriv(auth, vmPath, "VM.Backup"):
		// VM.Backup is enough to restore over an existing CT.
		if isTrue(existing.Config["unprivileged"]) && unprivSet && !isTrue(unprivStr) {
			if err := st.Access.Check(auth, "/", []string{"Sys.Modify"}, false); err != nil {
				return restoreSpec{}, err
			}
		}
	default:
		return restoreSpec{}, PermError("")
	}
	spec.archive, _ = take("ostemplate")
	spec.storage, _ = take("storage")
	if spec.storage == "" {
		spec.storage = "local"
	}
	unprivileged := isTrue(unprivStr)
	spec.mounts, spec.conf, err = cr.ctCheckCreateParamsLocked(auth, node, vmid, pool, p, spec.storage, spec.archive, "backup", unprivileged)
	if err != nil {
		return restoreSpec{}, err
	}
	if !unprivileged && unprivSet {
		spec.conf["unprivileged"] = "0"
	}
	return spec, nil
}

// restoreTask is the vzrestore worker. On failure the new volumes go
// again, and the config too unless it existed before and nothing was
// changed yet; the error reads "unable to restore CT <vmid> - …".
func (cr *ctCreator) restoreTask(w *Worker, spec restoreSpec) error {
	r := &ctRestore{c: w.c, w: w, spec: spec}
	return r.run()
}

// ctRestore is one vzrestore task: the request's spec and what the steps
// learn on the way. restore reads top-down: read the archive's config,
// settle the mount points, create the volumes (dropping an overwritten
// CT's old ones), extract, merge the config.
type ctRestore struct {
	c    *Cluster
	w    *Worker
	spec restoreSpec

	conf          map[string]string // the config being built
	oldConf       map[string]string // the config of the CT restored over
	orig          map[string]string // the backed-up config
	archivePath   string            // where the archive is read
	archiveHost   string            // its path as PVE logs it
	mounts        map[string]string // the mount points to create
	delayed       map[string]string // non-volume mount points, set after extraction
	targets       []restoreMount
	vols          []string // volumes created so far, freed on failure
	destroyConfig bool     // on failure the config goes too
}

// run restores, cleans up after a failure, and starts the CT if asked.
func (r *ctRestore) run() error {
	c, w, spec := r.c, r.w, r.spec
	if err := w.LockConfig(spec.vmid); err != nil {
		return err
	}
	r.destroyConfig = !spec.sameExists
	err := r.restore()
	if err != nil {
		w.cleanup(func(st *State) {
			c.freeImagesLocked(w, spec.node, r.vols)
			g := st.Guests[spec.vmid]
			if g == nil || g.Node != spec.node {
				return
			}
			if r.destroyConfig {
				delete(st.Guests, spec.vmid)
				delete(st.Extra, spec.vmid)
			} else if g.Config["lock"] == "create" {
				delete(g.Config, "lock")
			}
		})
		return Failf("unable to restore CT %d - %s", spec.vmid, errText(err))
	}
	return c.finishCreated(w, spec.node, spec.vmid, spec.pool, spec.start, spec.haManaged)
}

// restore is the body of create_vm's worker for a restore.
func (r *ctRestore) restore() error {
	r.conf = map[string]string{}
	for k, v := range r.spec.conf {
		r.conf[k] = v
	}
	r.w.Log("recovering backed-up configuration from '%s'", r.spec.archive)
	if err := r.readArchiveConfig(); err != nil {
		return err
	}
	if err := r.settleMounts(); err != nil {
		return err
	}
	r.destroyConfig = true
	if err := r.createVolumes(); err != nil {
		return err
	}
	if err := r.w.Phase("vzrestore", 0.2); err != nil {
		return err
	}
	if err := r.extract(); err != nil {
		return err
	}
	return r.mergeConfig()
}

// readArchiveConfig finds the archive and reads the config it carries.
func (r *ctRestore) readArchiveConfig() error {
	c, spec := r.c, r.spec
	err := r.w.doGuest(spec.node, spec.vmid, func(st *State, g *Guest) error {
		if g.Running {
			return Failf("can't overwrite running container\n")
		}
		r.oldConf = ctCloneGuest(g).Config
		sid, name, ok := ParseVolID(spec.archive)
		if !ok || st.Volumes[st.volKey(spec.node, spec.archive)] == nil {
			return Failf("can't find file '%s'\n", spec.archive)
		}
		r.archivePath = c.storage.volumePath(spec.node, sid, name)
		r.archiveHost = c.storage.hostPath(st.storage(sid), name)
		return nil
	})
	if err != nil {
		return err
	}
	text, err := readBackupConfig(r.archivePath)
	if err != nil {
		return Failf("unable to restore '%s' - %s\n", spec.archive, err)
	}
	r.orig = parseConfigSection(text)
	return nil
}

// settleMounts checks the bridges and the unprivileged flag and decides
// the mount points: those given, or (storage-only mode) the backed-up
// ones recreated on the target storage.
func (r *ctRestore) settleMounts() error {
	c, w, spec, conf, orig := r.c, r.w, r.spec, r.conf, r.orig
	r.mounts = map[string]string{}
	return w.Do(func(st *State) error {
		for _, k := range slices.Sorted(maps.Keys(orig)) {
			if ctKeyIs(k, "net") && spec.conf[k] == "" {
				if err := c.ctCheckBridgeAccessLocked(spec.auth, orig[k]); err != nil {
					return err
				}
			}
		}
		if !spec.unprivSet {
			if v, ok := orig["unprivileged"]; ok {
				conf["unprivileged"] = v
			}
		}
		if !isTrue(conf["unprivileged"]) {
			delete(conf, "unprivileged")
			if old := r.oldConf; !spec.sameExists || isTrue(old["unprivileged"]) {
				if err := st.Access.Check(spec.auth, "/", []string{"Sys.Modify"}, false); err != nil {
					return err
				}
			}
		}
		if len(spec.mounts) > 0 {
			for k, v := range spec.mounts {
				r.mounts[k] = v
			}
			return nil
		}
		// storage-only mode: the backed-up mount points, recreated.
		if _, ok := orig["rootfs"]; !ok {
			return Failf("rootfs configuration could not be recovered, please check and specify manually!\n")
		}
		for _, key := range ctVolumeKeys(orig) {
			if ctKeyIs(key, "unused") {
				continue
			}
			mp, err := ParseMountPoint(key, orig[key])
			if err != nil {
				return Failf("%s\n", err)
			}
			if typ := mp.Type(); typ != "volume" {
				if key == "rootfs" {
					return Failf("restoring rootfs to %s mount is only possible by specifying -rootfs manually!\n", typ)
				}
				if !spec.auth.IsRoot() {
					return Failf("restoring '%s' to %s mount is only possible for root\n", key, typ)
				}
				if mp.Backup() {
					w.logLocked("WARNING - unsupported configuration!")
					w.logLocked("backup was enabled for %s mount point %s ('%s')", typ, key, mp.Path())
					w.logLocked("mount point configuration will be restored after archive extraction!")
					w.logLocked("contained files will be restored to wrong directory!")
				}
				if r.delayed == nil {
					r.delayed = map[string]string{}
				}
				r.delayed[key] = mp.String()
				continue
			}
			sizeStr, ok := mp.Props["size"]
			if !ok {
				return Failf("unable to detect disk size - please specify %s (size)\n", key)
			}
			size, err := pvesize.Parse(sizeStr)
			if err != nil {
				return Failf("unable to detect disk size - please specify %s (size)\n", key)
			}
			delete(mp.Props, "size")
			mp.Props["volume"] = spec.storage + ":" + strconv.FormatFloat(float64(size)/float64(gib), 'f', -1, 64)
			r.mounts[key] = mp.String()
		}
		return nil
	})
}

// createVolumes allocates the mount points' volumes, drops an existing
// CT's old volumes once the new ones exist, and lists where each mount
// point's data goes.
func (r *ctRestore) createVolumes() error {
	c, w, spec, conf := r.c, r.w, r.spec, r.conf
	return w.Do(func(st *State) error {
		if err := c.ctCreateDisksLocked(w, spec.node, spec.vmid, r.mounts, conf, &r.vols); err != nil {
			return err
		}
		// An existing CT's old volumes go once the new ones exist.
		if len(r.oldConf) > 1 {
			old := &Guest{VMID: spec.vmid, Node: spec.node, Config: r.oldConf}
			if g := st.Guests[spec.vmid]; g != nil {
				old.Pending = g.Pending
			}
			if err := c.ctDestroyContainerLocked(w, old, false); err != nil {
				return err
			}
			if g := st.Guests[spec.vmid]; g != nil {
				g.Config = map[string]string{"lock": "create"}
				g.Pending, g.PendingDelete, g.Snapshots = nil, nil, nil
			}
		}
		for _, mp := range mountPoints(conf) {
			if mp.Type() != "volume" {
				continue
			}
			sid, name, ok := ParseVolID(mp.Volume())
			if !ok || st.Volumes[st.volKey(spec.node, mp.Volume())] == nil {
				return Failf("volume '%s' does not exist\n", mp.Volume())
			}
			r.targets = append(r.targets, restoreMount{path: mp.Path(), dir: c.storage.volumePath(spec.node, sid, name), ids: c.ctIDMap(conf)})
		}
		return nil
	})
}

// extract unpacks the archive into the new volumes.
func (r *ctRestore) extract() error {
	w := r.w
	w.Log("restoring '%s' now..", r.spec.archive)
	w.Log("extracting archive '%s'", r.archiveHost)
	began := time.Now()
	n, skipped, err := extractBackup(r.archivePath, r.targets)
	if err != nil {
		return Failf("unable to restore '%s': %s\n", r.archiveHost, err)
	}
	for _, line := range skipped {
		w.Log("%s", line)
	}
	w.Log("Total bytes read: %d (%s, %s/s)", n, ctHumanBytes(float64(n)), ctHumanBytes(float64(n)/max(time.Since(began).Seconds(), 1e-3)))
	return r.c.restoreUnpackErrors(w, r.spec, r.conf, r.archivePath, skipped)
}

// mergeConfig merges the backed-up config into the given one, fills the
// defaults and writes the CT's config.
func (r *ctRestore) mergeConfig() error {
	w, spec, conf := r.w, r.spec, r.conf
	w.Log("merging backed-up and given configuration..")
	for _, t := range r.targets {
		// Only through real directories: the backup's etc may be a
		// link (etc -> /etc), which RemoveAll would follow to the host.
		if ok, err := ctDirs(t.dir, "etc/vzdump/x", false, 0); t.path == "/" && ok && err == nil {
			os.RemoveAll(filepath.Join(t.dir, "etc", "vzdump"))
		}
	}
	restoreConfiguration(conf, r.orig, !spec.auth.IsRoot(), spec.unique, w)
	if err := w.Phase("vzrestore", 0.8); err != nil {
		return err
	}
	if conf["hostname"] == "" {
		conf["hostname"] = fmt.Sprintf("CT%d", spec.vmid)
	}
	if conf["memory"] == "" || conf["memory"] == "0" {
		conf["memory"] = "512"
	}
	if _, ok := conf["swap"]; !ok {
		conf["swap"] = "512"
	}
	for k, v := range r.delayed {
		conf[k] = v
	}
	for _, t := range r.targets {
		if t.path == "/" {
			if err := ctPostCreate(t.dir, conf["hostname"], ""); err != nil {
				return err
			}
		}
	}
	return w.doGuest(spec.node, spec.vmid, func(st *State, g *Guest) error {
		g.Config = conf
		g.Pending, g.PendingDelete, g.Snapshots = nil, nil, nil
		return nil
	})
}

// restoreConfiguration is restore_configuration's merge: every key of the
// backed-up config that the parameters did not set, except volumes,
// bookkeeping and (for non-root) raw lxc keys; with unique every NIC
// gets a new MAC.
func restoreConfiguration(conf, orig map[string]string, restricted, unique bool, w *Worker) {
	for _, k := range slices.Sorted(maps.Keys(orig)) {
		switch {
		case k == "digest" || k == "rootfs" || k == "snapshots" || k == "unprivileged" || k == "parent" || k == "lock" || k == "template":
			continue
		case ctKeyIs(k, "mp") || ctKeyIs(k, "unused"):
			continue
		case strings.HasPrefix(k, "lxc."):
			if restricted {
				w.Log("skipping custom lxc options, restore manually as root:")
				w.Log("--------------------------------")
				w.Log("%s: %s", k, orig[k])
				w.Log("--------------------------------")
				continue
			}
		case unique && ctKeyIs(k, "net"):
			if net, err := ParseNet(orig[k]); err == nil {
				net["hwaddr"] = ctRandomMAC()
				conf[k] = net.String()
				continue
			}
		}
		if _, ok := conf[k]; !ok {
			conf[k] = orig[k]
		}
	}
}

// parseConfigSection reads the main section of a config file as
// configText writes it: leading '#' lines are the description.
func parseConfigSection(text string) map[string]string {
	conf := map[string]string{}
	var desc, env []string // joined once at the end: appending to a string per line is quadratic
	for line := range strings.Lines(text) {
		line = strings.TrimSuffix(line, "\n")
		if strings.HasPrefix(line, "[") {
			break
		}
		switch {
		case strings.HasPrefix(line, "#"):
			desc = append(desc, decodeConfigText(line[1:]))
		case strings.HasPrefix(line, "lxc.environment.runtime: "):
			env = append(env, strings.TrimPrefix(line, "lxc.environment.runtime: "))
		default:
			if k, v, ok := strings.Cut(line, ": "); ok && k != "" {
				if k == "env" {
					env = append(env[:0], v)
					continue
				}
				conf[k] = v
			}
		}
	}
	if len(env) > 0 {
		conf["env"] = strings.Join(env, "\x00")
	}
	if len(desc) > 0 {
		conf["description"] = strings.Join(desc, "\n")
	}
	return conf
}

// restoreMount is where one mount point of the restored CT lives.
type restoreMount struct {
	path string // inside the CT
	dir  string // on the data plane
	ids  idMap  // the CT's id shift (idmap.go)
}
