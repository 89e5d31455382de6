package plan

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/corralhq/corral/internal/manifest"
)

// corral knows each of its own kinds of container by several signals at
// once: a keeper by its tag (corral-keeper), its name, the header and
// corral-volume lines of its Notes, and its mount points under /corral/;
// a carrier by its tag (corral-carrier), name, Notes header and move
// line. The tags are what corral lists containers by, so a keeper whose
// tag was edited in the web UI would simply not be seen: its node would
// look keeperless, and every volume it holds would look lost. A
// container that shows a kind's other signals without its tag is
// therefore *damaged*, never absent: the plan refuses every app whose data
// it may hold and creates no keeper or volume on its node until the tags
// are back (refuse, never guess). corral does not put the tags back
// itself: only a human can tell whether the container was retired on
// purpose, and the tag is the one edit that says so.

// Damaged is one of corral's keepers or carriers whose tags no longer say
// what its other signals do.
type Damaged struct {
	Kind string // "keeper" or "carrier"
	// VM: a keeper VM (vmkeeper.go), not a CT.
	VM   bool
	VMID int
	Node string
	// Tags are its tags as PVE lists them now.
	Tags []string
	// Signals are the signals it still shows, in words.
	Signals []string
	// Records are the volumes its mount points and Notes name, by app and
	// volume: the data corral would otherwise take for lost.
	Records map[VolumeKey]string
	// Volumes are every volume it owns or references (mpN, unusedN).
	Volumes []string
	// App is the app a carrier moves ("" for a keeper).
	App string
}

// WantTags are the tags that make the container recognized again.
func (d *Damaged) WantTags() string {
	if d.Kind == "carrier" && d.App != "" {
		return strings.Join([]string{TagManaged, TagCarrier, TagMovingPrefix + d.App}, ";")
	}
	if d.Kind == "carrier" {
		return TagManaged + ";" + TagCarrier
	}
	return TagManaged + ";" + TagKeeper
}

// Apps are the apps whose data it may hold.
func (d *Damaged) Apps() []string {
	apps := map[string]bool{}
	if d.App != "" {
		apps[d.App] = true
	}
	for vk := range d.Records {
		apps[vk.App] = true
	}
	return slices.Sorted(maps.Keys(apps))
}

// Holds lists what it holds, for messages ("alpha/a (local-lvm:vm-100-disk-1), …").
func (d *Damaged) Holds() string {
	var parts []string
	named := map[string]bool{}
	for _, vk := range sortedVolumeKeys(d.Records) {
		parts = append(parts, fmt.Sprintf("%s (%s)", vk, d.Records[vk]))
		named[d.Records[vk]] = true
	}
	for _, v := range d.Volumes {
		if !named[v] {
			parts = append(parts, v)
		}
	}
	if len(parts) == 0 {
		return "no volume"
	}
	return strings.Join(parts, ", ")
}

// Problem is the whole story in one message: which container, what
// disagrees, what it holds and the one command that repairs it.
func (d *Damaged) Problem() string {
	tags := "no tags"
	if len(d.Tags) > 0 {
		tags = "tags " + strings.Join(d.Tags, ";")
	}
	want := TagKeeper
	if d.Kind == "carrier" {
		want = TagCarrier
	}
	guest, cmd := "CT", "pct"
	if d.VM {
		guest, cmd = "VM", "qm"
	}
	return fmt.Sprintf("%s %s %d on %s is damaged: it has %s (not %s) but %s, so it is corral's %s; it holds %s. corral changes nothing that data may belong to until it is recognized again: put its tags back with `%s set %d --tags '%s'` on node %s (or the same tags in the web UI), then run corral again",
		d.Kind, guest, d.VMID, d.Node, tags, want, strings.Join(d.Signals, ", "), d.Kind, d.Holds(), cmd, d.VMID, d.WantTags(), d.Node)
}

