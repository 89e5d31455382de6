package plan

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/corralhq/corral/internal/manifest"
)

// A carrier is the container that takes an app's retained volumes from
// one node to another. PVE copies a local volume to another node only by
// migrating the container that owns it (behaviour.md (i.2): "owned by
// other guest"), and reassigns a volume between containers only on one
// node (i.4), so a move hands the app's volumes from the source keeper
// to a carrier (move_volume), migrates the carrier, and hands them to the
// target node's keeper. A keeper cannot travel itself: it holds other
// apps' volumes too.
//
// The carrier is protected from its first moment (protection never
// blocks a migration, i.2) and its Notes are the move's intent record,
// written by the create itself: "corral-move: app=A from=X to=Y", then one
// "corral-carrying: A/NAME=SOURCE>unusedN" line per volume, written before
// the move_volume that renames the volume into the carrier. Whatever
// moment a move is killed at, the carrier, the keepers and these lines
// say where every volume is and what is left to do (apply's moveApp).
const (
	TagCarrier = "corral-carrier"
	// TagMovingPrefix + app tags a carrier with the app it moves, so
	// that a move reads only its own carriers' configs (carriers of
	// older corral versions have no such tag and are read all).
	TagMovingPrefix = "corral-moving-"
	CarrierName     = "corral-carrier"
	markerMove      = "corral-move: "
	markerCarrying  = "corral-carrying: "
	carrierHeader   = "corral carrier: this container takes an app's volumes to another node; corral removes it when the move is done. " +
		"Keep protection on and edit none of these lines: corral finishes an interrupted move from them."
)

// CarrierNotes is what a carrier's Notes say.
type CarrierNotes struct {
	App      string
	From, To string
	// Was are the nodes the move was headed for before a rollback
	// retargeted it: a failed migration there may have left copies.
	Was []string
	// Carrying are the volumes handed (or being handed) to the carrier:
	// the source volid and the carrier's unusedN the volume becomes.
	Carrying map[VolumeKey]AdoptIntent
	// Malformed are the carrying lines that do not parse (or name an
	// entry that is no unusedN, or a volume a line before already
	// names), as written: an edit outside corral. They are kept here,
	// not dropped, so that ReadCarrier can refuse the move naming them.
	Malformed []string
}

// ParseCarrierNotes reads a carrier's Notes; ok is false when they hold
// no move line.
func ParseCarrierNotes(desc string) (n CarrierNotes, ok bool) {
	n.Carrying = map[VolumeKey]AdoptIntent{}
	for _, line := range manifest.DescriptionLines(desc) {
		l := manifest.MarkerLine(line)
		if v, found := strings.CutPrefix(l, markerMove); found {
			for _, kv := range strings.Fields(v) {
				k, val, _ := strings.Cut(kv, "=")
				switch k {
				case "app":
					n.App = val
				case "from":
					n.From = val
				case "to":
					n.To = val
				case "was":
					n.Was = strings.Split(val, ",")
				}
			}
			ok = n.App != "" && n.From != "" && n.To != ""
			continue
		}
		if len(l) >= len(markerCarrying)-2 && strings.EqualFold(l[:len(markerCarrying)-2], markerCarrying[:len(markerCarrying)-2]) {
			v, _ := strings.CutPrefix(l, markerCarrying)
			key, rest, ok1 := strings.Cut(v, "=")
			app, name, ok2 := strings.Cut(key, "/")
			src, to, ok3 := strings.Cut(rest, ">")
			src, to = strings.TrimSpace(src), strings.TrimSpace(to)
			vk := VolumeKey{app, name}
			_, twice := n.Carrying[vk]
			if !strings.HasPrefix(l, markerCarrying) || !ok1 || !ok2 || !ok3 || app == "" || name == "" || src == "" ||
				!isUnusedKey(to) || twice || strings.ContainsAny(app+name, " \t") {
				n.Malformed = append(n.Malformed, l)
				continue
			}
			n.Carrying[vk] = AdoptIntent{Source: src, Key: to}
		}
	}
	return n, ok
}

