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
	var added [][]any
	for _, s := range fuzzParsePropSeeds {
		added = append(added, []any{s.s, s.withDefault})
	}
	in := mutate.New(1, propDict...).Inputs(mutate.Seeds(t, "FuzzParseProp", added), 5000)
	mutate.Run(t, in, func(t *testing.T, a []any) { checkParseProp(t, a[0].(string), a[1].(bool)) })
}

func TestFuzzParseSizeSmoke(t *testing.T) {
	var added [][]any
	for _, s := range fuzzParseSizeSeeds {
		added = append(added, []any{s})
	}
	in := mutate.New(1, "K", "M", "G", "T", "i", "B", "KiB", ".", "e", "-", "+", "0").Inputs(mutate.Seeds(t, "FuzzParseSize", added), 5000)
	mutate.Run(t, in, func(t *testing.T, a []any) { checkParseSize(t, a[0].(string)) })
}

func TestFuzzParseMountPointSmoke(t *testing.T) {
	var added [][]any
	for _, s := range fuzzParseMountPointSeeds {
		added = append(added, []any{s.vol, s.path, s.backup})
	}
	in := mutate.New(1, propDict...).Inputs(mutate.Seeds(t, "FuzzParseMountPoint", added), 5000)
	mutate.Run(t, in, func(t *testing.T, a []any) { checkParseMountPoint(t, a[0].(string), a[1].(string), a[2].(bool)) })
}
