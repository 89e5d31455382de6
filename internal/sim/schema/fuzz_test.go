package schema_test

import (
	"strings"
	"testing"

	"github.com/corralhq/corral/internal/sim/schema"
)

// fuzzParams are the property-string parameters FuzzParseProperty picks
// from with its first argument.
var fuzzParams = []struct{ verb, path, name string }{
	{"PUT", "/nodes/pve/lxc/101/config", "mp0"},
	{"PUT", "/nodes/pve/lxc/101/config", "rootfs"},
	{"PUT", "/nodes/pve/lxc/101/config", "net0"},
	{"PUT", "/nodes/pve/lxc/101/config", "features"},
	{"PUT", "/nodes/pve/lxc/101/config", "dev0"},
	{"PUT", "/nodes/pve/lxc/101/config", "unused0"},
	{"PUT", "/nodes/pve/qemu/100/config", "net0"},
	{"PUT", "/nodes/pve/qemu/100/config", "scsi0"},
}

// FuzzParseProperty checks that parsing never panics, that parsed
// booleans are normalized, and that PVE's normalized printing is stable:
// printing, parsing and printing again gives the same string whenever the
// printed form parses and the default key's value holds no "=" (PVE
// prints that value bare, so it does not parse back, or parses back as
// another key, in PVE as here).
func FuzzParseProperty(f *testing.F) {
	for _, s := range fuzzParsePropertySeeds {
		f.Add(s.which, s.value)
	}
	params := fuzzPropertyParams(f)
	f.Fuzz(func(t *testing.T, which uint8, value string) { checkParseProperty(t, params, which, value) })
}

var fuzzParsePropertySeeds = []struct {
	which uint8
	value string
}{
	{0, "local-lvm:vm-101-disk-1,mp=/data,backup=1,size=8G"},
	{2, "name=eth0,bridge=vmbr0,hwaddr=BC:24:11:5E:7A:01,ip=dhcp"},
	{6, "virtio=BC:24:11:00:00:01,bridge=vmbr0,firewall=1"},
}

// fuzzPropertyParams loads the parameters of fuzzParams from the 9.1 schema.
func fuzzPropertyParams(tb testing.TB) []*schema.Param {
	tb.Helper()
	a := mustLoad(tb, "9.1")
	params := make([]*schema.Param, len(fuzzParams))
	for i, fp := range fuzzParams {
		m := mustMethod(tb, a, fp.verb, fp.path)
		if params[i] = m.Param(fp.name); params[i] == nil {
			tb.Fatalf("%s %s has no parameter %s", fp.verb, fp.path, fp.name)
		}
	}
	return params
}

// checkParseProperty is FuzzParseProperty's property, shared with its
// smoke test; which picks the parameter from params.
func checkParseProperty(t *testing.T, params []*schema.Param, which uint8, value string) {
	p := params[int(which)%len(params)]
	kv, err := p.ParseProperty(value)
	if err != nil {
		return
	}
	for k, v := range kv {
		prop := p.PropertyFormat.Keys[k]
		if prop == nil {
			t.Fatalf("%s: ParseProperty(%q) returned unknown key %q", p.Name, value, k)
		}
		if prop.Type == "boolean" && v != "1" && v != "0" {
			t.Fatalf("%s: ParseProperty(%q): boolean %s=%q not normalized", p.Name, value, k, v)
		}
	}
	if dk := p.PropertyFormat.DefaultKey(); dk != "" && strings.Contains(kv[dk], "=") {
		return
	}
	printed := schema.PrintProperty(p.PropertyFormat, kv)
	again, err := p.ParseProperty(printed)
	if err != nil {
		return
	}
	if reprinted := schema.PrintProperty(p.PropertyFormat, again); reprinted != printed {
		t.Fatalf("%s: %q printed as %q, which prints as %q", p.Name, value, printed, reprinted)
	}
}
