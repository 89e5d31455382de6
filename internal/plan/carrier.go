package plan

import (
	"fmt"
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
	TagCarrier     = "corral-carrier"
	CarrierName    = "corral-carrier"
	markerMove     = "corral-move: "
	markerCarrying = "corral-carrying: "
	carrierHeader  = "corral carrier: this container takes an app's volumes to another node; corral removes it when the move is done. " +
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
		if v, found := strings.CutPrefix(l, markerCarrying); found {
			key, rest, ok1 := strings.Cut(v, "=")
			app, name, ok2 := strings.Cut(key, "/")
			src, to, ok3 := strings.Cut(rest, ">")
			if ok1 && ok2 && ok3 && app != "" && name != "" && src != "" && to != "" {
				n.Carrying[VolumeKey{app, name}] = AdoptIntent{Source: strings.TrimSpace(src), Key: strings.TrimSpace(to)}
			}
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
