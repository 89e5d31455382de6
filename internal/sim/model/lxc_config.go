package model

import (
	"fmt"
	"log/slog"
	"maps"
	"net"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/corralhq/corral/internal/lazyre"
	"github.com/corralhq/corral/internal/pvesize"
)

// A CT's configuration: GET and PUT /nodes/{node}/lxc/{vmid}/config and
// GET .../pending (pve-container API2/LXC/Config.pm, LXC/Config.pm
// update_pct_config, vmconfig_hotplug_pending, vmconfig_apply_pending,
// and LXC.pm check_ct_modify_config_perm; behaviour.md (b), (c), (e)-(h)).
// PUT is synchronous: every change, even allocating a new volume, happens
// inside the request.

// Lines of pve-storage 9.1 Storage.pm whose die has no trailing newline,
// so that Perl appends " at FILE line N." (behaviour.md (b)).
const storageArbitraryPathDieLine = 651 // check_volume_access "Only root can pass arbitrary filesystem paths."

// ctBridgeMTU is the MTU of the emulated node's bridges (read_bridge_mtu).
const ctBridgeMTU = 1500

// ctFastplugOptions are $LXC_FASTPLUG_OPTIONS: applied at once even while
// the CT runs (behaviour.md (e)).
var ctFastplugOptions = map[string]bool{
	"description": true, "onboot": true, "startup": true, "protection": true, "hostname": true,
	"hookscript": true, "cores": true, "tags": true, "lock": true,
}

// ctPlainOptions are the non-indexed keys of LXC/Config.pm's $confdesc
// (option_exists), per release. parent and snaptime exist there although
// the API never accepts them.
var ctPlainOptions = map[string][]string{
	"8.4": {"arch", "cmode", "console", "cores", "cpulimit", "cpuunits", "debug", "description", "features",
		"hookscript", "hostname", "lock", "memory", "nameserver", "onboot", "ostype", "parent", "protection",
		"rootfs", "searchdomain", "snaptime", "startup", "swap", "tags", "template", "timezone", "tty", "unprivileged"},
	"9.1": {"entrypoint", "env"},
}

// ctIndexedOptions are the indexed keys and their count (mp0..mp255, …).
var ctIndexedOptions = map[string]int{"mp": 256, "unused": 256, "net": 32, "dev": 256}

// ctConfig reads and updates a CT's config and pending changes, with
// the permission checks of a config change. Cluster embeds it. It holds
// no *Cluster: the State's lock and the State, the release and the log,
// and one field per part it calls.
type ctConfig struct {
	// stateMu guards the State; state is the State (nil until loaded).
	stateMu *stateMutex
	state   func() *State
	version string
	log     *slog.Logger
	guests  configGuests
	storage configStorage
	// alloc (ctCreator) allocates a new mount point's volume.
	alloc interface {
		ctAllocDiskLocked(node, sid string, vmid int, size int64) (*Volume, []string, error)
	}
	// formatVolumes gives new volumes to the CT's root (the Cluster's
	// id shift, idmap.go).
	formatVolumes func(node string, conf map[string]string, volids []string) error
	journal       interface{ saveLocked() error }
	// tasks gives a synchronous volume free a Worker to log to.
	tasks interface{ detachedWorker() *Worker }
}

// configGuests is what ctConfig needs of guests: the node check, a CT's
// lookup and its config flock.
type configGuests interface {
	checkNodeLocked(node string) error
	guestLocked(node string, vmid int) (*Guest, error)
	lockConfig(node string, vmid int) (g *Guest, unlock func(), err error)
}

// configStorage is what ctConfig needs of storageLayer: a volume's name,
// its path, and the free of an unreferenced image.
type configStorage interface {
	parseVolnameLocked(volid string) (s *Storage, name, vtype string, owner int, err error)
	volumePath(node, storage, name string) string
	freeImageLocked(w *Worker, node, volid string) error
}

// ctOptionExists is LXC::Config->option_exists for the cluster's release.
func (cf *ctConfig) ctOptionExists(opt string) bool {
	for _, o := range ctPlainOptions["8.4"] {
		if o == opt {
			return true
		}
	}
	if cf.version == "9.1" {
		for _, o := range ctPlainOptions["9.1"] {
			if o == opt {
				return true
			}
		}
	}
	for prefix, n := range ctIndexedOptions {
		if rest, ok := strings.CutPrefix(opt, prefix); ok && ctIsIndex(rest) {
			i, _ := strconv.Atoi(rest)
			return i < n
		}
	}
	return false
}

// ctIsIndex reports a decimal index as PVE's \d+ matches it.
func ctIsIndex(s string) bool { return s != "" && strings.Trim(s, "0123456789") == "" }

