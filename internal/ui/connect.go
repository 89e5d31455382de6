package ui

import (
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/corralhq/corral/internal/sim/guest"
)

// WriteInsecureTLSWarning warns on w (stderr) that --insecure turned TLS
// verification off, so that nobody runs it unaware of what it exposes.
func WriteInsecureTLSWarning(w io.Writer) {
	fmt.Fprintln(w, "corral: warning: TLS verification is off (--insecure): anyone on the path can read the API token")
}

// WritePlainHTTPWarning warns on w (stderr) that the token travels
// unencrypted to an http: endpoint.
func WritePlainHTTPWarning(w io.Writer) {
	fmt.Fprintln(w, "corral: warning: plain http allowed (--insecure-plain-http): the API token crosses the network in clear text")
}

// WriteEmbeddedEmulatorNote says on w (stderr) that, without an endpoint,
// the command runs the emulator in its own process (env=1), with its
// state in dir.
func WriteEmbeddedEmulatorNote(w io.Writer, env, dir string) {
	fmt.Fprintf(w, "corral: no PROXMOX_VE_ENDPOINT set: using the embedded Proxmox VE emulator in this process (%s=1; state in %s)\n", env, dir)
}

// LocalEmulator is what a command says of the local emulator it connects
// to when no endpoint is set.
type LocalEmulator struct {
	// Started: this command started it (as pid, logging to Log).
	Started bool
	PID     int
	Dir     string
	Log     string
	// Unisolated: its guests run on this host (warned loudly).
	Unisolated bool
	// Notes are the settings it runs with that differ from this
	// command's.
	Notes []string
}

// WriteLocalEmulatorNote says on w (stderr) which local emulator the
// command uses: one line, more only when it started one that runs guests
// unisolated or whose settings differ from the command's.
func WriteLocalEmulatorNote(w io.Writer, e LocalEmulator) {
	if e.Started {
		fmt.Fprintf(w, "corral: no PROXMOX_VE_ENDPOINT set: started the local Proxmox VE emulator in the background (pid %d, state in %s, log %s; corral sim stop stops it)\n",
			e.PID, e.Dir, e.Log)
		if e.Unisolated {
			fmt.Fprintf(w, "corral: warning: GUEST COMMANDS RUN UNISOLATED ON THIS HOST (%s=1): they can see and kill your processes and write your files\n", guest.UnisolatedEnv)
		}
	} else {
		fmt.Fprintf(w, "corral: no PROXMOX_VE_ENDPOINT set: using the local Proxmox VE emulator (state in %s)\n", e.Dir)
	}
	if len(e.Notes) > 0 {
		fmt.Fprintf(w, "corral: note: the local emulator runs with %s: corral sim stop, then run again, to start it with this command's settings\n", strings.Join(e.Notes, ", "))
	}
}

// WriteEmulatorStartWait says on w (stderr) that the command waits for
// another corral starting or stopping the local emulator (log is its
// log), so that a long wait is not mistaken for a hang.
func WriteEmulatorStartWait(w io.Writer, log string) {
	fmt.Fprintf(w, "corral: waiting for another corral that is starting or stopping the local emulator (its log: %s)\n", log)
}

// WriteRealTemplatesStarting says on w (stderr) that the local emulator
// starts with real templates, whose first build takes minutes (log
// follows it).
func WriteRealTemplatesStarting(w io.Writer, log string) {
	fmt.Fprintf(w, "corral: starting the local emulator with real templates (the first start builds one, for minutes: its log, %s, follows it)\n", log)
}

// WriteDaemonLogStart marks in the local emulator's log (w) where the
// start by corral process pid at t begins.
func WriteDaemonLogStart(w io.Writer, t time.Time, pid int) {
	fmt.Fprintf(w, "==== %s: corral (pid %d) starts the local emulator\n", t.UTC().Format(time.RFC3339), pid)
}
