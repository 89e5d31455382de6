package propstr

import (
	"strings"
	"testing"

	"github.com/corralhq/corral/internal/testutil/memcap"
)

// Fuzz targets for every parser here. Each property is shared with a
// deterministic smoke test (fuzzsmoke_test.go). Invariants: no input
// panics; what a parser returns is bounded by its input (no value grows
// beyond a fixed multiple of what was read); and what parses prints back
// (String, FormatSize) to text that parses to the same thing, so corral
// never changes a value it only meant to pass through.

// maxGrowth bounds printed output against its input: PVE's normalized
// form may add "volume=" and spell booleans and sizes out.
func maxGrowth(in string) int { return 4*len(in) + 64 }

// capped runs a property under a memory cap (issue 27): a parser of PVE's
// property strings allocates at most 64 times its input and 1 MiB.
func capped(t *testing.T, in string, fn func()) {
	t.Helper()
	memcap.Run(t, 64*uint64(len(in))+1<<20, len(in), fn)
}

// FuzzSplit: pairs are well formed (non-empty keys without ',' or '=',
// values without ','), no more than the input's parts, and joined back
// as key=value they split to the same pairs.
func FuzzSplit(f *testing.F) {
	for _, s := range fuzzSplitSeeds {
		f.Add(s.s, s.withDefault)
	}
	f.Fuzz(func(t *testing.T, s string, d bool) { capped(t, s, func() { checkSplit(t, s, d) }) })
}

var fuzzSplitSeeds = []struct {
	s           string
	withDefault bool
}{
	{"local-lvm:vm-105-disk-1,mp=/srv/data,backup=1,size=8G", true},
	{"name=eth0,bridge=vmbr0,hwaddr=BC:24:11:5E:7A:01,ip=dhcp,type=veth", false},
	{"nesting=1,keyctl=1,mount=nfs;cifs", false},
	{"local-lvm:8,mp=/a,mp=/b", true},
	{"bare,value", false},
	{",,=,", true},
	{" , volume=a=b", true},
}

func checkSplit(t *testing.T, s string, withDefault bool) {
	def := ""
	if withDefault {
		def = "volume"
	}
	pairs, err := Split(s, def)
	if err != nil {
		if err.Error() == "" {
			t.Fatalf("Split(%q): an error without text", s)
		}
		return
	}
	if len(pairs) > strings.Count(s, ",")+1 {
		t.Fatalf("Split(%q): %d pairs from %d parts", s, len(pairs), strings.Count(s, ",")+1)
	}
	parts := make([]string, 0, len(pairs))
	for _, kv := range pairs {
		if kv[0] == "" || strings.ContainsAny(kv[0], ",=") || strings.Contains(kv[1], ",") {
			t.Fatalf("Split(%q): malformed pair %q", s, kv)
		}
		parts = append(parts, kv[0]+"="+kv[1])
	}
	again, err := Split(strings.Join(parts, ","), def)
	if err != nil || len(again) != len(pairs) {
		t.Fatalf("Split(%q) = %q, joined back splits as %q, %v", s, pairs, again, err)
	}
	for i := range pairs {
		if pairs[i] != again[i] {
			t.Fatalf("Split(%q) = %q, joined back splits as %q", s, pairs, again)
		}
	}
}

// FuzzParseMountPoint: a parsed rootfs/mpN value prints (String) to a
// value that parses and prints the same (PVE's normalized form is a
// fixed point), bounded by the input.
func FuzzParseMountPoint(f *testing.F) {
	for _, s := range fuzzParseMountPointSeeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) { capped(t, s, func() { checkParseMountPoint(t, s) }) })
}

var fuzzParseMountPointSeeds = []string{
	"local-lvm:vm-105-disk-1,mp=/srv/data,backup=1,size=8G",
	"local-lvm:vm-101-disk-0,size=8G",
	"volume=local-lvm:vm-900-disk-0,mp=/corral/db/data,acl=0,quota=yes,ro=off",
	"/mnt/host,mp=/mnt/x,mountoptions=noatime;nodev,shared=1",
	"local:subvol-1-disk-0,mp=/a,idmap=u:0:100000:65536",
	"local-lvm:1.5,mp=/a,size=1.5K",
	"a=b=c,mp=/x",
	",,=,mp=",
}

func checkParseMountPoint(t *testing.T, s string) {
	m, err := ParseMountPoint(s)
	if err != nil {
		return
	}
	printed := m.String()
	if len(printed) > maxGrowth(s) {
		t.Fatalf("ParseMountPoint(%q) prints %d bytes", s, len(printed))
	}
	again, err := ParseMountPoint(printed)
	if err != nil {
		t.Fatalf("ParseMountPoint(%q) prints %q, which does not parse: %v", s, printed, err)
	}
	if p2 := again.String(); p2 != printed {
		t.Fatalf("ParseMountPoint(%q) prints %q, which prints %q", s, printed, p2)
	}
	if again.Volume != m.Volume || again.Path != m.Path {
		t.Fatalf("ParseMountPoint(%q): volume/mp %q/%q read back as %q/%q", s, m.Volume, m.Path, again.Volume, again.Path)
	}
}

// FuzzParseNetDevice: the same for netN values.
func FuzzParseNetDevice(f *testing.F) {
	for _, s := range fuzzParseNetDeviceSeeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) { capped(t, s, func() { checkParseNetDevice(t, s) }) })
}

var fuzzParseNetDeviceSeeds = []string{
	"name=eth0,bridge=vmbr0,hwaddr=BC:24:11:5E:7A:01,ip=dhcp,type=veth",
	"name=eth0,bridge=vmbr0,firewall=1,gw=192.168.1.1,ip=192.168.1.50/24,tag=10,mtu=1400,rate=12.5",
	"name=eth1,bridge=vmbr1,trunks=10;20;30,link_down=yes,host-managed=0,ip6=auto",
	"name=e,rate=1e3,mtu=+5,newkey=x",
	"bridge=vmbr0",
	"name",
}

func checkParseNetDevice(t *testing.T, s string) {
	n, err := ParseNetDevice(s)
	if err != nil {
		return
	}
	printed := n.String()
	if len(printed) > maxGrowth(s) {
		t.Fatalf("ParseNetDevice(%q) prints %d bytes", s, len(printed))
	}
	again, err := ParseNetDevice(printed)
	if err != nil {
		t.Fatalf("ParseNetDevice(%q) prints %q, which does not parse: %v", s, printed, err)
	}
	if p2 := again.String(); p2 != printed {
		t.Fatalf("ParseNetDevice(%q) prints %q, which prints %q", s, printed, p2)
	}
	if again.Name != n.Name || again.Bridge != n.Bridge || again.IP != n.IP {
		t.Fatalf("ParseNetDevice(%q) = %+v, read back as %+v", s, n, again)
	}
}

// FuzzParseBool: only PVE's six words (any case) are booleans, and the
// value printed for one reads back the same.
func FuzzParseBool(f *testing.F) {
	for _, s := range []string{"1", "0", "yes", "No", "TRUE", "off", "", "2", "ye"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) { capped(t, s, func() { checkParseBool(t, s) }) })
}

func checkParseBool(t *testing.T, s string) {
	v, ok := ParseBool(s)
	if !ok {
		if v {
			t.Fatalf("ParseBool(%q) = true, false", s)
		}
		return
	}
	if len(s) > 5 {
		t.Fatalf("ParseBool(%q) accepted a word longer than PVE's", s)
	}
	if again, ok := ParseBool(bit(v)); !ok || again != v {
		t.Fatalf("ParseBool(%q) = %v, printed %q reads back as %v", s, v, bit(v), again)
	}
}
