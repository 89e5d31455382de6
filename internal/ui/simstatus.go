package ui

import (
	"fmt"
	"io"
	"time"

	"github.com/corralhq/corral/internal/sim/guest"
)

// SimStatus is `corral sim status -o json`, and what its text says.
type SimStatus struct {
	Running           bool       `json:"running"`
	PID               int        `json:"pid,omitempty"`
	Endpoint          string     `json:"endpoint,omitempty"`
	Fingerprint       string     `json:"fingerprint,omitempty"`
	State             string     `json:"state"`
	Log               string     `json:"log"`
	Started           *time.Time `json:"started,omitempty"`
	UptimeSeconds     *int64     `json:"uptime_seconds,omitempty"`
	Containers        *int       `json:"containers,omitempty"`
	ContainersRunning *int       `json:"containers_running,omitempty"`
	// Guests is how CTs run: lxc, unisolated (the fallback view, opted
	// in) or refused (they do not start: GuestsRefused says why).
	Guests        string `json:"guests,omitempty"`
	GuestsRefused string `json:"guests_refused,omitempty"`
	// Error: the process runs but its API did not answer.
	Error string `json:"error,omitempty"`
}

// WriteSimStatus writes corral sim status: whether the local emulator
// runs, where, and how its containers run.
func WriteSimStatus(w io.Writer, s SimStatus) {
	if !s.Running {
		fmt.Fprintf(w, "local emulator: not running (the next corral command without PROXMOX_VE_ENDPOINT starts it)\n")
		fmt.Fprintf(w, "  state:      %s\n  log:        %s\n", s.State, s.Log)
		return
	}
	fmt.Fprintf(w, "local emulator: running (pid %d, up %s)\n", s.PID, (time.Duration(*s.UptimeSeconds) * time.Second).String())
	fmt.Fprintf(w, "  endpoint:   %s\n", s.Endpoint)
	fmt.Fprintf(w, "  state:      %s\n  log:        %s\n", s.State, s.Log)
	if s.Error != "" {
		fmt.Fprintf(w, "  error:      %s (corral sim stop, then any command starts it again)\n", s.Error)
	} else {
		fmt.Fprintf(w, "  containers: %d running of %d\n", *s.ContainersRunning, *s.Containers)
	}
	switch s.Guests {
	case "refused":
		fmt.Fprintf(w, "  guests:     WILL NOT START: %s\n", s.GuestsRefused)
	case "unisolated":
		fmt.Fprintf(w, "  guests:     NOT ISOLATED (%s=1: guest commands run on this host)\n", guest.UnisolatedEnv)
	default:
		fmt.Fprintf(w, "  guests:     LXC\n")
	}
}
