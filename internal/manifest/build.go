package manifest

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/corralhq/corral/internal/localfile"
)

// build turns the decoded tree into a File: it applies defaults from the
// field table and checks what spans several keys (uniqueness, gateway
// with DHCP, adopt vs storage, feature flags). Members that failed their
// own checks are already reported and are skipped here.
func (d *decoder) build(root *value) *File {
	f := &File{Path: d.file, Overrides: d.paths, Project: root.strOr("project"), Pool: root.strOr("pool")}
	f.ProjectSet = f.Project != ""
	if !f.ProjectSet {
		f.Project = DefaultProject(d.dir)
	}
	f.Origin = origin(f.Project, f.ProjectSet, d.file)
	pv := root.object("placement")
	f.Placement.Policy = pv.strOr("policy")
	seen := map[string]bool{}
	for _, n := range pv.members("nodes") {
		if seen[n.str] {
			d.report(n.node, n.path, "node "+n.str+" is listed twice", "")
			continue
		}
		seen[n.str] = true
		f.Placement.Nodes = append(f.Placement.Nodes, n.str)
	}
	names := map[string]*value{}
	vmids := map[int64]*value{}
	adopted := map[string]*value{}
	apps := root.members("apps")
	if len(apps) > 0 {
		f.Apps = make([]App, 0, len(apps)) // an App is large: no doubling
	}
	for _, av := range apps {
		if !av.ok {
			continue
		}
		a := d.buildApp(av, adopted)
		if a.Pool == "" {
			a.Pool = f.Pool
		}
		if n := av.member("name"); n != nil {
			if first, dup := names[n.str]; dup {
				d.report(n.node, n.path, "duplicate app name (first at line "+strconv.Itoa(first.node.Line)+")", "")
			} else {
				names[n.str] = n
			}
		}
		if id := av.member("vmid"); id != nil {
			if first, dup := vmids[id.num]; dup {
				d.report(id.node, id.path, fmt.Sprintf("vmid %d is already used by %s", id.num, strings.TrimSuffix(first.path, ".vmid")), "")
			} else {
				vmids[id.num] = id
			}
		}
		f.Apps = append(f.Apps, a)
	}
	d.checkTotals(root, f)
	d.checkFacts(f)
	f.Outputs = d.buildOutputs(root, names)
	f.secrets = d.secrets
	return f
}

// DefaultProject is the project of a manifest that names none: its
// directory's base name as a PVE tag allows it (as docker compose names a
// project after its directory): lower-cased, each run of other characters
// than letters, digits, '-' and '_' turned into one '-', at most 40
// characters, "default" when nothing is left.
func DefaultProject(dir string) string {
	if abs, err := filepath.Abs(dir); err == nil {
		dir = abs
	}
	var b strings.Builder
	dash := false
	for _, r := range strings.ToLower(filepath.Base(dir)) {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '_' || r == '-' {
			b.WriteRune(r)
			dash = false
		} else if !dash {
			b.WriteByte('-')
			dash = true
		}
	}
	p := strings.Trim(b.String(), "-")
	if len(p) > 40 {
		p = strings.TrimRight(p[:40], "-")
	}
	if p == "" {
		return "default"
	}
	return p
}

// origin is File.Origin: "project NAME" for a manifest that names its
// project (any copy of it, on any machine, is the same declarer), else
// "HOST:PATH", the machine and absolute path of the manifest file, which
// tells apart two manifests whose directories share a base name.
func origin(project string, set bool, file string) string {
	if set {
		return "project " + project
	}
	if abs, err := filepath.Abs(file); err == nil && file != "" {
		file = abs
	}
	host, _ := os.Hostname()
	return host + ":" + file
}

