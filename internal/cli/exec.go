package cli

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
	"golang.org/x/term"

	"github.com/corralhq/corral/internal/apply"
	"github.com/corralhq/corral/internal/guest"
)

// execInGuest is `corral exec`: the command's streams are copied byte for
// byte (a binary or a prompt without newline comes through as it is),
// stdin only with -i, on a guest terminal with -t.
func execInGuest(ctx context.Context, st *streams, ff fileFlags, cf connFlags, trust bool, app string, argv []string, withStdin, tty bool) error {
	var local *os.File
	if tty {
		var err error
		if local, err = localTerminal(st, "exec -t: stdin is not a terminal; drop -t (with -i to pass stdin through a pipe)"); err != nil {
			return err
		}
	}
	return withAppGuest(ctx, st, ff, cf, trust, app, true, func(cl *guest.Client, _ bool) error {
		return pipeIn(ctx, st, cl, argv, withStdin, local)
	})
}

// localTerminal is corral's stdin as a terminal, or the error refusal.
func localTerminal(st *streams, refusal string) (*os.File, error) {
	f, ok := st.in.(*os.File)
	if !ok || !term.IsTerminal(int(f.Fd())) {
		return nil, errors.New(refusal)
	}
	return f, nil
}

// pipeIn runs argv (the login shell when empty) in the guest cl is logged
// into, its output copied to corral's, stdin passed with withStdin, on a
// guest terminal that follows the local terminal local when that is not
// nil (which is in raw mode meanwhile, so Ctrl-C goes to the command).
// corral exec and corral rescue share it.
func pipeIn(ctx context.Context, st *streams, cl *guest.Client, argv []string, withStdin bool, local *os.File) error {
	p := guest.Pipe{Script: quoteArgs(argv), Stdout: st.out, Stderr: st.err}
	if withStdin {
		p.Stdin = st.in
	}
	if local != nil {
		fd := int(local.Fd())
		cols, rows, err := term.GetSize(fd)
		if err != nil {
			return fmt.Errorf("terminal size: %w", err)
		}
		resize := make(chan guest.WindowSize, 1)
		winch := make(chan os.Signal, 1)
		signal.Notify(winch, syscall.SIGWINCH)
		defer signal.Stop(winch)
		done := make(chan struct{})
		defer close(done)
		go func() {
			for {
				select {
				case <-done:
					return
				case <-winch:
					if c, r, err := term.GetSize(fd); err == nil {
						select {
						case resize <- guest.WindowSize{Rows: r, Cols: c}:
						default: // one pending size is enough; the next signal sends the newest
						}
					}
				}
			}
		}()
		p.TTY = &guest.TTY{Term: os.Getenv("TERM"), Size: guest.WindowSize{Rows: rows, Cols: cols}, Resize: resize}
		old, err := term.MakeRaw(fd)
		if err != nil {
			return fmt.Errorf("raw mode: %w", err)
		}
		defer term.Restore(fd, old)
	}
	return exitStatus(cl.Pipe(ctx, p))
}

// withGuest logs into the app's container and calls fn with the client;
// a kind: vm app is refused (corral cp, the agent's install).
func withGuest(ctx context.Context, st *streams, ff fileFlags, cf connFlags, trust bool, app string, fn func(*guest.Client) error) error {
	return withAppGuest(ctx, st, ff, cf, trust, app, false, func(cl *guest.Client, _ bool) error { return fn(cl) })
}

// withAppGuest logs into the app's guest, its container or, with vms,
// its VM for a kind: vm app, and calls fn with the client and whether it
// is a VM.
func withAppGuest(ctx context.Context, st *streams, ff fileFlags, cf connFlags, trust bool, app string, vms bool, fn func(cl *guest.Client, vm bool) error) error {
	ff.lazy = true // no provisioning value is needed to log in
	j, err := openJob(ctx, st, ff, cf)
	if err != nil {
		return err
	}
	defer j.Close()
	if _, ok := j.f.App(app); !ok {
		return fmt.Errorf("app %q is not in %s", app, j.f.Path)
	}
	obs, err := apply.Observe(ctx, j.s.client)
	if err != nil {
		return err
	}
	if !vms && apply.IsVMApp(obs, app) {
		return fmt.Errorf("app %s is a VM app: this command works on containers only for now; "+
			"`corral exec %s -- COMMAND` runs commands in its VM (files go through it: tar c DIR | corral exec -i %s -- tar x -C DEST)", app, app, app)
	}
	sshc, err := sshConfig(j.s, trust)
	if err != nil {
		return err
	}
	ex := &apply.Executor{Client: j.s.client, SSH: sshc}
	cl, err := ex.Dial(ctx, obs, app)
	if err != nil {
		return err
	}
	defer cl.Close()
	return fn(cl, apply.IsVMApp(obs, app))
}

// exitStatus turns a guest command's exit into corral's: its status, or
// 128+N for a signal N, as a shell reports it.
func exitStatus(err error) error {
	var ee *guest.ExitError
	if !errors.As(err, &ee) {
		return err
	}
	code := ee.Code
	if ee.Signal != "" {
		code = ExitError
		if n := unix.SignalNum("SIG" + strings.TrimPrefix(ee.Signal, "SIG")); n != 0 {
			code = 128 + int(n)
		}
	}
	if code <= 0 {
		code = ExitError
	}
	return &exitError{code: code}
}
