package pve

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
)

// ContainerConfig is GET /nodes/{node}/lxc/{vmid}/config. It keeps every
// value raw, as PVE printed it, because the keys are open-ended (mp0…mp255,
// unused0…unused255, net0…, dev0…) and a typed struct would drop what it
// does not know; the accessors below type the keys corral reads.
type ContainerConfig struct {
	// Digest is the SHA-1 of the config file; send it back as "digest"
	// to make an update fail if someone else changed the config meanwhile.
	Digest string
	// Values holds every other key. Integers keep their decimal text,
	// booleans are "1"/"0".
	Values map[string]string
	// LXC holds raw lxc.* keys as [key, value] pairs (visible to root only).
	LXC [][2]string
}

// Indexed key limits (pve-container LXC/Config.pm).
const (
	MaxMountPoints = 256 // mp0 … mp255
	MaxUnused      = 256 // unused0 … unused255
	MaxNetworks    = 32  // net0 … net31
)

// UnmarshalJSON reads the config object, whatever JSON type each value has.
func (c *ContainerConfig) UnmarshalJSON(data []byte) error {
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(data, &raw); err != nil {
		return fmt.Errorf("decode ct config: %w", err)
	}
	c.Values = make(map[string]string, len(raw))
	c.Digest, c.LXC = "", nil
	for k, v := range raw {
		if k == "lxc" {
			var pairs [][]string
			if err := json.Unmarshal(v, &pairs); err != nil {
				return fmt.Errorf("decode ct config: lxc: %w", err)
			}
			for _, p := range pairs {
				if len(p) == 2 {
					c.LXC = append(c.LXC, [2]string{p[0], p[1]})
				}
			}
			continue
		}
		s, err := scalarText(v)
		if err != nil {
			return fmt.Errorf("decode ct config: %s: %w", k, err)
		}
		if k == "digest" {
			c.Digest = s
			continue
		}
		c.Values[k] = s
	}
	return nil
}

// Get returns the raw value of key.
func (c *ContainerConfig) Get(key string) (string, bool) {
	v, ok := c.Values[key]
	return v, ok
}

// Int returns key as an integer; ok is false when the key is absent or not
// an integer.
func (c *ContainerConfig) Int(key string) (n int64, ok bool) {
	v, present := c.Values[key]
	if !present {
		return 0, false
	}
	n, err := strconv.ParseInt(v, 10, 64)
	return n, err == nil
}

// Bool returns key as a PVE boolean; absent or malformed reads as false.
func (c *ContainerConfig) Bool(key string) bool {
	b, _ := parseBool(c.Values[key])
	return b
}

// Hostname is "hostname"; PVE defaults it to CT<vmid> on create.
func (c *ContainerConfig) Hostname() string { return c.Values["hostname"] }

// OSType is "ostype" (debian, ubuntu, alpine, unmanaged, …).
func (c *ContainerConfig) OSType() string { return c.Values["ostype"] }

// Description is "description", with PVE's trailing newline.
func (c *ContainerConfig) Description() string { return c.Values["description"] }

// Lock is the config lock ("backup", "create", …) or "" (behaviour.md §h).
func (c *ContainerConfig) Lock() string { return c.Values["lock"] }

// Memory is "memory" in MiB, PVE's default 512 when unset.
func (c *ContainerConfig) Memory() int64 { return c.intOr("memory", 512) }

// Swap is "swap" in MiB, PVE's default 512 when unset.
func (c *ContainerConfig) Swap() int64 { return c.intOr("swap", 512) }

// Cores is "cores"; 0 means unset, i.e. all host cores.
func (c *ContainerConfig) Cores() int64 { return c.intOr("cores", 0) }

// Unprivileged reports "unprivileged: 1".
func (c *ContainerConfig) Unprivileged() bool { return c.Bool("unprivileged") }

// Protection reports "protection: 1" (behaviour.md §g).
func (c *ContainerConfig) Protection() bool { return c.Bool("protection") }

// OnBoot reports "onboot: 1".
func (c *ContainerConfig) OnBoot() bool { return c.Bool("onboot") }

// Template reports "template: 1".
func (c *ContainerConfig) Template() bool { return c.Bool("template") }

