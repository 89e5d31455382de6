package model

import (
	"maps"
	"strings"
	"testing"
)

// FuzzParseProp: splitting a property string never panics; a rejection
// says why; and what parses prints back (PVE's normalized order) to a
// string that parses to the same map, unless the default key's value
// holds "=" or is blank (PVE prints that value bare, so it cannot parse
// back, in PVE as here: a blank part is skipped).
func FuzzParseProp(f *testing.F) {
	for _, s := range fuzzParsePropSeeds {
		f.Add(s.s, s.withDefault)
	}
	f.Fuzz(checkParseProp)
}

var fuzzParsePropSeeds = []struct {
	s           string
	withDefault bool
}{
	{"local-lvm:vm-105-disk-1,mp=/srv/data,backup=1,size=8G", true},
	{"name=eth0,bridge=vmbr0,hwaddr=BC:24:11:5E:7A:01,ip=dhcp,type=veth", false},
	{"nesting=1,keyctl=1,mount=nfs;cifs", false},
	{"local-lvm:8,mp=/a,mp=/b", true},
	{"bare,value", false},
	{",,=,", true},
}

// checkParseProp is FuzzParseProp's property, shared with its smoke test.
func checkParseProp(t *testing.T, s string, withDefault bool) {
	def := ""
	if withDefault {
		def = "volume"
	}
	p, err := ParseProp(s, def)
	if err != nil {
		if err.Error() == "" {
			t.Fatalf("ParseProp(%q, %q): an error without text", s, def)
		}
		return
	}
	if v, ok := p[def]; ok && (strings.Contains(v, "=") || strings.TrimSpace(v) == "") {
		return
	}
	printed := p.Print(def, "mp", "name")
	again, err := ParseProp(printed, def)
	if err != nil {
		t.Fatalf("ParseProp(%q) printed as %q, which does not parse: %v", s, printed, err)
	}
	if !maps.Equal(p, again) {
		t.Fatalf("ParseProp(%q) = %v, printed %q, parsed back %v", s, p, printed, again)
	}
}

// FuzzParseMountPoint: never panics, and an mpN value corral writes
// (volume, mp=, backup=; volume not blank, path not empty) prints back
// unchanged in PVE's order.
func FuzzParseMountPoint(f *testing.F) {
	for _, s := range fuzzParseMountPointSeeds {
		f.Add(s.vol, s.path, s.backup)
	}
	f.Fuzz(checkParseMountPoint)
}

var fuzzParseMountPointSeeds = []struct {
	vol, path string
	backup    bool
}{
	{"local-lvm:vm-105-disk-1", "/srv/data", true},
	{"local-lvm:1", "/var/lib/db", false},
	{"/dev/sdb1", "/mnt/dev", false},
}

// checkParseMountPoint is FuzzParseMountPoint's property, shared with its
// smoke test.
func checkParseMountPoint(t *testing.T, vol, path string, backup bool) {
	if strings.ContainsAny(vol+path, ",=") || strings.TrimSpace(vol) == "" || path == "" {
		return // not a value corral writes; PVE skips a blank part and refuses "mp="
	}
	b := "0"
	if backup {
		b = "1"
	}
	value := vol + ",mp=" + path + ",backup=" + b
	m, err := ParseMountPoint("mp0", value)
	if err != nil {
		t.Fatalf("ParseMountPoint(%q): %v", value, err)
	}
	if m.Volume() != vol || m.Path() != path || m.Backup() != backup {
		t.Fatalf("ParseMountPoint(%q) = volume %q, path %q, backup %v", value, m.Volume(), m.Path(), m.Backup())
	}
	if got := m.String(); got != value {
		t.Fatalf("ParseMountPoint(%q).String() = %q", value, got)
	}
	if typ := m.Type(); typ != "volume" && typ != "bind" && typ != "device" {
		t.Fatalf("type %q", typ)
	}
}
