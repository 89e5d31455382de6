package cli

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"
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
		fmt.Fprintln(os.Stderr, "\ninterrupt: finishing the step under way, then stopping (Ctrl-C again to abort it)")
		close(stop)
		<-sig
		fmt.Fprintln(os.Stderr, "\ninterrupt: aborting the step under way; corral still restores keeper protection and releases its lock (Ctrl-C again to exit at once)")
		cancel()
		<-sig
		os.Exit(130)
	}()
	return Run(WithStop(ctx, stop), os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
}