// ctKeyIs reports whether key is prefix followed by an index (mp3, net0).
func ctKeyIs(key, prefix string) bool {
	rest, ok := strings.CutPrefix(key, prefix)
	return ok && ctIsIndex(rest)
}

// CTConfig is GET /nodes/{node}/lxc/{vmid}/config: the config with the
// pending changes merged in (AbstractConfig load_current_config), the
// active config with current, or a snapshot's config. It never holds the
// "pending" or "snapshots" sections; the digest is returned apart, for the
// caller to add. auth is the caller; GET config has no checks of its own
// beyond the schema's VM.Audit.
func (cf *ctConfig) CTConfig(auth Auth, node string, vmid int, current bool, snapshot string) (conf map[string]string, digest string, err error) {
	if snapshot != "" && current {
		msg := "cannot use 'snapshot' parameter with 'current'"
		return nil, "", ParamError(map[string]string{"snapshot": msg, "current": msg})
	}
	cf.stateMu.RLock()
	defer cf.stateMu.RUnlock()
	if err := cf.guests.checkNodeLocked(node); err != nil {
		return nil, "", err
	}
	g, err := cf.guests.guestLocked(node, vmid)
	if err != nil {
		return nil, "", err
	}
	conf = map[string]string{}
	if snapshot != "" {
		s := g.Snapshots[snapshot]
		if s == nil {
			return nil, "", Failf("snapshot '%s' does not exist\n", snapshot)
		}
		for k, v := range s.Config {
			conf[k] = v
		}
	} else {
		for k, v := range g.Config {
			conf[k] = v
		}
		if !current {
			for k, v := range g.Pending {
				conf[k] = v
			}
			for k := range g.PendingDelete {
				delete(conf, k)
			}
		}
	}
	setDescriptionAsRead(conf)
	return conf, g.Digest(), nil
}

// setDescriptionAsRead makes conf what parse_pct_config reads back from
// the file: the description with every line ending in a newline, and no
// description key at all for an empty one; no key whose value is empty
// either (write_pct_config writes "key: ", which the parser skips).
func setDescriptionAsRead(conf map[string]string) {
	for k, v := range conf {
		if v == "" && k != "description" {
			delete(conf, k)
		}
	}
	if d, ok := conf["description"]; ok {
		if read, ok := descriptionAsRead(d); ok {
			conf["description"] = read
		} else {
			delete(conf, "description")
		}
	}
}

// PendingEntry is one row of GET .../pending (GuestHelpers
// config_with_pending_array): the active value, the pending value, and
// Delete 1 (or 2 for a forced delete) when the key is to be removed.
type PendingEntry struct {
	Key     string
	Value   *string
	Pending *string
	Delete  int // 0, 1, or 2 (force)
}

// CTPending is GET /nodes/{node}/lxc/{vmid}/pending: one entry per key of
// the config (digest included, as fixture lxc-pending-101.json shows), per
// key only pending, and per pending delete of an unset key; sorted by key.
func (cf *ctConfig) CTPending(node string, vmid int) ([]PendingEntry, error) {
	cf.stateMu.RLock()
	defer cf.stateMu.RUnlock()
	if err := cf.guests.checkNodeLocked(node); err != nil {
		return nil, err
	}
	g, err := cf.guests.guestLocked(node, vmid)
	if err != nil {
		return nil, err
	}
	rows := map[string]*PendingEntry{}
	row := func(k string) *PendingEntry {
		if rows[k] == nil {
			rows[k] = &PendingEntry{Key: k}
		}
		return rows[k]
	}
	str := func(s string) *string { return &s }
	conf, pending := maps.Clone(g.Config), maps.Clone(g.Pending)
	setDescriptionAsRead(conf)
	setDescriptionAsRead(pending)
	for k, v := range conf {
		row(k).Value = str(v)
	}
	row("digest").Value = str(g.Digest())
	for k, v := range pending {
		row(k).Pending = str(v)
	}
	for k, force := range g.PendingDelete {
		row(k).Delete = 1
		if force {
			row(k).Delete = 2
		}
	}
	out := make([]PendingEntry, 0, len(rows))
	for _, k := range slices.Sorted(maps.Keys(rows)) {
		out = append(out, *rows[k])
	}
	return out, nil
}

