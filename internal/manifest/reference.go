package manifest

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"

	"github.com/corralhq/corral/internal/lazyre"
	"github.com/corralhq/corral/internal/localfile"
)

// LoadOptions injects how ${env:NAME} and ${file:PATH} references are
// resolved. The zero value uses the process environment and file system.
type LoadOptions struct {
	// Getenv looks up an environment variable; nil means os.LookupEnv.
	// It is also asked for HOME to expand ~ in ${file:~/…}.
	Getenv func(name string) (string, bool)
	// ReadFile reads a file; nil means localfile.Read with the limit of
	// the kind of file (a regular file only, size-bounded).
	ReadFile func(path string) ([]byte, error)
	// Lazy leaves references that only provisioning or creating a
	// container reads (run scripts, file and compose content, envFile
	// values, the root password) unread when their variable is unset or
	// their file cannot be read: destroy, status, exec, logs, backups
	// and the like need none of them, and must not ask for a secret they
	// never use. App.Unresolved lists what was left.
	Lazy bool
	// Confine, when set, is all a manifest may read from its host: it
	// is set for a manifest from a source its reader does not control
	// (corral agent --git), nil for a manifest a human runs, which reads
	// any file and variable but corral's own secrets.
	Confine *Confine
	// inputs counts the bytes readInput has read for this manifest, to
	// bound them all together (localfile.MaxInputTotal); Parse sets it.
	inputs *atomic.Int64
}

// Confine is the allow-list of what a manifest from a Git repository may
// read from the host that runs it (docs/trust.md): whoever can push a
// commit writes the manifest, and a value it reads goes into a container
// whose users read it.
type Confine struct {
	// Root is the only directory tree whose files the manifest is read
	// from and may name (${file:…}, a file or compose step's source):
	// the Git checkout, .git excluded. Links are followed only while
	// they stay inside it.
	Root string
	// Env are the only variables ${env:…} may name (corral agent
	// --pass-env); any other reference, with a default or not, is
	// refused at parse time.
	Env []string
}

// ConfineExclude are the parts of Confine.Root no manifest reads: Git's
// own data (the fetch record names the repository's URL).
var ConfineExclude = []string{".git"}

// confineError says why a manifest from Git may not read a file, and
// what it may read.
func confineError(oe *localfile.OutsideError) error {
	var why string
	switch {
	case oe.Excluded != "":
		why = fmt.Sprintf("%s is in the checkout's %s directory, which is Git's, not the repository's", oe.Path, oe.Excluded)
	case oe.Link:
		why = fmt.Sprintf("%s leads outside the Git checkout (%s) through a symbolic link", oe.Path, oe.Root)
	default:
		why = fmt.Sprintf("%s is outside the Git checkout (%s)", oe.Path, oe.Root)
	}
	return fmt.Errorf("%s: a manifest from Git reads only the files committed in its repository; commit the file and name it by its path in the repository", why)
}

// envAllowed says why a manifest may not read variable name, or "".
func (o LoadOptions) envAllowed(name string) string {
	if o.Confine == nil || slices.Contains(o.Confine.Env, name) {
		return ""
	}
	passed := "none"
	if len(o.Confine.Env) > 0 {
		passed = strings.Join(o.Confine.Env, ", ")
	}
	return fmt.Sprintf("${env:%s}: a manifest from Git reads only the environment variables the agent passes it with --pass-env (now: %s); "+
		"to pass %s, run the agent with --pass-env %s (corral agent install --git … --pass-env %s), or commit the value when it is no secret", name, passed, name, name, name)
}

func (o LoadOptions) getenv(name string) (string, bool) {
	if o.Getenv == nil {
		return os.LookupEnv(name)
	}
	return o.Getenv(name)
}

func (o LoadOptions) readFile(path string, max int64) ([]byte, error) {
	switch {
	case o.Confine != nil:
		data, err := localfile.ReadIn(o.Confine.Root, ConfineExclude, path, max)
		if oe, ok := errors.AsType[*localfile.OutsideError](err); ok {
			return nil, confineError(oe)
		}
		return data, err
	case o.ReadFile == nil:
		return localfile.Read(path, max)
	}
	return o.ReadFile(path)
}

