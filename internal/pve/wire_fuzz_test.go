package pve

import (
	"bytes"
	"encoding/json"
	"math"
	"strings"
	"testing"

	"github.com/corralhq/corral/internal/testutil/memcap"
	"github.com/corralhq/corral/internal/testutil/mutate"
)

// Fuzz targets for what the client reads off the wire and off the
// command line: container configs (every accessor over whatever JSON PVE
// might send), PVE's loosely typed scalars, API tokens and certificate
// fingerprints. Invariants: no panic; bounded results; round trips where
// the format has one; a token's secret never appears in an error.

// FuzzContainerConfig: any JSON object decodes or fails cleanly, and every
// accessor then answers without panicking, within the indexed-key limits.
func FuzzContainerConfig(f *testing.F) {
	for _, s := range fuzzContainerConfigSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		// Memory cap (issue 27): 32 times the config and 1 MiB.
		memcap.Run(t, 32*uint64(len(data))+1<<20, len(data), func() { checkContainerConfig(t, data) })
	})
}

var fuzzContainerConfigSeeds = []string{
	`{"hostname":"notes","cores":2,"memory":"512","unprivileged":1,"rootfs":"local-lvm:vm-101-disk-0,size=8G","mp0":"local-lvm:vm-100-disk-1,mp=/srv/data,backup=1","net0":"name=eth0,bridge=vmbr0,ip=dhcp","features":"nesting=1","tags":"corral;corral-app-notes","unused0":"local-lvm:vm-101-disk-1","digest":"abc","lxc":[["lxc.environment.runtime","A=1"]]}`,
	`{"mp255":"local:1,mp=/x","mp256":"local:1,mp=/y","net31":"name=e","net99":"name=f","unused-1":"x"}`,
	`{"rootfs":"","features":"nesting","memory":1e300,"swap":-1,"cores":true,"lxc":[[1,2]]}`,
	`{"mp00":"a,mp=/b","mp0x":"","net0":"bridge=vmbr0"}`,
	`[]`, `null`, `{"a":{}}`,
}

func checkContainerConfig(t *testing.T, data []byte) {
	var c ContainerConfig
	if err := json.Unmarshal(data, &c); err != nil {
		return
	}
	_, _ = c.Features()
	_, _, _ = c.RootFS()
	mps, _ := c.MountPoints()
	nets, _ := c.Networks()
	unused := c.Unused()
	if len(mps) > MaxMountPoints || len(unused) > MaxUnused || len(nets) > MaxNetworks {
		t.Fatalf("config %s: %d mount points, %d unused, %d networks", data, len(mps), len(unused), len(nets))
	}
	for _, p := range []string{"mp", "unused", "net"} {
		if n := len(c.Indexes(p)); n > len(c.Values) {
			t.Fatalf("config %s: %d %s indexes from %d keys", data, n, p, len(c.Values))
		}
	}
	_, _ = c.FreeIndex("mp", MaxMountPoints)
	_ = c.Tags()
	_, _ = c.Int("memory")
	_ = c.Memory() + c.Swap() + c.Cores()
	_ = c.Bool("onboot") || c.Template() || c.Unprivileged() || c.Protection()
	_, _ = c.VolumeKey("local-lvm:vm-101-disk-0")
}

// FuzzWireScalars: PVE's loosely typed scalars decode or fail cleanly, and
// what decodes encodes to JSON that decodes to the same value.
func FuzzWireScalars(f *testing.F) {
	for _, s := range []string{`1`, `0`, `"1"`, `true`, `"yes"`, `null`, `""`, `42`, `"42"`, `1e+15`, `-1.5`, `"0.00"`, `"NaN"`, `1e400`, `"x"`, `[1]`, `{"a":1}`, `-0`} {
		f.Add([]byte(s))
	}
	f.Fuzz(checkWireScalars)
}

func checkWireScalars(t *testing.T, data []byte) {
	var b Bool01
	if json.Unmarshal(data, &b) == nil {
		out, _ := json.Marshal(b)
		var again Bool01
		if err := json.Unmarshal(out, &again); err != nil || again != b {
			t.Fatalf("Bool01 %s = %v, encoded %s, read back %v, %v", data, b, out, again, err)
		}
	}
	var n IntOrString
	if json.Unmarshal(data, &n) == nil {
		out, _ := json.Marshal(n)
		var again IntOrString
		if err := json.Unmarshal(out, &again); err != nil || again != n {
			t.Fatalf("IntOrString %s = %d, encoded %s, read back %d, %v", data, n, out, again, err)
		}
	}
	var fl FloatOrString
	if json.Unmarshal(data, &fl) == nil && !math.IsNaN(float64(fl)) && !math.IsInf(float64(fl), 0) {
		out, _ := json.Marshal(fl)
		var again FloatOrString
		if err := json.Unmarshal(out, &again); err != nil || again != fl {
			t.Fatalf("FloatOrString %s = %v, encoded %s, read back %v, %v", data, fl, out, again, err)
		}
	}
	var s Scalar
	if json.Unmarshal(data, &s) == nil && len(s) > 3*len(data) { // invalid UTF-8 becomes U+FFFD
		t.Fatalf("Scalar %s = %d bytes", data, len(s))
	}
}