// Tags splits "tags" (PVE separates with ';', and accepts ',' and spaces).
func (c *ContainerConfig) Tags() []string {
	return strings.FieldsFunc(c.Values["tags"], func(r rune) bool { return r == ';' || r == ',' || r == ' ' })
}

// Features parses "features" ("nesting=1,keyctl=1") into a map.
func (c *ContainerConfig) Features() (map[string]string, error) {
	pairs, err := splitPropertyString(c.Values["features"], "")
	if err != nil {
		return nil, fmt.Errorf("features: %w", err)
	}
	out := make(map[string]string, len(pairs))
	for _, kv := range pairs {
		out[kv[0]] = kv[1]
	}
	return out, nil
}

// RootFS parses "rootfs"; ok is false when the config has none.
func (c *ContainerConfig) RootFS() (mp MountPoint, ok bool, err error) {
	v, ok := c.Values["rootfs"]
	if !ok {
		return MountPoint{}, false, nil
	}
	mp, err = ParseMountPoint(v)
	return mp, true, err
}

// MountPoints parses every mpN, by N.
func (c *ContainerConfig) MountPoints() (map[int]MountPoint, error) {
	out := map[int]MountPoint{}
	for _, i := range c.Indexes("mp") {
		mp, err := ParseMountPoint(c.Values["mp"+strconv.Itoa(i)])
		if err != nil {
			return nil, fmt.Errorf("mp%d: %w", i, err)
		}
		out[i] = mp
	}
	return out, nil
}

// Unused returns every unusedN volid, by N.
func (c *ContainerConfig) Unused() map[int]string {
	out := map[int]string{}
	for _, i := range c.Indexes("unused") {
		v := c.Values["unused"+strconv.Itoa(i)]
		// unusedN is a property string whose only key is the default one.
		if vol, ok := strings.CutPrefix(v, "volume="); ok {
			v = vol
		}
		out[i] = v
	}
	return out
}

// Networks parses every netN, by N.
func (c *ContainerConfig) Networks() (map[int]NetDevice, error) {
	out := map[int]NetDevice{}
	for _, i := range c.Indexes("net") {
		n, err := ParseNetDevice(c.Values["net"+strconv.Itoa(i)])
		if err != nil {
			return nil, fmt.Errorf("net%d: %w", i, err)
		}
		out[i] = n
	}
	return out, nil
}

// Indexes returns the sorted N of every key prefix+N ("mp" → 0, 3).
func (c *ContainerConfig) Indexes(prefix string) []int {
	var out []int
	for k := range c.Values {
		rest, ok := strings.CutPrefix(k, prefix)
		if !ok || rest == "" || (len(rest) > 1 && rest[0] == '0') {
			continue
		}
		if n, err := strconv.Atoi(rest); err == nil && n >= 0 {
			out = append(out, n)
		}
	}
	slices.Sort(out)
	return out
}

// FreeIndex returns the lowest N in [0, limit) such that prefix+N is not
// set, e.g. FreeIndex("mp", MaxMountPoints). ok is false when all are used.
func (c *ContainerConfig) FreeIndex(prefix string, limit int) (n int, ok bool) {
	for i := range limit {
		if _, used := c.Values[prefix+strconv.Itoa(i)]; !used {
			return i, true
		}
	}
	return 0, false
}

// VolumeKey returns the key (rootfs, mpN or unusedN) whose volume is volid.
func (c *ContainerConfig) VolumeKey(volid string) (string, bool) {
	for _, k := range slices.Sorted(maps.Keys(c.Values)) {
		if k != "rootfs" && !isIndexed(k, "mp") && !isIndexed(k, "unused") {
			continue
		}
		if mp, err := ParseMountPoint(c.Values[k]); err == nil && mp.Volume == volid {
			return k, true
		}
	}
	return "", false
}

func isIndexed(key, prefix string) bool {
	rest, ok := strings.CutPrefix(key, prefix)
	if !ok || rest == "" {
		return false
	}
	_, err := strconv.Atoi(rest)
	return err == nil
}

func (c *ContainerConfig) intOr(key string, def int64) int64 {
	if n, ok := c.Int(key); ok {
		return n
	}
	return def
}
