package plan

import (
	"crypto/sha256"
	"encoding/hex"
	"iter"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/corralhq/corral/internal/manifest"
	"github.com/corralhq/corral/internal/propstr"
	"github.com/corralhq/corral/internal/pvesize"
)

// Tags and markers by which corral finds its containers in PVE itself.
const (
	TagManaged   = "corral"
	TagAppPrefix = "corral-app-"
	// TagProjectPrefix + the manifest's project is on every app CT
	// (keepers are shared by every project on a node and carry none).
	TagProjectPrefix = "corral-project-"
	TagKeeper        = "corral-keeper"
	// A restore's new container carries TagRestoringPrefix+app until it
	// runs; the container it replaces then carries TagReplacedPrefix+app
	// until it is destroyed. Neither counts as the app's container, so an
	// interrupted restore never leaves two of them (see Observed.Restores).
	TagRestoringPrefix = "corral-restoring-"
	TagReplacedPrefix  = "corral-replaced-"
	KeeperName         = "corral-keeper"

	markerApp      = "corral-app: "
	markerTemplate = "corral-template: "
	markerHostKey  = "corral-hostkey: "
	markerGuest    = "corral-provisioned: "
	markerVolume   = "corral-volume: "
	markerAdopting = "corral-adopting: "
	markerProject  = "corral-project: "
	markerRestore  = "corral-restore: "
	markerDeclared = "corral-declared: "
	markerCopyOf   = "corral-copy-of: "
	markerHeader   = "managed by corral; lines starting with 'corral-' are read back by corral"
	keeperHeader   = "corral keeper: this container owns the volumes corral keeps for its apps; corral writes these Notes and reads them back. " +
		"Never start it, keep protection on, and edit neither these lines nor its mount points (/corral/APP/VOLUME): each names whose data a volume holds."
)

// AppTags is the tag set of an app's CT: corral's tags (managed, app and,
// when the app has one, project) plus the user's, lower-cased, sorted and
// deduplicated as PVE stores them (pve-guest-common get_unique_tags), so
// that "Prod" in a manifest does not look like a change on every plan
// against real PVE.
func AppTags(a App) []string {
	tags := []string{TagManaged, TagAppPrefix + a.Name}
	if a.Project != "" {
		tags = append(tags, TagProjectPrefix+a.Project)
	}
	for _, t := range a.Tags {
		tags = append(tags, strings.ToLower(t))
	}
	sort.Strings(tags)
	return slices.Compact(tags)
}

// ParseTags splits PVE's tag string (';', ',' or space separated).
func ParseTags(s string) []string {
	f := strings.FieldsFunc(s, func(r rune) bool { return r == ';' || r == ',' || r == ' ' })
	sort.Strings(f)
	return slices.Compact(f)
}

// AppDescription is the CT description: the user's text, then corral's
// marker lines (app name and template, which PVE does not keep).
func AppDescription(a App) string {
	var b strings.Builder
	if d := strings.TrimSpace(a.Description); d != "" {
		b.WriteString(d + "\n\n")
	}
	b.WriteString(markerHeader + "\n")
	b.WriteString(markerApp + a.Name + "\n")
	b.WriteString(markerTemplate + a.Template + "\n")
	if a.Origin != "" {
		b.WriteString(markerDeclared + a.Origin + "\n")
	}
	return b.String()
}

// OriginID is the short form of an origin the keepers record beside a
// volume's project (a keeper's Notes have little room): the first 12 hex
// digits of its SHA-256.
func OriginID(origin string) string {
	sum := sha256.Sum256([]byte(origin))
	return hex.EncodeToString(sum[:6])
}

// WithHostKey appends the pinned SSH host key line to an app description
// (see Marker.HostKey); "" leaves it as it is.
func WithHostKey(desc, hostKey string) string {
	if hostKey == "" {
		return desc
	}
	return desc + markerHostKey + hostKey + "\n"
}

// WithGuestMarkers replaces the host key and provisioned lines of a
// description (an empty field drops its line), keeping its steps line.
func WithGuestMarkers(desc string, hostKey, provisioned string) string {
	return WithGuestRecord(desc, hostKey, provisioned, ParseMarker(desc).Steps)
}

