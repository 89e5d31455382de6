package schema_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/corralhq/corral/internal/sim/schema"
)

// fuzzMethods are the endpoints FuzzValidate sends arbitrary parameters
// to: the ones corral writes with, where a wrong verdict would matter.
var fuzzMethods = []struct{ verb, path string }{
	{"POST", "/nodes/pve/lxc"},
	{"PUT", "/nodes/pve/lxc/101/config"},
	{"PUT", "/nodes/pve/lxc/101/resize"},
	{"POST", "/nodes/pve/lxc/101/move_volume"},
	{"DELETE", "/nodes/pve/lxc/101"},
	{"POST", "/nodes/pve/storage/local-lvm/content"},
	{"GET", "/cluster/resources"},
}

// paramsFromLines turns the fuzzer's text into a parameter map: one
// "key=value" per line (a line without "=" is a key with an empty value).
func paramsFromLines(text string) map[string]string {
	params := map[string]string{}
	for _, line := range strings.Split(text, "\n") {
		if line == "" {
			continue
		}
		k, v, _ := strings.Cut(line, "=")
		params[k] = v
	}
	return params
}

// FuzzValidate: Validate never panics on any parameter map, and every
// rejection is a *ParamError naming at least one parameter, each with a
// message, as PVE's 400 "Parameter verification failed." carries them.
func FuzzValidate(f *testing.F) {
	for _, s := range fuzzValidateSeeds {
		f.Add(s.which, s.text)
	}
	targets := fuzzValidateTargets(f)
	f.Fuzz(func(t *testing.T, which uint8, text string) { checkValidate(t, targets, which, text) })
}

var fuzzValidateSeeds = []struct {
	which uint8
	text  string
}{
	{0, "vmid=105\nostemplate=local:vztmpl/debian-12-standard_12.12-1_amd64.tar.zst\nrootfs=local-lvm:8\nmp0=local-lvm:1,mp=/data\nnet0=name=eth0,bridge=vmbr0,ip=dhcp\nfeatures=nesting=1\nunprivileged=1"},
	{1, "mp0=local-lvm:vm-105-disk-1,mp=/srv/data,backup=0\ndelete=mp1,unused0\ndigest=0123456789abcdef0123456789abcdef01234567"},
	{2, "disk=mp0\nsize=+1G"},
	{3, "volume=unused0\ntarget-vmid=900\ntarget-volume=unused3"},
	{4, "purge=1\ndestroy-unreferenced-disks=1\nforce=1"},
	{5, "vmid=900\nfilename=vm-900-disk-0.raw\nsize=1G\nformat=raw"},
	{6, "type=vm"},
}

// validateTarget is a method of fuzzMethods with its path parameters.
type validateTarget struct {
	m    *schema.Method
	path map[string]string
}

// fuzzValidateTargets looks fuzzMethods up in the 9.1 schema.
func fuzzValidateTargets(tb testing.TB) []validateTarget {
	tb.Helper()
	a := mustLoad(tb, "9.1")
	targets := make([]validateTarget, len(fuzzMethods))
	for i, fm := range fuzzMethods {
		m, pp, ok := a.Lookup(fm.verb, fm.path)
		if !ok {
			tb.Fatalf("Lookup(%s %s) found nothing", fm.verb, fm.path)
		}
		targets[i] = validateTarget{m, pp}
	}
	return targets
}

// checkValidate is FuzzValidate's property, shared with its smoke test;
// which picks the method from targets, text holds the parameters.
func checkValidate(t *testing.T, targets []validateTarget, which uint8, text string) {
	tg := targets[int(which)%len(targets)]
	params := paramsFromLines(text)
	for k, v := range tg.path {
		params[k] = v
	}
	err := tg.m.Validate(params)
	if err == nil {
		return
	}
	var pe *schema.ParamError
	if !errors.As(err, &pe) {
		t.Fatalf("%s %s: Validate(%q) = %T %v, want a *ParamError", tg.m.HTTPMethod, tg.m.Path, params, err, err)
	}
	if len(pe.Errors) == 0 {
		t.Fatalf("%s %s: Validate(%q): a ParamError that names no parameter", tg.m.HTTPMethod, tg.m.Path, params)
	}
	for k, msg := range pe.Errors {
		if strings.TrimSpace(msg) == "" {
			t.Fatalf("%s %s: Validate(%q): parameter %q rejected without a message", tg.m.HTTPMethod, tg.m.Path, params, k)
		}
	}
	if err.Error() == "" {
		t.Fatalf("empty error text")
	}
}
