package sim

import (
	"fmt"

	"github.com/corralhq/corral/internal/sim/prereq"
)

// Node memory and memory admission (model/admission.go has the rule and
// why PVE has none).
//
//   - Options.NodeMemory > 0 (corral sim serve --node-memory): every node
//     has that much, and a CT that does not fit is refused, whatever the
//     guest runtime.
//   - Otherwise, with real containers (the LXC runtime, guest.Manager
//     Isolated): the host's MemTotal (/proc/meminfo) minus a reserve for
//     the host itself (HostMemoryReserve), shared evenly between the
//     nodes, since every node's containers run on this one machine.
//   - Otherwise (the filesystem view, CORRAL_SIM_RUNTIME=view, used by
//     the scale benchmarks; or no runtime at all): off. A CT there is no
//     process that holds memory, so there is nothing to protect, and
//     benchmarks of thousands of CTs keep working; the nodes report the
//     memory they have (32 GiB each by default).

// HostMemoryReserve and HostMemTotal: see package prereq.
var (
	HostMemoryReserve = prereq.HostMemoryReserve
	HostMemTotal      = prereq.HostMemTotal
)

// nodeMemory is each node's memory with admission on, or 0 for off.
func nodeMemory(opts Options, isolated bool, nodes int) (int64, error) {
	if opts.NodeMemory > 0 {
		return opts.NodeMemory, nil
	}
	if !isolated {
		return 0, nil
	}
	total, err := HostMemTotal()
	if err != nil {
		return 0, fmt.Errorf("sim: node memory: %w (give it with --node-memory)", err)
	}
	per := (total - HostMemoryReserve(total)) / int64(max(nodes, 1))
	return max(per, 1<<20), nil
}
