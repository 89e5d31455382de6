package model

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
)

// ctDestroyer destroys CTs: the API's DELETE and its task, which stop
// the CT, free its volumes and drop its config, ACLs and firewall file,
// so it calls ctPower, ctConfig, storageLayer and firewall through its
// Cluster. Cluster embeds it, so its methods are the Cluster's.
type ctDestroyer struct {
	c *Cluster
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
	c := d.c
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.checkNodeLocked(node); err != nil {
		return "", err
	}
	force, purge, unreferenced := isTrue(params["force"]), isTrue(params["purge"]), isTrue(params["destroy-unreferenced-disks"])
	g, err := c.guestLocked(node, vmid)
	if err != nil {
		return "", err
	}
	if err := ctDestroyEarlyChecks(g); err != nil {
		return "", err
	}
	if g.Running && !force {
		return "", Failf("unable to destroy CT %d - container is running\n", vmid)
	}
	return c.spawn(auth, node, "vzdestroy", strconv.Itoa(vmid), func(w *Worker) error {
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
				c.markStoppedLocked(g)
			}
			return nil
		})
		if err != nil {
			return err
		}
		if err := w.Phase("vzdestroy", 1); err != nil {
			return err
		}
		err = w.doGuest(node, vmid, func(st *State, g *Guest) error {
			return c.ctDestroyContainerLocked(w, g, unreferenced)
		})
		if err != nil {
			return err
		}
		// The config stays as {lock: destroyed} until the ACLs are gone
		// ("only now remove the zombie config, else we can have reuse race").
		return w.Do(func(st *State) error {
			c.st.Access.RemoveVMAccess(vmid)
			c.markCore()
			c.removeFirewallLocked(vmid)
			if purge {
				w.logLocked("purging CT %d from related configurations..", vmid)
			}
			delete(st.Guests, vmid)
			delete(st.Extra, vmid)
			return nil
		})
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
	c := d.c
	seen := map[string]bool{}
	for _, conf := range []map[string]string{g.Config, g.Pending} {
		for _, key := range ctVolumeKeys(conf) {
			volid := volumeOf(key, conf[key])
			if volid == "" || seen[volid] {
				continue
			}
			seen[volid] = true
			if err := c.ctDeleteMountpointVolumeLocked(g, volid, w); err != nil {
				return err
			}
		}
	}
	if unreferenced {
		for _, key := range slices.Sorted(maps.Keys(c.st.Volumes)) {
			v := c.st.Volumes[key]
			if !c.st.volOn(v, g.Node) || v.Owner != g.VMID || (v.Content != "images" && v.Content != "rootdir") {
				continue
			}
			s := c.st.storage(v.Storage)
			if s == nil || s.Disable || !s.OnNode(g.Node) || !s.HasContent("rootdir") {
				continue
			}
			if err := c.storage.freeImageLocked(w, g.Node, v.VolID()); err != nil {
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
func ctVolumeKeys(conf map[string]string) []string {
	var keys []string
	if _, ok := conf["rootfs"]; ok {
		keys = append(keys, "rootfs")
	}
	for _, prefix := range []string{"mp", "unused"} {
		for i := 0; i < ctIndexedOptions[prefix]; i++ {
			k := fmt.Sprintf("%s%d", prefix, i)
			if _, ok := conf[k]; ok {
				keys = append(keys, k)
			}
		}
	}
	return keys
}
