// Package propstr reads and writes PVE's property strings, the
// comma-separated option lists inside one config value
// ("local-lvm:vm-101-disk-1,mp=/data,backup=1,size=8G"), and PVE's size
// and boolean words. It is the one parser of these formats for the API
// client (package pve) and the planner (package plan), which must agree
// on them and may not import each other.
package propstr

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/corralhq/corral/internal/lazyre"
	"github.com/corralhq/corral/internal/pvesize"
)

// Property strings are PVE's comma-separated option lists inside one
// config value: "local-lvm:vm-101-disk-1,mp=/data,backup=1,size=8G"
// (pve-common JSONSchema parse_property_string/print_property_string).
// The parsers here read what the server prints; they keep keys they do not
// know in Extra (newer PVE adds keys, e.g. idmap) and print them back.

// MountPoint is a parsed rootfs or mpN value (format pve-ct-mountpoint,
// behaviour.md §f). Pointer fields are unset unless the value names them,
// so printing never adds an option with a server-side default.
type MountPoint struct {
	// Volume is the default key: "<sid>:<volname>" for a volume,
	// "<sid>:<GiB>" to allocate one, "/dev/…" for a device and any other
	// absolute path for a bind mount.
	Volume string
	// Path is the mount path in the CT ("mp"); empty for rootfs.
	Path         string
	ACL          *bool
	Backup       *bool
	KeepAttrs    *bool
	MountOptions []string // ";"-separated on the wire
	Quota        *bool
	Replicate    *bool
	RO           *bool
	Shared       *bool
	Size         *int64 // bytes
	Extra        map[string]string
}

func (m *MountPoint) bools() map[string]**bool {
	return map[string]**bool{
		"acl": &m.ACL, "backup": &m.Backup, "keepattrs": &m.KeepAttrs, "quota": &m.Quota,
		"replicate": &m.Replicate, "ro": &m.RO, "shared": &m.Shared,
	}
}

// ParseMountPoint parses a rootfs or mpN value. It requires a volume but
// not mp, since rootfs has none.
func ParseMountPoint(s string) (MountPoint, error) {
	var m MountPoint
	pairs, err := Split(s, "volume")
	if err != nil {
		return m, fmt.Errorf("mount point %q: %w", s, err)
	}
	bools := m.bools()
	for _, kv := range pairs {
		k, v := kv[0], kv[1]
		switch {
		case k == "volume":
			m.Volume = v
		case k == "mp":
			m.Path = v
		case k == "mountoptions":
			m.MountOptions = strings.Split(v, ";")
		case k == "size":
			n, err := pvesize.Parse(v)
			if err != nil {
				return m, fmt.Errorf("mount point %q: %w", s, err)
			}
			m.Size = &n
		case bools[k] != nil:
			b, ok := ParseBool(v)
			if !ok {
				return m, fmt.Errorf("mount point %q: %s: not a boolean: %q", s, k, v)
			}
			*bools[k] = &b
		default:
			if m.Extra == nil {
				m.Extra = map[string]string{}
			}
			m.Extra[k] = v
		}
	}
	if m.Volume == "" {
		return m, fmt.Errorf("mount point %q: no volume", s)
	}
	return m, nil
}

// String prints m in PVE's normalized order: volume, then mp, then the
// other keys sorted by name, sizes as format_size prints them ("8G").
func (m MountPoint) String() string {
	rest := map[string]string{}
	for k, p := range m.bools() {
		if *p != nil {
			rest[k] = bit(**p)
		}
	}
	if len(m.MountOptions) > 0 {
		rest["mountoptions"] = strings.Join(m.MountOptions, ";")
	}
	if m.Size != nil {
		rest["size"] = pvesize.Format(*m.Size)
	}
	parts := []string{defaultValue("volume", m.Volume)}
	if m.Path != "" {
		parts = append(parts, "mp="+m.Path)
	}
	return joinProperties(parts, rest, m.Extra, "volume", "mp")
}

// IsBindMount reports whether the volume is a host path (not /dev/…).
// Only root@pam may configure one (behaviour.md §b).
func (m MountPoint) IsBindMount() bool {
	return strings.HasPrefix(m.Volume, "/") && !m.IsDeviceMount()
}

// IsDeviceMount reports whether the volume is a /dev/… block device.
func (m MountPoint) IsDeviceMount() bool { return strings.HasPrefix(m.Volume, "/dev/") }

// StorageID is the storage part of a volume ("local-lvm" for
// "local-lvm:vm-101-disk-1"), or "" for a bind or device mount.
func (m MountPoint) StorageID() string {
	if strings.HasPrefix(m.Volume, "/") {
		return ""
	}
	sid, _, _ := strings.Cut(m.Volume, ":")
	return sid
}

// newVolumeRE is pve-lxc-mp-string's "allocate a new volume" form.
var newVolumeRE = lazyre.New(`^([^:\s]+):(\d+(\.\d+)?)$`)

// NewVolume reports whether the volume is "<sid>:<GiB>", a request to
// allocate a new volume, and returns its storage and size in GiB.
func (m MountPoint) NewVolume() (storage string, gib float64, ok bool) {
	sm := newVolumeRE.FindStringSubmatch(m.Volume)
	if sm == nil {
		return "", 0, false
	}
	gib, err := strconv.ParseFloat(sm[2], 64)
	if err != nil {
		return "", 0, false
	}
	return sm[1], gib, true
}

