// Command corral manages Proxmox VE LXC containers from a declarative
// manifest, and embeds a Proxmox VE emulator (corral sim).
package main

import (
	"os"

	"github.com/corralhq/corral/internal/cli"
)

// main runs corral; cli.Main says how it answers Ctrl-C.
func main() {
	os.Exit(cli.Main())
}
