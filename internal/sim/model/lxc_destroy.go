package model

import (
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"
)

// ctDestroyer destroys CTs: the API's DELETE and its task, which stop
// the CT, free its volumes and drop its config, ACLs and firewall file.
// It holds no *Cluster: the State's lock and the State, and one
// interface per part it calls. Cluster embeds it, so its methods are
// the Cluster's (c.DestroyCT, and restore's c.ctDestroyContainerLocked).
type ctDestroyer struct {
	// stateMu guards the State; state is the State (nil until loaded).
	stateMu *stateMutex
	state   func() *State
	guests  interface {
		checkNodeLocked(node string) error
		guestLocked(node string, vmid int) (*Guest, error)
	}
	// stopper (ctPower) stops a running CT a forced destroy takes down.
	stopper interface{ markStoppedLocked(g *Guest) }
	// mounts (ctConfig) frees one volume of the config, as
	// delete_mountpoint_volume; storage frees an unreferenced image.
	mounts interface {
		ctDeleteMountpointVolumeLocked(g *Guest, volid string, w *Worker) error
	}
	storage interface {
		freeImageLocked(w *Worker, node, volid string) error
	}
	// firewall drops the CT's firewall config with it.
	firewall interface{ removeFirewallLocked(vmid int) }
	tasks    taskStarter
	// journal records the change to the Access (the CT's ACLs).
	journal interface{ markCore() }
	// ha (haGuest) says whether the CT is an HA resource and drops it
	// with purge (stateMu held).
	ha interface {
		haConfiguredLocked(vmid int) bool
		purgeHAResourceLocked(vmid int) bool
	}
}

// DestroyCT is DELETE /nodes/{node}/lxc/{vmid} (API2/LXC.pm destroy_vm;
// behaviour.md (a)): task vzdestroy. params: force (stop a running CT
// first), purge (also drop it from related configurations) and
// destroy-unreferenced-disks.
//
// Before the task, in PVE's order: the CT must exist, not be protected,
// not be locked, and not run unless force is set. The task repeats the
// checks under the config lock, frees every volume the CT references —
// rootfs, mpN, unusedN, current and pending — whose name says it owns it,
// logs "ignore deletion of '<volid>', CT <vmid> isn't the owner!" for the
// others (the pet volume pattern relies on that), then removes the ACLs on
// /vms/<vmid> and the config. Volumes leave with their snapshots.
//
// HA resources and replication jobs are not emulated, so their checks
// never fire.
func (d *ctDestroyer) DestroyCT(auth Auth, node string, vmid int, params map[string]string) (string, error) {
	d.stateMu.Lock()
	defer d.stateMu.Unlock()
	if err := d.guests.checkNodeLocked(node); err != nil {
		return "", err
	}
	force, purge, unreferenced := isTrue(params["force"]), isTrue(params["purge"]), isTrue(params["destroy-unreferenced-disks"])
	g, err := d.guests.guestLocked(node, vmid)
	if err != nil {
		return "", err
	}
	if err := ctDestroyEarlyChecks(g); err != nil {
		return "", err
	}
	if !purge && d.ha.haConfiguredLocked(vmid) {
		return "", Failf("unable to remove CT %d - used in HA resources and purge parameter not set.\n", vmid)
	}
	if g.Running && !force {
		return "", Failf("unable to destroy CT %d - container is running\n", vmid)
	}
	return d.tasks.spawn(auth, node, "vzdestroy", strconv.Itoa(vmid), func(w *Worker) error {
		// The task lasts its duration with the emulator's own work (the
		// volumes' frees, the state's saves) inside it, as on PVE, where
		// freeing the volumes is what takes the time and the config goes
		// last: that work is the duration's last quarter, not added after
		// it (issue 30: every vzdestroy ended 0.05 to 0.15 s late, a
		// read more for its waiter).
		end := time.Now().Add(w.c.duration("vzdestroy"))
		if err := w.LockConfig(vmid); err != nil {
			return err
		}
		err := w.doGuest(node, vmid, func(st *State, g *Guest) error {
			if err := ctDestroyEarlyChecks(g); err != nil {
				return err
			}
			if g.Running {
				if !force {
					return Failf("unable to destroy CT %d - container is running\n", vmid)
				}
				// A plain Perl warn: logged, not counted as a task warning.
				w.logLocked("forced to stop CT %d before destroying!", vmid)
				d.stopper.markStoppedLocked(g)
			}
			return nil
		})
		if err != nil {
			return err
		}
		if err := w.Phase("vzdestroy", 0.75); err != nil {
			return err
		}
		err = w.doGuest(node, vmid, func(st *State, g *Guest) error {
			return d.ctDestroyContainerLocked(w, g, unreferenced)
		})
		if err != nil {
			return err
		}
		// The config stays as {lock: destroyed} until the ACLs are gone
		// ("only now remove the zombie config, else we can have reuse race").
		err = w.Do(func(st *State) error {
			st.Access.RemoveVMAccess(vmid)
			d.journal.markCore()
			d.firewall.removeFirewallLocked(vmid)
			if purge {
				w.logLocked("purging CT %d from related configurations..", vmid)
				if d.ha.purgeHAResourceLocked(vmid) {
					w.logLocked("NOTE: removed CT %d from HA resource configuration.", vmid)
				}
			}
			delete(st.Guests, vmid)
			delete(st.Extra, vmid)
			return nil
		})
		if err != nil {
			return err
		}
		return w.Sleep(time.Until(end))
	}), nil
}

