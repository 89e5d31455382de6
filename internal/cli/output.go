package cli

import (
	"cmp"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/corralhq/corral/internal/apply"
	"github.com/corralhq/corral/internal/manifest"
	"github.com/corralhq/corral/internal/plan"
	"github.com/corralhq/corral/internal/ui"
)

// appOutput is what `corral output` says of one app: the facts a script or
// a person needs to reach it, read from live state by the same
// observation as `corral status` (apply.Status, with its health checks).
type appOutput struct {
	App string `json:"app"`
	// VMID, Node, Status and Address are those of the app's container;
	// empty when it has none, or more than one (a move under way: see
	// Note).
	VMID    int    `json:"vmid,omitempty"`
	Node    string `json:"node,omitempty"`
	Status  string `json:"status"`
	Address string `json:"address,omitempty"`
	// SSH logs in as corral does: root, with corral's key; "" without an
	// address.
	SSH          string            `json:"ssh,omitempty"`
	Volumes      []plan.VolumeInfo `json:"volumes"`
	Health       string            `json:"health"`
	HealthDetail string            `json:"health_detail"`
	// Note says why a fact is missing (no container yet, a move).
	Note string `json:"note,omitempty"`
}

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

// appOutputs turns a status report into each app's facts; with app set,
// only that app's.
func appOutputs(r *apply.StatusReport, app string, login sshLogin) []appOutput {
	out := []appOutput{}
	for _, as := range r.Apps {
		if app != "" && as.App != app {
			continue
		}
		o := appOutput{App: as.App, Volumes: as.Volumes, Health: as.Health, HealthDetail: as.HealthDetail}
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

// writeOutputs prints each app's facts as a block of aligned "key: value"
// lines, leaving out the empty ones.
func writeOutputs(w io.Writer, apps []appOutput) {
	for i, o := range apps {
		if i > 0 {
			fmt.Fprintln(w)
		}
		var rows [][2]string
		row := func(k, v string) {
			if v != "" && v != "0" {
				rows = append(rows, [2]string{k + ":", v})
			}
		}
		row("vmid", strconv.Itoa(o.VMID))
		row("node", o.Node)
		row("status", o.Status)
		row("address", o.Address)
		row("ssh", o.SSH)
		row("health", healthText(o.Health, o.HealthDetail))
		for _, v := range o.Volumes {
			row("volume "+v.Name, fmt.Sprintf("%s, %s, at %s (%s)", v.VolID, manifest.Size(v.Size), ui.Dash(v.Mount), v.Holder))
		}
		row("note", o.Note)
		width := 0
		for _, r := range rows {
			width = max(width, len(r[0]))
		}
		fmt.Fprintln(w, o.App)
		for _, r := range rows {
			fmt.Fprintf(w, "  %-*s %s\n", width, r[0], r[1])
		}
	}
}

// healthText is health with its detail, when it says more.
func healthText(health, detail string) string {
	if detail == "" || detail == health {
		return health
	}
	return health + " (" + detail + ")"
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
	var named []namedOutput
	if app == "" {
		named = namedOutputs(j.f, apps)
	}
	if j.asJSON {
		return writeJSON(st, outputDoc{Apps: apps, Outputs: named})
	}
	writeOutputs(st.out, apps)
	writeNamedOutputs(st.out, named)
	return nil
}

// outputDoc is corral output -o json.
type outputDoc struct {
	Apps []appOutput `json:"apps"`
	// Outputs are the manifest's outputs: (without APP).
	Outputs []namedOutput `json:"outputs,omitempty"`
}

// namedOutput is one of the manifest's outputs, with the apps' facts
// read in; Missing says which fact could not be read, and why.
type namedOutput struct {
	Name    string `json:"name"`
	Value   string `json:"value"`
	Missing string `json:"missing,omitempty"`
}

// namedOutputs reads the manifest's outputs from apps' facts. A value
// shows each secret it read as its reference (File.Redact).
func namedOutputs(f *manifest.File, apps []appOutput) []namedOutput {
	byName := map[string]appOutput{}
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
	var out []namedOutput
	for _, o := range f.Outputs {
		v, err := manifest.ExpandOutput(o.Value, fact)
		if err != nil {
			out = append(out, namedOutput{Name: o.Name, Missing: f.Redact(err.Error())})
			continue
		}
		out = append(out, namedOutput{Name: o.Name, Value: f.Redact(v)})
	}
	return out
}

// writeNamedOutputs prints the manifest's outputs, aligned, after the
// apps.
func writeNamedOutputs(w io.Writer, named []namedOutput) {
	if len(named) == 0 {
		return
	}
	width := 0
	for _, o := range named {
		width = max(width, len(o.Name)+1)
	}
	fmt.Fprintln(w, "\noutputs")
	for _, o := range named {
		v := o.Value
		if o.Missing != "" {
			v = "(unknown: " + o.Missing + ")"
		}
		fmt.Fprintf(w, "  %-*s %s\n", width, o.Name+":", v)
	}
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