// UpdateCTConfig is PUT /nodes/{node}/lxc/{vmid}/config (update_vm):
// params are config keys to set plus delete, revert and digest. Under the
// config flock it checks the lock property, the digest and the caller's
// rights per key, writes every change to the pending section and applies
// what it can: all of it on a stopped CT, the hot-pluggable part on a
// running one (behaviour.md (e)). Per-key failures of that step come back
// as a 400 with the key's message and nothing is written, as PVE does;
// volumes already allocated by then stay allocated, as on PVE.
func (cf *ctConfig) UpdateCTConfig(auth Auth, node string, vmid int, params map[string]string) error {
	cf.stateMu.Lock()
	err := cf.guests.checkNodeLocked(node)
	cf.stateMu.Unlock()
	if err != nil {
		return err
	}
	set := map[string]string{}
	for k, v := range params {
		set[k] = v
	}
	digest := set["digest"]
	delete(set, "digest")
	if len(set) == 0 {
		return Failf("no options specified\n")
	}
	deletes, reverts := ctSplitList(set["delete"]), ctSplitList(set["revert"])
	delete(set, "delete")
	delete(set, "revert")

	g, unlock, err := cf.guests.lockConfig(node, vmid)
	if err != nil {
		return err
	}
	defer unlock()
	if digest != "" && digest != g.Digest() {
		return Failf("detected modified configuration - file changed by other user? Try again.\n")
	}
	unprivileged := isTrue(g.Config["unprivileged"])
	if err := cf.ctModifyConfigPermLocked(auth, vmid, "", g.Config, nil, deletes, unprivileged); err != nil {
		return err
	}
	if err := cf.ctModifyConfigPermLocked(auth, vmid, "", g.Config, nil, reverts, unprivileged); err != nil {
		return err
	}
	for _, opt := range reverts {
		if !cf.ctOptionExists(opt) {
			return ParamError(map[string]string{"revert": fmt.Sprintf("unknown option '%s'", opt)})
		}
		if _, ok := set[opt]; ok {
			return ParamError(map[string]string{"revert": fmt.Sprintf("you can't use '-%s' and '-revert %s' at the same time", opt, opt)})
		}
	}
	for _, opt := range deletes {
		if !cf.ctOptionExists(opt) {
			return ParamError(map[string]string{"delete": fmt.Sprintf("unknown option '%s'", opt)})
		}
		if _, ok := set[opt]; ok {
			// sic: the unbalanced quote is PVE's (behaviour.md (f)).
			return ParamError(map[string]string{"delete": fmt.Sprintf("you can't use '-%s' and -delete %s' at the same time", opt, opt)})
		}
		for _, r := range reverts {
			if r == opt {
				return ParamError(map[string]string{"delete": fmt.Sprintf("you can't use '-delete %s' and '-revert %s' at the same time", opt, opt)})
			}
		}
	}
	if err := cf.ctModifyConfigPermLocked(auth, vmid, "", g.Config, set, nil, unprivileged); err != nil {
		return err
	}

	work := ctCloneGuest(g)
	errs, err := cf.ctUpdateConfigLocked(work, g.Running, set, deletes, reverts)
	if err != nil {
		return err
	}
	if len(errs) > 0 {
		return ParamError(errs)
	}
	pruneUsedUnused(work.Config)
	g.Config, g.Pending, g.PendingDelete = work.Config, work.Pending, work.PendingDelete
	return cf.journal.saveLocked()
}

// ctSplitList is PVE::Tools::split_list: items separated by NUL, or by
// commas, semicolons and white space.
func ctSplitList(s string) []string { return SplitList(s) }

// ctCloneGuest copies g's config sections so that a PUT can be abandoned
// without a trace in the config.
func ctCloneGuest(g *Guest) *Guest {
	cp := *g
	cp.Config = map[string]string{}
	for k, v := range g.Config {
		cp.Config[k] = v
	}
	cp.Pending = map[string]string{}
	for k, v := range g.Pending {
		cp.Pending[k] = v
	}
	cp.PendingDelete = map[string]bool{}
	for k, v := range g.PendingDelete {
		cp.PendingDelete[k] = v
	}
	return &cp
}

