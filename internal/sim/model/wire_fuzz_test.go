package model

import (
	"maps"
	"math"
	"strings"
	"testing"
)

// Fuzz targets for the emulator's other PVE wire formats: netN values,
// volids, new-disk requests, tag lists, prune settings and the config
// file text. Invariants: no panic; results bounded by the input; round
// trips where PVE's format has one; and text a user controls (a
// description) can never add or change a config key.

// FuzzParseNet: a netN value that parses prints (name first, then sorted)
// to one that parses to the same map.
func FuzzParseNet(f *testing.F) {
	for _, s := range fuzzParseNetSeeds {
		f.Add(s)
	}
	f.Fuzz(checkParseNet)
}

var fuzzParseNetSeeds = []string{
	"name=eth0,bridge=vmbr0,hwaddr=BC:24:11:5E:7A:01,ip=dhcp,type=veth",
	"name=eth0,bridge=vmbr9,ip=192.168.1.50/24,gw=192.168.1.1,tag=10,trunks=1;2,mtu=1400",
	"bridge=vmbr0",
	"name=a,name=b",
	"eth0",
}

func checkParseNet(t *testing.T, s string) {
	n, err := ParseNet(s)
	if err != nil {
		return
	}
	if len(n) > strings.Count(s, ",")+1 {
		t.Fatalf("ParseNet(%q): %d keys", s, len(n))
	}
	printed := n.String()
	again, err := ParseNet(printed)
	if err != nil || !maps.Equal(n, again) {
		t.Fatalf("ParseNet(%q) = %v, printed %q, read back %v, %v", s, n, printed, again, err)
	}
	_ = bridgeExists(n["bridge"])
}

// FuzzParseVolID: a volid splits at its first ':' into a storage and a
// name that join back to it; VolumeOwner never panics and is never
// negative.
func FuzzParseVolID(f *testing.F) {
	for _, s := range []string{"local-lvm:vm-101-disk-0", "local:vztmpl/debian-12-standard_12.12-1_amd64.tar.zst", "local:backup/vzdump-lxc-101-2026_01_01-00_00_00.tar.zst", ":x", "x:", "a:b:c", "local-lvm:base-9-disk-1/vm-10-disk-0", "local-lvm:vm--1-disk-0"} {
		f.Add(s)
	}
	f.Fuzz(checkParseVolID)
}

func checkParseVolID(t *testing.T, s string) {
	sid, name, ok := ParseVolID(s)
	if !ok {
		if sid != "" || name != "" {
			t.Fatalf("ParseVolID(%q) = %q, %q, false", s, sid, name)
		}
		return
	}
	if sid == "" || name == "" || strings.Contains(sid, ":") || sid+":"+name != s {
		t.Fatalf("ParseVolID(%q) = %q, %q", s, sid, name)
	}
	if VolumeOwner(name) < 0 {
		t.Fatalf("VolumeOwner(%q) = %d", name, VolumeOwner(name))
	}
}

// FuzzParseNewDisk: "<sid>:<GiB>" gives a storage without blanks and a
// finite, non-negative size.
func FuzzParseNewDisk(f *testing.F) {
	for _, s := range []string{"local-lvm:8", "local-lvm:0.5", "local-lvm:1e3", "local-lvm:.5", "local-lvm:5.", ":8", "a b:1", "local-lvm:99999999999999999999999999999999999"} {
		f.Add(s)
	}
	f.Fuzz(checkParseNewDisk)
}

func checkParseNewDisk(t *testing.T, s string) {
	sid, gib, ok := ParseNewDisk(s)
	if !ok {
		return
	}
	if sid == "" || strings.ContainsAny(sid, " \t") || gib < 0 || math.IsNaN(gib) || math.IsInf(gib, 0) {
		t.Fatalf("ParseNewDisk(%q) = %q, %v", s, sid, gib)
	}
}

// FuzzUniqueTags: get_unique_tags is idempotent and yields tags without
// separators, never more than the input's.
func FuzzUniqueTags(f *testing.F) {
	for _, s := range []string{"corral;corral-app-notes", "Zeta;alpha;alpha", "a,b c\td", "", ";;", "x\x00y", "İ;i"} {
		f.Add(s, false)
	}
	f.Fuzz(checkUniqueTags)
}

func checkUniqueTags(t *testing.T, s string, caseSensitive bool) {
	style := TagStyle{CaseSensitive: caseSensitive}
	u := UniqueTags(s, style)
	if len(u) > 3*len(s) { // ToLower turns each invalid byte into U+FFFD
		t.Fatalf("UniqueTags(%q) = %d bytes", s, len(u))
	}
	if strings.Contains(s, "\x00") {
		return // the NUL-separated form is PVE's internal list, not a tag string
	}
	if again := UniqueTags(u, style); again != u {
		t.Fatalf("UniqueTags(%q) = %q, then %q", s, u, again)
	}
	for _, tag := range SplitList(u) {
		if tag == "" || strings.ContainsAny(tag, ",; \t\n\r\f\v") {
			t.Fatalf("UniqueTags(%q) = %q: tag %q", s, u, tag)
		}
	}
}

// FuzzVzdumpParsePrune: only PVE's keep-* keys with positive counts.
func FuzzVzdumpParsePrune(f *testing.F) {
	for _, s := range []string{"keep-last=3", "keep-all=1", "keep-all=1,keep-last=2", "keep-daily=0", "keep-hourly=2,keep-weekly=1", "keep-x=1", "", "keep-last=99999999999999999999"} {
		f.Add(s)
	}
	f.Fuzz(checkVzdumpParsePrune)
}

func checkVzdumpParsePrune(t *testing.T, s string) {
	keep, err := vzdumpParsePrune(s)
	if err != nil {
		return
	}
	for k, n := range keep {
		if !strings.HasPrefix(k, "keep-") || n < 1 {
			t.Fatalf("vzdumpParsePrune(%q) = %v", s, keep)
		}
	}
}

// FuzzConfigText: whatever a description holds, the config file PVE
// writes (configText: '#' lines, encode_text) reads back
// (parseConfigSection, as a backup's config is read at restore) with the
// description's lines and every other key unchanged: user text cannot
// plant a key (a lock, corral's tags, a mount point) in the config.
func FuzzConfigText(f *testing.F) {
	for _, s := range []string{"My app.", "x\nlock: backup", "x\n[snap]\ntags: corral-app-evil", "%41%3A", "a\r\nmp0: local-lvm:vm-1-disk-0,mp=/x", "\n\n", "#", "\x00\xff", "corral-hostkey: ssh-ed25519 AAAA\n"} {
		f.Add(s)
	}
	f.Fuzz(checkConfigText)
}

func checkConfigText(t *testing.T, desc string) {
	conf := map[string]string{
		"description": desc, "hostname": "notes", "tags": "corral;corral-app-notes",
		"rootfs": "local-lvm:vm-101-disk-0,size=8G", "net0": "name=eth0,bridge=vmbr0,ip=dhcp",
	}
	text := configText(&Guest{Config: conf})
	if len(text) > 3*len(desc)+512 {
		t.Fatalf("a %d-byte description makes a %d-byte config", len(desc), len(text))
	}
	got := parseConfigSection(text)
	want := maps.Clone(conf)
	delete(want, "description")
	if lines := descriptionLines(desc); len(lines) > 0 {
		want["description"] = strings.Join(lines, "\n")
	}
	if !maps.Equal(got, want) {
		t.Fatalf("description %q: the config reads back as %q, want %q", desc, got, want)
	}
}
