package model

import (
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
)

// TemplateCT is POST /nodes/{node}/lxc/{vmid}/template (pve-container
// API2/LXC.pm template): under the config lock it refuses a locked CT,
// one with snapshots, a template and a running CT, then a vztemplate task
// makes each volume a base volume (template_create) and sets template: 1.
// A template never starts and is what linked clones are made from.
func (cr *ctCreator) TemplateCT(auth Auth, node string, vmid int, _ map[string]string) (string, error) {
	g, unlock, err := cr.guests.lockConfig(node, vmid)
	if err != nil {
		return "", err
	}
	defer unlock()
	switch {
	case len(g.Snapshots) > 0:
		return "", Failf("unable to create template, because CT contains snapshots\n")
	case g.IsTemplate():
		return "", Failf("you can't convert a template to a template\n")
	case g.Running:
		return "", Failf("you can't convert a CT to template if the CT is running\n")
	}
	return cr.tasks.spawn(auth, node, "vztemplate", strconv.Itoa(vmid), func(w *Worker) error {
		if err := w.LockConfig(vmid); err != nil {
			return err
		}
		var lines []string
		err := w.doGuest(node, vmid, func(st *State, g *Guest) (err error) {
			lines, err = cr.templateCreateLocked(node, g)
			return err
		})
		for _, l := range lines {
			w.Log("%s", l)
		}
		if err != nil {
			return err
		}
		return w.Phase("vztemplate", 1)
	}), nil
}

// ctMountKeys are the config's rootfs and mpN keys in foreach_volume's
// order (ctVolumeKeys without the unusedN).
func ctMountKeys(conf map[string]string) []string {
	return slices.DeleteFunc(ctVolumeKeys(conf), func(k string) bool { return strings.HasPrefix(k, "unused") })
}

// templateCreateLocked is PVE::LXC::template_create: every mount point
// must be a storage volume (a bind or device path is no volume ID), then
// each becomes a base volume and the config says template: 1. It returns
// what lvrename printed.
func (cr *ctCreator) templateCreateLocked(node string, g *Guest) ([]string, error) {
	st := cr.state()
	keys := ctMountKeys(g.Config)
	mps := map[string]MountPoint{}
	for _, key := range keys {
		mp, err := parseVolumeKey(key, g.Config[key])
		if err != nil {
			return nil, err
		}
		if mp.Type() != "volume" {
			return nil, Failf("unable to parse volume ID '%s'\n", mp.Volume())
		}
		if st.Volumes[st.volKey(node, mp.Volume())] == nil {
			return nil, Failf("no such volume '%s'\n", mp.Volume())
		}
		mps[key] = mp
	}
	var out []string
	for _, key := range keys {
		mp := mps[key]
		base, lines, err := cr.createBaseLocked(node, mp.Volume())
		if err != nil {
			return out, err
		}
		out = append(out, lines...)
		mp.Props["volume"] = base
		g.Config[key] = mp.String()
	}
	g.Config["template"] = "1"
	return out, nil
}

// createBaseLocked is vdisk_create_base: an LVM-thin or RBD volume
// vm-<vmid>-disk-N is renamed base-<vmid>-disk-N (and made read-only); a
// file image on a dir storage likewise; a subvol keeps its name, since
// the dir plugin's create_base only renames a "vm-" prefix. It returns
// the base volume's ID and what lvrename prints.
func (cr *ctCreator) createBaseLocked(node, volid string) (string, []string, error) {
	st := cr.state()
	v := st.Volumes[st.volKey(node, volid)]
	s := st.storage(v.Storage)
	if s == nil {
		return "", nil, Failf("storage '%s' does not exist\n", v.Storage)
	}
	dir, file := "", v.Name
	if i := strings.LastIndexByte(v.Name, '/'); i >= 0 {
		dir, file = v.Name[:i+1], v.Name[i+1:]
	}
	if strings.HasPrefix(file, "base-") {
		return "", nil, Failf("create_base not possible with base image\n")
	}
	if !strings.HasPrefix(file, "vm-") {
		return volid, nil, nil
	}
	newName := dir + "base-" + strings.TrimPrefix(file, "vm-")
	newVolid := s.ID + ":" + newName
	if st.Volumes[st.volKey(node, newVolid)] != nil {
		return "", nil, Failf("file '%s' already exists\n", newName)
	}
	if err := os.Rename(cr.storage.volumePath(node, s.ID, v.Name), cr.storage.volumePath(node, s.ID, newName)); err != nil {
		return "", nil, fmt.Errorf("rename %s: %w", volid, err)
	}
	var lines []string
	if s.Type == "lvmthin" {
		lines = append(lines, fmt.Sprintf("  Renamed \"%s\" to \"%s\" in volume group \"%s\"", v.Name, newName, s.VGName),
			fmt.Sprintf("  Logical volume \"%s\" changed.", newName))
	}
	return cr.storage.renameVolumeLocked(node, volid, newName, v.Owner), lines, nil
}
