package cli

import (
	"fmt"

	"github.com/corralhq/corral/internal/lazyre"
	"github.com/corralhq/corral/internal/pvesize"
)

// nodeMemoryForm is --node-memory: a size with its unit ("16G", "2048M",
// "1.5T", "8GiB"); a bare number is refused, as it could mean bytes
// (PVE's sizes) or MiB (a CT's memory).
var nodeMemoryForm = lazyre.New(`^\d+(\.\d+)?[KMGT](iB)?$`)

// parseNodeMemory reads `corral sim serve --node-memory`: "" is 0 (the
// emulator decides: the host's memory with real containers, none
// enforced otherwise).
func parseNodeMemory(s string) (int64, error) {
	if s == "" {
		return 0, nil
	}
	if !nodeMemoryForm.MatchString(s) {
		return 0, fmt.Errorf("--node-memory %q: give a size with its unit, e.g. 2048M or 16G", s)
	}
	n, err := pvesize.Parse(s)
	if err != nil {
		return 0, fmt.Errorf("--node-memory: %w", err)
	}
	if n < 64<<20 {
		return 0, fmt.Errorf("--node-memory %s: want at least 64M (a CT's smallest memory is 16 MiB, its default 512)", s)
	}
	return n, nil
}
