package schema_test

import (
	"testing"

	"github.com/corralhq/corral/internal/testutil/mutate"
)

// The smoke tests run each fuzz target's property over inputs mutated
// from its seeds with a fixed seed, so plain go test covers more than the
// seeds, deterministically.

// propDict holds the separators and keys of PVE property strings.
var propDict = []string{",", "=", ";", ":", "/", "mp=", "size=", "backup=1", "volume=", "name=", "bridge=", "ip=", "hwaddr=",
	"ro=1", "local-lvm:", "vm-101-disk-1", "8G", "firewall=yes", "\\,"}

func TestFuzzParsePropertySmoke(t *testing.T) {
	params := fuzzPropertyParams(t)
	var added [][]any
	for _, s := range fuzzParsePropertySeeds {
		added = append(added, []any{s.which, s.value})
	}
	in := mutate.New(1, propDict...).Inputs(mutate.Seeds(t, "FuzzParseProperty", added), 3000)
	mutate.Run(t, in, func(t *testing.T, a []any) { checkParseProperty(t, params, a[0].(uint8), a[1].(string)) })
}

func TestFuzzValidateSmoke(t *testing.T) {
	targets := fuzzValidateTargets(t)
	var added [][]any
	for _, s := range fuzzValidateSeeds {
		added = append(added, []any{s.which, s.text})
	}
	dict := append([]string{"\n", "vmid=", "delete=", "digest=", "size=", "+", "-", "hostname=", "memory=", "cores=",
		"ostemplate=", "rootfs=", "mp255=", "net0=", "unprivileged=", "force=", "=1", "=0"}, propDict...)
	in := mutate.New(1, dict...).Inputs(mutate.Seeds(t, "FuzzValidate", added), 3000)
	mutate.Run(t, in, func(t *testing.T, a []any) { checkValidate(t, targets, a[0].(uint8), a[1].(string)) })
}
