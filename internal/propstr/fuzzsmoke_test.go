package propstr

import (
	"testing"

	"github.com/corralhq/corral/internal/testutil/mutate"
)

// The smoke tests run each fuzz target's property over inputs mutated
// from its seeds with a fixed seed, so plain go test covers more than the
// seeds, deterministically.

var propDict = []string{",", "=", ";", ":", "/", "mp=", "size=", "backup=", "volume=", "name=", "bridge=", "rate=", "mtu=", "tag=", "ro=1", "local-lvm:", "vm-105-disk-1", "G", "K", "iB", "\\,", " "}

func smoke(t *testing.T, name string, seeds []string, n int, check func(*testing.T, string), dict ...string) {
	t.Helper()
	var added [][]any
	for _, s := range seeds {
		added = append(added, []any{s})
	}
	in := mutate.New(1, dict...).Inputs(mutate.Seeds(t, name, added), n)
	mutate.Run(t, in, func(t *testing.T, a []any) { check(t, a[0].(string)) })
}

func TestFuzzSplitSmoke(t *testing.T) {
	var added [][]any
	for _, s := range fuzzSplitSeeds {
		added = append(added, []any{s.s, s.withDefault})
	}
	in := mutate.New(1, propDict...).Inputs(mutate.Seeds(t, "FuzzSplit", added), 4000)
	mutate.Run(t, in, func(t *testing.T, a []any) { checkSplit(t, a[0].(string), a[1].(bool)) })
}

func TestFuzzParseMountPointSmoke(t *testing.T) {
	smoke(t, "FuzzParseMountPoint", fuzzParseMountPointSeeds, 4000, checkParseMountPoint, propDict...)
}

func TestFuzzParseNetDeviceSmoke(t *testing.T) {
	smoke(t, "FuzzParseNetDevice", fuzzParseNetDeviceSeeds, 4000, checkParseNetDevice, propDict...)
}

func TestFuzzParseBoolSmoke(t *testing.T) {
	smoke(t, "FuzzParseBool", []string{"1", "0", "yes", "No", "TRUE", "off"}, 1000, checkParseBool, "Y", "e", "s", "N", "o", "1")
}