// Render writes the carrier's Notes.
func (n CarrierNotes) Render() string {
	var b strings.Builder
	b.WriteString(carrierHeader + "\n")
	fmt.Fprintf(&b, "%sapp=%s from=%s to=%s", markerMove, n.App, n.From, n.To)
	if len(n.Was) > 0 {
		fmt.Fprintf(&b, " was=%s", strings.Join(n.Was, ","))
	}
	b.WriteString("\n")
	keys := slices.SortedFunc(func(yield func(VolumeKey) bool) {
		for k := range n.Carrying {
			if !yield(k) {
				return
			}
		}
	}, func(a, b VolumeKey) int { return strings.Compare(a.String(), b.String()) })
	for _, k := range keys {
		fmt.Fprintf(&b, "%s%s=%s>%s\n", markerCarrying, k, n.Carrying[k].Source, n.Carrying[k].Key)
	}
	return b.String()
}

// Carrier is an observed carrier: a move that is under way or was
// interrupted.
type Carrier struct {
	VMID   int
	Node   string // where the carrier is now
	Notes  CarrierNotes
	Config map[string]string
	// Tagged is the app its corral-moving-<app> tag names; "" for a
	// carrier of a corral version that did not tag carriers by app.
	Tagged string
	// Problem says why corral cannot finish this carrier's move (see
	// ReadCarrier and GroupCarriers); "" when it can.
	Problem string
	twins   bool // one of an app's several carriers that hold volumes
}

// Holds returns the volumes the carrier owns now, by key: each carrying
// line whose unusedN names a volume of the carrier's own.
func (c *Carrier) Holds() map[VolumeKey]string {
	out := map[VolumeKey]string{}
	for vk, in := range c.Notes.Carrying {
		if v := c.Config[in.Key]; v != "" && VolumeOwner(v) == c.VMID {
			out[vk] = v
		}
	}
	return out
}

// Phases of a move, as MovePhase names them (docs/moving.md, "The steps").
const (
	MoveCarrying  = "carrying"     // volumes going from the source keeper into the carrier (step 3)
	MoveMigrating = "migrating"    // the carrier or the app's container to migrate (steps 4-5)
	MoveHanding   = "handing-over" // volumes going from the carrier to the target keeper (step 6)
	MoveFinishing = "finishing"    // the carrier to destroy, the result to verify, the app to attach and start (7-9)
)

// MovePhase says how far the move got, from where the carrier is, what
// it holds, and where the app's container is (appNode, "" when it has
// none).
func (c *Carrier) MovePhase(appNode string) string {
	held := len(c.Holds())
	switch {
	case c.Node != c.Notes.To && (len(c.Notes.Carrying) == 0 || held < len(c.Notes.Carrying)):
		return MoveCarrying
	case c.Node != c.Notes.To:
		return MoveMigrating
	case appNode != "" && appNode != c.Notes.To:
		return MoveMigrating
	case held > 0:
		return MoveHanding
	}
	return MoveFinishing
}

// ReadCarrier reads a carrier as observed: its VMID, node, tags and
// config. Problem is set when its Notes cannot be trusted to finish the
// move (they were edited outside corral): they name no move, or name
// another app than the carrier's own tag or its carrying lines.
func ReadCarrier(vmid int, node string, tags []string, conf map[string]string) *Carrier {
	n, ok := ParseCarrierNotes(conf["description"])
	c := &Carrier{VMID: vmid, Node: node, Notes: n, Config: conf}
	for _, t := range tags {
		if app, found := strings.CutPrefix(t, TagMovingPrefix); found {
			c.Tagged = app
		}
	}
	var others []string
	for vk := range n.Carrying {
		if ok && vk.App != n.App && !slices.Contains(others, vk.App) {
			others = append(others, vk.App)
		}
	}
	slices.Sort(others)
	switch {
	case !ok:
		c.Problem = "its Notes no longer name a move (the corral-move line was edited outside corral)"
	case c.Tagged != "" && c.Tagged != n.App:
		c.Problem = fmt.Sprintf("its Notes name app %s, but its tag names app %s (the Notes were edited outside corral)", n.App, c.Tagged)
	case len(others) > 0:
		c.Problem = fmt.Sprintf("its Notes name app %s, but carry volumes of %s (the Notes were edited outside corral)", n.App, strings.Join(others, ", "))
	default:
		c.Problem = c.lineProblem()
	}
	return c
}

