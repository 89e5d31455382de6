package plan

import (
	"testing"

	"github.com/corralhq/corral/internal/testutil/mutate"
)

// The smoke tests run each fuzz target's property over inputs mutated
// from its seeds with a fixed seed, so plain go test covers more than the
// seeds, deterministically.

func TestFuzzParseMountPointSmoke(t *testing.T) {
	var added [][]any
	for _, s := range fuzzParseMountPointSeeds {
		added = append(added, []any{s.raw, s.vol, s.path, s.backup})
	}
	dict := []string{",", "=", ":", "/", "mp=", "size=", "backup=", "backup=1", "volume=", "local-lvm:", "vm-105-disk-1", "\\,"}
	in := mutate.New(1, dict...).Inputs(mutate.Seeds(t, "FuzzParseMountPoint", added), 5000)
	mutate.Run(t, in, func(t *testing.T, a []any) {
		checkParseMountPoint(t, a[0].(string), a[1].(string), a[2].(string), a[3].(bool))
	})
}

func TestFuzzParseSizeStringSmoke(t *testing.T) {
	var added [][]any
	for _, s := range fuzzParseSizeStringSeeds {
		added = append(added, []any{s})
	}
	in := mutate.New(1, "K", "M", "G", "T", "i", "B", ".", "e", "E", "-", "+", "0", "x", "_").Inputs(mutate.Seeds(t, "FuzzParseSizeString", added), 5000)
	mutate.Run(t, in, func(t *testing.T, a []any) { checkParseSizeString(t, a[0].(string)) })
}

func TestFuzzParseKeeperRecordsSmoke(t *testing.T) {
	var added [][]any
	for _, s := range fuzzParseKeeperRecordsSeeds() {
		added = append(added, []any{s})
	}
	dict := []string{"corral-volume: ", "corral-adopting: ", "corral-volume:", "/", "=", ">", "\n", "\r\n", " ", ":", "unused0", "local-lvm:vm-1-disk-0"}
	in := mutate.New(1, dict...).Inputs(mutate.Seeds(t, "FuzzParseKeeperRecords", added), 4000)
	mutate.Run(t, in, func(t *testing.T, a []any) { checkParseKeeperRecords(t, a[0].(string)) })
}

func TestFuzzDescriptionMarkersSmoke(t *testing.T) {
	var added [][]any
	for _, s := range fuzzDescriptionMarkersSeeds {
		added = append(added, []any{s})
	}
	dict := []string{"corral-hostkey: ", "corral-app: ", "corral-provisioned: ", "corral-volume: ", "corral-adopting: ", "corral-", "CORRAL-",
		"\n", "\r", "\r\n", "\v", "\f", "\u0085", "\u2028", "\u2029", " ", "\t", "\u00a0", "\u200b", "\u200d", "\ufeff", "\u202e", "\u3000", "\u2003", "\u00ad", "\x00", "\xff",
		"a/b=local:1", ">unused0", "ssh-ed25519 AAAA"}
	in := mutate.New(1, dict...).Inputs(mutate.Seeds(t, "FuzzDescriptionMarkers", added), 6000)
	mutate.Run(t, in, func(t *testing.T, a []any) { checkDescriptionMarkers(t, a[0].(string)) })
}

func TestFuzzParseTagsSmoke(t *testing.T) {
	var added [][]any
	for _, s := range fuzzParseTagsSeeds {
		added = append(added, []any{s.pve, s.user})
	}
	dict := []string{";", ",", " ", "corral", "corral-", "corral-app-", "corral-keeper", "CORRAL", "-", "_", "+", ".", "\u017f", "\u212a"}
	in := mutate.New(1, dict...).Inputs(mutate.Seeds(t, "FuzzParseTags", added), 5000)
	mutate.Run(t, in, func(t *testing.T, a []any) { checkParseTags(t, a[0].(string), a[1].(string)) })
}

func TestFuzzParseKeeperMountPathSmoke(t *testing.T) {
	var added [][]any
	for _, s := range []string{"/corral/notes/data", "/corral/a/b/c", "/corral//x", "/srv/data"} {
		added = append(added, []any{s})
	}
	in := mutate.New(1, "/", "/corral/", "corral", "..", ".").Inputs(mutate.Seeds(t, "FuzzParseKeeperMountPath", added), 3000)
	mutate.Run(t, in, func(t *testing.T, a []any) { checkParseKeeperMountPath(t, a[0].(string)) })
}