// ctUpdateConfigLocked is update_pct_config on g (a working copy): reverts
// drop pending changes, deletes and sets are recorded as pending, then the
// modified keys are applied (stopped) or hot-plugged (running). A returned
// error is a die of the whole request; errs are the per-key apply errors.
// Creating a CT runs it too, on the new config.
func (cf *ctConfig) ctUpdateConfigLocked(g *Guest, running bool, set map[string]string, deletes, reverts []string) (errs map[string]string, err error) {
	if g.Pending == nil {
		g.Pending = map[string]string{}
	}
	if g.PendingDelete == nil {
		g.PendingDelete = map[string]bool{}
	}
	for _, opt := range reverts {
		delete(g.Pending, opt)
		delete(g.PendingDelete, opt)
	}
	modified := map[string]bool{}
	protected := isTrue(g.Config["protection"])
	for _, opt := range deletes {
		_, inConf := g.Config[opt]
		_, inPending := g.Pending[opt]
		if !inConf && !inPending {
			cf.log.Warn(fmt.Sprintf("cannot delete '%s' - not set in current configuration!", opt), "vmid", g.VMID)
			continue
		}
		modified[opt] = true
		switch {
		case opt == "memory" || opt == "rootfs" || opt == "ostype":
			return nil, Failf("unable to delete required option '%s'\n", opt)
		case ctKeyIs(opt, "unused") || ctKeyIs(opt, "mp"):
			if protected {
				return nil, Failf("can't remove CT %d drive '%s' - protection mode enabled\n", g.VMID, opt)
			}
		case opt == "unprivileged":
			return nil, Failf("unable to delete read-only option: '%s'\n", opt)
		}
		delete(g.Pending, opt)
		g.PendingDelete[opt] = false
	}
	for _, opt := range slices.Sorted(maps.Keys(set)) {
		modified[opt] = true
		value, err := cf.checkSetLocked(g, protected, opt, set[opt])
		if err != nil {
			return nil, err
		}
		g.Pending[opt] = value
		delete(g.PendingDelete, opt)
	}
	ctCleanupPending(g)
	if running {
		errs = cf.ctHotplugPendingLocked(g, modified)
	} else {
		errs = cf.ctApplyPendingLocked(g, modified)
	}
	return errs, nil
}

// checkSetLocked is update_pct_config's check of a set option opt:
// value, normalized as PVE writes it (nameservers, searchdomain, tags),
// or why it cannot be set.
func (cf *ctConfig) checkSetLocked(g *Guest, protected bool, opt, value string) (string, error) {
	var err error
	switch {
	case ctKeyIs(opt, "mp") || opt == "rootfs":
		if protected {
			return "", Failf("can't update CT %d drive '%s' - protection mode enabled\n", g.VMID, opt)
		}
		mp, err := ParseMountPoint(opt, value)
		if err != nil {
			return "", Failf("%s\n", err)
		}
		if mp.Type() == "volume" {
			if err := cf.ctCheckContentTypeLocked(mp.Volume()); err != nil {
				return "", err
			}
		}
	case opt == "hookscript":
		if err := cf.checkHookscriptLocked(g.Node, value); err != nil {
			return "", err
		}
	case opt == "nameserver":
		if value, err = ctVerifyNameservers(value); err != nil {
			return "", err
		}
	case opt == "searchdomain":
		value = strings.Join(ctSplitList(value), " ")
	case opt == "unprivileged":
		return "", Failf("unable to modify read-only option: '%s'\n", opt)
	case opt == "tags":
		value = UniqueTags(value, TagStyle{}) // the emulator's datacenter has the default tag style
	case ctKeyIs(opt, "net"):
		n, err := ParseNet(value)
		if err != nil {
			return "", Failf("%s\n", err)
		}
		if n["mtu"] != "" && !bridgeExists(n["bridge"]) {
			return "", Failf("bridge '%s' does not exist\n", n["bridge"]) // read_bridge_mtu
		}
		if mtu, err := strconv.Atoi(n["mtu"]); err == nil && mtu > ctBridgeMTU {
			return "", Failf("%s: MTU size '%d' is bigger than bridge MTU '%d'\n", opt, mtu, ctBridgeMTU)
		}
	}
	return value, nil
}

// checkHookscriptLocked is pve-guest-common GuestHelpers check_hookscript
// on node: the volume must parse, be a snippet, and be an executable
// file on the data plane.
func (cf *ctConfig) checkHookscriptLocked(node, volid string) error {
	s, name, vtype, _, err := cf.storage.parseVolnameLocked(volid)
	if err != nil {
		return err
	}
	if vtype != "snippets" {
		return Failf("'%s' is not in the snippets directory\n", volid)
	}
	fi, err := os.Stat(cf.storage.volumePath(node, s.ID, name))
	if err != nil || !fi.Mode().IsRegular() {
		return Failf("script '%s' does not exist\n", volid)
	}
	if fi.Mode().Perm()&0o111 == 0 {
		return Failf("script '%s' is not executable\n", volid)
	}
	return nil
}

// ctCheckContentTypeLocked is update_pct_config's $check_content_type for
// a volume mount point: the storage must allow container directories.
func (cf *ctConfig) ctCheckContentTypeLocked(volid string) error {
	st := cf.state()
	sid, _, ok := ParseVolID(volid)
	if !ok {
		return Failf("unable to parse volume ID '%s'\n", volid)
	}
	s := st.storage(sid)
	if s == nil {
		return Failf("storage '%s' does not exist\n", sid)
	}
	if !s.HasContent("rootdir") {
		return Failf("storage '%s' does not allow content type 'rootdir' (Container)\n", sid)
	}
	return nil
}