// WithGuestRecord replaces the host key, provisioned and steps lines of a
// description (an empty field drops its line). The steps line is left
// out when the description would grow past what PVE keeps: a plan then
// says that the steps are compared in the guest.
func WithGuestRecord(desc string, hostKey, provisioned, steps string) string {
	var b strings.Builder
	for _, line := range strings.SplitAfter(desc, "\n") {
		t := manifest.MarkerLine(line)
		if line == "" || strings.HasPrefix(t, markerHostKey) || strings.HasPrefix(t, markerGuest) || strings.HasPrefix(t, markerSteps) || strings.HasPrefix(t, markerStopped) {
			continue
		}
		b.WriteString(line)
		if !strings.HasSuffix(line, "\n") {
			b.WriteString("\n")
		}
	}
	out := WithHostKey(b.String(), hostKey)
	if provisioned != "" {
		out += markerGuest + provisioned + "\n"
	}
	if line := markerSteps + steps + "\n"; steps != "" && len(out)+len(line) <= maxGuestDescription {
		out += line
	}
	return out
}

// UserDescription is the part of a description the user wrote: every
// line of corral's (its header and the lines that start with corral-)
// left out, so that a plan's description diff shows only what the
// manifest changes.
func UserDescription(desc string) string {
	var keep []string
	for _, line := range strings.Split(desc, "\n") {
		t := manifest.MarkerLine(line)
		if t == markerHeader || manifest.ReservedLine(line) {
			continue
		}
		keep = append(keep, line)
	}
	return strings.TrimSpace(strings.Join(keep, "\n"))
}

// Marker is what corral reads back from a CT description.
type Marker struct {
	App      string
	Template string
	// HostKey is the container's SSH host key as corral first saw it
	// (authorized_keys form), pinned in PVE itself so that no local state
	// is needed: a different key later is an attack or a foreign change.
	HostKey string
	// Provisioned is the App.GuestDigest of the last guest work that
	// finished.
	Provisioned string
	// Steps is the per-step record of that work ("id=sum …", see
	// StepsRecord), "" when there is none.
	Steps string
	// Declared is the origin of the manifest that last declared the app
	// (App.Origin); "" for a container made before origins were recorded.
	Declared string
	// CopyOf is the app a container was restored from under another
	// name (restore --as) while its manifest does not list the copy; ""
	// otherwise. See CT.Copy.
	CopyOf string
	// Stopped is where the last apply's provisioning stopped, or nil
	// when it finished (markProvisioned drops the line).
	Stopped    *Stopped
	stoppedRaw string // the Stopped line as written, kept by config edits
}

// ParseMarker reads corral's marker lines from a description. Lines are
// split and normalized by manifest.DescriptionLines and MarkerLine, the
// functions the manifest's check of user descriptions uses, so no line a
// user wrote can be read as a marker.
func ParseMarker(desc string) Marker {
	var m Marker
	// Each plain marker fills one field with the rest of its line; a
	// later line with the same marker wins, as it always has.
	fields := []struct {
		prefix string
		to     *string
	}{
		{markerApp, &m.App}, {markerTemplate, &m.Template}, {markerHostKey, &m.HostKey},
		{markerGuest, &m.Provisioned}, {markerSteps, &m.Steps}, {markerDeclared, &m.Declared},
		{markerCopyOf, &m.CopyOf},
	}
	for _, line := range manifest.DescriptionLines(desc) {
		line = manifest.MarkerLine(line)
		for _, f := range fields {
			if v, ok := strings.CutPrefix(line, f.prefix); ok {
				*f.to = strings.TrimSpace(v)
			}
		}
		if v, ok := strings.CutPrefix(line, markerStopped); ok {
			m.Stopped, m.stoppedRaw = parseStopped(v), strings.TrimSpace(v)
		}
	}
	return m
}

// CopyMarker is the line that marks a container restored as a copy of
// app (see CT.Copy), for its description.
func CopyMarker(app string) string { return markerCopyOf + app + "\n" }

// Copy is the app ct is a copy of (restore --as), or "". A copy carries
// its project's tag and declarer, so that corral destroy APP from that
// manifest removes it and volumes prune frees its volumes afterwards, but
// the project's apply neither deletes it for being unlisted nor warns
// about it: a copy is run beside the app on purpose. Once the manifest
// lists it, apply rewrites its description and it is an app like any.
func (ct *CT) Copy() string { return ParseMarker(ct.Config["description"]).CopyOf }

// KeeperDescription renders the keeper's volume records.
func KeeperDescription(records map[VolumeKey]string) string {
	return KeeperDescriptionWith(records, nil)
}

// AdoptIntent is written to the keeper just before corral moves a volume
// into it ("corral-adopting: app/name=SOURCE>unusedN"). The move renames the
// volume, so if corral stops after the move but before recording the new
// volid, the intent says which keeper entry the volume became.
type AdoptIntent struct {
	Source string // the volid being adopted
	Key    string // the keeper's unusedN it is moved to
}