// readInput reads a file whose content goes into a container (a
// ${file:…} reference, a file step's source): readFile, then refused if
// it is one of the host's secrets (hostSecretPath). The read comes first,
// so a device or FIFO is refused as what it is.
func (o LoadOptions) readInput(path string, max int64) ([]byte, error) {
	// What is left of the manifest's total bounds this read too, so a
	// source past it is refused before it is read.
	lim := max
	if o.inputs != nil {
		lim = min(max, localfile.MaxInputTotal-o.inputs.Load())
	}
	data, err := o.readFile(path, lim)
	if err == nil && o.ReadFile == nil {
		err = o.hostSecretPath(path)
	}
	if tl, ok := errors.AsType[*localfile.TooLargeError](err); ok && lim < max && (tl.Size == 0 || tl.Size <= max) {
		return nil, fmt.Errorf("the files this manifest copies into containers (${file:…} references, file and compose sources) pass %d MiB in all with this one; "+
			"fetch large files in a provisioning step instead (curl, git, apt), which also keeps them out of corral's memory", localfile.MaxInputTotal>>20)
	}
	if err != nil {
		return nil, err
	}
	if o.inputs != nil {
		o.inputs.Add(int64(len(data)))
	}
	return data, nil
}

// hostSecretPath refuses a file a manifest must never copy into a guest:
// the kernel's views of this host's processes and devices (/proc — where
// /proc/self/environ holds corral's own token —, /sys, /dev) and corral's
// own credentials and state (its SSH key and config, the emulator's and
// the agent's state, the agent's token file). Links are followed first,
// so a link to /proc/self/environ is refused as well.
func (o LoadOptions) hostSecretPath(path string) error {
	real, err := filepath.EvalSymlinks(path)
	if err != nil {
		return nil // localfile.Read says why it cannot be read
	}
	home, _ := o.getenv("HOME")
	state, _ := o.getenv("XDG_STATE_HOME")
	config, _ := o.getenv("XDG_CONFIG_HOME")
	if state == "" && home != "" {
		state = filepath.Join(home, ".local", "state")
	}
	if config == "" && home != "" {
		config = filepath.Join(home, ".config")
	}
	// Only corral's secrets themselves: the agent's manifests and Git
	// checkouts live under /etc/corral and the state directory too, and
	// their own files must stay readable.
	for _, dir := range []string{"/proc", "/sys", "/dev", "/etc/corral/agent/agent.env", "/etc/corral/agent/id_ed25519",
		filepath.Join(state, "corral", "sim"), filepath.Join(config, "corral", "id_ed25519")} {
		if !filepath.IsAbs(dir) {
			continue // HOME unset
		}
		if real == dir || strings.HasPrefix(real, dir+"/") {
			return fmt.Errorf("%s is under %s, which holds this host's process, device or corral's own credential data: corral never copies it into a container (docs/trust.md)", path, dir)
		}
	}
	return nil
}

// CorralCredential reports whether the environment variable name is one
// of corral's own connection or agent credentials, which no manifest
// reads.
func CorralCredential(name string) bool {
	for _, p := range []string{"PROXMOX_VE_", "CORRAL_AGENT_", "CORRAL_SSH_", "PVE_ROOT_"} {
		if strings.HasPrefix(name, p) {
			return true
		}
	}
	return false
}

// referenceBody is what a reference holds between ${ and }.
const referenceBody = `(env:[A-Za-z_][A-Za-z0-9_]*(:-[^}]*)?|file:[^}]+)`

// referenceRE matches one reference, ${env:X} or ${file:P}.
var referenceRE = lazyre.New(`^\$\{` + referenceBody + `\}$`)

// templatePattern, used by the JSON Schema, matches a string holding at
// least one reference and no other ${: text runs ([^$]), dollars not
// before a { or $, a run of two or more dollars before { (the last two
// and the { are the $${ escape), and references.
const templatePattern = `^(` + templateText + `)*\$\{` + referenceBody + `\}(` + templateText + `|\$\{` + referenceBody + `\})*$`

const templateText = `[^$]|\$+[^${]|\$+$|\$\$+\{`

const referenceAllowed = "${env:NAME} with NAME of letters, digits and _, ${env:NAME:-default}, or ${file:PATH}, as the whole value or inside text; write $${ for a literal ${"

// part is one piece of a YAML string: literal text (with $${ unescaped
// to ${), a reference read at load time ("${env:X}"), or in an output's
// value a reference to a live fact of an app ("${app:db.address}"), left
// for corral output.
type part struct{ lit, ref, app string }

// OutputFacts are the facts of an app an output may name as
// ${app:APP.FACT}: what corral output reads from the cluster.
var OutputFacts = []string{"address", "vmid", "node", "status", "ssh", "health"}

