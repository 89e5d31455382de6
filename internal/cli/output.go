package cli

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/corralhq/corral/internal/apply"
	"github.com/corralhq/corral/internal/manifest"
	"github.com/corralhq/corral/internal/ui"
)

// sshLogin is how `ssh` reaches the apps' containers: corral's key, and
// the port (22, or the emulator's guest SSH port).
type sshLogin struct {
	key  string
	port int
}

// command is the ssh command line that logs into addr as root.
func (l sshLogin) command(addr string) string {
	cmd := "ssh -i " + shellQuote(l.key)
	if l.port != 22 {
		cmd += " -p " + strconv.Itoa(l.port)
	}
	return cmd + " root@" + addr
}

// shellQuote quotes s for a POSIX shell when it needs it.
func shellQuote(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_./:=@+,") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// checkApp says that f has no app called app ("" stands for every app).
func checkApp(f *manifest.File, app string) error {
	if _, ok := f.App(app); app != "" && !ok {
		names := make([]string, 0, len(f.Apps))
		for _, a := range f.Apps {
			names = append(names, a.Name)
		}
		return fmt.Errorf("app %q is not in %s: name one of %s, or leave APP out for every app", app, f.Path, strings.Join(names, ", "))
	}
	return nil
}

// ui.AppOutputs turns a status report into each app's facts; with app set,
// only that app's.
func appOutputs(r *apply.StatusReport, app string, login sshLogin) []ui.AppOutput {
	out := []ui.AppOutput{}
	for _, as := range r.Apps {
		if app != "" && as.App != app {
			continue
		}
		o := ui.AppOutput{App: as.App, Volumes: as.Volumes, Health: as.Health, HealthDetail: as.HealthDetail}
		switch n := len(as.Containers); {
		case n == 0:
			o.Status, o.Note = "not created", "no container: run corral apply"
		case n > 1:
			o.Status, o.Note = "several", fmt.Sprintf("%d containers (a move or a recovery under way): see corral status", n)
		default:
			ct := as.Containers[0]
			o.VMID, o.Node, o.Status, o.Address = ct.VMID, ct.Node, ct.Status, ct.IP
			if ct.IP != "" {
				o.SSH = login.command(ct.IP)
			} else {
				o.Note = "no address: the container is " + ct.Status
			}
		}
		if as.Moving != nil {
			o.Note = "moving from " + as.Moving.From + " to " + as.Moving.To + ": " + as.Moving.Fix
		}
		out = append(out, o)
	}
	return out
}

func newOutputCmd(st *streams) *cobra.Command {
	var ff fileFlags
	var cf connFlags
	var noHealth bool
	cmd := &cobra.Command{
		Use:         "output [APP]",
		Annotations: jsonForm(),
		Short:       "Show each app's VMID, node, address, SSH command, volumes and health, from the live cluster",
		Long: `output prints the facts needed to reach each app (or APP alone), read
from the live cluster as corral status reads them: its container's VMID,
node and status, its address, the ssh command that logs in as corral does
(root, with corral's key), its volumes and its health (one run of its
health checks; --no-health skips them).`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ff.lazy = true // output provisions nothing
			app := ""
			if len(args) == 1 {
				app = args[0]
			}
			return runOutput(cmd, st, ff, cf, app, noHealth)
		},
	}
	ff.add(cmd.Flags())
	cf.add(cmd.Flags())
	cmd.Flags().BoolVar(&noHealth, "no-health", false, "do not run the apps' health checks (health shows unknown)")
	return cmd
}

// runOutput observes the cluster as status does and prints the facts.
func runOutput(cmd *cobra.Command, st *streams, ff fileFlags, cf connFlags, app string, noHealth bool) error {
	ctx, cancel := readOnly(cmd.Context())
	defer cancel()
	j, r, err := observeStatus(ctx, st, ff, cf, app)
	if err != nil {
		return err
	}
	defer j.Close()
	if app != "" {
		// Only APP's health checks run.
		r.Apps = slices.DeleteFunc(r.Apps, func(as apply.AppStatus) bool { return as.App != app })
	}
	statusHealth(ctx, j, r, noHealth)
	login, err := loginOf(j)
	if err != nil {
		return err
	}
	apps := appOutputs(r, app, login)
	var named []ui.NamedOutput
	if app == "" {
		named = namedOutputs(j.f, apps)
	}
	if j.asJSON {
		return writeJSON(st, outputDoc{Apps: apps, Outputs: named})
	}
	ui.WriteOutputs(st.out, apps, named)
	return nil
}

// outputDoc is corral output -o json.
type outputDoc struct {
	Apps []ui.AppOutput `json:"apps"`
	// Outputs are the manifest's outputs: (without APP).
	Outputs []ui.NamedOutput `json:"outputs,omitempty"`
}

// ui.NamedOutputs reads the manifest's outputs from apps' facts. A value
// shows each secret it read as its reference (File.Redact).
func namedOutputs(f *manifest.File, apps []ui.AppOutput) []ui.NamedOutput {
	byName := map[string]ui.AppOutput{}
	for _, a := range apps {
		byName[a.App] = a
	}
	fact := func(app, name string) (string, error) {
		a := byName[app]
		v := map[string]string{"address": a.Address, "node": a.Node, "status": a.Status, "ssh": a.SSH, "health": a.Health}[name]
		if name == "vmid" && a.VMID != 0 {
			v = strconv.Itoa(a.VMID)
		}
		if v == "" {
			return "", fmt.Errorf("app %s has no %s (%s)", app, name, cmp.Or(a.Note, a.Status))
		}
		return v, nil
	}
	var out []ui.NamedOutput
	for _, o := range f.Outputs {
		v, err := manifest.ExpandOutput(o.Value, fact)
		if err != nil {
			out = append(out, ui.NamedOutput{Name: o.Name, Missing: f.Redact(err.Error())})
			continue
		}
		out = append(out, ui.NamedOutput{Name: o.Name, Value: f.Redact(v)})
	}
	return out
}

// loginOf is how ssh reaches j's containers.
func loginOf(j *job) (sshLogin, error) {
	key, err := identityPath()
	if err != nil {
		return sshLogin{}, err
	}
	sshc, err := sshConfig(j.s, false)
	if err != nil {
		return sshLogin{}, fmt.Errorf("ssh command: %w", err)
	}
	return sshLogin{key: key, port: sshc.Port}, nil
}