// KeeperDescriptionWith renders the records and the adoptions in flight.
func KeeperDescriptionWith(records map[VolumeKey]string, intents map[VolumeKey]AdoptIntent) string {
	return KeeperNotes{Records: records, Intents: intents}.Render()
}

// markerPairs yields the "KEY=VALUE" of every description line that
// starts with marker, untrimmed: the keeper's records (volumes, adoptions,
// projects, declarers) are all such lines, and each reader checks its own
// key and value shape.
func markerPairs(desc, marker string) iter.Seq2[string, string] {
	return func(yield func(string, string) bool) {
		for _, line := range manifest.DescriptionLines(desc) {
			v, ok := strings.CutPrefix(manifest.MarkerLine(line), marker)
			if !ok {
				continue
			}
			if k, val, ok := strings.Cut(v, "="); ok && !yield(k, val) {
				return
			}
		}
	}
}

// appValues reads the "app=value" lines of marker, both sides trimmed and
// non-empty.
func appValues(desc, marker string) map[string]string {
	out := map[string]string{}
	for app, v := range markerPairs(desc, marker) {
		if app, v = strings.TrimSpace(app), strings.TrimSpace(v); app != "" && v != "" {
			out[app] = v
		}
	}
	return out
}

// ParseKeeperProjects reads "corral-project: app=project" lines.
func ParseKeeperProjects(desc string) map[string]string { return appValues(desc, markerProject) }

// ParseKeeperDeclared reads "corral-declared: app=ID" lines.
func ParseKeeperDeclared(desc string) map[string]string { return appValues(desc, markerDeclared) }

// ParseKeeperIntents reads "corral-adopting: app/name=SOURCE>unusedN" lines.
func ParseKeeperIntents(desc string) map[VolumeKey]AdoptIntent {
	out := map[VolumeKey]AdoptIntent{}
	for key, rest := range markerPairs(desc, markerAdopting) {
		app, name, ok := strings.Cut(key, "/")
		src, to, ok2 := strings.Cut(rest, ">")
		if ok && ok2 && app != "" && name != "" && src != "" && to != "" {
			out[VolumeKey{app, name}] = AdoptIntent{Source: strings.TrimSpace(src), Key: strings.TrimSpace(to)}
		}
	}
	return out
}

// ParseKeeperRecords reads "corral-volume: app/name=volid" lines.
func ParseKeeperRecords(desc string) map[VolumeKey]string {
	out := map[VolumeKey]string{}
	for key, volid := range markerPairs(desc, markerVolume) {
		app, name, ok := strings.Cut(key, "/")
		if ok && app != "" && name != "" && volid != "" {
			out[VolumeKey{app, name}] = strings.TrimSpace(volid)
		}
	}
	return out
}

// KeeperMountPath is the mount path of a volume's mpN entry on the keeper
// (mpN=STORAGE:SIZE,mp=/corral/<app>/<name>): the record of whose it is,
// written by the very PUT that allocates the volume (see MountRecords).
func KeeperMountPath(k VolumeKey) string { return "/corral/" + k.App + "/" + k.Name }

// ParseKeeperMountPath is the inverse of KeeperMountPath.
func ParseKeeperMountPath(p string) (VolumeKey, bool) {
	rest, ok := strings.CutPrefix(p, "/corral/")
	if !ok {
		return VolumeKey{}, false
	}
	app, name, ok := strings.Cut(rest, "/")
	if !ok || app == "" || name == "" || strings.Contains(name, "/") {
		return VolumeKey{}, false
	}
	return VolumeKey{app, name}, true
}

// Net0 is the desired net0 value (PVE adds hwaddr and type itself).
func Net0(a App) string {
	p := []string{"name=eth0", "bridge=" + a.Bridge}
	if a.Gateway != "" {
		p = append(p, "gw="+a.Gateway)
	}
	p = append(p, "ip="+a.IP)
	return strings.Join(p, ",")
}

// InPlaceConfig is the part of the desired config that PVE changes in
// place, as key → raw value, compared key by key with the observed config.
func InPlaceConfig(a App) map[string]string {
	c := map[string]string{
		"cores":       strconv.Itoa(a.Cores),
		"memory":      strconv.Itoa(a.MemoryMiB),
		"swap":        strconv.Itoa(a.SwapMiB),
		"hostname":    a.Name,
		"onboot":      boolStr(a.OnBoot),
		"tags":        strings.Join(AppTags(a), ";"),
		"description": AppDescription(a),
		"net0":        Net0(a),
		"features":    "",
		"nameserver":  strings.Join(a.DNS, " "),
	}
	if a.Nesting {
		c["features"] = "nesting=1"
	}
	return c
}