func (d *decoder) buildApp(v *value, adopted map[string]*value) App {
	a := App{
		Name:         v.strOr("name"),
		Node:         v.strOr("node"),
		VMID:         int(v.intOr("vmid")),
		Template:     v.strOr("template"),
		Unprivileged: v.boolOr("unprivileged"),
		Cores:        int(v.intOr("cores")),
		MemoryMiB:    int(v.intOr("memory")),
		SwapMiB:      int(v.intOr("swap")),
		OnBoot:       v.boolOr("onboot"),
		Description:  v.strOr("description"),
		Pos:          d.pos(v.node),
		Unresolved:   uniqueStrings(d.unresolved[appOf(v.path)]),
	}
	if !strings.Contains(a.Template, ":") && a.Template != "" {
		a.Template = "local:vztmpl/" + a.Template
	}
	rootfs := v.object("rootfs")
	a.RootFS = RootFS{Storage: rootfs.strOr("storage"), Size: rootfs.sizeOr("size")}
	if pw := v.member("password"); pw != nil {
		a.Password = NewSecret(pw.ref, pw.str)
	}
	for _, t := range v.members("tags") {
		a.Tags = append(a.Tags, t.str)
	}
	for _, k := range v.object("ssh").members("publicKeys") {
		a.SSH.PublicKeys = append(a.SSH.PublicKeys, splitKeys(k.str)...)
	}
	a.Features = d.buildFeatures(v)
	a.Network = d.buildNetwork(v.object("network"))

	names := map[string]*value{}
	mounts := map[string]*value{}
	for _, vv := range v.members("volumes") {
		if !vv.ok {
			continue
		}
		vol := d.buildVolume(vv, adopted)
		if n := vv.member("name"); n != nil {
			if first, dup := names[n.str]; dup {
				d.report(n.node, n.path, "duplicate volume name (first at line "+strconv.Itoa(first.node.Line)+")", "")
			} else {
				names[n.str] = n
			}
		}
		if m := vv.member("mount"); m != nil {
			if first, dup := mounts[m.str]; dup {
				d.report(m.node, m.path, "mount path is already used by "+strings.TrimSuffix(first.path, ".mount"), "")
			} else {
				mounts[m.str] = m
			}
		}
		a.Volumes = append(a.Volumes, vol)
	}

	a.Provision = d.buildProvision(v, a.Name)
	a.Health = d.buildHealth(v)
	bv := v.object("backup")
	a.Backup = BackupPolicy{Keep: int(bv.intOr("keep")), Storage: bv.strOr("storage"), Mode: bv.strOr("mode"), Schedule: bv.strOr("schedule")}
	a.SnapshotBeforeChange = v.boolOr("snapshotBeforeChange")
	a.Pool = v.strOr("pool")
	a.Firewall = d.buildFirewall(v)
	a.HA = d.buildHA(v)
	d.composeFeatures(v, &a)
	d.buildKind(v, &a)
	return a
}

// composeFeatures applies what a compose step implies: Docker needs
// nesting, which corral sets, and in an unprivileged container also
// keyctl, which only root@pam can set (behaviour.md §c), so the app is
// marked NeedsKeyctl and corral names the command up front.
func (d *decoder) composeFeatures(app *value, a *App) {
	if app.strOr("kind") == KindVM {
		return // a VM runs Docker with no container feature flags
	}
	var compose *value
	for _, sv := range app.members("provision") {
		if c := sv.obj["compose"]; c != nil {
			compose = c
			break
		}
	}
	if compose == nil {
		return
	}
	nesting := app.object("features").member("nesting")
	switch {
	case nesting != nil && !nesting.b:
		d.report(nesting.node, nesting.path, "the compose step "+compose.path+" runs Docker, which needs nesting; "+
			"set it to true or leave it out", "true")
	case !a.Unprivileged:
		if nesting == nil { // nesting: true is reported by buildFeatures
			vmid := "<vmid>"
			if a.VMID != 0 {
				vmid = strconv.Itoa(a.VMID)
			}
			d.report(compose.node, compose.path, "Docker needs features.nesting, and on a privileged container (unprivileged: false) "+
				"only root@pam can set feature flags; make the app unprivileged, or ask an administrator to run: pct set "+
				vmid+" -features nesting=1", "")
		}
	default:
		a.Features.Nesting = true
		a.NeedsKeyctl = true
	}
}

// buildProvision builds the steps, with derived names, and checks that
// names (under which the executor records each step) are unique.
func (d *decoder) buildProvision(app *value, appName string) []Step {
	var steps []Step
	names := map[string]*value{}
	var built []*value
	all := map[string]bool{} // every step name, to tell "later" from "unknown"
	for _, sv := range app.members("provision") {
		st, ok := d.buildStep(sv, appName)
		if !ok {
			continue
		}
		all[st.Name] = true
		steps = append(steps, st)
		built = append(built, sv)
	}
	for i, sv := range built {
		d.checkOnChange(sv, steps[i], names, all)
		d.uniqueName(names, sv, "step", steps[i].Name)
	}
	return steps
}

