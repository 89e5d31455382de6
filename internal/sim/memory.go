package sim

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
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

// HostMemoryReserve is what the host keeps for itself when the nodes'
// memory comes from it: 2 GiB, or a quarter of MemTotal on small hosts.
func HostMemoryReserve(memTotal int64) int64 {
	return min(2<<30, memTotal/4)
}

// HostMemTotal is /proc/meminfo's MemTotal in bytes.
func HostMemTotal() (int64, error) {
	f, err := os.Open("/proc/meminfo")
	if err != nil {
		return 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		rest, ok := strings.CutPrefix(sc.Text(), "MemTotal:")
		if !ok {
			continue
		}
		kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
		if err != nil {
			return 0, fmt.Errorf("/proc/meminfo: MemTotal %q: %w", rest, err)
		}
		return kb * 1024, nil
	}
	if err := sc.Err(); err != nil {
		return 0, err
	}
	return 0, errors.New("/proc/meminfo: no MemTotal")
}

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