// GuestFacts are the facts of an app a string that goes into a guest
// (a run script, a file's or compose file's content, an envFile value)
// may name as ${app:APP.FACT}. The others of OutputFacts are left out:
// status and health change while the apps run, and ssh names the key of
// whoever runs corral, so a string holding one would differ at every
// plan, or between two people's plans, and provision again each time.
var GuestFacts = []string{"address", "vmid", "node"}

// appRefRE matches a reference to an app's live fact.
var appRefRE = lazyre.New(`^\$\{app:([a-z]([a-z0-9-]{0,38}[a-z0-9])?)\.(` + strings.Join(OutputFacts, "|") + `)\}$`)

// parseTemplate splits a YAML string into literal text and references,
// read left to right: $${ is a literal ${, and any other ${ starts a
// reference that ends at the next }. problem says what is wrong with a
// ${ that is no valid reference, or with a reference to one of corral's
// own credentials. facts are the facts of apps the string may name as
// ${app:APP.FACT} (OutputFacts in an output's value, GuestFacts in a
// string that goes into a guest); nil: none.
func parseTemplate(s string, facts []string) (parts []part, problem string) {
	live := facts != nil
	var lit strings.Builder
	for i := 0; i < len(s); {
		switch {
		case strings.HasPrefix(s[i:], "$${"):
			lit.WriteString("${")
			i += 3
			continue
		case !strings.HasPrefix(s[i:], "${"):
			lit.WriteByte(s[i])
			i++
			continue
		}
		end := strings.IndexByte(s[i:], '}')
		if end < 0 {
			return nil, "invalid reference"
		}
		ref, p := s[i:i+end+1], part{}
		switch {
		case live && appRefRE.MatchString(ref) && slices.Contains(facts, appRefRE.FindStringSubmatch(ref)[3]):
			p.app = ref
		case live && strings.HasPrefix(ref, "${app:"):
			return nil, "invalid reference to an app's fact: write ${app:APP.FACT} with FACT one of " + strings.Join(facts, ", ") + factsWhy(facts)
		case !referenceRE.MatchString(ref):
			return nil, "invalid reference"
		default:
			p.ref = ref
		}
		if name, ok := envName(ref); ok && CorralCredential(name) {
			return nil, name + " is corral's own credential: a manifest never passes it into a container (anyone who can read the container would get corral's access); give the app a token of its own in a variable of its own"
		}
		if lit.Len() > 0 {
			parts = append(parts, part{lit: lit.String()})
			lit.Reset()
		}
		parts = append(parts, p)
		i += end + 1
	}
	if lit.Len() > 0 || len(parts) == 0 {
		parts = append(parts, part{lit: lit.String()})
	}
	return parts, ""
}

// factsWhy says why a string that goes into a guest may name fewer facts
// than an output.
func factsWhy(facts []string) string {
	if len(facts) == len(OutputFacts) {
		return ""
	}
	return " (status, health and ssh change while apps run or name your own key, so a container holding one would be provisioned again at every apply; an output may name them)"
}

// references are the references among parts, in order.
func references(parts []part) []string {
	var refs []string
	for _, p := range parts {
		if p.ref != "" {
			refs = append(refs, p.ref)
		}
	}
	return refs
}

// envName is the variable of an ${env:…} reference.
func envName(ref string) (string, bool) {
	name, ok := strings.CutPrefix(ref, "${env:")
	if !ok {
		return "", false
	}
	name, _, _ = strings.Cut(strings.TrimSuffix(name, "}"), ":-")
	return name, true
}

// interpolated is a string whose references were read.
type interpolated struct {
	value string
	// read are the values read from the environment or a file (not a
	// default written in the manifest), each with its reference.
	read []Secret
	// failed are the references that could not be read, errs why.
	failed []string
	errs   []string
}

// interpolate reads every reference of parts and joins the values with
// the literal text. Errors name the variable or path, never a value.
// With live (an output's value), the result is itself a template for
// ExpandOutput: references to apps' facts stay, and every other ${ is
// written $${.
func (o LoadOptions) interpolate(parts []part, dir string, live bool) interpolated {
	var in interpolated
	var b strings.Builder
	text := func(s string) {
		if live {
			s = strings.ReplaceAll(s, "${", "$${")
		}
		b.WriteString(s)
	}
	for _, p := range parts {
		switch {
		case p.app != "":
			b.WriteString(p.app)
			continue
		case p.ref == "":
			text(p.lit)
			continue
		}
		v, fromDefault, err := o.resolve(p.ref, dir)
		switch {
		case err != nil:
			in.failed, in.errs = append(in.failed, p.ref), append(in.errs, err.Error())
		case !fromDefault:
			in.read = append(in.read, NewSecret(p.ref, v))
		}
		text(v)
	}
	in.value = b.String()
	return in
}