// checkOnChange reports an onChange entry that names no earlier step of
// the app: steps run in order, so a step can only react to one that ran
// before it, and a name that matches nothing is a typo that would
// silently never trigger.
func (d *decoder) checkOnChange(sv *value, st Step, earlier map[string]*value, all map[string]bool) {
	for _, o := range sv.members("onChange") {
		switch {
		case o.str == st.Name:
			d.report(o.node, o.path, "a step cannot react to itself", "the name of an earlier step of the app")
		case earlier[o.str] != nil:
		case all[o.str]:
			d.report(o.node, o.path, "step "+quote(o.str)+" comes after this one; steps run in order, so move this step below it", "the name of an earlier step of the app")
		default:
			d.report(o.node, o.path, "no step of the app is named "+quote(o.str)+knownSteps(earlier), "the name of an earlier step of the app")
		}
	}
}

// knownSteps lists the earlier step names for a diagnostic.
func knownSteps(earlier map[string]*value) string {
	if len(earlier) == 0 {
		return "; no step comes before this one"
	}
	var names []string
	for n := range earlier {
		names = append(names, quote(n))
	}
	slices.Sort(names)
	return "; earlier steps: " + strings.Join(names, ", ")
}

// uniqueName records the name of step or check v in names, or reports
// it (at its name key if written) when an earlier one has it. A name
// nameKnown doubts is left out: its reason is reported already.
func (d *decoder) uniqueName(names map[string]*value, v *value, what, name string) {
	if !nameKnown(v, name) {
		return
	}
	if first, dup := names[name]; dup {
		at := v
		if n := v.member("name"); n != nil {
			at = n
		}
		d.report(at.node, at.path, what+" name "+quote(name)+" is already used by "+first.path+
			"; give one of them a name of its own", "")
		return
	}
	names[name] = v
}

// nameKnown reports whether the name of a step or check is the one the
// user meant: its name key is valid if written, it has one kind, and the
// kind's value was valid enough to derive a name from.
func nameKnown(v *value, name string) bool {
	if n := v.obj["name"]; n != nil {
		return n.ok
	}
	kinds := 0
	for _, k := range v.f.oneOf {
		if v.obj[k] != nil {
			kinds++
		}
	}
	return kinds == 1 && !strings.HasSuffix(name, ": ")
}

// kindOf returns the first oneOf key written in an object value, or "".
func kindOf(v *value) string {
	for _, k := range v.f.oneOf {
		if v.obj[k] != nil {
			return k
		}
	}
	return ""
}

// buildStep is one provisioning step of app appName from its value: its
// kind's fields, and the name shown in progress (the step's own, else
// KIND: SUBJECT).
func (d *decoder) buildStep(sv *value, appName string) (Step, bool) {
	kind := kindOf(sv)
	if kind == "" {
		return Step{}, false // reported by the decoder
	}
	st := Step{Kind: StepKind(kind), Timeout: sv.durOr("timeout"), Pos: d.pos(sv.node)}
	var subject string
	switch st.Kind {
	case StepRun:
		st.Run = sv.strOr("run")
		subject = firstLine(st.Run)
		if r := sv.member("run"); r != nil && r.ref != "" {
			subject = r.ref
			if len(r.facts) > 0 {
				// As written, so that a new fact keeps the name (and
				// the record under it); its first line, as for a
				// script without references.
				subject = firstLine(r.ref)
			}
		}
	case StepFile:
		fv := sv.object("file")
		st.Path, st.Mode, st.Owner = fv.strOr("path"), fv.modeOr("mode"), fv.strOr("owner")
		st.Content = d.content(fv)
		subject = fv.displayOr("path")
	case StepEnvFile:
		fv := sv.object("envFile")
		st.Path, st.Mode, st.Owner = fv.strOr("path"), fv.modeOr("mode"), fv.strOr("owner")
		subject = fv.displayOr("path")
		st.Env = d.envVars(fv)
	case StepCompose:
		fv := sv.object("compose")
		st.Path, st.Mode, st.Project = fv.strOr("path"), fv.modeOr("mode"), fv.strOr("project")
		if st.Path == "" {
			st.Path = "/opt/" + appName + "/compose.yaml"
		}
		if st.Project == "" {
			st.Project = appName
		}
		st.Content = d.content(fv)
		subject = st.Path
		if p := fv.member("path"); p != nil {
			subject = p.display()
		}
	case StepUser:
		uv := sv.object("user")
		st.Account = account(uv)
		subject = uv.displayOr("name")
	}
	st.Name = kind + ": " + subject
	if n := sv.member("name"); n != nil {
		st.Name = n.str
	}
	for _, o := range sv.members("onChange") {
		st.OnChange = append(st.OnChange, o.str)
	}
	for _, u := range sv.members("restart") {
		st.Restart = append(st.Restart, u.str)
	}
	if st.Kind == StepCompose {
		st.Pull = Pull(sv.object("compose").strOr("pull"))
	}
	st.Facts = d.stepFacts(sv, appName)
	if len(st.Facts) > 0 {
		templateEnv(st.Env, sv.object("envFile"))
	}
	return st, true
}

