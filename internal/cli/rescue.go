package cli

import (
	"context"
	"errors"
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/corralhq/corral/internal/apply"
	"github.com/corralhq/corral/internal/plan"
	"github.com/corralhq/corral/internal/ui"
)

// rescueArgs are corral rescue's flags and arguments.
type rescueArgs struct {
	ff           fileFlags
	cf           connFlags
	lf           lockFlags
	stop, end    bool
	trust, stdin bool
	app          string
	argv         []string
}

func newRescueCmd(st *streams) *cobra.Command {
	a := &rescueArgs{}
	cmd := &cobra.Command{
		Use:         "rescue APP [-- COMMAND [ARG...]]",
		Annotations: jsonForm(),
		Short:       "A shell beside a stopped app's volumes, in a temporary rescue container (pct enter for an API token)",
		Long: `rescue is for an app that will not come up (a corrupt database file, a bad
config written into a volume, a full disk): a shell where the app's data
is, without the app running. Proxmox gives an API token no console into a
stopped container, and pct enter / pct mount are root's on the node, so
corral, as cloud providers' rescue modes do:

  1. refuses while the app runs, unless --stop (then shuts it down cleanly);
  2. creates a temporary rescue container on the app's node from the app's
     template (tags corral-rescue, corral-rescuing-APP; its Notes name the
     app's container);
  3. detaches the app's retained volumes from the app's container and
     attaches them to the rescue container at the same paths; the keeper
     keeps owning and recording them all along, so no moment exists at
     which a kill or a destroy could free one;
  4. starts it and opens an interactive shell (needs a terminal), or runs
     COMMAND and keeps its exit status;
  5. stops it, attaches the volumes back to the app's container, and
     destroys the rescue container. The app stays stopped: start it with
     corral start APP (or corral apply).

The root file system is not offered: it is disposable (a replace makes it
anew from the template), and PVE hands no rootfs to another container.

The whole rescue holds corral's lock on the node, so no apply, destroy or
other rescue changes anything meanwhile. If corral is killed, the next
corral rescue APP, corral rescue APP --end, or corral apply gives the
volumes back first; plan and status show the app in rescue meanwhile.

  corral rescue web --stop                 a shell, web's volumes at their paths
  corral rescue web -- ls -la /srv/data    one command; corral exits with its status
  corral rescue web --end                  end a rescue a killed corral left

With -o json (COMMAND form only) the command's output goes to stderr and
stdout carries one document: the rescue container, the volumes, the
command's exit status.`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			a.app, a.argv = args[0], args[1:]
			return runRescue(cmd, st, a)
		},
	}
	a.ff.add(cmd.Flags())
	a.cf.add(cmd.Flags())
	a.lf.add(cmd.Flags())
	cmd.Flags().BoolVar(&a.stop, "stop", false, "shut the app down first if it runs (else a running app is refused)")
	cmd.Flags().BoolVar(&a.end, "end", false, "only end the app's rescue (one a killed corral rescue left): volumes back to the app's container, the rescue container removed")
	cmd.Flags().BoolVarP(&a.stdin, "stdin", "i", false, "pass standard input to COMMAND")
	cmd.Flags().BoolVar(&a.trust, "trust-host-key", false, "accept the rescue container's SSH host key when its create logged none")
	return cmd
}

// rescueJSON is corral rescue -o json.
type rescueJSON struct {
	*apply.RescueSession
	ExitStatus int    `json:"exit_status"`
	Ended      bool   `json:"ended"`
	AppStatus  string `json:"app_status"`
	Next       string `json:"next"`
}

// runRescue checks what it can before the lock, then takes corral's lock
// on the app's node for the whole rescue, ends a rescue a killed run
// left, makes the new one, uses it and ends it.
func runRescue(cmd *cobra.Command, st *streams, a *rescueArgs) error {
	asJSON, err := a.ff.json()
	if err != nil {
		return err
	}
	local, err := a.terminal(st, asJSON)
	if err != nil {
		return err
	}
	return withApp(cmd, st, a.ff, a.cf, a.app, func(ctx context.Context, j *backupJob, obs *plan.Observed, ct *plan.CT) error {
		lock, err := lockNodes(ctx, st, j.ex, obs, []string{ct.Node}, "rescue", a.lf, nil)
		if err != nil {
			return j.err(err)
		}
		defer lock.release()
		// Ending a rescue is never left half done for a Ctrl-C: only a
		// lost lock stops it.
		endCtx, cancel := lock.lostOnly()
		defer cancel()
		r, err := newRescuer(st, j, a, asJSON)
		if err != nil {
			return err
		}
		if err := r.endLeft(endCtx, true); err != nil || a.end {
			return err
		}
		return r.rescue(lock.ctx, endCtx, local)
	})
}

// rescuer is one corral rescue under the lock. ender is the executor that
// ends the rescue: without the stop channel of the first Ctrl-C, so that
// a Ctrl-C during COMMAND still ends the rescue.
type rescuer struct {
	st       *streams
	j        *backupJob
	a        *rescueArgs
	declared []plan.Volume
	asJSON   bool
	ender    apply.Executor
}

