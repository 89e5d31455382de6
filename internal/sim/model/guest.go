package model

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"fmt"
	"log/slog"
	"maps"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
)

// guests holds what every operation on a CT shares: the config locks,
// the lookups and checks (guest.go), the hooks the guest layer sets
// (guest_hooks.go), status (lxc_status.go), held locks (hold.go) and
// disk usage (du.go), with the state only they use. The operations
// themselves come in parts by concern (ctConfig, ctPower, ctDisks,
// ctSnapshots, ctDestroyer, …). The guests stay in the State, under the
// one lock the parts share, so that an operation that spans parts (a
// restore's guest, volumes and task) is one atomic step; guests reaches
// the rest of the cluster only through the fields below. Cluster embeds
// it, so its methods are the Cluster's (c.guestLocked, c.CTStatus).
type guests struct {
	// stateMu guards the State; state is the State (nil until loaded).
	stateMu *stateMutex
	state   func() *State
	clock   func() time.Time
	// ctx is the cluster's life, wg counts its goroutines for Close.
	ctx context.Context
	wg  *sync.WaitGroup
	log *slog.Logger
	// dataDir is the root of the data plane; version the emulated
	// release (Options.Version).
	dataDir string
	version string
	journal guestJournal
	volumes volumePather
	// guestBlockLocked is the loopback block of guest addresses
	// (Cluster.guestBlockLocked, stateMu held).
	guestBlockLocked func() int

	// locks are the per-guest config flocks (lock.go).
	locks *configLocks
	// migLocks are the guest migration flocks (migrate.go).
	migLocks *configLocks

	hookMu       sync.Mutex
	shutdownHook ShutdownHook         // SetShutdownHook
	startGuard   func(vmid int) error // SetStartGuard
	// runHook: see SetRunHook (ctPower counts the starts and stops).
	runHook func()
	// guestGen counts guest changes (markGuest, c.mu): the guest layer
	// polls it and lists the running CTs again only when it moved.
	guestGen uint64

	// du caches the disk usage of running CTs (du.go).
	du diskUsage
}

// guestJournal is what guests needs of persistence: to mark a CT
// changed and to save.
type guestJournal interface {
	markGuest(vmid int)
	saveLocked() error
}

// volumePather is what guests needs of storageLayer: where a volume's
// data lives.
type volumePather interface {
	volumePath(node, storage, name string) string
}

// The CTs' operations come in parts by concern, each declared in its
// own file with the fields it reaches the rest through (ctConfig in
// lxc_config.go, ctPower, ctDisks, ctSnapshots, ctDestroyer, ctCreator,
// vzdump, ctMigrator).