// envVars are an envFile step's variables; a name set twice is reported
// at its second place, naming the first.
func (d *decoder) envVars(fv *value) []EnvVar {
	var vars []EnvVar
	seen := map[string]*value{}
	for _, ev := range fv.members("env") {
		n, val := ev.member("name"), ev.member("value")
		if n == nil || val == nil {
			continue
		}
		if first, dup := seen[n.str]; dup {
			d.report(n.node, n.path, "variable "+n.display()+" is already set by "+strings.TrimSuffix(first.path, ".name"), "")
			continue
		}
		seen[n.str] = n
		vars = append(vars, EnvVar{Name: n.str, Value: NewSecret(val.ref, val.str)})
	}
	return vars
}

// account is a user step's account, its home /home/NAME by default.
func account(uv *value) Account {
	a := Account{
		Name:  uv.strOr("name"),
		UID:   int(uv.intOr("uid")),
		Home:  uv.strOr("home"),
		Shell: uv.strOr("shell"),
	}
	if a.Home == "" {
		a.Home = "/home/" + a.Name
	}
	for _, g := range uv.members("groups") {
		a.Groups = append(a.Groups, g.str)
	}
	return a
}

// content returns the content of a file or compose step: the content key,
// or the file its source names, read now.
func (d *decoder) content(fv *value) string {
	if c := fv.member("content"); c != nil {
		return c.str
	}
	src := fv.member("source")
	if src == nil {
		return ""
	}
	p, err := d.opts.expandPath(src.str, d.dirOf(src.node))
	if err == nil {
		var data []byte
		if data, err = d.opts.readInput(p, localfile.MaxContent); err == nil {
			return string(data)
		}
		// The path is in the message already; keep only the reason.
		if pe, ok := errors.AsType[*fs.PathError](err); ok {
			err = pe.Err
		}
	}
	d.report(src.node, src.path, "cannot read "+src.display()+": "+err.Error(), "")
	return ""
}

// firstLine is the first non-blank line of a script, cut to 40 characters,
// to name a step.
func firstLine(s string) string {
	for line := range strings.Lines(s) {
		if line = strings.TrimSpace(line); line != "" {
			if r := []rune(line); len(r) > 40 {
				line = string(r[:40])
			}
			return line
		}
	}
	return ""
}

// buildHealth builds the health checks, with derived names, and checks
// that names are unique and that expect is only given to http checks.
func (d *decoder) buildHealth(app *value) []Check {
	var checks []Check
	names := map[string]*value{}
	for _, cv := range app.members("health") {
		kind := kindOf(cv)
		if kind == "" {
			continue // reported by the decoder
		}
		c := Check{
			Kind:     kind,
			Timeout:  cv.durOr("timeout"),
			Retries:  int(cv.intOr("retries")),
			Interval: cv.durOr("interval"),
			Pos:      d.pos(cv.node),
		}
		subject := cv.displayOr(kind)
		switch kind {
		case "http":
			c.URL, c.Expect = cv.strOr("http"), int(cv.intOr("expect"))
		case "tcp":
			c.Address = cv.strOr("tcp")
		case "command":
			c.Command = cv.strOr("command")
			if m := cv.member("command"); m != nil && m.ref == "" {
				subject = firstLine(c.Command)
			}
		}
		if e := cv.member("expect"); e != nil && kind != "http" {
			d.report(e.node, e.path, "expect applies only to http checks", "")
		}
		c.Name = kind + ": " + subject
		if n := cv.member("name"); n != nil {
			c.Name = n.str
		}
		d.uniqueName(names, cv, "check", c.Name)
		checks = append(checks, c)
	}
	return checks
}