// lineProblem says why the carrier's carrying lines cannot be trusted to
// say which volume it holds is which: a line corral cannot read, two
// lines naming one entry, or a volume it holds that no line names (a
// line deleted or edited in the web UI; the move would hand the other
// volumes over and leave that one in the carrier, nameless). "" when
// every volume it holds is named by exactly one line. A line whose entry
// is empty is normal: its volume is not moved in yet, or was handed to
// the target keeper already.
//
// What it cannot see is two lines' entries swapped: move_volume renames a
// volume for the carrier (vm-<carrier>-disk-N, in the order of the
// moves, not of the lines), a migration may rename it again, and an
// unusedN entry has no size, so nothing PVE shows ties a held volume to
// the line's source volid (docs/moving.md, "Edited carrier Notes").
func (c *Carrier) lineProblem() string {
	n := c.Notes
	if len(n.Malformed) > 0 {
		return fmt.Sprintf("its Notes have carrying lines corral cannot read (%q; the Notes were edited outside corral)", n.Malformed)
	}
	byKey := map[string][]string{}
	for vk, in := range n.Carrying {
		byKey[in.Key] = append(byKey[in.Key], vk.String())
	}
	for _, key := range slices.Sorted(maps.Keys(byKey)) {
		if vks := byKey[key]; len(vks) > 1 {
			slices.Sort(vks)
			return fmt.Sprintf("its carrying lines of %s all name its %s (the Notes were edited outside corral)", strings.Join(vks, " and "), key)
		}
	}
	var unnamed, foreign []string
	for _, k := range slices.Sorted(maps.Keys(c.Config)) {
		if !isVolumeKey(k) {
			continue
		}
		volid := ParseMountPoint(c.Config[k]).Volume
		switch {
		case volid == "":
		case byKey[k] == nil:
			unnamed = append(unnamed, k+"="+volid)
		case VolumeOwner(volid) != c.VMID:
			foreign = append(foreign, k+"="+volid)
		}
	}
	switch {
	case len(unnamed) > 0:
		return fmt.Sprintf("it holds %s, but no corral-carrying line of its Notes names that entry (a line was deleted or edited outside corral); "+
			"the missing line is \"corral-carrying: APP/VOLUME=SOURCE>ENTRY\", VOLUME the app's retained volume no other line names, SOURCE its volid in the keeper before the move",
			strings.Join(unnamed, ", "))
	case len(foreign) > 0:
		return fmt.Sprintf("it holds %s, not named for CT %d: corral hands a carrier only volumes move_volume renamed for it (the config was edited outside corral)", strings.Join(foreign, ", "), c.VMID)
	}
	return ""
}

// Apps are the apps a carrier names anywhere: its tag, its move line,
// its carrying lines. A carrier with a Problem may hold the volumes of
// any of them.
func (c *Carrier) Apps() []string {
	var apps []string
	add := func(a string) {
		if a != "" && !slices.Contains(apps, a) {
			apps = append(apps, a)
		}
	}
	add(c.Tagged)
	add(c.Notes.App)
	for vk := range c.Notes.Carrying {
		add(vk.App)
	}
	slices.Sort(apps)
	return apps
}

// Empty reports whether the carrier holds no volume (no mpN, no unusedN)
// and its Notes carry nothing: a carrier whose move never began (a run
// killed right after creating it).
func (c *Carrier) Empty() bool {
	if len(c.Notes.Carrying) > 0 {
		return false
	}
	for k := range c.Config {
		if isVolumeKey(k) {
			return false
		}
	}
	return true
}

// HeldVolumes are the volumes in the carrier's config (mpN and unusedN
// entries), sorted: what a carrier corral cannot finish holds.
func (c *Carrier) HeldVolumes() []string {
	var out []string
	for k, v := range c.Config {
		if isVolumeKey(k) {
			if volid := ParseMountPoint(v).Volume; volid != "" {
				out = append(out, k+"="+volid)
			}
		}
	}
	slices.Sort(out)
	return out
}

