package apply

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/url"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/corralhq/corral/internal/plan"
	"github.com/corralhq/corral/internal/pve"
)

// Backups, restores and snapshots of an app's container (issue 5, seed
// 004 §3.4–§4.7). A backup is a vzdump archive whose notes name the app
// ("corral app <name>"), which is how corral tells its archives apart
// from everyone else's; a restore recreates the container under a new
// VMID and hands its volumes to the keeper as the app's retained volumes.

// notesPrefix starts the notes of every archive `corral backup` makes.
const notesPrefix = "corral app "

// BackupNotes is the notes-template corral gives the archives of app. It
// holds no {{…}} variable, so the notes are exactly this text.
func BackupNotes(app string) string { return notesPrefix + app }

// ArchiveApp returns the app an archive belongs to by its notes: those
// of `corral backup` ("corral app NAME") and of the backup that
// snapshotBeforeChange takes where the storage cannot snapshot
// ("corral: NAME before …"). ours says whether `corral backup` made it,
// which is what keep counts and prunes.
func ArchiveApp(notes string) (app string, ours bool) {
	first, _, _ := strings.Cut(strings.TrimSpace(notes), "\n")
	if rest, ok := strings.CutPrefix(first, notesPrefix); ok {
		if name := strings.TrimSpace(rest); name != "" && !strings.ContainsAny(name, " \t") {
			return name, true
		}
	}
	if rest, ok := strings.CutPrefix(first, "corral: "); ok {
		if name, _, ok := strings.Cut(rest, " "); ok && name != "" {
			return name, false
		}
	}
	return "", false
}

// BackupOptions tune Backup. Zero values take the manifest's defaults:
// mode snapshot, storage local, every archive kept.
type BackupOptions struct {
	Mode    string // snapshot | stop | suspend
	Storage string // a storage with content "backup"
	// Keep prunes the app's older corral archives on Storage beyond the
	// newest Keep; 0 keeps them all.
	Keep int
}

// Excluded is something of the container that an archive does not hold.
type Excluded struct {
	Key   string `json:"key"`            // mpN
	Name  string `json:"name,omitempty"` // the app's volume name, when corral knows it
	Mount string `json:"mount"`
	// Kind is "volume" (a volume mount point with backup=0) or the mount
	// type PVE never backs up ("bind", "device").
	Kind   string `json:"kind"`
	Source string `json:"source"` // volid or host path
	Reason string `json:"reason"`
}

// BackupResult is one finished backup.
type BackupResult struct {
	App string `json:"app"`
	// Kind is "vm" for a VM app's backup, "" for a container's.
	Kind       string        `json:"kind,omitempty"`
	VMID       int           `json:"vmid"`
	Node       string        `json:"node"`
	Mode       string        `json:"mode"`
	Storage    string        `json:"storage"`
	Archive    string        `json:"archive"`
	Size       int64         `json:"size"`
	Duration   time.Duration `json:"-"`
	DurationMS int64         `json:"duration_ms"`
	UPID       string        `json:"upid"`
	Excluded   []Excluded    `json:"excluded"`
	Pruned     []string      `json:"pruned"`
	Warnings   []string      `json:"warnings"`
	// Consistency is a VM backup's: ConsistentApp, ConsistentCrash or
	// ConsistentStopped, and ConsistencyWhy says why (vmbackup.go). A
	// container has no guest agent, so its snapshot-mode backup is
	// crash-consistent and this stays "".
	Consistency    string `json:"consistency,omitempty"`
	ConsistencyWhy string `json:"consistency_reason,omitempty"`
}

// AppCT returns the one container of app, or an error that says what to
// do when there is none or more than one.
func AppCT(obs *plan.Observed, app string) (*plan.CT, error) {
	cts := obs.Apps[app]
	switch len(cts) {
	case 0:
		if obs.CannotSeeGuests {
			node := ""
			if len(obs.Nodes) > 0 {
				node = obs.Nodes[0]
			}
			return nil, errors.New(plan.BlindReason(app, node))
		}
		return nil, fmt.Errorf("app %s has no container on this cluster (corral finds it by the tag %s%s); `corral status` lists the apps", app, plan.TagAppPrefix, app)
	case 1:
		return cts[0], nil
	}
	var ids []string
	for _, ct := range cts {
		ids = append(ids, strconv.Itoa(ct.VMID))
	}
	return nil, fmt.Errorf("app %s has %d containers carrying its tag (%s), and corral cannot tell which is the app's (one was copied or tagged outside corral): remove the tag from the others, then try again", app, len(cts), strings.Join(ids, ", "))
}

