package guest

import (
	"context"
	"fmt"
	"io"

	"golang.org/x/crypto/ssh"
)

// WindowSize is a terminal's size in characters.
type WindowSize struct{ Rows, Cols int }

// TTY asks for a pseudo-terminal on the guest side, as `ssh -t` does.
type TTY struct {
	// Term is the remote TERM (e.g. the local one); "" gives xterm.
	Term string
	// Size is the initial window size.
	Size WindowSize
	// Resize delivers later window sizes (the local terminal's SIGWINCH);
	// nil when the size never changes.
	Resize <-chan WindowSize
}

// Pipe is a command whose standard streams are copied as bytes, not
// lines: an interactive shell, a tar archive, a pipe.
type Pipe struct {
	// Script runs with the login shell's -c; "" starts the login shell
	// itself (an SSH shell request), as `ssh host` does.
	Script string
	// Stdin feeds the command; nil gives it EOF at once.
	Stdin io.Reader
	// Stdout and Stderr get the command's output; nil discards it. On a
	// TTY the guest merges stderr into stdout, as sshd does.
	Stdout, Stderr io.Writer
	// TTY, when set, runs the command on a guest pseudo-terminal.
	TTY *TTY
}

// Pipe runs cmd with its streams copied byte for byte and waits for it,
// through sudo as root when the client was dialled with Config.Sudo (the
// login shell then is root's, sudo -i), as Exec runs its scripts.
// Errors are Exec's: a non-zero exit is an *ExitError, a ctx that ends
// kills the command.
func (c *Client) Pipe(ctx context.Context, cmd Pipe) error {
	sess, err := c.session(ctx)
	if err != nil {
		return err
	}
	defer sess.Close()
	sess.Stdin = cmd.Stdin
	sess.Stdout, sess.Stderr = cmd.Stdout, cmd.Stderr
	if sess.Stdout == nil {
		sess.Stdout = io.Discard
	}
	if sess.Stderr == nil {
		sess.Stderr = io.Discard
	}
	if t := cmd.TTY; t != nil {
		term := t.Term
		if term == "" {
			term = "xterm"
		}
		modes := ssh.TerminalModes{ssh.ECHO: 1, ssh.TTY_OP_ISPEED: 38400, ssh.TTY_OP_OSPEED: 38400}
		if err := sess.RequestPty(term, t.Size.Rows, t.Size.Cols, modes); err != nil {
			return fmt.Errorf("guest refused a terminal (pty-req): %w", err)
		}
	}
	switch script := cmd.Script; {
	case c.sudo && script == "":
		// root's login shell, as a login as root would give
		err = sess.Start("sudo -n -i")
	case c.sudo:
		err = sess.Start("sudo -n -- sh -c " + ShellQuote(script))
	case script == "":
		err = sess.Shell()
	default:
		err = sess.Start(script)
	}
	if err != nil {
		return c.lost(err)
	}
	waited := make(chan error, 1)
	go func() { waited <- sess.Wait() }()
	var resize <-chan WindowSize
	if cmd.TTY != nil {
		resize = cmd.TTY.Resize
	}
	return c.await(ctx, sess, waited, resize)
}

// await waits for the session's exit status on waited, passing terminal
// resizes on (resize is nil without a terminal): a cancelled ctx kills
// the command, a lost connection ends the wait with the client's error.
func (c *Client) await(ctx context.Context, sess *ssh.Session, waited <-chan error, resize <-chan WindowSize) error {
	for {
		select {
		case ws := <-resize:
			sess.WindowChange(ws.Rows, ws.Cols)
		case err := <-waited:
			return c.exitError(err)
		case <-ctx.Done():
			sess.Signal(ssh.SIGKILL)
			sess.Close()
			return fmt.Errorf("guest command stopped: %w", context.Cause(ctx))
		case <-c.done:
			return c.Err()
		}
	}
}
