package cli

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/corralhq/corral/internal/apply"
	"github.com/corralhq/corral/internal/guest"
	"github.com/corralhq/corral/internal/plan"
)

// sshConfig is how corral logs into containers for this session: its own
// key, and the guests' SSH port (22 on PVE; the embedded emulator's own
// port, the local emulator's, or CORRAL_SIM_GUEST_SSH_PORT from a standalone emulator's env
// file).
func sshConfig(s *session, trustNew bool) (apply.SSH, error) {
	id, err := loadIdentity()
	if err != nil {
		return apply.SSH{}, err
	}
	port := 22
	if s.guestSSHPort != 0 {
		port = s.guestSSHPort
	} else if s.embedded != nil {
		port = s.embedded.Guests().Port()
	} else if s.local != nil {
		port = s.local.GuestSSHPort
	} else if v := os.Getenv("CORRAL_SIM_GUEST_SSH_PORT"); v != "" {
		if port, err = strconv.Atoi(v); err != nil || port <= 0 || port > 65535 {
			return apply.SSH{}, fmt.Errorf("CORRAL_SIM_GUEST_SSH_PORT=%q: want a port number", v)
		}
	}
	return apply.SSH{Signer: id.signer, AuthorizedKey: id.authorizedKey, Port: port, TrustNewHostKey: trustNew}, nil
}

// appCT finds the container of an app in the manifest.
func appCT(ctx context.Context, j *job, app string) (*plan.CT, error) {
	if _, ok := j.f.App(app); !ok {
		return nil, fmt.Errorf("app %q is not in %s", app, j.f.Path)
	}
	obs, err := apply.Observe(ctx, j.s.client)
	if err != nil {
		return nil, err
	}
	return apply.AppCT(obs, app)
}

func newExecCmd(st *streams) *cobra.Command {
	var ff fileFlags
	var cf connFlags
	var trust, stdin, tty bool
	cmd := &cobra.Command{
		Use:   "exec APP [-- COMMAND [ARG...]]",
		Short: "Run a command inside an app's container or VM (over SSH)",
		Long: `exec runs a command as root inside the app's container, over SSH with
corral's key and the host key corral pinned when it created the container.
For a kind: vm app it logs in to the VM as vm.user (the cloud-init user)
at the address corral provisions it at (the static network.ip, else what
its guest agent reports) and runs the command through sudo, as root; -it
without a command gives root's login shell there (sudo -i).
Output streams as it comes, byte for byte; the exit status is the
command's (128+N when a signal N ended it).

  -i   pass corral's standard input to the command (else it reads EOF)
  -t   run the command on a terminal in the container (TERM and the window
       size are the local terminal's, and follow it when it is resized;
       the local terminal is in raw mode meanwhile, so Ctrl-C goes to the
       command). Needs a terminal on stdin.

  corral exec -it APP -- bash       an interactive shell
  corral exec -it APP               the container's login shell
  tar c dir | corral exec -i APP -- tar x -C /srv

Proxmox gives API tokens no console for containers and no shell in a VM
(the guest agent's exec is off by default and has no terminal), so corral
uses SSH.`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			app, argv := args[0], args[1:]
			if len(argv) == 0 && !tty {
				return errors.New("exec: no command: write `corral exec APP -- COMMAND`, or `corral exec -it APP` for a login shell")
			}
			return execInGuest(cmd.Context(), st, ff, cf, trust, app, argv, stdin, tty)
		},
	}
	ff.add(cmd.Flags())
	cf.add(cmd.Flags())
	cmd.Flags().BoolVar(&trust, "trust-host-key", false, "accept the container's (or VM's) SSH host key if corral has none pinned")
	cmd.Flags().BoolVarP(&stdin, "stdin", "i", false, "pass standard input to the command")
	cmd.Flags().BoolVarP(&tty, "tty", "t", false, "run the command on a terminal (needs a terminal on stdin)")
	return cmd
}

