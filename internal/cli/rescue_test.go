package cli

import (
	"context"
	"io"
	"strconv"
	"strings"
	"testing"

	"github.com/corralhq/corral/internal/testenv"
	"github.com/creack/pty"
)

// TestRescueInteractiveShell: `corral rescue APP --stop` on a local
// terminal stops the app and gives a login shell in the rescue container,
// where the app's volume holds what the app wrote; the shell's exit
// status is corral's, the local terminal is put back, and the rescue
// ends with the app stopped, its volumes attached, no rescue CT left.
// Without a terminal and without a COMMAND it is refused before anything
// changes.
func TestRescueInteractiveShell(t *testing.T) {
	// Serial: the rescue shell's hostname is the CT's only in a real
	// container, so this test keeps the machine's runtime.
	realContainers(t, "the rescue shell's hostname")
	testenv.NeedRoot(t, "the emulator's guest view")
	c, m, conn := guestApp(t)
	if r := c.run(append([]string{"exec", "notes"}, append(conn, "--", "sh", "-c", "echo precious > /srv/data/p")...)...); r.code != 0 {
		t.Fatalf("exec: exit %d\n%s", r.code, r.stderr)
	}
	r := c.run(append([]string{"rescue", "notes", "--stop"}, conn...)...)
	if r.code == 0 || !strings.Contains(r.stderr, "needs a terminal") {
		t.Fatalf("rescue without a terminal or a COMMAND: exit %d, want a refusal\n%s", r.code, r.stderr)
	}
	if st := c.status(m).Apps[0].Containers[0].Status; st != "running" {
		t.Fatalf("the refused rescue left notes %s", st)
	}

	ptmx, tty, err := pty.Open()
	if err != nil {
		t.Skipf("no pty here: %v", err)
	}
	defer ptmx.Close()
	defer tty.Close()
	before, err := termiosOf(tty)
	if err != nil {
		t.Fatal(err)
	}
	screen := copyScreen(t, ptmx)
	code := make(chan int, 1)
	go func() {
		code <- Run(context.Background(), append([]string{"rescue", "notes", "--stop"}, conn...), tty, tty, tty)
	}()
	screen.waitFor(t, "leave the shell (exit) to end the rescue")
	// The arithmetic makes the marker appear only in the shell's output,
	// never in the echo of what was typed.
	io.WriteString(ptmx, "echo RESCUE-$((6*7)) $(hostname) $(cat /srv/data/p)\r")
	screen.waitFor(t, "RESCUE-42 ")
	if out := screen.String(); !strings.Contains(out, "RESCUE-42 rescue-notes precious") {
		t.Fatalf("in the rescue shell, want hostname rescue-notes and the app's file:\n%s", out)
	}
	io.WriteString(ptmx, "exit 5\r")
	select {
	case got := <-code:
		if got != 5 {
			t.Fatalf("rescue exit %d, want the shell's 5\n%s", got, screen.String())
		}
	case <-testenv.Expiry(t):
		t.Fatalf("rescue did not end after exit (waited until the test's deadline):\n%s", screen.String())
	}
	if after, err := termiosOf(tty); err != nil || after.Lflag != before.Lflag || after.Iflag != before.Iflag || after.Oflag != before.Oflag {
		t.Errorf("local terminal not restored (%v): %+v, was %+v", err, after, before)
	}
	// Run has written its last words to the terminal; the copy from it
	// may not have read them yet on a loaded machine.
	screen.waitFor(t, "start it with corral start notes")
	a := c.status(m).Apps[0]
	if a.Rescue != nil || a.Containers[0].Status != "stopped" || len(a.Volumes) != 2 {
		t.Fatalf("after the rescue: %+v, want notes stopped, no rescue, both volumes", a)
	}
	for _, v := range a.Volumes {
		if v.Holder != "ct "+strconv.Itoa(a.Containers[0].VMID) {
			t.Errorf("volume %s after the rescue: held by %q, want notes's ct %d", v.Name, v.Holder, a.Containers[0].VMID)
		}
	}
}