// ctVerifyNameservers is verify_nameserver_list: IP addresses, joined by
// spaces.
func ctVerifyNameservers(value string) (string, error) {
	list := ctSplitList(value)
	for _, ip := range list {
		if net.ParseIP(ip) == nil {
			return "", Failf("value does not look like a valid IP address\n")
		}
	}
	return strings.Join(list, " "), nil
}

// ctCleanupPending is AbstractConfig cleanup_pending: a pending value
// equal to the active one is no change, a pending delete of an unset key
// is nothing to do.
func ctCleanupPending(g *Guest) {
	for opt, v := range g.Pending {
		if cur, ok := g.Config[opt]; ok && cur == v {
			delete(g.Pending, opt)
		}
	}
	for opt := range g.PendingDelete {
		if _, ok := g.Config[opt]; !ok {
			delete(g.PendingDelete, opt)
		}
	}
}

// ctApplyPendingLocked is vmconfig_apply_pending for the keys in
// selection (a stopped CT): deletes first — a volume mpN becomes unusedN,
// an unusedN is freed if g owns it — then the pending values, a new disk
// being allocated and an existing volume's size rescanned. Failures stay
// pending and are reported as "unable to apply pending change <opt> :
// <err>" (sic, with the space).
func (cf *ctConfig) ctApplyPendingLocked(g *Guest, selection map[string]bool) map[string]string {
	errs := map[string]string{}
	fail := func(opt string, err error) {
		errs[opt] = fmt.Sprintf("unable to apply pending change %s : %s", opt, errText(err))
		cf.log.Warn(strings.TrimRight(errs[opt], "\n"), "vmid", g.VMID)
	}
	for _, opt := range slices.Sorted(maps.Keys(g.PendingDelete)) {
		if !selection[opt] {
			continue
		}
		var err error
		switch {
		case ctKeyIs(opt, "mp"):
			// PVE asks is_volume_in_use with the whole mp string, which
			// never matches a volume: the volume always becomes unusedN.
			if mp, perr := ParseMountPoint(opt, g.Config[opt]); perr == nil && mp.Type() == "volume" {
				_, err = configAddUnused(g.Config, mp.Volume())
			}
		case ctKeyIs(opt, "unused"):
			if volid := g.Config[opt]; !volumeInUse(g, volid, true, true) {
				err = cf.ctDeleteMountpointVolumeLocked(g, volid, nil)
			}
		}
		if err != nil {
			fail(opt, err)
			continue
		}
		delete(g.Config, opt)
		delete(g.PendingDelete, opt)
	}
	ctCleanupPending(g)
	for _, opt := range slices.Sorted(maps.Keys(g.Pending)) {
		if !selection[opt] {
			continue
		}
		var err error
		switch {
		case ctKeyIs(opt, "mp"):
			err = cf.ctApplyPendingMountLocked(g, opt, false)
		case ctKeyIs(opt, "net"):
			g.Pending[opt] = ctNormalizeNet(g.Pending[opt])
		}
		if err != nil {
			fail(opt, err)
			continue
		}
		g.Config[opt] = g.Pending[opt]
		delete(g.Pending, opt)
	}
	ctTidyPending(g)
	return errs
}

// ctHotplugNetDeleteRE is the key pattern vmconfig_hotplug_pending removes
// interfaces for: a single digit (sic), so deleting net10..net31 from a
// running CT stays pending.
var ctHotplugNetDeleteRE = lazyre.New(`^net\d$`)

// ctHotplugPendingLocked is vmconfig_hotplug_pending for the keys in
// selection (a running CT): fast-plug options are applied, then deletes
// and values that can be hot-plugged — cgroup limits, network interfaces,
// a new mpN or devN. Everything else stays pending without error until the
// next start. Failures read "unable to hotplug <opt>: <err>".
func (cf *ctConfig) ctHotplugPendingLocked(g *Guest, selection map[string]bool) map[string]string {
	errs := map[string]string{}
	for _, opt := range slices.Sorted(maps.Keys(g.Pending)) {
		if selection[opt] && ctFastplugOptions[opt] {
			g.Config[opt] = g.Pending[opt]
			delete(g.Pending, opt)
		}
	}
	for _, opt := range slices.Sorted(maps.Keys(g.PendingDelete)) {
		if !selection[opt] {
			continue
		}
		var err error
		switch {
		case ctFastplugOptions[opt], opt == "swap", opt == "cpulimit", opt == "cpuunits", ctHotplugNetDeleteRE.MatchString(opt):
		case ctKeyIs(opt, "unused"):
			if volid := g.Config[opt]; !volumeInUse(g, volid, true, true) {
				err = cf.ctDeleteMountpointVolumeLocked(g, volid, nil)
			}
		default:
			continue // not hot-pluggable: stays pending
		}
		if err != nil {
			errs[opt] = fmt.Sprintf("unable to hotplug %s: %s", opt, errText(err))
			continue
		}
		delete(g.Config, opt)
		delete(g.PendingDelete, opt)
	}
	for _, opt := range slices.Sorted(maps.Keys(g.Pending)) {
		if !selection[opt] {
			continue
		}
		var err error
		_, exists := g.Config[opt]
		switch {
		case opt == "cpulimit", opt == "cpuunits", opt == "memory", opt == "swap":
		case ctKeyIs(opt, "net"):
			g.Pending[opt] = ctNormalizeNet(g.Pending[opt])
		case ctKeyIs(opt, "mp") && !exists:
			err = cf.ctApplyPendingMountLocked(g, opt, true)
		case ctKeyIs(opt, "dev") && !exists:
		default:
			continue // not hot-pluggable, or over an existing mp/dev: stays pending
		}
		if err != nil {
			errs[opt] = fmt.Sprintf("unable to hotplug %s: %s", opt, errText(err))
			continue
		}
		g.Config[opt] = g.Pending[opt]
		delete(g.Pending, opt)
	}
	ctTidyPending(g)
	return errs
}