func newLogsCmd(st *streams) *cobra.Command {
	var ff fileFlags
	var cf connFlags
	var trust, follow bool
	var lines int
	var unit string
	cmd := &cobra.Command{
		Use:   "logs APP",
		Short: "Show an app's logs: its compose project's, else the system journal",
		Long: `logs prints the app's recent log lines over SSH, as corral exec does: its
compose project's when it runs one, else the system journal (journalctl),
else /var/log/syslog or /var/log/messages. For a kind: vm app it logs in to
the VM as vm.user and reads them through sudo, so the whole system journal
is shown.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runInGuest(cmd.Context(), st, ff, cf, trust, args[0], func(vm bool) string {
				return logsScript(args[0], lines, follow, unit, vm)
			})
		},
	}
	ff.add(cmd.Flags())
	cf.add(cmd.Flags())
	cmd.Flags().BoolVar(&trust, "trust-host-key", false, "accept the container's (or VM's) SSH host key if corral has none pinned")
	cmd.Flags().BoolVarP(&follow, "follow", "F", false, "keep printing new lines (Ctrl-C to stop)")
	cmd.Flags().IntVarP(&lines, "lines", "n", 200, "how many recent lines")
	cmd.Flags().StringVarP(&unit, "unit", "u", "", "only this systemd unit's journal")
	return cmd
}

// logsScript is corral logs' script: n lines (following with follow) of
// the compose project's logs, else the journal (unit's only, with unit),
// else the syslog file. In a VM it runs through sudo, as root, so the
// cloud-init user reads the whole system journal.
func logsScript(app string, lines int, follow bool, unit string, vm bool) string {
	n := strconv.Itoa(lines)
	f := ""
	if follow {
		f = " -f"
	}
	journal := "journalctl --no-pager -n " + n + f
	if unit != "" {
		journal += " -u " + guest.ShellQuote(unit)
	}
	// A compose app's containers log to Docker, everything else to the
	// journal; without systemd, the syslog file. journalctl alone is no
	// journal: a guest whose init is not systemd (the emulator's
	// stand-in template, its view VMs) has the tool and no files, and
	// journalctl's "No journal files were found" says nothing of why or
	// what to do. tail gets only the syslog files that exist: one missing
	// would fail it (exit 1) after it printed the other.
	return "if command -v docker >/dev/null 2>&1 && [ -n \"$(docker compose ls -q 2>/dev/null)\" ]; then " +
		"for p in $(docker compose ls -q); do docker compose -p \"$p\" logs --no-color --tail " + n + f + "; done; " +
		"elif command -v journalctl >/dev/null 2>&1 && [ -n \"$(find /run/log/journal /var/log/journal -name '*.journal*' 2>/dev/null | head -n 1)\" ]; then " + journal + "; " +
		"elif [ -f /var/log/syslog ] || [ -f /var/log/messages ]; then set --; for l in /var/log/syslog /var/log/messages; do [ -f \"$l\" ] && set -- \"$@\" \"$l\"; done; tail -n " + n + f + " \"$@\"; " +
		"else echo " + guest.ShellQuote(noLogs(app, vm)) + " >&2; exit 1; fi"
}

// noLogs says that app's guest (its VM with vm) keeps no logs corral can
// show, and how to get some.
func noLogs(app string, vm bool) string {
	if vm {
		return "app " + app + ": this VM keeps no system journal (systemd is not its init, or keeps no journal files), no /var/log/syslog or /var/log/messages, and runs no compose project. " +
			"On the emulator this is a view VM, which runs no systemd (a real VM boot has the image's journal). " +
			"Meanwhile read the app's own log files with corral exec " + app + " -- tail FILE"
	}
	return "app " + app + ": this container keeps no system journal (systemd is not its init), no /var/log/syslog or /var/log/messages, and runs no compose project. " +
		"On the emulator this is the stand-in template, which runs no systemd: serve it with the real Debian template (corral sim serve --real-templates, see docs/emulator.md, Templates) for a real journal. " +
		"Meanwhile read the app's own log files with corral exec " + app + " -- tail FILE"
}

// runInGuest runs the script that script makes for the app's guest (a
// VM with vm), streaming its output to corral's stdout and stderr line
// by line, and exits with its status.
func runInGuest(ctx context.Context, st *streams, ff fileFlags, cf connFlags, trust bool, app string, script func(vm bool) string) error {
	return withAppGuest(ctx, st, ff, cf, trust, app, true, func(cl *guest.Client, vm bool) error {
		return exitStatus(cl.Exec(ctx, guest.Command{Script: script(vm), Stdin: st.in, OnLine: func(s guest.Stream, line string) {
			if s == guest.Stderr {
				fmt.Fprintln(st.err, line)
			} else {
				fmt.Fprintln(st.out, line)
			}
		}}))
	})
}

// quoteArgs joins argv into a shell command line.
func quoteArgs(argv []string) string {
	q := make([]string, len(argv))
	for i, a := range argv {
		q[i] = guest.ShellQuote(a)
	}
	return strings.Join(q, " ")
}
