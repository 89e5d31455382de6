// Command corral manages Proxmox VE LXC containers from a declarative
// manifest, and embeds a Proxmox VE emulator (corral sim).
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/corralhq/corral/internal/cli"
)

// main runs corral. The first Ctrl-C (or SIGTERM) lets the step under way
// finish and stops at the next step boundary; the second aborts the step
// (corral still puts keeper protection back and gives its lock back);
// a third exits at once.
func main() {
	ctx, cancel := context.WithCancel(context.Background())
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
	os.Exit(cli.Run(cli.WithStop(ctx, stop), os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}
