package cli

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/corralhq/corral/internal/ui"
)

// Main runs corral as the program, on the process's arguments and
// standard streams, and returns its exit code. The first Ctrl-C (or
// SIGTERM) lets the step under way finish and stops at the next step
// boundary; the second aborts the step (corral still puts keeper
// protection back and gives its lock back); a third exits at once.
//
// It is cmd/corral's main, and the test binaries that run themselves as
// corral (testenv.RunningAs) call it too.
func Main() int {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	stop := make(chan struct{})
	sig := make(chan os.Signal, 3)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
	go func() {
		<-sig
		ui.WriteInterruptStopping(os.Stderr)
		close(stop)
		<-sig
		ui.WriteInterruptAborting(os.Stderr)
		cancel()
		<-sig
		os.Exit(130)
	}()
	return Run(WithStop(ctx, stop), os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
}
