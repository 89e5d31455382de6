package guest

import (
	"strconv"
	"strings"

	"github.com/corralhq/corral/internal/sim/model"
)

// bridgeNet is the emulator's own network namespace with its bridge
// vmbr0, where every CT's eth0 is plugged.
type bridgeNet struct {
	pid int // a process holding the namespace
}

func (n *bridgeNet) nsPath() string { return "/proc/" + strconv.Itoa(n.pid) + "/ns/net" }

func (n *bridgeNet) lxcConfig(b *strings.Builder, run model.GuestRun) {
	b.WriteString("lxc.net.0.type = empty\n")
}