// volumeNames maps the volids the keepers record to their names.
func volumeNames(obs *plan.Observed) map[string]plan.VolumeKey {
	out := map[string]plan.VolumeKey{}
	for _, ks := range obs.Keepers {
		for _, k := range ks {
			for vk, volid := range k.Records {
				out[volid] = vk
			}
		}
	}
	return out
}

// BackupExclusions lists what a vzdump of conf leaves out (seed 004
// §4.7): volume mount points with backup=0 and every bind or device mount
// point. names maps volids to the app's volume names.
func BackupExclusions(conf map[string]string, names map[string]plan.VolumeKey) []Excluded {
	out := []Excluded{}
	for _, key := range mpKeys(conf) {
		mp := plan.ParseMountPoint(conf[key])
		kind := mountKind(mp.Volume)
		e := Excluded{Key: key, Mount: mp.Path, Kind: kind, Source: mp.Volume, Name: names[mp.Volume].Name}
		switch {
		case kind == "bind":
			e.Reason = "a bind mount is not a volume: vzdump never includes it, and on another host its data is gone unless backed up separately"
		case kind == "device":
			e.Reason = "a device mount is not a volume: vzdump never includes it"
		case !mp.Backup:
			e.Reason = "backup=0: vzdump skips it; a restore recreates it empty"
		default:
			continue
		}
		out = append(out, e)
	}
	return out
}

// mountKind is PVE's mount point type for a mount point's source.
func mountKind(src string) string {
	switch {
	case strings.HasPrefix(src, "/dev/"):
		return "device"
	case strings.HasPrefix(src, "/"):
		return "bind"
	}
	return "volume"
}

// mpKeys are the mpN keys of conf in numeric order.
func mpKeys(conf map[string]string) []string {
	var keys []string
	for k := range conf {
		if isMP(k) {
			keys = append(keys, k)
		}
	}
	sort.Slice(keys, func(i, j int) bool {
		a, _ := strconv.Atoi(keys[i][2:])
		b, _ := strconv.Atoi(keys[j][2:])
		return a < b
	})
	return keys
}

// Backup backs up app's container with vzdump, waits for the task and
// checks its exit status: PVE answers the request 200 even when the
// token may not back the guest up and fails the task afterwards (seed 004
// §3.5), so only the task says whether an archive exists. It then finds
// the archive, says what it leaves out, and with Keep prunes the app's
// older corral archives.
func (e *Executor) Backup(ctx context.Context, obs *plan.Observed, app string, opts BackupOptions) (*BackupResult, error) {
	return (&backups{e.ops()}).backup(ctx, obs, app, opts)
}

// backups makes an app's vzdump archives and prunes the older ones.
type backups struct {
	*runner
}

// backup is Executor.Backup.
func (b *backups) backup(ctx context.Context, obs *plan.Observed, app string, opts BackupOptions) (*BackupResult, error) {
	if opts.Mode == "" {
		opts.Mode = "snapshot"
	}
	if opts.Storage == "" {
		opts.Storage = "local"
	}
	if IsVMApp(obs, app) {
		return b.backupVM(ctx, obs, app, opts) // vmbackup.go
	}
	ct, err := AppCT(obs, app)
	if err != nil {
		return nil, err
	}
	res := &BackupResult{App: app, VMID: ct.VMID, Node: ct.Node, Mode: opts.Mode, Storage: opts.Storage,
		Excluded: BackupExclusions(ct.Config, volumeNames(obs)), Pruned: []string{}, Warnings: []string{}}
	return b.vzdump(ctx, res, opts, fmt.Sprintf("ct %d", ct.VMID), func(log []string) {
		for _, line := range log {
			// vzdump backs a stopped guest up in stop mode, and falls back
			// from snapshot to suspend where a volume cannot snapshot.
			if m, ok := strings.CutPrefix(line, "INFO: backup mode: "); ok {
				res.Mode = strings.TrimSpace(m)
			}
		}
	})
}

