package ui

import (
	"fmt"
	"io"
	"strings"

	"github.com/corralhq/corral/internal/sim/prereq"
)

// WriteSimDoctor renders corral sim doctor's report (and corral
// doctor's with the embedded emulator): one line per check, its fix
// below a missing one, then what the emulator will give.
func WriteSimDoctor(w io.Writer, r prereq.Report) {
	for _, c := range r.Checks {
		state := "ok"
		switch {
		case !c.OK && c.Required:
			state = "MISSING"
		case !c.OK:
			state = "missing"
		}
		fmt.Fprintf(w, "%-8s %-11s %s\n", state, c.Name, c.Found)
		if !c.OK {
			fmt.Fprintf(w, "%-8s %-11s needed for %s\n", "", "", c.For)
			fmt.Fprintf(w, "%-8s %-11s fix: %s\n", "", "", c.Fix)
		}
	}
	fmt.Fprintln(w)
	fmt.Fprintf(w, "containers: %s\n", r.Containers)
	if r.RealTemplates {
		fmt.Fprintln(w, "template:   the real Debian 12 (corral sim serve uses it by default)")
	} else {
		fmt.Fprintln(w, "template:   a stand-in that boots no init (fix the lines above for the real Debian 12)")
	}
	switch {
	case r.OK:
	case strings.HasPrefix(r.Containers, "unisolated"):
		fmt.Fprintln(w, "MISSING: CTs run unisolated here (you opted in): guest commands run directly on this host and can see and kill its processes; fix the required prerequisites above for LXC containers")
	default:
		fmt.Fprintln(w, "MISSING: the emulator refuses to start CTs on this machine until the required prerequisites above are fixed")
		fmt.Fprintln(w, "         (or run it with --unisolated-guests: guest commands then run directly on this host and can see and kill its processes)")
	}
}
