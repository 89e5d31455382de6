package manifest

import (
	"cmp"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"gopkg.in/yaml.v3"
)

// File is a valid manifest: its apps with every default applied.
type File struct {
	// Path is the file name given to Load or Parse: with override files,
	// the first, whose directory and path give the project and Origin.
	Path string
	// Overrides are the files merged over Path, in order (LoadFiles);
	// nil for one file.
	Overrides []string
	// Project names the project the apps belong to: every container
	// corral creates for them is tagged corral-project-<Project>, and
	// apply prunes this project's containers whose app is gone from the
	// manifest, never another project's. Default: DefaultProject of the
	// manifest's directory.
	Project string
	// ProjectSet: the manifest names its project (project:). A defaulted
	// project can collide with another directory of the same base name,
	// so corral deletes under it only what this very manifest declared
	// (see Origin).
	ProjectSet bool
	// Origin says who declares the apps, recorded on each app's container
	// and in the keeper beside its volumes' project: "project NAME" when
	// ProjectSet, else "HOST:ABSOLUTE-PATH" of the manifest file.
	Origin string
	// Pool is the manifest's pool:, the default of each app's Pool.
	Pool string
	// Placement says where corral creates an app that names no node.
	Placement Placement
	Apps      []App
	// Outputs are the named values corral output prints, in order.
	Outputs []Output

	// secrets are held as Secrets so that even printing a File with %+v
	// shows no value.
	secrets []Secret
}

// Output is a named value of the manifest (outputs:), printed by corral
// output.
type Output struct {
	Name string
	// Value has its ${env:…} and ${file:…} references read; its
	// ${app:APP.FACT} references are left for ExpandOutput, and a literal
	// ${ is written $${. Print it through File.Redact: it may hold a
	// secret.
	Value string
	Pos   Pos
}

// Placement is how corral chooses a node for a new app that names none.
type Placement struct {
	Policy string   // "spread" (default) or "memory"
	Nodes  []string // the nodes allowed; nil: every online node
}

// App is one app: an LXC container and its persistent volumes.
type App struct {
	Name string
	// Kind is KindVM for a kind: vm app and "" for a container (the
	// default, KindCT: KindName says which); VM holds a VM app's vm:
	// keys, nil for a container (vm.go).
	Kind         string
	VM           *VM
	Node         string // "" lets corral choose
	VMID         int    // 0 lets corral choose (/cluster/nextid)
	Template     string // full volid, e.g. local:vztmpl/debian-12-standard_12.12-1_amd64.tar.zst
	Unprivileged bool
	Cores        int
	MemoryMiB    int
	SwapMiB      int
	RootFS       RootFS
	Features     Features
	Network      Network
	Tags         []string // the user's tags; corral adds its own
	OnBoot       bool
	Description  string
	Password     Secret // zero when not set
	SSH          SSH
	Volumes      []Volume

	// Provision are the steps run inside the container, in order.
	Provision []Step
	// Health are the checks that say the app is healthy.
	Health []Check
	Backup BackupPolicy
	// SnapshotBeforeChange asks apply to snapshot the container before an
	// in-place change or provisioning and to roll back when a health
	// check fails afterwards.
	SnapshotBeforeChange bool
	// Pool and firewall (issue 33), one block.
	// Pool is the PVE resource pool the container joins: the app's
	// pool:, else the manifest's; "" leaves its membership alone.
	Pool string
	// Firewall is the container's firewall, nil when the manifest
	// leaves it alone.
	Firewall *Firewall

	// HA makes the container an HA resource of PVE (ha:); nil without.
	HA *HA
	// NeedsKeyctl is set for an unprivileged app with a compose step:
	// Docker there needs the keyctl feature, which only root@pam can set
	// (behaviour.md §c), so an administrator runs
	// pct set <vmid> -features nesting=1,keyctl=1 once.
	NeedsKeyctl bool

	// Pos is where the app is written, for messages about it after
	// validation ("corral.yaml:3:5: app hermes: …").
	Pos Pos

	// Unresolved lists the references LoadOptions.Lazy left unread, each
	// once, in the order written; nil when every value was read. An app
	// with any cannot be provisioned or created.
	Unresolved []string
}

// HA is an app's ha: what PVE's HA stack is asked to do for its
// container. Group (PVE 8) and Rule (PVE 9) are at most one.
type HA struct {
	State       string // started or stopped
	Group       string
	Rule        string
	MaxRestart  int
	MaxRelocate int
}

