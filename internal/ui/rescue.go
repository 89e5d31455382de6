package ui

import (
	"fmt"
	"io"

	"github.com/corralhq/corral/internal/apply"
	"github.com/corralhq/corral/internal/plan"
)

// WriteRescueEnded says on w (stderr) that the rescue r of app ended and
// gave the volumes back; left: an earlier corral rescue left it.
func WriteRescueEnded(w io.Writer, app string, r *plan.Rescue, left bool) {
	what := "ended the rescue"
	if left {
		what = "ended the rescue an earlier corral rescue left"
	}
	fmt.Fprintf(w, "%s of app %s: rescue ct %d on %s removed, volumes back in ct %d\n", what, app, r.VMID, r.Node, r.AppVMID)
}

// WriteNotInRescue says on w (stderr) that corral rescue --end found no
// rescue of app.
func WriteNotInRescue(w io.Writer, app string) {
	fmt.Fprintf(w, "app %s is not in rescue; nothing to end\n", app)
}

// WriteRescueOver says on w (stderr) that app stays stopped after its
// rescue, and the command (next) that starts it.
func WriteRescueOver(w io.Writer, app, next string) {
	fmt.Fprintf(w, "app %s is stopped; start it with %s\n", app, next)
}

// WriteRescueHeld says on w (stderr) which volumes rescue s holds and
// where they are mounted; shell: an interactive shell follows, which
// ends the rescue when left.
func WriteRescueHeld(w io.Writer, s *apply.RescueSession, shell bool) {
	fmt.Fprintf(w, "rescue ct %d on %s holds app %s's volumes (its container %d is stopped):\n", s.VMID, s.Node, s.App, s.AppVMID)
	for _, v := range s.Volumes {
		fmt.Fprintf(w, "  %s  %s (%s)\n", v.Mount, v.Volume, v.Key)
	}
	for _, u := range s.Unmounted {
		fmt.Fprintf(w, "  not mounted: %s (the manifest declares no mount for it)\n", u)
	}
	if shell {
		fmt.Fprintln(w, "leave the shell (exit) to end the rescue")
	}
}
