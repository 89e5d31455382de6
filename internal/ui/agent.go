package ui

import (
	"fmt"
	"io"
	"strconv"
	"time"

	"github.com/corralhq/corral/internal/agent"
)

// WriteAgentStatus prints `corral agent status`: the agent's mode and
// sync, a row per app, then the ten most recent events.
func WriteAgentStatus(w io.Writer, s agent.Status, events []agent.Event) {
	sync := "in sync"
	if !s.InSync {
		sync = "DRIFT"
	}
	last := "never"
	if !s.LastPlan.IsZero() {
		last = s.Now.Sub(s.LastPlan).Round(time.Second).String() + " ago"
	}
	fmt.Fprintf(w, "agent: %s mode, %s, last plan %s\n", s.Mode, sync, last)
	if s.Error != "" {
		fmt.Fprintf(w, "cannot read the cluster: %s\n", s.Error)
	}
	if g := s.Git; g != nil {
		fmt.Fprintf(w, "git: %s %s at commit %s\n", g.URL, g.Path, Dash(g.Commit))
		if g.Head != g.Commit {
			fmt.Fprintf(w, "git: commit %s is not applied: its manifest is invalid or refused (see below)\n", g.Head)
		}
		if g.Error != "" {
			fmt.Fprintf(w, "git: the last pull failed: %s\n", g.Error)
		}
	}
	if s.ManifestError != "" {
		fmt.Fprintf(w, "manifest: the last valid one is in force; the one on disk: %s\n", s.ManifestError)
	}
	t := NewTable(w, "APP", "NODE", "CT", "STATE", "HEALTH", "DRIFT", "LAST BACKUP")
	for _, a := range s.Apps {
		backup := "-"
		if b := a.LastBackup; b != nil {
			backup = "ok "
			if !b.OK {
				backup = "FAILED "
			}
			backup += s.Now.Sub(b.Time).Round(time.Second).String() + " ago"
		}
		t.Row(a.Name, Dash(a.Node), strconv.Itoa(a.VMID), a.State, Dash(a.Health), DriftText(a.Drift), backup)
	}
	t.Flush()
	if len(events) > 0 {
		fmt.Fprintln(w, "\nrecent events:")
		for i, e := range events {
			if i == 10 {
				break
			}
			fmt.Fprintf(w, "  %s  %-5s %s\n", e.Time.UTC().Format(time.RFC3339), e.Level, e.Message)
		}
	}
}

// WriteAgentInstallEvent writes a step of corral agent install to w
// (stderr: progress).
func WriteAgentInstallEvent(w io.Writer, e agent.InstallEvent) {
	switch e.Kind {
	case agent.EventContainer:
		fmt.Fprintf(w, "corral: the agent's container (project %s, app %s)\n", e.Project, e.App)
	case agent.EventToken:
		fmt.Fprintf(w, "corral: made the agent's API token %s (role %s: %d privileges)\n", e.TokenID, e.Role, e.Privileges)
	case agent.EventEndpoint:
		fmt.Fprintf(w, "corral: the agent reaches the API at %s from inside its container (%s is the container's own loopback there)\n", e.Endpoint, e.Given)
	}
}

// WriteAgentInstalled writes corral agent install's outcome: where the
// agent runs and how it was started on progress (stderr), and on out
// the one line to keep, with the command that finds it again (path is
// the manifest's).
func WriteAgentInstalled(progress, out io.Writer, r agent.InstallResult, mode, path string) {
	fmt.Fprintf(progress, "corral: the agent runs in container %d on %s, at %s (%s mode)\n", r.VMID, r.Node, r.URL, mode)
	if r.Started == "systemd" {
		fmt.Fprintf(progress, "corral: started by systemd (corral-agent.service, Restart=always, enabled at boot)\n")
	} else {
		fmt.Fprintf(progress, "corral: the container has no systemd as its init: the agent was started as a detached process (log %s).\n"+
			"        It stops with the container and does not come back after a reboot; run corral agent install again then.\n"+
			"        The systemd unit is written (%s) and is used once the container runs systemd.\n", agent.InstalledLog, agent.InstalledUnit)
	}
	fmt.Fprintf(out, "agent for project %s: container %d on %s, %s (started by %s)\ncorral agent status -f %s\n", r.Project, r.VMID, r.Node, r.URL, r.Started, path)
}

// WriteAgentTokenDeleted says on w (stderr) that corral agent uninstall
// deleted the agent's API token id.
func WriteAgentTokenDeleted(w io.Writer, id string) {
	fmt.Fprintf(w, "corral: deleted the agent's API token %s\n", id)
}

// WriteAgentUninstalled says on w (stderr) that corral agent uninstall
// is done.
func WriteAgentUninstalled(w io.Writer, project string) {
	fmt.Fprintf(w, "corral: the agent of project %s is uninstalled\n", project)
}