// Hostname is the container's hostname: the app's name.
func (a App) Hostname() string { return a.Name }

// RootFS is the container's root file system.
type RootFS struct {
	Storage string
	Size    Size
}

// Features are the container's feature flags. Only nesting is here: PVE
// lets only root@pam set the others (behaviour.md §c), and corral works
// with an API token.
type Features struct {
	Nesting bool
}

// Network is the container's net0 interface.
type Network struct {
	Bridge  string
	IP      string // "dhcp" or an IPv4 CIDR like 192.168.1.50/24
	Gateway string // "" with DHCP
	DNS     []string
}

// DHCP reports whether the address comes from DHCP.
func (n Network) DHCP() bool { return n.IP == defaultIP }

// SSH is root's SSH access inside the container.
type SSH struct {
	// PublicKeys are OpenSSH public key lines; a ${file:…} holding several
	// keys contributes one entry per key.
	PublicKeys []string
}

// Volume is a persistent volume of an app.
type Volume struct {
	Name    string
	Storage string
	Size    Size // 0 only when adopting a volume without giving its size
	Mount   string
	Backup  bool
	Reclaim Reclaim
	Adopt   string // volid to take over; "" allocates a new volume
	Pos     Pos
}

// StepKind is what a provision step does.
type StepKind string

const (
	StepRun     StepKind = "run"     // run a shell script
	StepFile    StepKind = "file"    // write a file
	StepEnvFile StepKind = "envFile" // write NAME=value lines whose values are secrets
	StepCompose StepKind = "compose" // write a compose file and run docker compose up -d
	StepUser    StepKind = "user"    // create a user
)

// Step is one provisioning step. Which fields are set depends on Kind.
type Step struct {
	Kind StepKind
	// Name is unique within the app; the executor records each step's
	// checksum under it. Default: "run: <first line, cut to 40
	// characters>", "file: <path>", "envFile: <path>", "compose: <path>"
	// or "user: <name>"; a value read through a reference is named by
	// the reference.
	Name    string
	Timeout time.Duration

	// Run is the shell script of a run step, run as root with
	// bash -euo pipefail (sh -e where there is no bash).
	Run string

	// Path is the file a file, envFile or compose step writes.
	Path string
	// Content is the content of a file or compose step: written in the
	// manifest, or read from its source at load time.
	Content string
	Mode    os.FileMode
	Owner   string   // file, envFile: USER or USER:GROUP; default root
	Env     []EnvVar // envFile
	Project string   // compose project; default the app's name

	// Account is the user a user step creates.
	Account Account

	// OnChange names earlier steps of the app: this step also runs when
	// one of them runs in the same apply (a handler, in Ansible's terms).
	OnChange []string
	// Restart lists systemd units restarted once, after the app's last
	// step, when this step ran.
	Restart []string
	// Pull is a compose step's image pull policy.
	Pull Pull

	// Facts are the facts of other apps the step's strings name
	// (${app:APP.FACT}), each as APP.FACT, once each, in order. When
	// set, Run, Content and every Env value are templates for
	// ExpandOutput (a literal ${ written $${), which plan and apply
	// expand with the facts read from the cluster.
	Facts []string

	Pos Pos
}

// Pull is when a compose step pulls images.
type Pull string

const (
	// PullMissing pulls only images the container does not hold yet
	// (docker compose's own default).
	PullMissing Pull = "missing"
	// PullAlways pulls every image each time the step runs.
	PullAlways Pull = "always"
)

// EnvVar is one NAME=value line of an envFile step. The value is always
// sensitive.
type EnvVar struct {
	Name  string
	Value Secret
}

// Account is a Linux user in the container.
type Account struct {
	Name   string
	UID    int // 0 lets the system pick; the user's group gets the same ID
	Home   string
	Shell  string
	Groups []string
}

// Check is one health check, tried inside the container until it passes
// or its retries run out. Kind says which of URL, Address and Command is
// set. The executor runs every kind in the guest (curl or wget for http,
// nc for tcp), so localhost is the container itself.
type Check struct {
	Kind     string // "http", "tcp" or "command"
	Name     string // default "http: <url>", "tcp: <address>" or "command: <first line>"
	URL      string
	Expect   int // HTTP status an http check expects; default 200, 0 for other kinds
	Address  string
	Command  string
	Timeout  time.Duration // per attempt
	Retries  int           // attempts after the first failure
	Interval time.Duration
	Pos      Pos
}