// KeepRootFeatures adds to the wanted features every flag other than
// nesting that the container has: only root@pam can set or clear those
// (behaviour.md §c), so an administrator set them on purpose (keyctl for
// Docker) and corral leaves them be.
func KeepRootFeatures(want, got string) string {
	var out []string
	if want != "" {
		out = append(out, want)
	}
	for _, item := range strings.Split(got, ",") {
		if k, _, _ := strings.Cut(item, "="); item != "" && k != "nesting" {
			out = append(out, item)
		}
	}
	return strings.Join(out, ",")
}

// HasFeature reports whether a features value sets flag=1.
func HasFeature(features, flag string) bool {
	for _, item := range strings.Split(features, ",") {
		if k, v, _ := strings.Cut(item, "="); k == flag && truthy(v) {
			return true
		}
	}
	return false
}

// KeyctlCommand is the one-time root@pam command that lets Docker run in
// an unprivileged container.
func KeyctlCommand(vmid int) string {
	id := "<vmid>"
	if vmid != 0 {
		id = strconv.Itoa(vmid)
	}
	return "pct set " + id + " -features nesting=1,keyctl=1"
}

// restartKeys are in-place changes that PVE applies only at the next start
// when the CT runs (behaviour.md §e: left pending).
var restartKeys = map[string]bool{"features": true, "nameserver": true}

func boolStr(b bool) string {
	if b {
		return "1"
	}
	return "0"
}

// sameValue compares a desired and an observed raw value for key,
// normalizing what PVE rewrites (net0 gains hwaddr/type, tags may be
// reordered, booleans print as 0/1, descriptions end in a newline).
func sameValue(key, want, got string) bool {
	switch key {
	case "net0":
		return sameProps(want, got, "hwaddr", "type", "firewall")
	case "tags":
		return slices.Equal(ParseTags(want), ParseTags(got))
	case "onboot":
		return truthy(want) == truthy(got)
	case "description":
		return strings.TrimSpace(want) == strings.TrimSpace(got)
	case "features":
		return sameProps(want, got)
	}
	return want == got
}

func truthy(s string) bool { return s == "1" || s == "true" || s == "yes" || s == "on" }

// sameProps compares two property strings as sets of key=value, ignoring
// the named keys (which PVE fills in) and false-valued booleans.
func sameProps(a, b string, ignore ...string) bool {
	pa, pb := props(a, ignore), props(b, ignore)
	if len(pa) != len(pb) {
		return false
	}
	for k, v := range pa {
		if pb[k] != v {
			return false
		}
	}
	return true
}

func props(s string, ignore []string) map[string]string {
	m := map[string]string{}
	for _, item := range strings.Split(s, ",") {
		if item == "" {
			continue
		}
		k, v, _ := strings.Cut(item, "=")
		if slices.Contains(ignore, k) || v == "0" {
			continue
		}
		m[k] = v
	}
	return m
}

// MountPoint is a parsed rootfs/mpN value as corral needs it.
type MountPoint struct {
	Volume string
	Path   string
	Backup bool
	Size   string
}

// ParseMountPoint reads a rootfs/mpN value ("volid,mp=/path,backup=1,
// size=8G") with the one parser of the format (propstr). A value PVE
// wrote always parses; one that does not keeps at least its volume.
func ParseMountPoint(s string) MountPoint {
	pm, err := propstr.ParseMountPoint(s)
	if err != nil {
		v, _, _ := strings.Cut(s, ",")
		if strings.Contains(v, "=") {
			v = ""
		}
		return MountPoint{Volume: v}
	}
	m := MountPoint{Volume: pm.Volume, Path: pm.Path, Backup: pm.Backup != nil && *pm.Backup}
	if pm.Size != nil {
		m.Size = pvesize.Format(*pm.Size)
	}
	return m
}

// AttachValue is the mpN value that attaches an existing volume: no size=
// (seed 000: size= with an existing volume confuses the parser), backup
// stated explicitly.
func AttachValue(volid, path string, backup bool) string {
	return AttachMount(volid, path, backup).String()
}

// AttachMount is AttachValue as a mount point, for a typed write.
func AttachMount(volid, path string, backup bool) propstr.MountPoint {
	return propstr.MountPoint{Volume: volid, Path: path, Backup: &backup}
}

// ParseSizeString parses PVE's size= values (8G, 512M, 1T, bytes) with
// pvesize.Parse.
func ParseSizeString(s string) (int64, bool) {
	n, err := pvesize.Parse(s)
	return n, err == nil
}

// GiB renders bytes as PVE's STORAGE:SIZE_IN_GiB number (fractions allowed).
func GiB(b int64) string {
	return strconv.FormatFloat(float64(b)/float64(1<<30), 'f', -1, 64)
}