// NetDevice is a parsed netN value (format pve-lxc-network). It has no
// default key; name is required.
type NetDevice struct {
	Name        string
	Bridge      string
	Firewall    *bool
	GW          string
	GW6         string
	HostManaged *bool
	HWAddr      string
	IP          string // IPv4/CIDR, dhcp or manual
	IP6         string // IPv6/CIDR, auto, dhcp or manual
	LinkDown    *bool
	MTU         *int
	Rate        *float64 // MB/s
	Tag         *int
	Trunks      string // "vlanid;vlanid…"
	Type        string // veth
	Extra       map[string]string
}

func (n *NetDevice) bools() map[string]**bool {
	return map[string]**bool{"firewall": &n.Firewall, "host-managed": &n.HostManaged, "link_down": &n.LinkDown}
}

func (n *NetDevice) strs() map[string]*string {
	return map[string]*string{
		"bridge": &n.Bridge, "gw": &n.GW, "gw6": &n.GW6, "hwaddr": &n.HWAddr,
		"ip": &n.IP, "ip6": &n.IP6, "trunks": &n.Trunks, "type": &n.Type,
	}
}

func (n *NetDevice) ints() map[string]**int { return map[string]**int{"mtu": &n.MTU, "tag": &n.Tag} }

// ParseNetDevice parses a netN value such as
// "name=eth0,bridge=vmbr0,hwaddr=BC:24:11:5E:7A:01,ip=dhcp,type=veth".
func ParseNetDevice(s string) (NetDevice, error) {
	var n NetDevice
	pairs, err := Split(s, "")
	if err != nil {
		return n, fmt.Errorf("network device %q: %w", s, err)
	}
	bools, strs, ints := n.bools(), n.strs(), n.ints()
	for _, kv := range pairs {
		k, v := kv[0], kv[1]
		switch {
		case k == "name":
			n.Name = v
		case k == "rate":
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				return n, fmt.Errorf("network device %q: rate: not a number: %q", s, v)
			}
			n.Rate = &f
		case strs[k] != nil:
			*strs[k] = v
		case ints[k] != nil:
			i, err := strconv.Atoi(v)
			if err != nil {
				return n, fmt.Errorf("network device %q: %s: not an integer: %q", s, k, v)
			}
			*ints[k] = &i
		case bools[k] != nil:
			b, ok := ParseBool(v)
			if !ok {
				return n, fmt.Errorf("network device %q: %s: not a boolean: %q", s, k, v)
			}
			*bools[k] = &b
		default:
			if n.Extra == nil {
				n.Extra = map[string]string{}
			}
			n.Extra[k] = v
		}
	}
	if n.Name == "" {
		return n, fmt.Errorf("network device %q: no name", s)
	}
	return n, nil
}

// String prints n in PVE's normalized order: name, then the other keys
// sorted by name.
func (n NetDevice) String() string {
	rest := map[string]string{}
	for k, p := range n.bools() {
		if *p != nil {
			rest[k] = bit(**p)
		}
	}
	for k, p := range n.strs() {
		if *p != "" {
			rest[k] = *p
		}
	}
	for k, p := range n.ints() {
		if *p != nil {
			rest[k] = strconv.Itoa(**p)
		}
	}
	if n.Rate != nil {
		rest["rate"] = strconv.FormatFloat(*n.Rate, 'f', -1, 64)
	}
	return joinProperties([]string{"name=" + n.Name}, rest, n.Extra, "name")
}

// Split splits s into key/value pairs in order. A part
// without '=' is the value of defaultKey (PVE's parse_property_string);
// empty parts are skipped; a repeated key is an error, as in PVE.
func Split(s, defaultKey string) ([][2]string, error) {
	var out [][2]string
	seen := map[string]bool{}
	for part := range strings.SplitSeq(s, ",") {
		if strings.TrimSpace(part) == "" {
			continue
		}
		k, v, hasEq := strings.Cut(part, "=")
		switch {
		case !hasEq && defaultKey != "":
			k, v = defaultKey, part
		case !hasEq:
			return nil, fmt.Errorf("value without key, but the format has no default key")
		case k == "" || v == "":
			return nil, fmt.Errorf("missing key or value in comma-separated list property")
		}
		if seen[k] {
			return nil, fmt.Errorf("duplicate key in comma-separated list property: %s", k)
		}
		seen[k] = true
		out = append(out, [2]string{k, v})
	}
	return out, nil
}

// joinProperties appends rest and extra (minus the keys already printed
// first) to first, sorted by key.
func joinProperties(first []string, rest, extra map[string]string, printed ...string) string {
	all := maps.Clone(rest)
	for k, v := range extra {
		if _, dup := all[k]; !dup && !slices.Contains(printed, k) {
			all[k] = v
		}
	}
	for _, k := range slices.Sorted(maps.Keys(all)) {
		first = append(first, k+"="+all[k])
	}
	return strings.Join(first, ",")
}

// defaultValue prints a default key's value bare, unless it contains '='
// and would then read as a key.
func defaultValue(key, v string) string {
	if strings.Contains(v, "=") {
		return key + "=" + v
	}
	return v
}

func bit(b bool) string {
	if b {
		return "1"
	}
	return "0"
}

// ParseBool reads a PVE boolean word (pve-common JSONSchema parse_boolean).
func ParseBool(s string) (value, ok bool) {
	switch strings.ToLower(s) {
	case "1", "on", "yes", "true":
		return true, true
	case "0", "off", "no", "false":
		return false, true
	}
	return false, false
}
