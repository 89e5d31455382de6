package plan

import (
	"maps"
	"regexp"
	"testing"
)

// FuzzParseMountPoint: never panics, and a value corral writes with
// AttachValue reads back as the volume, path and backup flag it wrote.
func FuzzParseMountPoint(f *testing.F) {
	for _, s := range fuzzParseMountPointSeeds {
		f.Add(s.raw, s.vol, s.path, s.backup)
	}
	f.Fuzz(checkParseMountPoint)
}

var fuzzParseMountPointSeeds = []struct {
	raw, vol, path string
	backup         bool
}{
	{"local-lvm:vm-105-disk-1,mp=/srv/data,backup=1,size=8G", "local-lvm:vm-105-disk-1", "/srv/data", true},
	{"volume=local-lvm:vm-900-disk-0,mp=/corral/db/data", "local-lvm:1", "/corral/db/data", false},
	{",,=,mp=", "x", "/", false},
}

// What corral writes into mpN: a volid PVE gave it, and a mount path the
// manifest check accepted.
var (
	fuzzVolidRE = regexp.MustCompile(`^[A-Za-z][-_.A-Za-z0-9]*:[-_.A-Za-z0-9/]+$`)
	fuzzPathRE  = regexp.MustCompile(`^/[-_.A-Za-z0-9/]*$`)
)

// checkParseMountPoint is FuzzParseMountPoint's property, shared with its
// smoke test.
func checkParseMountPoint(t *testing.T, raw, vol, path string, backup bool) {
	ParseMountPoint(raw)
	// corral writes only what the manifest check allows: a volume and an
	// absolute mount path, neither with the format's separators.
	if !fuzzVolidRE.MatchString(vol) || !fuzzPathRE.MatchString(path) {
		return
	}
	m := ParseMountPoint(AttachValue(vol, path, backup))
	if m.Volume != vol || m.Path != path || m.Backup != backup || m.Size != "" {
		t.Fatalf("AttachValue(%q, %q, %v) reads back as %+v", vol, path, backup, m)
	}
}

// FuzzParseSizeString: never panics; what it accepts is a size that can
// exist: not negative.
func FuzzParseSizeString(f *testing.F) {
	for _, s := range fuzzParseSizeStringSeeds {
		f.Add(s)
	}
	f.Fuzz(checkParseSizeString)
}

var fuzzParseSizeStringSeeds = []string{"8G", "512M", "1T", "4096", "1.5G", "", "G", "-1G", "NaN", "Inf", "1e30T", "0x10G"}

// checkParseSizeString is FuzzParseSizeString's property, shared with its
// smoke test.
func checkParseSizeString(t *testing.T, s string) {
	n, ok := ParseSizeString(s)
	if ok && n < 0 {
		t.Fatalf("ParseSizeString(%q) = %d, true", s, n)
	}
	if !ok && n != 0 {
		t.Fatalf("ParseSizeString(%q) = %d, false", s, n)
	}
}

// FuzzParseKeeperRecords: reading a keeper description never panics, and
// what was read renders (KeeperDescriptionWith) to a description that
// reads back the same records and intents: corral never loses a record by
// rewriting the description it read.
func FuzzParseKeeperRecords(f *testing.F) {
	for _, s := range fuzzParseKeeperRecordsSeeds() {
		f.Add(s)
	}
	f.Fuzz(checkParseKeeperRecords)
}

func fuzzParseKeeperRecordsSeeds() []string {
	return []string{
		KeeperDescriptionWith(
			map[VolumeKey]string{{"db", "data"}: "local-lvm:vm-900-disk-1", {"web", "cache"}: "local-lvm:vm-900-disk-2"},
			map[VolumeKey]AdoptIntent{{"db", "legacy"}: {Source: "local-lvm:vm-150-disk-1", Key: "unused3"}}),
		"corral-volume: a/b=\ncorral-volume: /b=x\ncorral-volume: a/=x\ncorral-adopting: a/b=x>\n",
		"  corral-volume:  db/data = local-lvm:vm-1-disk-0  \r\ncorral-volume: db/data=other\n",
		"corral-adopting: a/b/c=s=t>u>v\ncorral-volume: a=b/c=d",
	}
}

// checkParseKeeperRecords is FuzzParseKeeperRecords' property, shared
// with its smoke test.
func checkParseKeeperRecords(t *testing.T, desc string) {
	recs := ParseKeeperRecords(desc)
	intents := ParseKeeperIntents(desc)
	for k, v := range recs {
		if k.App == "" || k.Name == "" || v == "" {
			t.Fatalf("ParseKeeperRecords(%q): empty part in %v=%q", desc, k, v)
		}
	}
	for k, in := range intents {
		if k.App == "" || k.Name == "" || in.Source == "" || in.Key == "" {
			t.Fatalf("ParseKeeperIntents(%q): empty part in %v=%+v", desc, k, in)
		}
	}
	out := KeeperDescriptionWith(recs, intents)
	if got := ParseKeeperRecords(out); !maps.Equal(got, recs) {
		t.Fatalf("records %v rendered as %q read back as %v", recs, out, got)
	}
	if got := ParseKeeperIntents(out); !maps.Equal(got, intents) {
		t.Fatalf("intents %v rendered as %q read back as %v", intents, out, got)
	}
}
