package model

import (
	"testing"

	"github.com/corralhq/corral/internal/testutil/mutate"
)

// The smoke tests run each fuzz target's property over inputs mutated
// from its seeds with a fixed seed, so plain go test covers more than the
// seeds, deterministically.

// propDict holds the separators and keys of PVE property strings.
var propDict = []string{",", "=", ";", ":", "/", "mp=", "size=", "backup=", "volume=", "name=", "ro=1", "local-lvm:", "vm-105-disk-1", "G", "\\,"}

func TestFuzzParsePropSmoke(t *testing.T) {
	t.Parallel()
	var added [][]any
	for _, s := range fuzzParsePropSeeds {
		added = append(added, []any{s.s, s.withDefault})
	}
	in := mutate.New(1, propDict...).Inputs(mutate.Seeds(t, "FuzzParseProp", added), 5000)
	mutate.Run(t, in, func(t *testing.T, a []any) { checkParseProp(t, a[0].(string), a[1].(bool)) })
}

func TestFuzzParseMountPointSmoke(t *testing.T) {
	t.Parallel()
	var added [][]any
	for _, s := range fuzzParseMountPointSeeds {
		added = append(added, []any{s.vol, s.path, s.backup})
	}
	in := mutate.New(1, propDict...).Inputs(mutate.Seeds(t, "FuzzParseMountPoint", added), 5000)
	mutate.Run(t, in, func(t *testing.T, a []any) { checkParseMountPoint(t, a[0].(string), a[1].(string), a[2].(bool)) })
}

func TestFuzzWireSmoke(t *testing.T) {
	t.Parallel()
	one := func(name string, seeds []string, dict []string, n int, check func(*testing.T, string)) {
		t.Run(name, func(t *testing.T) {
			var added [][]any
			for _, s := range seeds {
				added = append(added, []any{s})
			}
			in := mutate.New(1, dict...).Inputs(mutate.Seeds(t, name, added), n)
			mutate.Run(t, in, func(t *testing.T, a []any) { check(t, a[0].(string)) })
		})
	}
	one("FuzzParseNet", fuzzParseNetSeeds, propDict, 4000, checkParseNet)
	one("FuzzParseVolID", []string{"local-lvm:vm-101-disk-0", "local:vztmpl/x.tar.zst", "a:b:c"}, []string{":", "vm-", "-disk-", "base-", "/", "-1"}, 3000, checkParseVolID)
	one("FuzzParseNewDisk", []string{"local-lvm:8", "local-lvm:0.5"}, []string{":", ".", "e", "0", " "}, 3000, checkParseNewDisk)
	one("FuzzVzdumpParsePrune", []string{"keep-last=3", "keep-all=1,keep-last=2"}, []string{",", "=", "keep-", "keep-last=", "keep-all=1", "0", "-1"}, 3000, checkVzdumpParsePrune)
	one("FuzzConfigText", []string{"My app.", "x\nlock: backup", "x\n[snap]\ntags: corral-app-evil"}, []string{"\n", "\r", "[", "]", "#", "%", ": ", "lock", "tags", "corral-", "\x00", "\u2028"}, 4000, checkConfigText)
	t.Run("FuzzUniqueTags", func(t *testing.T) {
		added := [][]any{{"corral;corral-app-notes", false}, {"Zeta;alpha;alpha", true}}
		in := mutate.New(1, ";", ",", " ", "\t", "İ", "K", "corral").Inputs(mutate.Seeds(t, "FuzzUniqueTags", added), 3000)
		mutate.Run(t, in, func(t *testing.T, a []any) { checkUniqueTags(t, a[0].(string), a[1].(bool)) })
	})
}
