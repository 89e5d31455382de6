package plan

import (
	"fmt"
	"maps"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/corralhq/corral/internal/manifest"
)

// A keeper records which volume is which in two places PVE keeps:
//
//   - the mount path of the volume's mpN entry on the keeper
//     (mpN: local-lvm:vm-900-disk-3,mp=/corral/<app>/<name>), written by
//     the same PUT that allocates the volume, so a volume never exists
//     unrecorded; the keeper never starts, so nothing is ever mounted
//     there;
//   - a line per volume in the keeper's Notes (description), for people
//     reading the web UI, and as a second copy.
//
// The mount path is the record. A Notes line edited or deleted in the web
// UI loses nothing (the next apply writes the Notes again), and a mount
// point removed in the web UI (PVE keeps the volume as unusedN) is put
// back from its Notes line. Only both gone at once forgets a volume, and
// then the volume is still kept, reported as orphaned.

// MountRecords reads the records from a keeper's config: every mpN whose
// mount path is KeeperMountPath.
func MountRecords(conf map[string]string) map[VolumeKey]string {
	out := map[VolumeKey]string{}
	for _, key := range sortedConfigKeys(conf, "mp") {
		mp := ParseMountPoint(conf[key])
		if vk, ok := ParseKeeperMountPath(mp.Path); ok && mp.Volume != "" {
			out[vk] = mp.Volume
		}
	}
	return out
}

// MountKey is the keeper's mpN entry that records vk, or "".
func MountKey(conf map[string]string, vk VolumeKey) string {
	for _, key := range sortedConfigKeys(conf, "mp") {
		if got, ok := ParseKeeperMountPath(ParseMountPoint(conf[key]).Path); ok && got == vk {
			return key
		}
	}
	return ""
}

// KeeperRecords is what a keeper records: its mount records, and the
// Notes records whose mount point was removed while PVE kept the volume
// as the keeper's unusedN (lost, to be mounted again by a repair).
func KeeperRecords(conf map[string]string) (records, lost map[VolumeKey]string) {
	records = MountRecords(conf)
	mounted := map[string]bool{}
	for _, volid := range records {
		mounted[volid] = true
	}
	unused := map[string]bool{}
	for _, key := range sortedConfigKeys(conf, "unused") {
		unused[conf[key]] = true
	}
	for vk, volid := range ParseKeeperRecords(conf["description"]) {
		if _, ok := records[vk]; ok || mounted[volid] || !unused[volid] {
			continue
		}
		if lost == nil {
			lost = map[VolumeKey]string{}
		}
		lost[vk] = volid
		records[vk] = volid
	}
	return records, lost
}

// Lease is corral's lock on a node: one line in the Notes of the node's
// first keeper, written with a compare-and-swap on the keeper's config
// digest, so two corral processes cannot both take it. A holder renews it
// while it works; a lease past Until was left by a process that died and
// may be taken over.
type Lease struct {
	ID      string    // random, the holder's own
	Holder  string    // user@host:pid
	Command string    // apply, destroy, …
	Since   time.Time // when it was taken
	Until   time.Time // when it lapses unless renewed
	// Life is set on a lease a keeper's create wrote into its Notes: its
	// holder cannot renew it while the create runs (the config is
	// locked), however long that takes, so it holds past Until while
	// the keeper is being created and for Life after a reader first
	// finds the keeper created (internal/apply, lockscan.go). The first
	// renewal clears it.
	Life time.Duration
}

const markerLease = "corral-lock: "

func (l *Lease) line() string {
	life := ""
	if l.Life > 0 {
		life = fmt.Sprintf(" life=%d", max(1, int64(l.Life.Round(time.Second)/time.Second)))
	}
	return fmt.Sprintf("%s%s holder=%s cmd=%s since=%d until=%d%s\n", markerLease, l.ID,
		strings.ReplaceAll(l.Holder, " ", "_"), strings.ReplaceAll(l.Command, " ", "_"), l.Since.Unix(), l.Until.Unix(), life)
}

// String says who holds the lease, for messages.
func (l *Lease) String() string {
	return fmt.Sprintf("corral %s run by %s since %s", strings.ReplaceAll(l.Command, "_", " "), l.Holder, l.Since.UTC().Format(time.RFC3339))
}

// ParseLease reads the lease line of a keeper's Notes, or nil.
func ParseLease(desc string) *Lease {
	for _, line := range manifest.DescriptionLines(desc) {
		v, ok := strings.CutPrefix(manifest.MarkerLine(line), markerLease)
		if !ok {
			continue
		}
		f := strings.Fields(v)
		if len(f) == 0 {
			continue
		}
		l := &Lease{ID: f[0]}
		for _, kv := range f[1:] {
			k, val, _ := strings.Cut(kv, "=")
			switch k {
			case "holder":
				l.Holder = val
			case "cmd":
				l.Command = val
			case "since", "until", "life":
				n, err := strconv.ParseInt(val, 10, 64)
				if err != nil {
					continue
				}
				switch k {
				case "since":
					l.Since = time.Unix(n, 0)
				case "until":
					l.Until = time.Unix(n, 0)
				default:
					l.Life = time.Duration(n) * time.Second
				}
			}
		}
		return l
	}
	return nil
}