// ctTidyPending drops empty pending sections, so that the config text has
// no empty [pve:pending] section.
func ctTidyPending(g *Guest) {
	if len(g.Pending) == 0 {
		g.Pending = nil
	}
	if len(g.PendingDelete) == 0 {
		g.PendingDelete = nil
	}
}

// ctApplyPendingMountLocked is apply_pending_mountpoint: STORAGE:SIZE
// allocates a volume (create_disks) and the pending value names it with
// its size; an existing volume gets its size rescanned from storage
// (behaviour.md (f) 2). On a running CT the mount point is then plugged in.
// The volume the key held before becomes unusedN.
func (cf *ctConfig) ctApplyPendingMountLocked(g *Guest, opt string, running bool) error {
	st := cf.state()
	mp, err := ParseMountPoint(opt, g.Pending[opt])
	if err != nil {
		return Failf("%s\n", err)
	}
	if sid, sizeGiB, ok := ParseNewDisk(mp.Volume()); ok && mp.Type() == "volume" {
		size := int64(sizeGiB*1024) * mib
		v, lines, err := cf.alloc.ctAllocDiskLocked(g.Node, sid, g.VMID, size)
		for _, l := range lines {
			cf.log.Debug(l, "vmid", g.VMID)
		}
		if err != nil {
			return err
		}
		if err := cf.formatVolumes(g.Node, g.Config, []string{v.VolID()}); err != nil {
			return err
		}
		mp.Props["volume"] = v.VolID()
		mp.Props["size"] = pvesize.Format(size)
	} else if mp.Type() == "volume" {
		if v := st.Volumes[st.volKey(g.Node, mp.Volume())]; v != nil {
			mp.Props["size"] = pvesize.Format(v.Size)
		} else if running {
			return Failf("volume '%s' does not exist\n", mp.Volume())
		} else {
			cf.log.Warn(fmt.Sprintf("Could not rescan volume size - volume '%s' does not exist", mp.Volume()), "vmid", g.VMID)
		}
	}
	return pendMountLocked(g, opt, mp)
}

// pendMountLocked is the end of apply_pending_mountpoint, for a running
// CT (ctConfig) and at a start (ctPower) alike: the pending value names
// mp as settled, and the volume the key held before becomes unusedN.
func pendMountLocked(g *Guest, opt string, mp MountPoint) error {
	g.Pending[opt] = mp.String()
	if old, ok := g.Config[opt]; ok {
		if om, err := ParseMountPoint(opt, old); err == nil && om.Type() == "volume" {
			if _, err := configAddUnused(g.Config, om.Volume()); err != nil {
				return err
			}
		}
	}
	return nil
}

// ctNormalizeNet is parse_lxc_network + print_lxc_network: type=veth, a
// generated hwaddr when none is set, keys in PVE's order.
func ctNormalizeNet(value string) string {
	n, err := ParseNet(value)
	if err != nil {
		return value
	}
	n["type"] = "veth"
	if n["hwaddr"] == "" {
		n["hwaddr"] = ctRandomMAC()
	}
	return n.String()
}

