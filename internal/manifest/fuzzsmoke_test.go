package manifest_test

import (
	"testing"

	"github.com/corralhq/corral/internal/testutil/mutate"
)

// TestFuzzParseSmoke runs FuzzParse's property over inputs mutated from
// its seeds with a fixed seed, so plain go test covers more than the
// seeds, deterministically.
func TestFuzzParseSmoke(t *testing.T) {
	var added [][]any
	for _, data := range fuzzParseSeeds(t) {
		added = append(added, []any{data})
	}
	dict := []string{"\n", "\n  ", "\n    ", ": ", ":", "- ", "-", "{", "}", "[", "]", ",", "&a ", "*a", "<<: *a", "!!str ", "!!int ",
		"'", "\"", "#", "---", "...", "|", ">", "~", "null", "true", "yes", "0o17", "0x1F", ".inf",
		"apps:", "name: ", "template: ", "size: ", "mount: ", "volumes:", "storage: ", "reclaim: ", "adopt: ",
		"provision:", "health:", "backup:", "network:", "ip: ", "gateway: ", "bridge: ", "cores: ", "memory: ",
		"${env:", "${file:", "secrets:", "run: ", "path: ", "user:", "compose:", "1G", "512M", "dhcp", "10.0.0.2/24"}
	in := mutate.New(1, dict...).Inputs(mutate.Seeds(t, "FuzzParse", added), 3000)
	mutate.Run(t, in, func(t *testing.T, a []any) { checkParse(t, a[0].([]byte)) })
}