// guestLocked returns the CT vmid on node, or PVE's load_config error
// (behaviour.md §0: a missing CT is a 500 naming the config file).
func (gs *guests) guestLocked(node string, vmid int) (*Guest, error) {
	st := gs.state()
	g := st.Guests[vmid]
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

// acquireFlock takes CT vmid's config flock alone, waiting up to
// timeout: a create or restore takes it before the CT exists.
func (gs *guests) acquireFlock(vmid int, timeout time.Duration) (release func(), err error) {
	return gs.locks.acquire(gs.ctx, vmid, timeout)
}

// lockConfig is lock_config plus check_lock for a synchronous request: it
// takes CT vmid's config flock and the cluster mutex and returns the
// guest with unlock, which releases both.
func (gs *guests) lockConfig(node string, vmid int) (g *Guest, unlock func(), err error) {
	release, err := gs.locks.acquire(gs.ctx, vmid, configLockTimeout)
	if err != nil {
		return nil, nil, err
	}
	gs.stateMu.Lock()
	gs.journal.markGuest(vmid) // the caller changes it and saves
	unlock = func() {
		gs.stateMu.Unlock()
		release()
	}
	if g, err = gs.guestLocked(node, vmid); err == nil {
		err = checkLock(g)
	}
	if err != nil {
		unlock()
		return nil, nil, err
	}
	return g, unlock, nil
}

// CheckNode fails like PVE for an unknown node (400 "no such cluster
// node"), for routes that have nothing else to ask the model.
func (gs *guests) CheckNode(node string) error {
	gs.stateMu.Lock()
	defer gs.stateMu.Unlock()
	return gs.checkNodeLocked(node)
}

// checkNodeLocked fails like PVE for an unknown node.
func (gs *guests) checkNodeLocked(node string) error {
	st := gs.state()
	if st.node(node) == nil {
		return ParamError(map[string]string{"node": fmt.Sprintf("no such cluster node '%s'", node)})
	}
	return nil
}

// configText renders the guest as write_pct_config writes
// /etc/pve/lxc/<vmid>.conf: the description as leading '#' lines, the
// keys sorted, then the [pve:pending] section (whose "delete" is one of
// its sorted keys) and the snapshot sections. Its SHA-1 is the config
// digest (pve-common assert_if_modified).
func configText(g *Guest) string {
	var b strings.Builder
	writeSection(&b, g.Config, "")
	if len(g.Pending) > 0 || len(g.PendingDelete) > 0 {
		b.WriteString("\n[pve:pending]\n")
		var dels []string
		for _, k := range slices.Sorted(maps.Keys(g.PendingDelete)) {
			if g.PendingDelete[k] {
				dels = append(dels, "!"+k)
			} else {
				dels = append(dels, k)
			}
		}
		writeSection(&b, g.Pending, strings.Join(dels, ","))
	}
	for _, name := range slices.Sorted(maps.Keys(g.Snapshots)) {
		s := g.Snapshots[name]
		fmt.Fprintf(&b, "\n[%s]\n", name)
		writeSection(&b, s.Config, "")
	}
	return b.String()
}

// writeSection writes one section: its description, then its keys
// sorted, among them "delete" when pendingDelete is not empty, then env
// as lxc.environment.runtime lines.
func writeSection(b *strings.Builder, conf map[string]string, pendingDelete string) {
	for _, line := range descriptionLines(conf["description"]) {
		b.WriteString("#" + encodeConfigText(line) + "\n")
	}
	keys := slices.Sorted(maps.Keys(conf))
	if pendingDelete != "" {
		keys = append(keys, "delete")
		sort.Strings(keys)
	}
	for _, k := range keys {
		switch k {
		case "description", "env":
		case "delete":
			fmt.Fprintf(b, "delete: %s\n", pendingDelete)
		default:
			fmt.Fprintf(b, "%s: %s\n", k, conf[k])
		}
	}
	// PVE 9's env is written as raw lxc keys after the others.
	for _, v := range strings.Split(conf["env"], "\x00") {
		if v != "" {
			fmt.Fprintf(b, "lxc.environment.runtime: %s\n", v)
		}
	}
}

// descriptionLines are the '#' lines write_pct_config makes of a
// description: Perl's split(/\n/), which drops trailing empty lines, so
// that an empty description (or one of only newlines) writes none.
func descriptionLines(d string) []string {
	lines := strings.Split(d, "\n")
	for len(lines) > 0 && lines[len(lines)-1] == "" {
		lines = lines[:len(lines)-1]
	}
	return lines
}

// descriptionAsRead is a description as parse_pct_config reads it back
// from its '#' lines, each ending in a newline; ok is false when there
// are none, and so no description key.
func descriptionAsRead(d string) (read string, ok bool) {
	lines := descriptionLines(d)
	if len(lines) == 0 {
		return "", false
	}
	return strings.Join(lines, "\n") + "\n", true
}

// encodeConfigText is PVE::Tools::encode_text, which write_pct_config
// applies to each description line: control and non-ASCII bytes, '%'
// and ':' become %XX.
func encodeConfigText(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < 0x20 || c == '%' || c == ':' || c > 0x7e {
			fmt.Fprintf(&b, "%%%02X", c)
		} else {
			b.WriteByte(c)
		}
	}
	return b.String()
}

// decodeConfigText is PVE::Tools::decode_text, encodeConfigText's
// inverse: uri_unescape, which turns every %XX into its byte and leaves
// anything else as it is.
func decodeConfigText(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '%' && i+2 < len(s) {
			if v, err := strconv.ParseUint(s[i+1:i+3], 16, 8); err == nil {
				b.WriteByte(byte(v))
				i += 2
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// Digest is the SHA-1 hex of the config file text.
func (g *Guest) Digest() string {
	sum := sha1.Sum([]byte(configText(g)))
	return hex.EncodeToString(sum[:])
}

// ConfigText is the guest's config file as PVE would write it (for tests
// and the admin API).
func (gs *guests) ConfigText(vmid int) (string, error) {
	st := gs.state()
	gs.stateMu.RLock()
	defer gs.stateMu.RUnlock()
	g := st.Guests[vmid]
	if g == nil {
		return "", fmt.Errorf("no CT %d", vmid)
	}
	return configText(g), nil
}

// mountPoints returns the guest's rootfs and mpN entries of conf, parsed.
func mountPoints(conf map[string]string) []MountPoint {
	var out []MountPoint
	for _, k := range slices.Sorted(maps.Keys(conf)) {
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
func (gs *guests) rootfsDirLocked(g *Guest) (string, bool) {
	mp, err := ParseMountPoint("rootfs", g.Config["rootfs"])
	if err != nil || mp.Type() != "volume" {
		return "", false
	}
	sid, name, ok := ParseVolID(mp.Volume())
	if !ok {
		return "", false
	}
	return gs.volumes.volumePath(g.Node, sid, name), true
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
func (gs *guests) GuestMounts(vmid int) ([]GuestMount, error) {
	st := gs.state()
	gs.stateMu.RLock()
	defer gs.stateMu.RUnlock()
	g := st.Guests[vmid]
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
			gm.HostDir = gs.volumes.volumePath(g.Node, sid, name)
		default:
			gm.HostDir = filepath.Join(gs.dataDir, "host", filepath.FromSlash(mp.Volume()))
		}
		out = append(out, gm)
	}
	return out, nil
}