// FuzzParseToken: an API token splits into id and secret that join back
// to it; an error never holds any part of the input (a malformed value may
// be nothing but the secret).
func FuzzParseToken(f *testing.F) {
	for _, s := range []string{"corral@pve!op=0d9e7a2c-5f1b-4c3e-9a8d-112233445566", "corral-op-secret", "a@b!c=", "@!=", "a@pve!t=x y", " root@pam!sim=s3cr3t ", "a@b@c!d!e=f=g"} {
		f.Add(s)
	}
	f.Fuzz(checkParseToken)
}

func checkParseToken(t *testing.T, s string) {
	tok, err := parseToken(s)
	if err != nil {
		// Every part of s longer than a word of the message stays out.
		for _, part := range strings.FieldsFunc(s, func(r rune) bool { return strings.ContainsRune("=!@ \t\r\n", r) }) {
			if len(part) >= 12 && strings.Contains(err.Error(), part) {
				t.Fatalf("parseToken(%q): the error holds %q: %v", s, part, err)
			}
		}
		return
	}
	if tok.id+"="+tok.secret != strings.TrimSpace(s) || tok.secret == "" || strings.ContainsAny(tok.id, "=") {
		t.Fatalf("parseToken(%q) = %q, %q", s, tok.id, tok.secret)
	}
}

// FuzzParseFingerprint: a fingerprint is 32 bytes and prints (as PVE
// does) to text that parses to the same bytes.
func FuzzParseFingerprint(f *testing.F) {
	for _, s := range []string{strings.Repeat("AB:", 31) + "AB", strings.Repeat("ab", 32), "AB:CD", "", strings.Repeat("0", 63), " " + strings.Repeat("12", 32) + " "} {
		f.Add(s)
	}
	f.Fuzz(checkParseFingerprint)
}

func checkParseFingerprint(t *testing.T, s string) {
	b, err := parseFingerprint(s)
	if err != nil {
		return
	}
	p := formatFingerprint(b)
	again, err := parseFingerprint(p)
	if len(b) != 32 || err != nil || !bytes.Equal(again, b) {
		t.Fatalf("parseFingerprint(%q) = %x, printed %q, read back %x, %v", s, b, p, again, err)
	}
}

func TestFuzzWireSmoke(t *testing.T) {
	bytesSmoke := func(name string, seeds []string, dict []string, n int, check func(*testing.T, []byte)) {
		t.Run(name, func(t *testing.T) {
			var added [][]any
			for _, s := range seeds {
				added = append(added, []any{[]byte(s)})
			}
			in := mutate.New(1, dict...).Inputs(mutate.Seeds(t, name, added), n)
			mutate.Run(t, in, func(t *testing.T, a []any) { check(t, a[0].([]byte)) })
		})
	}
	strSmoke := func(name string, seeds []string, dict []string, n int, check func(*testing.T, string)) {
		t.Run(name, func(t *testing.T) {
			var added [][]any
			for _, s := range seeds {
				added = append(added, []any{s})
			}
			in := mutate.New(1, dict...).Inputs(mutate.Seeds(t, name, added), n)
			mutate.Run(t, in, func(t *testing.T, a []any) { check(t, a[0].(string)) })
		})
	}
	jsonDict := []string{"{", "}", "[", "]", ",", ":", `"`, "null", "true", "1e999", `"mp0"`, `"net0"`, `"unused0"`, `"mp255"`, `"lxc"`, `"rootfs"`}
	bytesSmoke("FuzzContainerConfig", fuzzContainerConfigSeeds, jsonDict, 3000, checkContainerConfig)
	bytesSmoke("FuzzWireScalars", []string{`1`, `"1"`, `true`, `null`, `"42"`, `1e+15`, `"0.00"`}, jsonDict, 3000, checkWireScalars)
	strSmoke("FuzzParseToken", []string{"corral@pve!op=0d9e7a2c-5f1b-4c3e-9a8d-112233445566", "corral-op-secret"}, []string{"@", "!", "=", " ", "pve", "0d9e7a2c-5f1b-4c3e-9a8d"}, 3000, checkParseToken)
	strSmoke("FuzzParseFingerprint", []string{strings.Repeat("AB:", 31) + "AB", strings.Repeat("ab", 32)}, []string{":", "A", "f", "0", " "}, 3000, checkParseFingerprint)
}