// KeeperNotes is everything corral writes in a keeper's Notes.
type KeeperNotes struct {
	Records map[VolumeKey]string
	Intents map[VolumeKey]AdoptIntent
	Lease   *Lease
	// Projects maps an app with a record or an adoption to its project
	// ("corral-project: app=project"): a keeper is shared by every project
	// on its node, and once an app's container is gone this line is what
	// says whose its volumes are (see Prune). It is written with the
	// first volume of the app, before PVE has allocated it (so before it
	// is a record), and kept after the app's last volume is freed: a line
	// counts only while the keeper records a volume of its app
	// (Observed.RecordProject).
	Projects map[string]string
	// Declared maps an app to the OriginID of the manifest that declared
	// it ("corral-declared: app=ID"), written and kept with its project
	// line: under a defaulted project, prune frees only volumes this very
	// manifest declared.
	Declared map[string]string
}

// ParseKeeperNotes reads a keeper's Notes.
func ParseKeeperNotes(desc string) KeeperNotes {
	return KeeperNotes{Records: ParseKeeperRecords(desc), Intents: ParseKeeperIntents(desc), Lease: ParseLease(desc),
		Projects: ParseKeeperProjects(desc), Declared: ParseKeeperDeclared(desc)}
}

// Render writes the Notes: the header, the lease, then the records and
// the adoptions in flight, sorted.
func (n KeeperNotes) Render() string {
	var b strings.Builder
	b.WriteString(keeperHeader + "\n")
	if n.Lease != nil {
		b.WriteString(n.Lease.line())
	}
	keys := make([]VolumeKey, 0, len(n.Records))
	for k := range n.Records {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return keys[i].String() < keys[j].String() })
	for _, k := range keys {
		fmt.Fprintf(&b, "%s%s=%s\n", markerVolume, k, n.Records[k])
	}
	ikeys := make([]VolumeKey, 0, len(n.Intents))
	for k := range n.Intents {
		ikeys = append(ikeys, k)
	}
	sort.Slice(ikeys, func(i, j int) bool { return ikeys[i].String() < ikeys[j].String() })
	for _, k := range ikeys {
		fmt.Fprintf(&b, "%s%s=%s>%s\n", markerAdopting, k, n.Intents[k].Source, n.Intents[k].Key)
	}
	for _, app := range slices.Sorted(maps.Keys(n.Projects)) {
		if n.Projects[app] != "" {
			fmt.Fprintf(&b, "%s%s=%s\n", markerProject, app, n.Projects[app])
		}
	}
	for _, app := range slices.Sorted(maps.Keys(n.Declared)) {
		if n.Declared[app] != "" {
			fmt.Fprintf(&b, "%s%s=%s\n", markerDeclared, app, n.Declared[app])
		}
	}
	return b.String()
}

// NewKeeper is the observed keeper of a config read from PVE.
func NewKeeper(vmid int, node string, conf map[string]string) *Keeper {
	recs, lost := KeeperRecords(conf)
	notes := ParseKeeperNotes(conf["description"])
	return &Keeper{VMID: vmid, Node: node, Protected: conf["protection"] == "1", Config: conf,
		Records: recs, Lost: lost, Intents: notes.Intents, Lease: notes.Lease, Projects: notes.Projects, Declared: notes.Declared}
}

// RestoreMarker is the description line of a restore's new container
// ("corral-restore: stamp=…"): the suffix its volumes' temporary records
// carry, so an interrupted restore can be finished.
func RestoreMarker(stamp string) string { return markerRestore + "stamp=" + stamp + "\n" }

// ParseRestoreMarker returns the stamp of a restore marker, or "".
func ParseRestoreMarker(desc string) string {
	for _, line := range manifest.DescriptionLines(desc) {
		if v, ok := strings.CutPrefix(manifest.MarkerLine(line), markerRestore+"stamp="); ok {
			return strings.TrimSpace(v)
		}
	}
	return ""
}

// WithoutRestoreMarker drops the restore marker line.
func WithoutRestoreMarker(desc string) string {
	var b strings.Builder
	for _, line := range strings.SplitAfter(desc, "\n") {
		if !strings.HasPrefix(manifest.MarkerLine(line), markerRestore) {
			b.WriteString(line)
		}
	}
	return b.String()
}
