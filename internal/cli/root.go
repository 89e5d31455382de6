// Package cli is corral's command line. Every command is listed in
// commands.go; each is a small function that parses its flags, calls a
// package (apply, plan, doctor, …) and renders with internal/ui. Exit
// codes are decided in one place (exitCode).
package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"sync"

	"github.com/spf13/cobra"

	"github.com/corralhq/corral/internal/apply"
	"github.com/corralhq/corral/internal/sim/guest"
	"github.com/corralhq/corral/internal/ui"
)

// Exit codes (documented in `corral --help`, EXIT STATUS).
const (
	ExitOK          = 0
	ExitError       = 1
	ExitChanges     = 2 // plan: changes present
	ExitInterrupted = 130
)

// exitError carries a specific exit code through cobra.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string {
	if e.err == nil {
		return fmt.Sprintf("exit %d", e.code)
	}
	return e.err.Error()
}
func (e *exitError) Unwrap() error { return e.err }

// streams are a command's standard streams, and its logger.
type streams struct {
	in       io.Reader
	out, err io.Writer
	// log writes to err at --log-level. It is this run's own: several
	// Runs in one process (the tests) must not log into each other's
	// stderr, as they would through slog's process-wide default.
	log *slog.Logger
}

// logger is st's logger, or slog's default where none was set up (a
// command run without the root's flags).
func (st *streams) logger() *slog.Logger {
	if st.log != nil {
		return st.log
	}
	return slog.Default()
}

// Run executes corral with args and returns the process exit code.
func Run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	// Apps change in parallel, and logs, progress and output may come
	// from several goroutines: one lock per stream keeps lines whole.
	st := &streams{in: stdin, out: &lockedWriter{w: stdout}, err: &lockedWriter{w: stderr}}
	root := newRoot(ctx, st)
	root.SetArgs(args)
	root.SetIn(stdin)
	root.SetOut(stdout)
	root.SetErr(stderr)
	err := root.ExecuteContext(ctx)
	return exitCode(ctx, err, stderr)
}

// exitCode maps an error to the process exit code and prints it once.
func exitCode(ctx context.Context, err error, stderr io.Writer) int {
	var ee *exitError
	switch {
	case err == nil:
		return ExitOK
	case errors.As(err, &ee) && ee.err == nil:
		return ee.code
	case ctx.Err() != nil || errors.Is(err, context.Canceled) || errors.Is(err, apply.ErrStopped):
		ui.WriteError(stderr, err, true)
		return ExitInterrupted
	case errors.As(err, &ee):
		ui.WriteError(stderr, ee.err, false)
		return ee.code
	default:
		ui.WriteError(stderr, err, false)
		return ExitError
	}
}

type globalFlags struct {
	logLevel   string
	unisolated bool // --unisolated-guests
}

func newRoot(ctx context.Context, st *streams) *cobra.Command {
	g := &globalFlags{}
	root := &cobra.Command{
		Use:   "corral",
		Short: "Run apps in Proxmox VE LXC containers from a declarative manifest",
		Long: `corral runs apps in Proxmox VE LXC containers from a declarative manifest
(corral.yaml), with only an API token. Containers are disposable; their
volumes are not: persistent volumes survive every destroy and recreate.

With no endpoint configured, corral uses its local Proxmox VE emulator,
which the first command starts in the background and which keeps running
(corral sim status, corral sim stop, corral sim logs).

EXIT STATUS
  0   success (plan: no changes)
  1   error
  2   plan: changes present
  130 interrupted`,
		SilenceUsage:  true,
		SilenceErrors: true,
		PersistentPreRunE: func(cmd *cobra.Command, args []string) error {
			if err := checkJSONForm(cmd); err != nil {
				return err
			}
			if g.unisolated {
				// The emulator reads the opt-in when it starts (embedded or
				// `corral sim serve`).
				os.Setenv(guest.UnisolatedEnv, "1")
			}
			return setupLogging(g.logLevel, st)
		},
	}
	root.SetFlagErrorFunc(flagError)
	root.PersistentFlags().StringVar(&g.logLevel, "log-level", envOr("CORRAL_LOG", "warn"), "log level: debug, info, warn, error (env CORRAL_LOG)")
	root.PersistentFlags().BoolVar(&g.unisolated, "unisolated-guests", false,
		"where the emulator cannot isolate containers (no lxc, not root), run guest commands directly on this host: they can see and kill your processes and write your files (env "+guest.UnisolatedEnv+"=1)")
	root.AddCommand(commands(st)...)
	setVersionFlag(root)
	completeAppNames(root)
	return root
}

func envOr(key, def string) string {
	if v, ok := os.LookupEnv(key); ok && v != "" {
		return v
	}
	return def
}

func setupLogging(level string, st *streams) error {
	var l slog.Level
	if err := l.UnmarshalText([]byte(strings.ToLower(level))); err != nil {
		return fmt.Errorf("--log-level %q: want debug, info, warn or error", level)
	}
	st.log = slog.New(slog.NewTextHandler(st.err, &slog.HandlerOptions{Level: l}))
	return nil
}

// lockedWriter serializes writes to w.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

type stopKey struct{}

// WithStop returns ctx carrying stop, which main closes at the first
// Ctrl-C or SIGTERM: commands that change the cluster then finish the step
// under way and stop. main cancels ctx itself at the second one.
func WithStop(ctx context.Context, stop <-chan struct{}) context.Context {
	return context.WithValue(ctx, stopKey{}, stop)
}

// readOnly returns ctx cancelled also at the first Ctrl-C or SIGTERM
// (when stop closes): a command that changes nothing (plan, status) has
// no step to finish, so it stops at once, wherever it waits (issue 27).
func readOnly(ctx context.Context) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(ctx)
	if stop := stopOf(ctx); stop != nil {
		go func() {
			select {
			case <-stop:
				cancel()
			case <-ctx.Done():
			}
		}()
	}
	return ctx, cancel
}

// interruptible runs fn, which changes nothing and does not watch ctx
// (parsing a manifest), and returns its result, or ctx's error as soon as
// ctx is done: fn then finishes in the background and its result is
// dropped. The result comes back through a channel, never a variable fn
// sets, so a dropped result is never read while fn still writes it.
func interruptible[T any](ctx context.Context, fn func() (T, error)) (T, error) {
	type result struct {
		v   T
		err error
	}
	done := make(chan result, 1)
	go func() {
		v, err := fn()
		done <- result{v, err}
	}()
	select {
	case r := <-done:
		return r.v, r.err
	case <-ctx.Done():
		var zero T
		return zero, fmt.Errorf("read the manifest: %w", ctx.Err())
	}
}

// stopOf is the stop channel of ctx (nil: never closed).
func stopOf(ctx context.Context) <-chan struct{} {
	ch, _ := ctx.Value(stopKey{}).(<-chan struct{})
	return ch
}