// ctDestroyEarlyChecks is destroy_vm's $early_checks: protection, then
// the config lock.
func ctDestroyEarlyChecks(g *Guest) error {
	if isTrue(g.Config["protection"]) {
		return Failf("can't remove CT %d - protection mode enabled\n", g.VMID)
	}
	if err := checkLock(g); err != nil {
		return err
	}
	return nil
}

// ctDestroyContainerLocked is destroy_lxc_container: every volume of the
// config and of its pending section, each once, goes through
// delete_mountpoint_volume; with unreferenced, every other image named for
// the CT on an enabled storage for container directories goes too (those
// errors are only logged). The config is left as {lock: destroyed}.
func (d *ctDestroyer) ctDestroyContainerLocked(w *Worker, g *Guest, unreferenced bool) error {
	st := d.state()
	seen := map[string]bool{}
	for _, conf := range []map[string]string{g.Config, g.Pending} {
		for _, key := range ctVolumeKeys(conf) {
			volid := volumeOf(key, conf[key])
			if volid == "" || seen[volid] {
				continue
			}
			seen[volid] = true
			if err := d.mounts.ctDeleteMountpointVolumeLocked(g, volid, w); err != nil {
				return err
			}
		}
	}
	if unreferenced {
		for _, key := range slices.Sorted(maps.Keys(st.Volumes)) {
			v := st.Volumes[key]
			if !st.volOn(v, g.Node) || v.Owner != g.VMID || (v.Content != "images" && v.Content != "rootdir") {
				continue
			}
			s := st.storage(v.Storage)
			if s == nil || s.Disable || !s.OnNode(g.Node) || !s.HasContent("rootdir") {
				continue
			}
			if err := d.storage.freeImageLocked(w, g.Node, v.VolID()); err != nil {
				w.logLocked("%s", errText(err))
			}
		}
	}
	g.Config = map[string]string{"lock": "destroyed"}
	g.Pending, g.PendingDelete, g.Snapshots = nil, nil, nil
	return nil
}

// ctVolumeKeys lists the volume keys of conf in foreach_volume_full
// order with include_unused: rootfs, mp0…mp255, unused0…unused255.
// It ranks conf's own keys (a few dozen) rather than asking conf for
// each of the 513 names: formatting and looking those up was 1.5% of
// internal/cli's test CPU (issue 30).
func ctVolumeKeys(conf map[string]string) []string {
	var keys []string
	for k := range conf {
		if ctVolumeRank(k) >= 0 {
			keys = append(keys, k)
		}
	}
	slices.SortFunc(keys, func(a, b string) int { return ctVolumeRank(a) - ctVolumeRank(b) })
	return keys
}

// ctVolumeRank is key's place in ctVolumeKeys' order, or -1 when key
// names no volume (net0, mp256, mp01).
func ctVolumeRank(key string) int {
	if key == "rootfs" {
		return 0
	}
	base := 1
	for _, prefix := range []string{"mp", "unused"} {
		n := ctIndexedOptions[prefix]
		if rest, ok := strings.CutPrefix(key, prefix); ok {
			if i, err := strconv.Atoi(rest); err == nil && i >= 0 && i < n && strconv.Itoa(i) == rest {
				return base + i
			}
			return -1
		}
		base += n
	}
	return -1
}