// BackupPolicy is how corral backup backs an app up.
type BackupPolicy struct {
	Keep    int    // archives to keep; 0 keeps all
	Storage string // PVE storage for the archives
	Mode    string // vzdump mode: snapshot, stop or suspend
	// Schedule is when corral agent backs the app up (a standard cron
	// expression, checked at parse time); "" for never.
	Schedule string
}

// Reclaim says whether corral may ever free a volume.
type Reclaim string

const (
	// ReclaimRetain: corral never frees the volume.
	ReclaimRetain Reclaim = "retain"
	// ReclaimDelete: corral destroy --delete-volumes may free it.
	ReclaimDelete Reclaim = "delete"
)

// Load reads and parses the manifest at path. The file is read with
// opts.ReadFile when set. A manifest that is not valid gives a
// *Diagnostics.
func Load(path string, opts LoadOptions) (*File, error) {
	return LoadFiles([]string{path}, opts)
}

// Parse parses a manifest. filename is used in diagnostics, and its
// directory is the base of relative ${file:PATH} references. Every
// rejection is a *Diagnostics holding every problem found.
func Parse(filename string, data []byte, opts LoadOptions) (*File, error) {
	return ParseFiles([]Source{{Name: filename, Data: data}}, opts)
}

// ParseFiles parses the manifest srcs[0] with each later source merged
// into it as an override file (merge.go). The project and its identity
// are the first file's; every problem names the file it is in.
func ParseFiles(srcs []Source, opts LoadOptions) (*File, error) {
	if opts.inputs == nil {
		opts.inputs = new(atomic.Int64)
	}
	d := &decoder{file: srcs[0].Name, dir: filepath.Dir(srcs[0].Name), opts: opts, unresolved: map[string][]string{}, origins: map[*yaml.Node]string{}}
	roots := make([]*yaml.Node, len(srcs))
	for i, src := range srcs {
		d.file = src.Name
		if line, col, problem := checkBounds(src.Data); problem != "" {
			d.diags.add(Pos{File: src.Name, Line: line, Col: col}, "", problem, "")
			continue
		}
		roots[i], _ = d.parseYAML(src.Data)
	}
	d.file = srcs[0].Name
	if err := d.diags.err(); err != nil {
		return nil, err
	}
	for _, src := range srcs[1:] {
		d.paths = append(d.paths, src.Name)
	}
	for i, over := range roots[1:] {
		d.markOrigin(over, srcs[i+1].Name)
		merger{d}.mergeRoot(roots[0], over)
	}
	f := d.build(d.walk(roots[0], manifestSpec, ""))
	if err := d.diags.err(); err != nil {
		return nil, err
	}
	return f, nil
}

// App returns the app called name.
func (f *File) App(name string) (*App, bool) {
	for i := range f.Apps {
		if f.Apps[i].Name == name {
			return &f.Apps[i], true
		}
	}
	return nil, false
}

// Secrets lists every sensitive value in the manifest: passwords and any
// value read through ${env:…} or ${file:…} (SSH public keys excepted).
// Tests and output scanners use it to check that nothing leaks.
func (f *File) Secrets() []string {
	var out []string
	for _, s := range f.secrets {
		if v := s.Reveal(); v != "" {
			out = append(out, v)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// minRedact is the shortest value Redact replaces.
const minRedact = 5

// Redact replaces every sensitive value in s with the reference it was
// read through (or "(sensitive)"), longest value first, so that output
// which must show, say, a description read from ${env:DESC} shows the
// reference instead. Values shorter than minRedact characters are left:
// every envFile value counts as sensitive, and replacing a PORT=8080 or a
// flag "1" everywhere would garble any output, while so short a value
// protects nothing (a password needs at least 5 characters anyway).
func (f *File) Redact(s string) string {
	secrets := slices.Clone(f.secrets)
	slices.SortStableFunc(secrets, func(a, b Secret) int { return cmp.Compare(len(b.Reveal()), len(a.Reveal())) })
	var pairs []string
	for _, sec := range secrets {
		if v := sec.Reveal(); len(v) >= minRedact {
			pairs = append(pairs, v, sec.String())
		}
	}
	// One pass, so a reference put in is never searched again.
	return strings.NewReplacer(pairs...).Replace(s)
}
