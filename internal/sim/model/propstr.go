package model

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
)

// Property strings are PVE's "key=value,key=value" option values (mpN,
// rootfs, netN, features). The HTTP layer has already validated them
// against the schema; here they are only split, edited and printed back
// in PVE's normalized order.

// PropString is a parsed property string. Keys keep PVE's names; the
// default key (e.g. "volume" for mount points) is stored under its name.
type PropString map[string]string

// ParseProp splits s as PVE's parse_property_string does: a blank item is
// skipped, an item without "=" is the value of defaultKey, and an item
// with "=" needs a key and a value.
func ParseProp(s, defaultKey string) (PropString, error) {
	p := PropString{}
	for _, item := range strings.Split(s, ",") {
		if strings.TrimSpace(item) == "" {
			continue
		}
		k, v, ok := strings.Cut(item, "=")
		if ok && (k == "" || v == "") {
			return nil, fmt.Errorf("missing key in comma-separated list property")
		}
		if !ok {
			if defaultKey == "" {
				return nil, fmt.Errorf("value without key, but schema does not define a default key")
			}
			k, v = defaultKey, item
		}
		if _, dup := p[k]; dup {
			return nil, fmt.Errorf("duplicate key in comma-separated list property: %s", k)
		}
		p[k] = v
	}
	return p, nil
}

// Print renders p in PVE's normalized order (JSONSchema
// print_property_string): the default key's bare value first, then the
// required keys in the given order, then the rest sorted by name.
func (p PropString) Print(defaultKey string, required ...string) string {
	var parts []string
	done := map[string]bool{}
	if v, ok := p[defaultKey]; ok && defaultKey != "" {
		parts = append(parts, v)
		done[defaultKey] = true
	}
	for _, k := range required {
		if v, ok := p[k]; ok && !done[k] {
			parts = append(parts, k+"="+v)
			done[k] = true
		}
	}
	var rest []string
	for k := range p {
		if !done[k] {
			rest = append(rest, k)
		}
	}
	sort.Strings(rest)
	for _, k := range rest {
		parts = append(parts, k+"="+p[k])
	}
	return strings.Join(parts, ",")
}

// MountPoint is a parsed rootfs or mpN value.
type MountPoint struct {
	Key   string // rootfs, mp0, …
	Props PropString
}

// ParseMountPoint parses a rootfs/mpN value ("volume" is the default key).
func ParseMountPoint(key, value string) (MountPoint, error) {
	p, err := ParseProp(value, "volume")
	if err != nil {
		return MountPoint{}, err
	}
	return MountPoint{Key: key, Props: p}, nil
}

// Volume is the volume, bind path or device path.
func (m MountPoint) Volume() string { return m.Props["volume"] }

// Path is the mount path inside the CT ("/" for rootfs).
func (m MountPoint) Path() string {
	if m.Key == "rootfs" {
		return "/"
	}
	return m.Props["mp"]
}

// Type is classify_mountpoint (behaviour.md (b)): "device" for /dev/…,
// "bind" for any other absolute path, else "volume".
func (m MountPoint) Type() string { return ClassifyMountPoint(m.Volume()) }

// ClassifyMountPoint classifies a mount point's volume value.
func ClassifyMountPoint(vol string) string {
	switch {
	case strings.HasPrefix(vol, "/dev/"):
		return "device"
	case strings.HasPrefix(vol, "/"):
		return "bind"
	default:
		return "volume"
	}
}

// Backup reports backup=1.
func (m MountPoint) Backup() bool { return isTrue(m.Props["backup"]) }

// String prints in PVE's normalized order: volume, mp, then sorted
// (behaviour.md §f "Normalized printing").
func (m MountPoint) String() string { return m.Props.Print("volume", "mp") }

// newDiskRE is $NEW_DISK_RE: "STORAGE:SIZE_IN_GiB" allocates a new volume.
func ParseNewDisk(vol string) (storage string, gib float64, ok bool) {
	sid, size, found := strings.Cut(vol, ":")
	if !found || sid == "" || strings.ContainsAny(sid, " \t") {
		return "", 0, false
	}
	if size == "" || strings.Trim(size, "0123456789.") != "" || strings.Count(size, ".") > 1 || size[0] == '.' || size[len(size)-1] == '.' {
		return "", 0, false
	}
	f, err := strconv.ParseFloat(size, 64)
	if err != nil {
		return "", 0, false
	}
	return sid, f, true
}

func isTrue(v string) bool {
	switch strings.ToLower(v) {
	case "1", "yes", "on", "true":
		return true
	}
	return false
}

// Net is a parsed netN value (name=eth0,bridge=vmbr0,hwaddr=…,ip=dhcp,type=veth).
type Net PropString

// ParseNet parses a netN value (no default key).
func ParseNet(value string) (Net, error) {
	p, err := ParseProp(value, "")
	return Net(p), err
}

// String prints name first (the required key) then the rest sorted, as PVE does.
func (n Net) String() string { return PropString(n).Print("", "name") }

// Features parses a features value.
func ParseFeatures(value string) (PropString, error) { return ParseProp(value, "") }
