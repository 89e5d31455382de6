package pve_test

import (
	"testing"

	"github.com/corralhq/corral/internal/testutil/mutate"
)

// The smoke tests run each fuzz target's property over inputs mutated
// from its seeds with a fixed seed, so plain go test covers more than the
// seeds, deterministically.

func TestFuzzParseUPIDSmoke(t *testing.T) {
	var added [][]any
	for _, s := range fuzzParseUPIDSeeds {
		added = append(added, []any{s})
	}
	seeds := mutate.Seeds(t, "FuzzParseUPID", added)
	in := mutate.New(1, ":", "UPID:", "!", "@", "@pve", "pve", "0", "F", "ffffffff", "vzcreate", "101", "\\x3a").Inputs(seeds, 5000)
	mutate.Run(t, in, func(t *testing.T, a []any) { checkParseUPID(t, a[0].(string)) })
}