// ctDeleteMountpointVolumeLocked is delete_mountpoint_volume: a volume
// named for g is freed, any other is left alone with PVE's warning, which
// goes to w's task log, or to the server log for a synchronous call (w nil).
func (cf *ctConfig) ctDeleteMountpointVolumeLocked(g *Guest, volid string, w *Worker) error {
	if ClassifyMountPoint(volid) != "volume" {
		return nil
	}
	_, _, _, owner, err := cf.storage.parseVolnameLocked(volid)
	if err != nil {
		return err
	}
	if owner != g.VMID {
		msg := fmt.Sprintf("ignore deletion of '%s', CT %d isn't the owner!", volid, g.VMID)
		if w != nil {
			w.logLocked("%s", msg)
		} else {
			cf.log.Warn(msg, "vmid", g.VMID)
		}
		return nil
	}
	if w == nil {
		// A detached worker collects what lvremove prints; a synchronous
		// call has no task log to put it in.
		w = cf.tasks.detachedWorker()
		defer func() {
			for _, l := range w.t.Log {
				cf.log.Debug(strings.TrimSpace(l), "vmid", g.VMID)
			}
		}()
	}
	return cf.storage.freeImageLocked(w, g.Node, volid)
}

// ctModifyConfigPermLocked is check_ct_modify_config_perm (behaviour.md
// (b), (c)): for anyone but root@pam, each key of newconf (sorted) and of
// deletes needs its privilege on /vms/<vmid>; mount points must be storage
// volumes the caller may use, feature flags other than nesting are
// root-only, and so on. oldconf is nil when creating. pool is a create's
// pool= ("" otherwise): as check_vm_perm, a privilege on /pool/<pool>
// then does instead of one on /vms/<vmid>.
func (cf *ctConfig) ctModifyConfigPermLocked(auth Auth, vmid int, pool string, oldconf, newconf map[string]string, deletes []string, unprivileged bool) error {
	st := cf.state()
	if auth.IsRoot() {
		return nil
	}
	vmPath := fmt.Sprintf("/vms/%d", vmid)
	vmCheck := func(priv string) error {
		if pool != "" && st.Access.HasPriv(auth, "/pool/"+pool, priv) {
			return nil
		}
		return st.Access.Check(auth, vmPath, []string{priv}, false)
	}
	check := func(opt string, del bool) error {
		switch {
		case opt == "cores" || opt == "cpuunits" || opt == "cpulimit":
			return vmCheck("VM.Config.CPU")
		case opt == "rootfs" || ctKeyIs(opt, "mp"):
			if err := vmCheck("VM.Config.Disk"); err != nil || del {
				return err
			}
			mp, err := ParseMountPoint(opt, newconf[opt])
			if err != nil {
				return Failf("%s\n", err)
			}
			if typ := mp.Type(); typ != "volume" {
				return PermError(fmt.Sprintf("mount point type %s is only allowed for root@pam", typ))
			}
			if sid, _, ok := ParseNewDisk(mp.Volume()); ok {
				return st.Access.Check(auth, "/storage/"+sid, []string{"Datastore.AllocateSpace"}, false)
			}
			return cf.ctCheckVolumeAccessLocked(auth, vmid, mp.Volume(), "rootdir")
		case opt == "memory" || opt == "swap":
			return vmCheck("VM.Config.Memory")
		case ctKeyIs(opt, "net"):
			if err := vmCheck("VM.Config.Network"); err != nil {
				return err
			}
			if old := oldconf[opt]; old != "" {
				if err := cf.ctCheckBridgeAccessLocked(auth, old); err != nil {
					return err
				}
			}
			if v := newconf[opt]; v != "" {
				return cf.ctCheckBridgeAccessLocked(auth, v)
			}
			return nil
		case ctKeyIs(opt, "dev"):
			return PermError("configuring device passthrough is only allowed for root@pam")
		case opt == "nameserver" || opt == "searchdomain" || opt == "hostname":
			return vmCheck("VM.Config.Network")
		case opt == "features":
			return cf.ctCheckFeaturesPermLocked(auth, vmPath, oldconf[opt], newconf[opt], del, unprivileged)
		case opt == "hookscript":
			return PermError("changing the hookscript is only allowed for root@pam")
		default:
			// tags too: assert_tag_permissions needs VM.Config.Options, and
			// nothing more with the default datacenter tag settings.
			return vmCheck("VM.Config.Options")
		}
	}
	for _, opt := range slices.Sorted(maps.Keys(newconf)) {
		if err := check(opt, false); err != nil {
			return err
		}
	}
	for _, opt := range deletes {
		if err := check(opt, true); err != nil {
			return err
		}
	}
	return nil
}

