package model

import (
	"crypto/sha1"
	"encoding/hex"
	"fmt"
	"path/filepath"
	"strings"
)

// guestLocked returns the CT vmid on node, or PVE's load_config error
// (behaviour.md §0: a missing CT is a 500 naming the config file).
func (c *Cluster) guestLocked(node string, vmid int) (*Guest, error) {
	g := c.st.Guests[vmid]
	if g == nil || g.Node != node {
		return nil, Failf("Configuration file '%s' does not exist\n", configPath(node, vmid))
	}
	return g, nil
}

// checkLock is check_lock: a CT with a lock in its config refuses the
// operation.
func checkLock(g *Guest) error {
	if lock := g.Lock(); lock != "" {
		return Failf("CT is locked (%s)\n", lock)
	}
	return nil
}

// lockConfig is lock_config plus check_lock for a synchronous request: it
// takes CT vmid's config flock and the cluster mutex and returns the
// guest with unlock, which releases both.
func (c *Cluster) lockConfig(node string, vmid int) (g *Guest, unlock func(), err error) {
	release, err := c.locks.acquire(c.ctx, vmid, configLockTimeout)
	if err != nil {
		return nil, nil, err
	}
	c.mu.Lock()
	c.markGuest(vmid) // the caller changes it and saves
	unlock = func() {
		c.mu.Unlock()
		release()
	}
	if g, err = c.guestLocked(node, vmid); err == nil {
		err = checkLock(g)
	}
	if err != nil {
		unlock()
		return nil, nil, err
	}
	return g, unlock, nil
}

// checkNodeLocked fails like PVE for an unknown node.
func (c *Cluster) checkNodeLocked(node string) error {
	if c.st.node(node) == nil {
		return ParamError(map[string]string{"node": fmt.Sprintf("no such cluster node '%s'", node)})
	}
	return nil
}

// configText renders the guest as /etc/pve/lxc/<vmid>.conf: description as
// leading '#' lines, keys sorted, then [pve:pending] and snapshot sections.
// Its SHA-1 is the config digest (pve-common assert_if_modified).
func configText(g *Guest) string {
	var b strings.Builder
	writeSection(&b, g.Config)
	if len(g.Pending) > 0 || len(g.PendingDelete) > 0 {
		b.WriteString("\n[pve:pending]\n")
		writeSection(&b, g.Pending)
		if len(g.PendingDelete) > 0 {
			var dels []string
			for _, k := range sortedKeys(g.PendingDelete) {
				if g.PendingDelete[k] {
					dels = append(dels, "!"+k)
				} else {
					dels = append(dels, k)
				}
			}
			fmt.Fprintf(&b, "delete: %s\n", strings.Join(dels, ","))
		}
	}
	for _, name := range sortedKeys(g.Snapshots) {
		s := g.Snapshots[name]
		fmt.Fprintf(&b, "\n[%s]\n", name)
		writeSection(&b, s.Config)
	}
	return b.String()
}

func writeSection(b *strings.Builder, conf map[string]string) {
	if d, ok := conf["description"]; ok {
		for _, line := range strings.Split(strings.TrimRight(d, "\n"), "\n") {
			b.WriteString("#" + line + "\n")
		}
	}
	for _, k := range sortedKeys(conf) {
		if k == "description" {
			continue
		}
		fmt.Fprintf(b, "%s: %s\n", k, conf[k])
	}
}

// Digest is the SHA-1 hex of the config file text.
func (g *Guest) Digest() string {
	sum := sha1.Sum([]byte(configText(g)))
	return hex.EncodeToString(sum[:])
}

// ConfigText is the guest's config file as PVE would write it (for tests
// and the admin API).
func (c *Cluster) ConfigText(vmid int) (string, error) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	g := c.st.Guests[vmid]
	if g == nil {
		return "", fmt.Errorf("no CT %d", vmid)
	}
	return configText(g), nil
}

// mountPoints returns the guest's rootfs and mpN entries of conf, parsed.
func mountPoints(conf map[string]string) []MountPoint {
	var out []MountPoint
	for _, k := range sortedKeys(conf) {
		if k == "rootfs" || (strings.HasPrefix(k, "mp") && isVolumeKey(k)) {
			if mp, err := ParseMountPoint(k, conf[k]); err == nil {
				out = append(out, mp)
			}
		}
	}
	return out
}

// volumeOf returns the volid of a rootfs/mpN/unusedN value.
func volumeOf(key, value string) string {
	if strings.HasPrefix(key, "unused") {
		return value
	}
	mp, err := ParseMountPoint(key, value)
	if err != nil {
		return ""
	}
	return mp.Volume()
}

// rootfsDir is where a guest's root filesystem lives on the data plane
// (the rootfs volume's directory).
func (c *Cluster) rootfsDirLocked(g *Guest) (string, bool) {
	mp, err := ParseMountPoint("rootfs", g.Config["rootfs"])
	if err != nil || mp.Type() != "volume" {
		return "", false
	}
	sid, name, ok := ParseVolID(mp.Volume())
	if !ok {
		return "", false
	}
	return c.volumePath(g.Node, sid, name), true
}

// GuestMount is one filesystem a running guest sees: its data directory on
// the host and where it is mounted inside the CT.
type GuestMount struct {
	Key      string // rootfs, mp0, …
	Path     string // inside the CT
	HostDir  string // on the emulator's disk
	ReadOnly bool
}

// GuestMounts lists the filesystems of CT vmid as it would be mounted now
// (for the guest exec layer and tests): rootfs first, then mount points by
// path depth.
func (c *Cluster) GuestMounts(vmid int) ([]GuestMount, error) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	g := c.st.Guests[vmid]
	if g == nil {
		return nil, fmt.Errorf("no CT %d", vmid)
	}
	var out []GuestMount
	for _, mp := range mountPoints(g.Config) {
		gm := GuestMount{Key: mp.Key, Path: mp.Path(), ReadOnly: isTrue(mp.Props["ro"])}
		switch mp.Type() {
		case "volume":
			sid, name, ok := ParseVolID(mp.Volume())
			if !ok {
				continue
			}
			gm.HostDir = c.volumePath(g.Node, sid, name)
		default:
			gm.HostDir = filepath.Join(c.DataDir(), "host", filepath.FromSlash(mp.Volume()))
		}
		out = append(out, gm)
	}
	return out, nil
}