// resolve reads the value of a reference that splitReference accepted. dir
// is the manifest's directory, against which a relative PATH is resolved.
// Errors name the variable or path, never a value. A file's trailing line
// breaks are dropped, so a password file may end in a newline.
//
// ${env:NAME:-default} is default when NAME is unset or empty, as in a
// POSIX shell; fromDefault says the default was taken (a value written in
// the manifest, not read from the environment).
func (o LoadOptions) resolve(ref, dir string) (value string, fromDefault bool, err error) {
	kind, arg, _ := strings.Cut(ref[2:len(ref)-1], ":")
	if kind == "env" {
		name, def, hasDefault := strings.Cut(arg, ":-")
		v, ok := o.getenv(name)
		switch {
		case hasDefault && v == "":
			return def, true, nil
		case !ok:
			return "", false, fmt.Errorf("environment variable %s is not set (write ${env:%s:-} for an optional one)", name, name)
		}
		return v, false, nil
	}
	path, err := o.expandPath(arg, dir)
	if err != nil {
		return "", false, err
	}
	data, err := o.readInput(path, localfile.MaxSecret)
	if err != nil {
		return "", false, fmt.Errorf("cannot read %s: %w", ref, err)
	}
	return strings.TrimRight(string(data), "\r\n"), false, nil
}

// expandPath expands a leading ~ to $HOME and makes a relative path
// relative to dir.
func (o LoadOptions) expandPath(p, dir string) (string, error) {
	if p == "~" || strings.HasPrefix(p, "~/") {
		home, ok := o.getenv("HOME")
		if !ok || home == "" {
			return "", fmt.Errorf("cannot expand ~ in ${file:%s}: HOME is not set", p)
		}
		return filepath.Join(home, p[1:]), nil
	}
	if strings.HasPrefix(p, "~") {
		return "", fmt.Errorf("cannot expand %s in ${file:%s}: only ~ (your home) is supported", strings.SplitN(p, "/", 2)[0], p)
	}
	if !filepath.IsAbs(p) {
		return filepath.Join(dir, p), nil
	}
	return p, nil
}

// ExpandOutput reads an output's value (Output.Value): each
// ${app:APP.FACT} becomes fact(APP, FACT), and $${ a literal ${. An
// error names the first fact fact cannot give, with its reason.
func ExpandOutput(value string, fact func(app, name string) (string, error)) (string, error) {
	var b strings.Builder
	for i := 0; i < len(value); {
		switch {
		case strings.HasPrefix(value[i:], "$${"):
			b.WriteString("${")
			i += 3
			continue
		case !strings.HasPrefix(value[i:], "${app:"):
			b.WriteByte(value[i])
			i++
			continue
		}
		end := strings.IndexByte(value[i:], '}')
		m := appRefRE.FindStringSubmatch(value[i : i+end+1])
		if end < 0 || m == nil {
			return "", fmt.Errorf("invalid reference at %q", value[i:])
		}
		v, err := fact(m[1], m[3])
		if err != nil {
			return "", fmt.Errorf("${app:%s.%s}: %w", m[1], m[3], err)
		}
		b.WriteString(v)
		i += end + 1
	}
	return b.String(), nil
}

// outputApps are the apps an output's value names.
func outputApps(parts []part) []string {
	var apps []string
	for _, p := range parts {
		if m := appRefRE.FindStringSubmatch(p.app); m != nil {
			apps = append(apps, m[1])
		}
	}
	return apps
}

// factRefs are the facts parts name, each as APP.FACT, in order.
func factRefs(parts []part) []string {
	var refs []string
	for _, p := range parts {
		if m := appRefRE.FindStringSubmatch(p.app); m != nil {
			refs = append(refs, m[1]+"."+m[3])
		}
	}
	return refs
}

// EscapeTemplate writes s, a string with no reference, as a template
// for ExpandOutput: every ${ as $${.
func EscapeTemplate(s string) string { return strings.ReplaceAll(s, "${", "$${") }