// vzdump runs the backup task of res's guest (what names it, "ct 101"),
// hands its whole log to read (the log says which mode vzdump used, so it
// is read whether or not the observer shows it), and ends the backup:
// its warnings, duration, archive and pruning (finishBackup).
func (b *backups) vzdump(ctx context.Context, res *BackupResult, opts BackupOptions, what string, read func(log []string)) (*BackupResult, error) {
	app := res.App
	start := time.Now()
	err := b.step(app, "backup", fmt.Sprintf("%s to %s (%s mode)", what, opts.Storage, opts.Mode), func() error {
		upid, err := b.client.Backup(ctx, res.Node, res.VMID, pve.BackupOptions{Mode: opts.Mode, Storage: opts.Storage, Compress: "zstd", NotesTemplate: BackupNotes(app)})
		if err != nil {
			return explainBackupErr(err, res.VMID, opts.Storage)
		}
		res.UPID = upid
		wopts := pve.WaitOptions{Log: true}
		if wantsTaskLogs(b.obs()) {
			wopts.OnLog = func(line string) { b.obs().TaskLog(app, upid, line) }
		}
		tr, err := b.client.WaitTask(ctx, upid, wopts)
		if err != nil {
			return explainBackupErr(err, res.VMID, opts.Storage)
		}
		read(tr.Log)
		for _, w := range tr.Warnings {
			b.obs().Warn(app, w)
			res.Warnings = append(res.Warnings, w)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	res.Duration = time.Since(start)
	res.DurationMS = res.Duration.Milliseconds()
	return b.finishBackup(ctx, res, opts)
}

// finishBackup finds the archive the backup made (the newest with the
// app's notes on its storage) and, with Keep, prunes the older ones.
func (b *backups) finishBackup(ctx context.Context, res *BackupResult, opts BackupOptions) (*BackupResult, error) {
	app := res.App
	vols, err := b.client.Backups(ctx, res.Node, opts.Storage, res.VMID)
	if err != nil {
		return nil, fmt.Errorf("%s: the backup task ended OK but its archive could not be listed: %w", app, err)
	}
	var best *pve.Volume
	for i := range vols {
		v := &vols[i]
		if a, ours := ArchiveApp(v.Notes); a != app || !ours {
			continue
		}
		if best == nil || v.CTime > best.CTime || v.CTime == best.CTime && v.VolID > best.VolID {
			best = v
		}
	}
	if best == nil {
		return nil, fmt.Errorf("%s: the backup task ended OK but no archive with notes %q is on %s", app, BackupNotes(app), opts.Storage)
	}
	res.Archive, res.Size = best.VolID, best.Size
	if opts.Keep > 0 {
		pruned, err := b.prune(ctx, res.Node, app, opts.Storage, opts.Keep)
		res.Pruned = append(res.Pruned, pruned...)
		if err != nil {
			return res, fmt.Errorf("%s: backup %s made, but pruning older archives stopped: %w", app, res.Archive, err)
		}
	}
	return res, nil
}

// explainBackupErr adds what to do to a failed backup: a permission
// failure (in the request or, after a 200, in the task) names the
// privileges vzdump checks.
func explainBackupErr(err error, vmid int, storage string) error {
	if !pve.IsPermission(err) {
		return err
	}
	return fmt.Errorf("%w\nno archive was made: PVE accepted the request (HTTP 200) and checked the privileges inside the task; "+
		"the token (and, for a privilege-separated token, its user too) needs VM.Backup on /vms/%d and Datastore.AllocateSpace on /storage/%s", err, vmid, storage)
}

// Archive is one backup archive as `corral backups` lists it.
type Archive struct {
	App     string    `json:"app"`
	VolID   string    `json:"volid"`
	Node    string    `json:"node"`
	Storage string    `json:"storage"`
	VMID    int       `json:"vmid"`
	Size    int64     `json:"size"`
	Time    time.Time `json:"time"`
	// Protected archives are never pruned (by PVE or corral).
	Protected bool   `json:"protected"`
	Notes     string `json:"notes"`
	// By says how the archive was attributed to App: "notes" (corral's
	// notes) or "config" (the corral-app tag in the archived config).
	By string `json:"attributed_by"`
	// Corral: made by `corral backup`, so counted by keep.
	Corral bool `json:"corral"`
	// Kind is "vm" for a VM's archive (vzdump-qemu-…), "" for a
	// container's.
	Kind string `json:"kind,omitempty"`
}

// ListBackups lists the container and VM archives on every backup storage of
// every node, newest first, attributed to apps: by corral's notes, or —
// for archives made some other way (pct vzdump, a PVE backup job) — by
// the corral-app tag in the config stored in the archive (one
// extractconfig per such archive; one the token may not read stays
// unattributed). Archives of no corral app are left out. app "" lists
// every app's.
func ListBackups(ctx context.Context, c *pve.Client, obs *plan.Observed, app string) ([]Archive, error) {
	seen := map[string]bool{}
	out := []Archive{}
	for _, node := range obs.Nodes {
		storages, err := c.StorageList(ctx, node, "backup")
		if err != nil {
			return nil, fmt.Errorf("list backup storages on %s: %w", node, err)
		}
		for _, s := range storages {
			vols, err := c.Backups(ctx, node, s.Storage, 0)
			if err != nil {
				return nil, err
			}
			for _, v := range vols {
				if seen[v.VolID] || !strings.Contains(v.VolID, "vzdump-lxc-") && !IsVMArchive(v.VolID) {
					continue
				}
				seen[v.VolID] = true
				a := Archive{VolID: v.VolID, Node: node, Storage: s.Storage, VMID: int(v.VMID), Size: v.Size,
					Time: time.Unix(int64(v.CTime), 0).UTC(), Protected: bool(v.Protected), Notes: v.Notes}
				if IsVMArchive(v.VolID) {
					a.Kind = plan.KindVM
				}
				if name, ours := ArchiveApp(v.Notes); name != "" {
					a.App, a.Corral, a.By = name, ours, "notes"
				} else if text, err := c.BackupConfig(ctx, node, v.VolID); err == nil {
					if name := appOf(plan.ParseTags(configValue(text, "tags"))); name != "" {
						a.App, a.By = name, "config"
					}
				}
				if a.App == "" || app != "" && a.App != app {
					continue
				}
				out = append(out, a)
			}
		}
	}
	sort.SliceStable(out, func(i, j int) bool {
		if !out[i].Time.Equal(out[j].Time) {
			return out[i].Time.After(out[j].Time)
		}
		return out[i].VolID > out[j].VolID
	})
	return out, nil
}

// configValue reads key from the main section of a config file's text.
func configValue(text, key string) string {
	return parseConfigText(text)[key]
}

// parseConfigText reads the main section of a PVE config file: "#" lines
// are the description, "[…]" starts the snapshots.
func parseConfigText(text string) map[string]string {
	conf := map[string]string{}
	var desc []string
	for line := range strings.Lines(text) { // no slice of every line (issue 27)
		line = strings.TrimSuffix(line, "\n")
		if strings.HasPrefix(line, "[") {
			break
		}
		if d, ok := strings.CutPrefix(line, "#"); ok {
			desc = append(desc, unescapeDesc(d))
			continue
		}
		if k, v, ok := strings.Cut(line, ": "); ok && k != "" {
			conf[k] = v
		}
	}
	if len(desc) > 0 {
		conf["description"] = strings.Join(desc, "\n") + "\n"
	}
	return conf
}

// unescapeDesc undoes the %XX escapes PVE writes in "#" description
// lines.
func unescapeDesc(s string) string {
	if u, err := url.PathUnescape(s); err == nil {
		return u
	}
	return s
}

// prune deletes the app's corral archives on storage beyond the newest
// keep. Only archives whose notes say `corral backup` made them for app
// are counted or touched; protected ones are left (and not counted).
func (b *backups) prune(ctx context.Context, node, app, storage string, keep int) ([]string, error) {
	vols, err := b.client.Backups(ctx, node, storage, 0)
	if err != nil {
		return nil, err
	}
	var mine []pve.Volume
	for _, v := range vols {
		if a, ours := ArchiveApp(v.Notes); a == app && ours && !bool(v.Protected) {
			mine = append(mine, v)
		}
	}
	sort.Slice(mine, func(i, j int) bool {
		if mine[i].CTime != mine[j].CTime {
			return mine[i].CTime > mine[j].CTime
		}
		return mine[i].VolID > mine[j].VolID
	})
	var pruned []string
	for i := keep; i < len(mine); i++ {
		volid := mine[i].VolID
		err := b.step(app, "prune", volid, func() error {
			upid, err := b.client.DeleteVolume(ctx, node, storage, volid)
			if err != nil {
				return err
			}
			if upid == "" {
				return nil
			}
			return b.wait(ctx, app, upid)
		})
		if err != nil {
			return pruned, err
		}
		pruned = append(pruned, volid)
	}
	return pruned, nil
}

// snapshotTypes are the storage types on which PVE can snapshot a
// container volume (the storage plugins' volume_has_feature 'snapshot'
// for raw/subvol volumes).
var snapshotTypes = []string{"lvmthin", "zfspool", "rbd", "btrfs"}

// CanSnapshot reports whether PVE can snapshot ct, and if not, why: every
// mount point (rootfs and each mpN, keeper volumes attached to it
// included) must be a volume on a storage that snapshots (LVM-thin,
// ZFS, Ceph RBD, btrfs; seed 004 §4.5). A dir storage cannot.
func CanSnapshot(obs *plan.Observed, ct *plan.CT) (bool, string) {
	for _, key := range append([]string{"rootfs"}, mpKeys(ct.Config)...) {
		v, ok := ct.Config[key]
		if !ok {
			continue
		}
		mp := plan.ParseMountPoint(v)
		if kind := mountKind(mp.Volume); kind != "volume" {
			return false, fmt.Sprintf("%s is a %s mount (%s), which PVE cannot snapshot", key, kind, mp.Volume)
		}
		sid, _, _ := strings.Cut(mp.Volume, ":")
		typ := obs.StorageTypes[sid]
		if typ == "" {
			return false, fmt.Sprintf("%s is on storage %s, which no node lists", key, sid)
		}
		if !slices.Contains(snapshotTypes, typ) {
			return false, fmt.Sprintf("%s (%s) is on storage %s of type %s; PVE snapshots container volumes only on %s storage (\"snapshot feature is not available\")",
				key, mp.Volume, sid, typ, strings.Join(snapshotTypes, ", "))
		}
	}
	return true, ""
}

// SnapshotName is the default snapshot name: corral-YYYYMMDD-HHMMSS
// (PVE names start with a letter and hold letters, digits, - and _).
func SnapshotName(t time.Time) string { return "corral-" + t.UTC().Format("20060102-150405") }

func explainSnapErr(err error, vmid int, priv string) error {
	if err == nil {
		return nil
	}
	if pve.IsPermission(err) {
		return fmt.Errorf("%w (the token and its user need %s on /vms/%d)", err, priv, vmid)
	}
	if errors.Is(err, pve.ErrSnapshotUnsupported) {
		return fmt.Errorf("%w: a volume of ct %d is on a storage that cannot snapshot (a dir storage, say) or is a bind mount", err, vmid)
	}
	return err
}

// ctApp is the app name in ct's tags ("" for none).
func ctApp(ct *plan.CT) string { return appOf(plan.ParseTags(ct.Config["tags"])) }

// SnapshotInfo is one snapshot as `corral snapshots` lists it.
type SnapshotInfo struct {
	Name        string    `json:"name"`
	Time        time.Time `json:"time"`
	Description string    `json:"description"`
	Parent      string    `json:"parent,omitempty"`
	// Current: the container descends from this snapshot (a rollback to
	// it undoes only what changed since).
	Current bool `json:"current"`
	// RAM is a VM snapshot's: whether it holds the RAM state too (qm
	// snapshot --vmstate; corral takes none), nil for a container's.
	RAM *bool `json:"ram,omitempty"`
}

// ListSnapshots lists ct's snapshots, oldest first.
func ListSnapshots(ctx context.Context, c *pve.Client, ct *plan.CT) ([]SnapshotInfo, error) {
	snaps, err := c.Snapshots(ctx, ct.Node, ct.VMID)
	if err != nil {
		return nil, err
	}
	return snapshotInfos(snaps, false), nil
}

// snapshotInfos turns a guest's snapshot list into its snapshots, oldest
// first, the one the guest descends from marked current ("current" is
// PVE's entry for the guest itself). A VM's (vm) say whether they hold
// the RAM state.
func snapshotInfos(snaps []pve.Snapshot, vm bool) []SnapshotInfo {
	parent := ""
	for _, s := range snaps {
		if s.Name == "current" {
			parent = s.Parent
		}
	}
	out := []SnapshotInfo{}
	for _, s := range snaps {
		if s.Name == "current" {
			continue
		}
		si := SnapshotInfo{Name: s.Name, Time: time.Unix(int64(s.SnapTime), 0).UTC(),
			Description: strings.TrimSpace(s.Description), Parent: s.Parent, Current: s.Name == parent}
		if vm {
			ram := bool(s.VMState)
			si.RAM = &ram
		}
		out = append(out, si)
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Time.Before(out[j].Time) })
	return out
}

// sortedVolumeKeys returns the keys of m in string order.
func sortedVolumeKeys[V any](m map[plan.VolumeKey]V) []plan.VolumeKey {
	keys := slices.Collect(maps.Keys(m))
	sort.Slice(keys, func(i, j int) bool { return keys[i].String() < keys[j].String() })
	return keys
}
