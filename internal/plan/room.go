package plan

import (
	"strconv"
	"strings"
)

// A keeper's capacity is bounded twice by PVE: a CT has at most 256
// unusedN entries (unused0..unused255), and its description, where the
// records live, holds at most 8192 characters. corral keeps a margin under
// both.
const (
	MaxKeeperVolumes = 250
	maxDescription   = 8192 - 256
)

// Room is what a keeper can still take: volumes and description space.
type Room struct {
	volumes int
	desc    int
}

// NewRoom is the room of a keeper about to be created.
func NewRoom() Room { return Room{desc: len(KeeperDescription(nil))} }

// RoomOf is the room left in an observed keeper: every unusedN and mpN
// entry counts as a volume.
func RoomOf(k *Keeper) Room {
	return Room{volumes: VolumeEntries(k.Config), desc: len(KeeperNotes{Records: k.Records, Intents: k.Intents, Projects: k.Projects, Declared: k.Declared, Lease: k.Lease}.Render())}
}

// VolumeEntries counts the unusedN and mpN entries of a config: what a
// keeper's room is counted in.
func VolumeEntries(conf map[string]string) int {
	n := 0
	for key := range conf {
		if _, ok := indexed(key, "unused"); ok {
			n++
		} else if _, ok := indexed(key, "mp"); ok {
			n++
		}
	}
	return n
}

// RoomFor is the room of a keeper holding volumes entries and Notes
// (records, adoptions and project lines: every line takes room; the
// project lines alone fill a third of a keeper whose apps belong to a
// project).
func RoomFor(volumes int, notes KeeperNotes) Room {
	return Room{volumes: volumes, desc: len(notes.Render())}
}

// Take reserves room for one volume whose record line is line characters
// long, and reports whether it fit.
func (r *Room) Take(line int) bool {
	if r.volumes+1 > MaxKeeperVolumes || r.desc+line > maxDescription {
		return false
	}
	r.volumes++
	r.desc += line
	return true
}

// RecordLen bounds the length of the record line of key for a volume on
// storage: the volid is not known before the volume exists, so it counts
// the longest name PVE gives (vm-<9-digit vmid>-disk-<3 digits>), plus
// the longest project and declared lines its app may need (see
// KeeperDescriptionProjects).
func RecordLen(key VolumeKey, storage string) int {
	return len(markerVolume) + len(key.String()) + 1 + len(storage) + len(":vm-999999999-disk-999") + 1 +
		len(markerProject) + len(key.App) + 1 + maxProject + 1 +
		len(markerDeclared) + len(key.App) + 1 + len(OriginID("")) + 1
}

// maxProject is the longest project name (manifest: project).
const maxProject = 40

// indexed parses keys like mp12 or unused3.
func indexed(key, prefix string) (int, bool) {
	rest, ok := strings.CutPrefix(key, prefix)
	if !ok || rest == "" {
		return 0, false
	}
	n, err := strconv.Atoi(rest)
	return n, err == nil && strings.Trim(rest, "0123456789") == ""
}