// ReadDamaged says whether a container that does not carry the tag of
// corral's keepers or carriers shows their other signals, and how. It
// returns nil for a container that holds nothing of corral's: a leftover
// shell with a keeper's name but no volume holds no data to protect.
func ReadDamaged(vmid int, node, name string, tags []string, conf map[string]string) *Damaged {
	if slices.Contains(tags, TagKeeper) || slices.Contains(tags, TagCarrier) {
		return nil
	}
	desc := conf["description"]
	if ParseMarker(desc).App != "" {
		return nil // an app's container: recognize() knows it by its marker
	}
	d := &Damaged{VMID: vmid, Node: node, Tags: tags}
	for _, key := range sortedConfigKeys(conf, "mp") {
		if v := ParseMountPoint(conf[key]).Volume; v != "" {
			d.Volumes = append(d.Volumes, v)
		}
	}
	for _, key := range sortedConfigKeys(conf, "unused") {
		d.Volumes = append(d.Volumes, conf[key])
	}
	if notes, ok := ParseCarrierNotes(desc); ok || hasHeader(desc, carrierHeader) || name == CarrierName && len(d.Volumes) > 0 {
		d.Kind, d.App = "carrier", notes.App
		d.signal(name == CarrierName, "its name is "+CarrierName)
		d.signal(hasHeader(desc, carrierHeader), "its Notes carry corral's carrier header")
		d.signal(ok, "its Notes name the move of app "+notes.App)
		d.Records = map[VolumeKey]string{}
		for vk, in := range notes.Carrying {
			d.Records[vk] = in.Source
		}
		d.signal(len(d.Records) > 0, strconv.Itoa(len(d.Records))+" corral-carrying line(s)")
		return d
	}
	records, _ := KeeperRecords(conf)
	notes := ParseKeeperRecords(desc)
	if !hasHeader(desc, keeperHeader) && len(records) == 0 && len(notes) == 0 {
		return nil
	}
	d.Kind = "keeper"
	d.Records = records
	for vk, v := range notes {
		if _, ok := d.Records[vk]; !ok && slices.Contains(d.Volumes, v) {
			d.Records[vk] = v
		}
	}
	d.signal(name == KeeperName, "its name is "+KeeperName)
	d.signal(hasHeader(desc, keeperHeader), "its Notes carry corral's keeper header")
	d.signal(len(notes) > 0, strconv.Itoa(len(notes))+" corral-volume line(s) in its Notes")
	d.signal(len(MountRecords(conf)) > 0, strconv.Itoa(len(MountRecords(conf)))+" mount point(s) under /corral/")
	d.signal(conf["protection"] == "1", "protection is on")
	if len(d.Volumes) == 0 && len(d.Records) == 0 {
		return nil // a keeper's empty shell: nothing to lose
	}
	return d
}

func (d *Damaged) signal(has bool, what string) {
	if has {
		d.Signals = append(d.Signals, what)
	}
}

// hasHeader reports whether desc carries header as one of its lines (the
// web UI may have re-wrapped nothing else).
func hasHeader(desc, header string) bool {
	for _, line := range manifest.DescriptionLines(desc) {
		if strings.TrimSpace(line) == header {
			return true
		}
	}
	return false
}

// damagedOn lists the damaged keepers on node.
// damagedHolding is the damaged keeper or carrier that holds (or may
// hold) app's data, or nil.
func (o *Observed) damagedHolding(app string) *Damaged {
	for _, d := range o.Damaged {
		if slices.Contains(d.Apps(), app) {
			return d
		}
	}
	return nil
}

func (o *Observed) damagedOn(node string) []*Damaged {
	var out []*Damaged
	for _, d := range o.Damaged {
		if d.Node == node && d.Kind == "keeper" {
			out = append(out, d)
		}
	}
	return out
}

// DamagedKeeperProblem is the refusal for a change that would create a
// keeper or a volume on node, or "" when no keeper there is damaged.
func (o *Observed) DamagedKeeperProblem(node string) string {
	if ds := o.damagedOn(node); len(ds) > 0 {
		return ds[0].Problem()
	}
	return ""
}

// damagedRefusals are the refusals the damaged containers impose on a
// plan: every change of an app whose data one of them may hold, every
// keeper to create and every new volume on a node with a damaged keeper
// (it would stand beside the data it may replace). The refused changes
// leave the plan, so that it never shows a change it will not make.
func damagedRefusals(p *Plan, obs *Observed) []string {
	if len(obs.Damaged) == 0 {
		return nil
	}
	var refused []string
	said := map[*Damaged]bool{}
	refuse := func(d *Damaged) {
		if !said[d] {
			said[d] = true
			refused = append(refused, d.Problem())
		}
	}
	held := map[string]*Damaged{}
	for _, d := range obs.Damaged {
		for _, app := range d.Apps() {
			held[app] = d
		}
	}
	var kept []Change
	for _, c := range p.Changes {
		if d := held[c.App]; d != nil {
			refuse(d)
			continue
		}
		if ds := obs.damagedOn(c.Node); len(ds) > 0 && c.Action != NoOp && createsVolume(c) {
			refuse(ds[0])
			refused = append(refused, fmt.Sprintf("app %s: it needs a new volume on node %s, where keeper CT %d is damaged (see above): corral creates no volume there until that keeper is recognized again", c.App, c.Node, ds[0].VMID))
			continue
		}
		kept = append(kept, c)
	}
	p.Changes = kept
	var keepers []KeeperChange
	for _, kc := range p.Keepers {
		if ds := obs.damagedOn(kc.Node); len(ds) > 0 && kc.Action == Create {
			refuse(ds[0])
			continue
		}
		keepers = append(keepers, kc)
	}
	p.Keepers = keepers
	return refused
}

// createsVolume reports whether c makes or takes in a volume for a keeper.
func createsVolume(c Change) bool {
	return slices.ContainsFunc(c.Volumes, func(v VolumeChange) bool {
		return v.Action == VolCreate || v.Action == VolAdopt || v.Action == VolMove
	})
}