// newRescuer is the rescue of a.app in j: its ender logs in as j's
// executor does, with the SSH settings it now shares.
func newRescuer(st *streams, j *backupJob, a *rescueArgs, asJSON bool) (*rescuer, error) {
	r := &rescuer{st: st, j: j, a: a, declared: declaredVolumes(j, a.app), asJSON: asJSON}
	var err error
	if r.ender.SSH, err = sshConfig(j.s, a.trust); err != nil {
		return nil, err
	}
	r.ender.Client, r.ender.Observer = j.ex.Client, j.ex.Observer
	j.ex.SSH = r.ender.SSH
	return r, nil
}

// terminal refuses flags that cannot work together and, for an
// interactive shell (no COMMAND, no --end), is the terminal it needs on
// stdin; nil otherwise.
func (a *rescueArgs) terminal(st *streams, asJSON bool) (*os.File, error) {
	switch {
	case a.end && len(a.argv) > 0:
		return nil, errors.New("rescue --end takes no COMMAND")
	case asJSON && len(a.argv) == 0 && !a.end:
		return nil, errors.New("rescue -o json: give a COMMAND (corral rescue APP -o json -- COMMAND): an interactive shell has no JSON form")
	case len(a.argv) == 0 && !a.end:
		return localTerminal(st, "rescue: an interactive shell needs a terminal on stdin; give a COMMAND (corral rescue APP -- COMMAND), or run it from a terminal")
	}
	return nil, nil
}

// endLeft ends app's rescue containers, from a fresh read; left says they
// were left by an earlier, killed run (else: this run's).
func (r *rescuer) endLeft(ctx context.Context, left bool) error {
	obs, err := apply.Observe(ctx, r.j.s.client)
	if err != nil {
		return r.j.err(err)
	}
	rs := obs.Rescues[r.a.app]
	n, err := r.ender.Rescues().EndApp(ctx, obs, r.a.app, r.declared)
	if err != nil {
		return r.j.err(fmt.Errorf("%w\nthe rescue container is left as it is, and says so in plan and status: run corral rescue %s --end (or corral apply) to end it", err, r.a.app))
	}
	for _, res := range rs[:n] {
		ui.WriteRescueEnded(r.st.err, r.a.app, res, left)
	}
	if r.a.end && n == 0 {
		ui.WriteNotInRescue(r.st.err, r.a.app)
	}
	return nil
}

// rescue makes the rescue container, uses it, and always ends it.
func (r *rescuer) rescue(ctx, endCtx context.Context, local *os.File) error {
	obs, err := apply.Observe(ctx, r.j.s.client)
	if err != nil {
		return r.j.err(err)
	}
	s, err := r.j.ex.Rescues().Start(ctx, obs, r.a.app, apply.RescueOptions{Stop: r.a.stop, Declared: r.declared})
	var running *apply.AppRunningError
	if errors.As(err, &running) || (err != nil && s == nil) {
		return r.j.err(err)
	}
	useErr := err
	if err == nil {
		useErr = r.use(ctx, s, local)
	}
	if endErr := r.endLeft(endCtx, false); endErr != nil {
		return errors.Join(useErr, endErr)
	}
	code := 0
	var ee *exitError
	if errors.As(useErr, &ee) && ee.err == nil {
		code = ee.code
	} else if useErr != nil {
		return r.j.err(useErr)
	}
	next := "corral start " + r.a.app + " (or corral apply)"
	if r.asJSON {
		if err := writeJSON(r.st, rescueJSON{RescueSession: s, ExitStatus: code, Ended: true, AppStatus: "stopped", Next: next}); err != nil {
			return err
		}
	} else {
		ui.WriteRescueOver(r.st.err, r.a.app, next)
	}
	return useErr
}

// use logs into the rescue container and runs the shell or COMMAND.
func (r *rescuer) use(ctx context.Context, s *apply.RescueSession, local *os.File) error {
	ui.WriteRescueHeld(r.st.err, s, local != nil)
	cl, err := r.j.ex.Rescues().Dial(ctx, s)
	if err != nil {
		return err
	}
	defer cl.Close()
	out := r.st
	if r.asJSON {
		// stdout is the JSON document's; the command's output goes to stderr.
		out = &streams{in: r.st.in, out: r.st.err, err: r.st.err}
	}
	return pipeIn(ctx, out, cl, r.a.argv, r.a.stdin || local != nil, local)
}

// declaredVolumes are app's volumes as the manifest declares them.
func declaredVolumes(j *backupJob, app string) []plan.Volume {
	m, ok := j.app(app)
	if !ok {
		return nil
	}
	var out []plan.Volume
	for _, v := range m.Volumes {
		out = append(out, plan.Volume{Name: v.Name, Mount: v.Mount, Backup: v.Backup})
	}
	return out
}