// buildFeatures rejects what an API token cannot set (behaviour.md §c):
// any flag but nesting, and any flag at all on a privileged container.
// The message gives the pct command an administrator can run instead.
func (d *decoder) buildFeatures(app *value) Features {
	fv := app.object("features")
	feat := Features{Nesting: fv.boolOr("nesting")}
	var rootOnly []*value
	for _, c := range fv.f.fields {
		if m := fv.member(c.key); m != nil && c.rootOnly {
			rootOnly = append(rootOnly, m)
		}
	}
	if len(rootOnly) > 0 {
		flags := []string{"nesting=" + boolDigit(feat.Nesting)}
		for _, m := range rootOnly {
			if m.f.kind == kindBool {
				flags = append(flags, m.f.key+"="+boolDigit(m.b))
			} else {
				flags = append(flags, m.f.key+"="+m.display())
			}
		}
		vmid := "<vmid>"
		if id := app.member("vmid"); id != nil {
			vmid = strconv.FormatInt(id.num, 10)
		}
		cmd := "pct set " + vmid + " -features " + strings.Join(flags, ",")
		for _, m := range rootOnly {
			d.report(m.node, m.path, "only root@pam can set this feature flag, and corral works with an API token; "+
				"leave it out and ask an administrator to run: "+cmd, "nesting")
		}
	}
	if n := fv.member("nesting"); n != nil && n.b {
		if u := app.member("unprivileged"); u != nil && !u.b {
			d.report(n.node, n.path, "on a privileged container (unprivileged: false) only root@pam can set feature flags, "+
				"and corral works with an API token", "")
		}
	}
	return feat
}

func (d *decoder) buildNetwork(nv *value) Network {
	n := Network{
		Bridge:  nv.strOr("bridge"),
		IP:      nv.strOr("ip"),
		Gateway: nv.strOr("gateway"),
	}
	for _, s := range nv.members("dns") {
		n.DNS = append(n.DNS, s.str)
	}
	// Judge the gateway only against an ip that is absent (dhcp) or valid.
	if gw := nv.member("gateway"); gw != nil && n.DHCP() && (nv.obj["ip"] == nil || nv.member("ip") != nil) {
		d.report(gw.node, gw.path, "a gateway needs a static ip; with dhcp the gateway comes from DHCP", "")
	}
	return n
}

func (d *decoder) buildVolume(v *value, adopted map[string]*value) Volume {
	vol := Volume{
		Name:    v.strOr("name"),
		Storage: v.strOr("storage"),
		Size:    v.sizeOr("size"),
		Mount:   v.strOr("mount"),
		Backup:  v.boolOr("backup"),
		Reclaim: Reclaim(v.strOr("reclaim")),
		Adopt:   v.strOr("adopt"),
		Pos:     d.pos(v.node),
	}
	ad := v.member("adopt")
	if ad == nil {
		if v.obj["size"] == nil && v.obj["adopt"] == nil {
			d.report(v.node, joinPath(v.path, "size"), "required key is missing (only an adopted volume may leave it out)", "")
		}
		return vol
	}
	sid, _, _ := strings.Cut(ad.str, ":")
	if st := v.member("storage"); st != nil && st.str != sid {
		d.report(st.node, st.path, "storage "+st.display()+" is not the storage of the adopted volume "+ad.display(), sid)
	}
	vol.Storage = sid
	if first, dup := adopted[ad.str]; dup {
		d.report(ad.node, ad.path, "volume "+ad.display()+" is already adopted by "+strings.TrimSuffix(first.path, ".adopt"), "")
	} else {
		adopted[ad.str] = ad
	}
	return vol
}

func boolDigit(b bool) string {
	if b {
		return "1"
	}
	return "0"
}

// display shows a value in a message: as written, or as its reference.
func (v *value) display() string {
	if v.ref != "" {
		return v.ref
	}
	return v.str
}

// member returns the valid member key of an object value, or nil.
func (v *value) member(key string) *value {
	if v == nil || v.obj == nil {
		return nil
	}
	if c := v.obj[key]; c != nil && c.ok {
		return c
	}
	return nil
}

