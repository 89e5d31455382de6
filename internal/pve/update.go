package pve

import (
	"net/url"
	"strconv"
	"strings"
)

// ConfigUpdate is the body of PUT /nodes/{node}/lxc/{vmid}/config
// (apidoc.json; UpdateContainerConfig), and of the config part of a
// create. Every field is optional: a nil pointer, nil slice or empty map
// leaves the key out, so an update never resets a key with a server-side
// default by accident (style §3). Values encode themselves in PVE's
// spelling: booleans as 0/1, tags ";"-joined, mount points and network
// devices as property strings (MountPoint.String, NetDevice.String).
type ConfigUpdate struct {
	Hostname    *string
	Memory      *int64 // MiB
	Swap        *int64 // MiB
	Cores       *int64
	OnBoot      *bool
	Protection  *bool
	Tags        []string // written ";"-joined; nil leaves the tags alone
	Description *string  // the Notes; a pointer to "" empties them
	Features    *string  // "nesting=1,keyctl=1"
	Nameserver  *string

	// MountPoints sets mpN (N is the key) to a mount point: an existing
	// volume ("local-lvm:vm-900-disk-3,mp=/data,backup=0") or a new one
	// ("local-lvm:8,mp=/data", Volume "<storage>:<GiB>").
	MountPoints map[int]MountPoint
	// Net sets netN to a network device.
	Net map[int]NetDevice
	// Raw sets other keys to values already in PVE's spelling, as the
	// planner renders a config edit (plan.ConfigEdit.New). A typed field
	// for the same key wins.
	Raw map[string]string

	// Delete removes keys ("mp0", "unused1"); a volume still owned by the
	// CT becomes unusedN, an unusedN entry frees its volume.
	Delete []string
	// Revert drops pending changes of the keys.
	Revert []string
	// Digest makes PVE refuse the write with ErrModified when the config
	// changed since it was read with that digest (compare-and-swap).
	Digest string
}

// MountKey is the config key of mount point n: "mp3".
func MountKey(n int) string { return "mp" + strconv.Itoa(n) }

// MountIndex is n of an "mpN" key, or false for any other key.
func MountIndex(key string) (int, bool) { return keyIndex(key, "mp") }

func keyIndex(key, prefix string) (int, bool) {
	rest, ok := strings.CutPrefix(key, prefix)
	if !ok || rest == "" || strings.Trim(rest, "0123456789") != "" {
		return 0, false
	}
	n, err := strconv.Atoi(rest)
	return n, err == nil
}

// IsZero reports whether u writes nothing (a digest alone writes nothing).
func (u *ConfigUpdate) IsZero() bool {
	if u == nil {
		return true
	}
	v := u.Encode()
	v.Del("digest")
	return len(v) == 0
}

// SetMountPoint sets mpN; it allocates the map.
func (u *ConfigUpdate) SetMountPoint(n int, mp MountPoint) {
	if u.MountPoints == nil {
		u.MountPoints = map[int]MountPoint{}
	}
	u.MountPoints[n] = mp
}

// Encode is the form body. Keys follow apidoc.json's names; url.Values
// sorts them when the body is written.
func (u *ConfigUpdate) Encode() url.Values {
	v := url.Values{}
	if u == nil {
		return v
	}
	for k, s := range u.Raw {
		v.Set(k, s)
	}
	str := func(k string, p *string) {
		if p != nil {
			v.Set(k, *p)
		}
	}
	num := func(k string, p *int64) {
		if p != nil {
			v.Set(k, strconv.FormatInt(*p, 10))
		}
	}
	boo := func(k string, p *bool) {
		if p != nil {
			v.Set(k, bit(*p))
		}
	}
	str("hostname", u.Hostname)
	num("memory", u.Memory)
	num("swap", u.Swap)
	num("cores", u.Cores)
	boo("onboot", u.OnBoot)
	boo("protection", u.Protection)
	if u.Tags != nil {
		v.Set("tags", strings.Join(u.Tags, ";"))
	}
	str("description", u.Description)
	str("features", u.Features)
	str("nameserver", u.Nameserver)
	for n, mp := range u.MountPoints {
		v.Set(MountKey(n), mp.String())
	}
	for n, nd := range u.Net {
		v.Set("net"+strconv.Itoa(n), nd.String())
	}
	setEdits(v, u.Delete, u.Revert, u.Digest)
	return v
}

// setEdits adds what a CT's and a VM's config update spell alike: the
// keys to delete and to revert (pending changes), comma-separated, and
// the digest the update is made against.
func setEdits(v url.Values, del, revert []string, digest string) {
	if len(del) > 0 {
		v.Set("delete", strings.Join(del, ","))
	}
	if len(revert) > 0 {
		v.Set("revert", strings.Join(revert, ","))
	}
	if digest != "" {
		v.Set("digest", digest)
	}
}

// Ptr returns a pointer to v, for the optional fields of a write body.
func Ptr[T any](v T) *T { return &v }

// ContainerCreate is the body of POST /nodes/{node}/lxc that creates a
// container from a template (CreateContainer). Config carries the config
// keys (hostname, cores, tags, …); its Delete, Revert and Digest are not
// create parameters and are not sent.
type ContainerCreate struct {
	VMID       int
	OSTemplate string // "local:vztmpl/debian-12-standard_12.12-1_amd64.tar.zst"
	// RootFS is the root volume; Volume "<storage>:<GiB>" allocates it.
	RootFS MountPoint
	// Unprivileged: corral always sets it, since PVE 8 creates a
	// privileged container without it and PVE 9 an unprivileged one
	// (doctor's version note).
	Unprivileged *bool
	// SSHPublicKeys are authorized_keys lines for root, each ending "\n".
	SSHPublicKeys string
	// Password is root's password; it travels only in the body and is
	// never logged (logtransport redacts it).
	Password string
	Config   ConfigUpdate
}

// Encode is the form body.
func (c *ContainerCreate) Encode() url.Values {
	cfg := c.Config
	cfg.Delete, cfg.Revert, cfg.Digest = nil, nil, ""
	v := cfg.Encode()
	v.Set("vmid", strconv.Itoa(c.VMID))
	if c.OSTemplate != "" {
		v.Set("ostemplate", c.OSTemplate)
	}
	if c.RootFS.Volume != "" {
		v.Set("rootfs", c.RootFS.String())
	}
	if c.Unprivileged != nil {
		v.Set("unprivileged", bit(*c.Unprivileged))
	}
	if c.SSHPublicKeys != "" {
		v.Set("ssh-public-keys", c.SSHPublicKeys)
	}
	if c.Password != "" {
		v.Set("password", c.Password)
	}
	return v
}

// VolumeMove is the body of POST …/lxc/{vmid}/move_volume (MoveVolume):
// Volume ("rootfs", "mp0", "unused1") goes either to Storage, or to
// TargetVMID's TargetVolume key (behaviour.md §d).
type VolumeMove struct {
	Volume       string
	Storage      string
	TargetVMID   int
	TargetVolume string
	// Delete removes the source after a move to another storage (PVE
	// otherwise keeps it as unusedN).
	Delete *bool
}

// Encode is the form body.
func (m *VolumeMove) Encode() url.Values {
	v := url.Values{"volume": {m.Volume}}
	if m.Storage != "" {
		v.Set("storage", m.Storage)
	}
	if m.TargetVMID != 0 {
		v.Set("target-vmid", strconv.Itoa(m.TargetVMID))
	}
	if m.TargetVolume != "" {
		v.Set("target-volume", m.TargetVolume)
	}
	if m.Delete != nil {
		v.Set("delete", bit(*m.Delete))
	}
	return v
}