// isUnusedKey reports whether a config key is unusedN, the only entry
// a carrying line names (carry hands volumes to the carrier's unusedN).
func isUnusedKey(k string) bool {
	rest, ok := strings.CutPrefix(k, "unused")
	return ok && rest != "" && strings.Trim(rest, "0123456789") == ""
}

// isVolumeKey reports whether a config key is mpN or unusedN.
func isVolumeKey(k string) bool {
	for _, p := range []string{"mp", "unused"} {
		if rest, ok := strings.CutPrefix(k, p); ok && rest != "" && strings.Trim(rest, "0123456789") == "" {
			return true
		}
	}
	return false
}

// GroupCarriers sorts the carriers found in the cluster: the one move
// of each app (by app), the leftovers (an app's other carriers that are
// Empty: runs killed right after creating one; they are destroyed when
// the move goes on), and the carriers corral cannot finish (a Problem of
// their own, or an app with two or more carriers that are not Empty,
// each of which may hold its volumes). Of several Empty carriers the
// lowest VMID is the move, the others leftovers.
func GroupCarriers(all []*Carrier) (moves map[string]*Carrier, leftovers, bad []*Carrier) {
	byApp := map[string][]*Carrier{}
	for _, c := range all {
		if c.Problem != "" {
			bad = append(bad, c)
			continue
		}
		byApp[c.Notes.App] = append(byApp[c.Notes.App], c)
	}
	moves = map[string]*Carrier{}
	for _, app := range slices.Sorted(maps.Keys(byApp)) {
		cs := byApp[app]
		slices.SortFunc(cs, func(a, b *Carrier) int { return a.VMID - b.VMID })
		var full []*Carrier
		for _, c := range cs {
			if !c.Empty() {
				full = append(full, c)
			}
		}
		switch {
		case len(full) > 1:
			var names []string
			for _, c := range full {
				names = append(names, fmt.Sprintf("CT %d on %s", c.VMID, c.Node))
			}
			for _, c := range full {
				c.Problem = fmt.Sprintf("app %s has %d carriers holding its volumes (%s), and corral cannot tell which move is the real one", app, len(full), strings.Join(names, ", "))
				c.twins = true
				bad = append(bad, c)
			}
			for _, c := range cs {
				if c.Empty() {
					leftovers = append(leftovers, c)
				}
			}
		case len(full) == 1:
			moves[app] = full[0]
			for _, c := range cs {
				if c != full[0] {
					leftovers = append(leftovers, c)
				}
			}
		default:
			moves[app] = cs[0]
			leftovers = append(leftovers, cs[1:]...)
		}
	}
	return moves, leftovers, bad
}

// HeldList is what the carrier holds, for a message: its volume entries
// (KEY=VOLID), or "nothing".
func (c *Carrier) HeldList() string {
	if h := c.HeldVolumes(); len(h) > 0 {
		return strings.Join(h, ", ")
	}
	return "nothing"
}

// Refusal is the error text for app when a carrier corral cannot finish
// may hold its volumes: the carrier's VMID, node, what it holds, and
// the fix. Nothing is moved or created for app until it is fixed.
func (c *Carrier) Refusal(app string) string {
	held := c.HeldList()
	if c.twins {
		return fmt.Sprintf("app %s: carrier CT %d on %s: %s; it holds %s; corral neither moves nor creates app %s's volumes until one is left: "+
			"hand the volumes of one carrier to the other (move_volume to a free unusedN of it, and a \"corral-carrying: %s/VOLUME=SOURCE>unusedN\" line per volume in its Notes) or to a keeper by hand, "+
			"then destroy the emptied carrier (protection off first) and run corral again (docs/moving.md)",
			app, c.VMID, c.Node, c.Problem, held, app, app)
	}
	return fmt.Sprintf("app %s: carrier CT %d on %s: %s; it holds %s, which may be app %s's volumes, so corral neither moves nor creates app %s's volumes until it is fixed: "+
		"write back its Notes as corral wrote them (a line \"corral-move: app=%s from=NODE to=NODE\" and a line \"corral-carrying: %s/VOLUME=SOURCE>unusedN\" per volume it holds; corral status and docs/moving.md show the format), "+
		"or hand its volumes to a keeper by hand and destroy it (protection off first); then run corral again",
		app, c.VMID, c.Node, c.Problem, held, app, app, app, app)
}