// members returns the valid items of the list member key.
func (v *value) members(key string) []*value {
	l := v.member(key)
	if l == nil {
		return nil
	}
	var out []*value
	for _, it := range l.list {
		if it.ok {
			out = append(out, it)
		}
	}
	return out
}

// object returns the object member key, or an empty one of the right
// field, so that its defaults apply when the key is absent.
func (v *value) object(key string) *value {
	if m := v.member(key); m != nil {
		return m
	}
	return &value{f: v.f.child(key), ok: true}
}

// strOr returns the string member key, or the field's default.
func (v *value) strOr(key string) string {
	if m := v.member(key); m != nil {
		return m.str
	}
	s, _ := v.f.child(key).def.(string)
	return s
}

func (v *value) intOr(key string) int64 {
	if m := v.member(key); m != nil {
		return m.num
	}
	i, _ := v.f.child(key).def.(int64)
	return i
}

func (v *value) boolOr(key string) bool {
	if m := v.member(key); m != nil {
		return m.b
	}
	b, _ := v.f.child(key).def.(bool)
	return b
}

// displayOr shows the string member key as display does, or its default.
func (v *value) displayOr(key string) string {
	if m := v.member(key); m != nil {
		return m.display()
	}
	return v.strOr(key)
}

func (v *value) durOr(key string) time.Duration {
	if m := v.member(key); m != nil {
		return m.dur
	}
	def, _ := v.f.child(key).def.(string)
	d, err := time.ParseDuration(def)
	if err != nil {
		panic("manifest: bad default duration " + def) // a bug in spec.go, caught by tests
	}
	return d
}

func (v *value) modeOr(key string) os.FileMode {
	if m := v.member(key); m != nil {
		return m.mode
	}
	def, _ := v.f.child(key).def.(string)
	mode, ok := parseMode(def)
	if !ok {
		panic("manifest: bad default mode " + def) // a bug in spec.go, caught by tests
	}
	return mode
}

func (v *value) sizeOr(key string) Size {
	if m := v.member(key); m != nil {
		return m.size
	}
	def, _ := v.f.child(key).def.(string)
	if def == "" {
		return 0
	}
	s, err := ParseSize(def)
	if err != nil {
		panic("manifest: bad default size " + def) // a bug in spec.go, caught by tests
	}
	return s
}

// uniqueStrings drops repeats, keeping the first of each in order.
func uniqueStrings(in []string) []string {
	var out []string
	seen := map[string]bool{}
	for _, s := range in {
		if !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	return out
}

// buildOutputs reads the named outputs; each name is unique and each
// ${app:APP.FACT} names an app of the manifest (names, by app name).
func (d *decoder) buildOutputs(root *value, names map[string]*value) []Output {
	var outs []Output
	seen := map[string]*value{}
	for _, ov := range root.members("outputs") {
		n, val := ov.member("name"), ov.member("value")
		if !ov.ok || n == nil || val == nil {
			continue
		}
		if first, dup := seen[n.str]; dup {
			d.report(n.node, n.path, "duplicate output name (first at line "+strconv.Itoa(first.node.Line)+")", "")
			continue
		}
		seen[n.str] = n
		for _, app := range val.apps {
			if names[app] == nil {
				d.report(val.node, val.path, "${app:"+app+".…} names no app of this manifest", "an app's name")
			}
		}
		outs = append(outs, Output{Name: n.str, Value: val.str, Pos: d.pos(ov.node)})
	}
	return outs
}

// buildHA is the app's ha:, nil when it has none. group and rule are
// PVE 8's and PVE 9's ways of one thing: a manifest names at most one.
func (d *decoder) buildHA(app *value) *HA {
	hv := app.member("ha")
	if hv == nil {
		return nil
	}
	h := &HA{State: hv.strOr("state"), Group: hv.strOr("group"), Rule: hv.strOr("rule"),
		MaxRestart: int(hv.intOr("maxRestart")), MaxRelocate: int(hv.intOr("maxRelocate"))}
	if h.Group != "" && h.Rule != "" {
		r := hv.member("rule")
		d.report(r.node, r.path, "set group (PVE 8) or rule (PVE 9), not both: PVE 9 migrated its HA groups to rules", "")
	}
	return h
}
