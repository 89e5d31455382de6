package cli

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/corralhq/corral/internal/sim"
	"github.com/corralhq/corral/internal/sim/guest"
	"github.com/corralhq/corral/internal/ui"
)

// writeDaemonRecord is what `corral sim serve --daemon` writes once it
// serves: how later commands find it (daemon.go).
func writeDaemonRecord(s *sim.Server, a *simServeArgs) error {
	r := daemonRecord{PID: os.Getpid(), URL: s.URL(), Fingerprint: s.Fingerprint(), Started: time.Now().UTC(),
		GuestSSHPort: s.Guests().Port(),
		Settings: daemonSettings{TimeScale: a.timeScale, Runtime: os.Getenv(runtimeEnv),
			Unisolated: os.Getenv(guest.UnisolatedEnv) == "1", RealTemplates: a.real || os.Getenv(realTemplatesEnv) == "1"}}
	r.Isolated, _ = s.Guests().Isolated()
	if err := s.Guests().Refused(); err != nil {
		r.GuestsRefused = err.Error()
	}
	return localDaemon{dir: a.state}.writeRecord(r)
}

// localStatus is what corral sim status says of the local emulator.
func localStatus(ctx context.Context, st *streams) (ui.SimStatus, error) {
	d := newLocalDaemon()
	s := ui.SimStatus{State: d.dir, Log: d.path(daemonLogFile)}
	r, err := d.running()
	if err != nil || r == nil {
		return s, err
	}
	s.Running, s.PID, s.Endpoint, s.Fingerprint = true, r.PID, r.URL+"/api2/json", r.Fingerprint
	started := r.Started
	up := int64(time.Since(started).Seconds())
	s.Started, s.UptimeSeconds = &started, &up
	switch {
	case r.GuestsRefused != "":
		s.Guests, s.GuestsRefused = "refused", r.GuestsRefused
	case r.Isolated:
		s.Guests = "lxc"
	default:
		s.Guests = "unisolated"
	}
	c, err := d.client(ctx, r, st.logger())
	if err != nil {
		s.Error = err.Error()
		return s, nil
	}
	res, err := c.ClusterResources(ctx, "vm")
	if err != nil {
		s.Error = err.Error()
		return s, nil
	}
	total, running := 0, 0
	for _, x := range res {
		if x.Type != "lxc" {
			continue
		}
		total++
		if x.Status == "running" {
			running++
		}
	}
	s.Containers, s.ContainersRunning = &total, &running
	return s, nil
}

func newSimStatusCmd(st *streams) *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:         "status",
		Short:       "Say whether the local emulator runs: pid, endpoint, state, uptime, containers running",
		Args:        cobra.NoArgs,
		Annotations: jsonForm(),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if output != "text" && output != "json" {
				return fmt.Errorf("-o %q: want text or json", output)
			}
			s, err := localStatus(cmd.Context(), st)
			if err != nil {
				return err
			}
			if output == "json" {
				return writeJSON(st, s)
			}
			ui.WriteSimStatus(st.out, s)
			return nil
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", "text", "output format: text or json")
	return cmd
}

func newSimStopCmd(st *streams) *cobra.Command {
	return &cobra.Command{
		Use:   "stop",
		Short: "Stop the local emulator (its containers start again with the next corral command)",
		Long: `stop ends the local emulator cleanly (SIGTERM, then waits for it). Its
state stays on disk: the next corral command without PROXMOX_VE_ENDPOINT
starts it again, and the containers that were running start again.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			d := newLocalDaemon()
			r, err := d.stop(cmd.Context(), st.err)
			if err != nil {
				return err
			}
			pid := 0
			if r != nil {
				pid = r.PID
			}
			ui.WriteSimStopped(st.out, pid, d.dir)
			return nil
		},
	}
}

func newSimLogsCmd(st *streams) *cobra.Command {
	var follow bool
	cmd := &cobra.Command{
		Use:   "logs",
		Short: "Print the local emulator's log",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			path := newLocalDaemon().path(daemonLogFile)
			err := followLog(cmd.Context(), stopOf(cmd.Context()), path, st.out, follow)
			if errors.Is(err, context.Canceled) {
				return nil
			}
			return err
		},
	}
	cmd.Flags().BoolVarP(&follow, "follow", "F", false, "keep printing what is appended, until interrupted")
	return cmd
}