// ctCheckFeaturesPermLocked is the features branch of
// check_ct_modify_config_perm (behaviour.md (c)): refused outright on a
// privileged CT; a change of anything but nesting is root-only; a nesting
// change needs VM.Allocate. Without old features only exactly {nesting=1}
// counts as a nesting change; a delete is judged by the old value.
func (cf *ctConfig) ctCheckFeaturesPermLocked(auth Auth, vmPath, old, new string, del, unprivileged bool) error {
	st := cf.state()
	if !unprivileged {
		return PermError("changing feature flags for privileged container is only allowed for root@pam")
	}
	nestingChanged, otherChanged := false, false
	onlyNesting := func(f PropString) {
		if len(f) == 1 && f["nesting"] == "1" {
			nestingChanged = true
		} else if len(f) > 0 {
			otherChanged = true
		}
	}
	switch {
	case del:
		onlyNesting(ctParseFeatures(old))
	case old != "":
		of, nf := ctParseFeatures(old), ctParseFeatures(new)
		for _, k := range append(slices.Sorted(maps.Keys(of)), slices.Sorted(maps.Keys(nf))...) {
			if of[k] != nf[k] {
				if k == "nesting" {
					nestingChanged = true
				} else {
					otherChanged = true
				}
			}
		}
	default:
		onlyNesting(ctParseFeatures(new))
	}
	if otherChanged {
		return PermError("changing feature flags (except nesting) is only allowed for root@pam")
	}
	if nestingChanged {
		return st.Access.Check(auth, vmPath, []string{"VM.Allocate"}, false)
	}
	return nil
}

// ctParseFeatures parses a features value with its booleans normalized to
// 1/0, as parse_property_string returns them.
func ctParseFeatures(value string) PropString {
	f, err := ParseFeatures(value)
	if err != nil {
		return PropString{}
	}
	for k, v := range f {
		if k != "mount" {
			f[k] = "0"
			if isTrue(v) {
				f[k] = "1"
			}
		}
	}
	return f
}

// ctCheckBridgeAccessLocked is check_bridge_access → check_vnet_access:
// SDN.Use on the bridge in the "localnetwork" zone, or on each VLAN of it
// the interface uses (tag, trunks). An interface without bridge is not
// checked.
func (cf *ctConfig) ctCheckBridgeAccessLocked(auth Auth, value string) error {
	st := cf.state()
	n, err := ParseNet(value)
	if err != nil || n["bridge"] == "" {
		return nil
	}
	base := "/sdn/zones/" + DefaultSDNZone + "/" + n["bridge"]
	paths := []string{base}
	if tag := n["tag"]; tag != "" {
		paths = []string{base + "/" + tag}
	} else if trunks := n["trunks"]; trunks != "" {
		paths = nil
		for _, t := range strings.Split(trunks, ";") {
			paths = append(paths, base+"/"+t)
		}
	}
	for _, p := range paths {
		if err := st.Access.Check(auth, p, []string{"SDN.Use"}, true); err != nil {
			return err
		}
	}
	return nil
}

// ctCheckVolumeAccessLocked is pve-storage check_volume_access
// (behaviour.md (b)): typ is the content type the caller needs ("" for
// any; "rootdir" accepts images). Datastore.Allocate on the storage
// allows everything; otherwise templates need read access to the storage,
// the guest's own volumes are allowed, backups need VM.Backup and other
// guests' images Datastore.Audit plus VM.Config.Disk on their owner.
func (cf *ctConfig) ctCheckVolumeAccessLocked(auth Auth, vmid int, volid, typ string) error {
	st := cf.state()
	sid, _, ok := ParseVolID(volid)
	if !ok {
		if auth.IsRoot() {
			return nil
		}
		return Failf("Only root can pass arbitrary filesystem paths. at /usr/share/perl5/PVE/Storage.pm line %d.\n", storageArbitraryPathDieLine)
	}
	_, _, vtype, owner, err := cf.storage.parseVolnameLocked(volid)
	if err != nil {
		return err
	}
	if typ != "" && vtype != typ && (typ != "rootdir" || vtype != "images") {
		return Failf("unable to use volume %s - content type needs to be '%s'\n", volid, typ)
	}
	storagePath := "/storage/" + sid
	if st.Access.HasPriv(auth, storagePath, "Datastore.Allocate") {
		return nil
	}
	switch {
	case vtype == "iso" || vtype == "vztmpl" || vtype == "import":
		return st.Access.Check(auth, storagePath, []string{"Datastore.AllocateSpace", "Datastore.Audit"}, true)
	case owner != 0 && owner == vmid:
		return nil
	case vtype == "backup" && owner != 0:
		if err := st.Access.Check(auth, storagePath, []string{"Datastore.AllocateSpace"}, false); err != nil {
			return err
		}
		return st.Access.Check(auth, fmt.Sprintf("/vms/%d", owner), []string{"VM.Backup"}, false)
	case (vtype == "images" || vtype == "rootdir") && owner != 0:
		if err := st.Access.Check(auth, storagePath, []string{"Datastore.Audit"}, false); err != nil {
			return err
		}
		return st.Access.Check(auth, fmt.Sprintf("/vms/%d", owner), []string{"VM.Config.Disk"}, false)
	}
	return Failf("missing privileges to access %s\n", volid)
}
