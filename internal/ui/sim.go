package ui

import (
	"fmt"
	"io"
	"path/filepath"

	"github.com/corralhq/corral/internal/sim/guest"
)

// SimBanner is what corral sim serve says it serves.
type SimBanner struct {
	Version     string
	URL         string
	Fingerprint string
	State       string
	// SSHPort and Block: the guests' SSH port and their 127.<Block>
	// address block.
	SSHPort, Block int
	// Isolated: CTs run in LXC, reaching the API at APIPort; else
	// Refused says why they will not start, or Unisolated why they run
	// on the host.
	Isolated   bool
	APIPort    int
	Refused    error
	Unisolated error
}

// WriteSimBanner writes corral sim serve's banner to w (stdout): where
// the API is, how to trust it and log in, and how its CTs run.
func WriteSimBanner(w io.Writer, b SimBanner) {
	fmt.Fprintf(w, "corral sim: Proxmox VE %s emulator\n", b.Version)
	fmt.Fprintf(w, "  endpoint:    %s/api2/json\n", b.URL)
	fmt.Fprintf(w, "  fingerprint: %s\n", b.Fingerprint)
	fmt.Fprintf(w, "  state:       %s\n", b.State)
	fmt.Fprintf(w, "  guest ssh:   port %d on each running container's address (ip=dhcp: 127.%d.<vmid/256>.<vmid%%256>)\n", b.SSHPort, b.Block)
	switch {
	case b.Isolated:
		fmt.Fprintf(w, "  containers:  LXC; from inside, the API is https://%s:%d\n", guest.GatewayIP, b.APIPort)
	case b.Refused != nil:
		fmt.Fprintf(w, "  containers:  WILL NOT START: %v\n", b.Refused)
	default:
		fmt.Fprintf(w, "  containers:  NOT ISOLATED (--unisolated-guests: guest commands run on this host and can see and kill its processes; %v)\n", b.Unisolated)
	}
	fmt.Fprintf(w, "  credentials: . %s\n", filepath.Join(b.State, "env"))
}

// WriteSimShuttingDown says on w (stderr) that corral sim serve stops.
func WriteSimShuttingDown(w io.Writer) {
	fmt.Fprintln(w, "corral sim: shutting down")
}

// WriteSimStopped says on w what corral sim stop did: stopped the local
// emulator at pid (0: none was running), its state kept in dir.
func WriteSimStopped(w io.Writer, pid int, dir string) {
	if pid == 0 {
		fmt.Fprintf(w, "corral sim: the local emulator is not running (state in %s)\n", dir)
		return
	}
	fmt.Fprintf(w, "corral sim: stopped the local emulator (pid %d); its state is kept in %s\n", pid, dir)
}

// WriteStandInTemplate says on w (stderr) that CTs get the stand-in
// template because the real one cannot be built here (why).
func WriteStandInTemplate(w io.Writer, why string) {
	fmt.Fprintf(w, "corral sim: CTs get a stand-in Debian 12 template that boots no init, not the real Debian 12 (%s); `corral sim doctor` lists what the real one needs\n", why)
}

// WriteStandInTemplateFailed says on w (stderr) that building the real
// template failed (err), so CTs get the stand-in.
func WriteStandInTemplateFailed(w io.Writer, err error) {
	fmt.Fprintf(w, "corral sim: CTs get a stand-in Debian 12 template that boots no init, not the real Debian 12: %v; fix that and start again, or insist with --real-templates\n", err)
}
