package agent

import (
	"archive/tar"
	"bytes"
	"cmp"
	"crypto/rand"
	"debug/elf"
	"encoding/hex"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/goccy/go-yaml"

	"github.com/corralhq/corral/internal/guest"
	"github.com/corralhq/corral/internal/manifest"
)

// corral agent install deploys the agent as a corral app of its own
// small manifest (project corral-agent-<project>, one app "agent"),
// written by install and applied through corral apply's own code: the
// agent's container is created, locked, tagged and replaced exactly as
// any app's, and it is not an app of the user's project (whose plan
// would otherwise want to delete it).
//
// Inside the container everything lives at fixed paths, so that a
// re-install finds and replaces it, and `corral agent status -f` finds
// the agent's address and bearer token again.
const (
	// InstalledApp is the app of the agent's own manifest.
	InstalledApp = "agent"
	// InstalledBin is the corral binary in the agent's container.
	InstalledBin = "/usr/local/bin/corral"
	// InstalledDir holds the agent's files (0700: its token and key).
	InstalledDir = "/etc/corral/agent"
	// InstalledEnvFile is the installed agent's 0600 environment file,
	// which holds its bearer token (CORRAL_AGENT_TOKEN).
	InstalledEnvFile = InstalledDir + "/agent.env"
	agentKeyFile     = InstalledDir + "/id_ed25519"
	agentCAFile      = InstalledDir + "/ca.pem"
	// InstalledURLFile holds the URL install reaches the agent at.
	InstalledURLFile = InstalledDir + "/url"
	agentRunFile     = InstalledDir + "/run"
	// InstalledUnit is the installed agent's systemd unit.
	InstalledUnit = "/etc/systemd/system/corral-agent.service"
	// InstalledLog is the log of an agent started detached.
	InstalledLog = "/var/log/corral-agent.log"
	agentPIDFile = "/var/lib/corral/agent.pid"
	// InstalledState is the agent's XDG_STATE_HOME (and Git checkouts).
	InstalledState = "/var/lib/corral"
	agentPort      = 9120
)

// GitURLEnv passes --git's URL to the agent install starts: through its
// 0600 environment file, never its command line or systemd unit, which
// any user of the container reads (a URL may hold a password).
const GitURLEnv = "CORRAL_AGENT_GIT"

// ManifestPathOf is where the user's manifest goes in the agent's
// container: in a directory named as its project, so that a manifest
// without project: keeps its project there (the default project is the
// manifest's directory's name).
func ManifestPathOf(project string) string { return InstalledDir + "/" + project + "/corral.yaml" }

// ProjectOf is the project of the agent's own manifest.
func ProjectOf(project string) string { return "corral-agent-" + project }

// Container is the agent's own container as install was told: each field
// empty (0) takes the manifest's first app's (Memory's default is 512).
type Container struct {
	Node, Template, Storage, Bridge string
	Memory                          int // MiB
	// Git provisions git in the container, which --git needs.
	Git bool
}

// ownManifest is the agent's own manifest, as the YAML corral apply
// reads: a value, so that every name and path in it is quoted by the
// encoder and none can break the document.
type ownManifest struct {
	Project string   `yaml:"project"`
	Apps    []ownApp `yaml:"apps"`
}

type ownApp struct {
	Name        string          `yaml:"name"`
	Template    string          `yaml:"template"`
	Cores       int             `yaml:"cores"`
	Memory      int             `yaml:"memory"`
	OnBoot      bool            `yaml:"onboot"`
	Features    map[string]bool `yaml:"features,flow"`
	Description string          `yaml:"description"`
	Node        string          `yaml:"node,omitempty"`
	RootFS      ownRootFS       `yaml:"rootfs"`
	Network     *ownNetwork     `yaml:"network,omitempty"`
	Provision   []ownStep       `yaml:"provision,omitempty"`
}

type ownRootFS struct {
	Size    string `yaml:"size"`
	Storage string `yaml:"storage,omitempty"`
}

type ownNetwork struct {
	Bridge string `yaml:"bridge"`
}

type ownStep struct {
	Name string `yaml:"name"`
	Run  string `yaml:"run"`
}

// ManifestText is the agent's own manifest for f: one small container,
// started at boot, on the first app's template, storage and bridge unless
// c says otherwise. With c.Git it provisions git when the template lacks
// it.
func ManifestText(f *manifest.File, c Container) (string, error) {
	if len(f.Apps) == 0 {
		return "", fmt.Errorf("%s has no apps: nothing for an agent to keep", f.Path)
	}
	first := f.Apps[0]
	app := ownApp{
		Name: InstalledApp, Template: cmp.Or(c.Template, first.Template), Cores: 1, Memory: c.Memory, OnBoot: true,
		Features:    map[string]bool{"nesting": true},
		Description: "corral agent for project " + f.Project + " (corral agent install)",
		Node:        c.Node,
		RootFS:      ownRootFS{Size: "4G", Storage: cmp.Or(c.Storage, first.RootFS.Storage)},
	}
	if c.Memory < 64 {
		return "", fmt.Errorf("--memory %d: want 64 (MiB) or more", c.Memory)
	}
	if bridge := cmp.Or(c.Bridge, first.Network.Bridge); bridge != "" {
		app.Network = &ownNetwork{Bridge: bridge}
	}
	if c.Git {
		app.Provision = []ownStep{{Name: "git for corral agent --git", Run: "command -v git >/dev/null || (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq git)"}}
	}
	b, err := yaml.MarshalWithOptions(ownManifest{Project: ProjectOf(f.Project), Apps: []ownApp{app}}, yaml.IndentSequence(true))
	if err != nil {
		return "", fmt.Errorf("the agent's manifest: %w", err)
	}
	return "# written by corral agent install for project " + f.Project + "\n" + string(b), nil
}

// BinaryArch is the PVE architecture (the container's arch:) a Linux ELF
// binary runs on.
func BinaryArch(path string) (string, error) {
	ef, err := elf.Open(path)
	if err != nil {
		return "", fmt.Errorf("%s is not a Linux binary (%w): build corral for linux (GOOS=linux GOARCH=<the container's arch>) and pass --binary", path, err)
	}
	defer ef.Close()
	switch ef.Machine {
	case elf.EM_X86_64:
		return "amd64", nil
	case elf.EM_AARCH64:
		return "arm64", nil
	case elf.EM_386:
		return "i386", nil
	case elf.EM_ARM:
		return "armhf", nil
	case elf.EM_RISCV:
		if ef.Class == elf.ELFCLASS64 {
			return "riscv64", nil
		}
		return "riscv32", nil
	}
	return "", fmt.Errorf("%s is a binary for %s, which Proxmox VE containers do not run", path, ef.Machine)
}

// EnvQuote quotes a value of the agent's env file, which systemd
// (EnvironmentFile=) reads under systemd and sh (set -a; . FILE) when the
// agent runs detached: manifest.EnvFileValue's quoting, which both read
// back as written.
func EnvQuote(name, v string) (string, error) {
	q, err := manifest.EnvFileValue(v)
	if err != nil {
		return "", fmt.Errorf("%s: the value %w, so it cannot go into the agent's environment file", name, err)
	}
	return q, nil
}

func randomToken() string {
	b := make([]byte, 24)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// File is one file install writes into the agent's container.
type File struct {
	Path string
	Mode int64
	Data []byte
}

// tarOf packs files for `tar -x -C /`, with their directories (the
// agent's own 0700: it holds the token and the key).
func tarOf(files []File) []byte {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	now := time.Now()
	dirs := map[string]bool{}
	for _, f := range files {
		name := strings.TrimPrefix(f.Path, "/")
		for d := filepath.Dir(name); d != "." && !dirs[d]; d = filepath.Dir(d) {
			dirs[d] = true
		}
	}
	for _, d := range slices.Sorted(maps.Keys(dirs)) {
		mode := int64(0o755)
		if d == strings.TrimPrefix(InstalledDir, "/") {
			mode = 0o700 // the token, the key
		}
		tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: d + "/", Mode: mode, ModTime: now})
	}
	for _, f := range files {
		tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: strings.TrimPrefix(f.Path, "/"), Mode: f.Mode, Size: int64(len(f.Data)), ModTime: now})
		tw.Write(f.Data)
	}
	tw.Close()
	return buf.Bytes()
}

// Command is the installed agent's command line, as install was told.
type Command struct {
	Mode         Mode
	Interval     time.Duration
	AllowedHosts []string
	// GitURL is --git's URL ("" without): it goes into the environment
	// file (GitURLEnv); GitArgs are the other --git flags.
	GitURL  string
	GitArgs []string
	// PassEnv are the variables the manifest reads, passed in the
	// environment file.
	PassEnv []string
}

// FilesIn is what the agent's files are made of.
type FilesIn struct {
	Project, Endpoint, APIToken, Fingerprint string
	Listen, URL                              string // the agent's --listen, and where install reaches it
	CA, Key, Manifest                        []byte // CA: nil without --ca-file
	Env                                      map[string]string
	// SimGuestSSHPort is the emulator's guest SSH port, passed on ("":
	// none).
	SimGuestSSHPort string
}

// Files are the files install writes into the agent's container.
// Every secret (the API token, the bearer token, the SSH key, a password
// in --git's URL, the manifest's ${env:…} values) goes into a 0600 file:
// the command line, the run script and the systemd unit, which any user
// of the container may read, hold none.
func (c Command) Files(in FilesIn) ([]File, error) {
	var files []File
	if in.CA != nil {
		files = append(files, File{agentCAFile, 0o644, in.CA})
	}
	envText, err := c.envFile(in)
	if err != nil {
		return nil, err
	}
	manifestPath := ManifestPathOf(in.Project)
	argv := c.Argv(manifestPath, in.Listen, in.Project)
	var quoted []string
	for _, s := range argv {
		quoted = append(quoted, guest.ShellQuote(s))
	}
	unit, err := unitText(in.Project, argv)
	if err != nil {
		return nil, err
	}
	run := fmt.Sprintf("#!/bin/sh\n# Starts the agent where the container has no systemd (corral agent install).\nset -a\n. %s\nset +a\nexec %s\n", InstalledEnvFile, strings.Join(quoted, " "))
	files = append(files,
		File{InstalledEnvFile, 0o600, []byte(envText)},
		File{agentKeyFile, 0o600, in.Key},
		File{InstalledURLFile, 0o644, []byte(in.URL + "\n")},
		File{agentRunFile, 0o755, []byte(run)},
		File{InstalledUnit, 0o644, []byte(unit)},
	)
	if c.GitURL == "" {
		files = append(files, File{manifestPath, 0o600, in.Manifest})
	}
	return files, nil
}

// envFile is the agent's environment file: its credentials, its bearer
// token, --git's URL and the --pass-env values.
func (c Command) envFile(in FilesIn) (string, error) {
	vars := [][2]string{
		{"HOME", "/root"},
		{"XDG_STATE_HOME", InstalledState},
		{"PROXMOX_VE_ENDPOINT", in.Endpoint},
		{"PROXMOX_VE_API_TOKEN", in.APIToken},
		{"CORRAL_SSH_KEY", agentKeyFile},
		{"CORRAL_AGENT_TOKEN", randomToken()},
	}
	if in.Fingerprint != "" {
		vars = append(vars, [2]string{"PROXMOX_VE_FINGERPRINT", in.Fingerprint})
	}
	if in.CA != nil {
		vars = append(vars, [2]string{"PROXMOX_VE_CA_FILE", agentCAFile})
	}
	if in.SimGuestSSHPort != "" {
		vars = append(vars, [2]string{"CORRAL_SIM_GUEST_SSH_PORT", in.SimGuestSSHPort})
	}
	if c.GitURL != "" {
		vars = append(vars, [2]string{GitURLEnv, c.GitURL})
	}
	for _, name := range slices.Sorted(maps.Keys(in.Env)) {
		vars = append(vars, [2]string{name, in.Env[name]})
	}
	var b strings.Builder
	b.WriteString("# corral agent's environment (corral agent install); secrets: keep 0600\n")
	for _, kv := range vars {
		v, err := EnvQuote(kv[0], kv[1])
		if err != nil {
			return "", err
		}
		fmt.Fprintf(&b, "%s=%s\n", kv[0], v)
	}
	return b.String(), nil
}

// Argv is the installed agent's command line.
func (c Command) Argv(manifestPath, listen, project string) []string {
	argv := []string{InstalledBin, "agent", "-f", manifestPath, "--mode", string(c.Mode), "--listen", listen, "--interval", c.Interval.String(), "--log-format", "json"}
	for _, h := range c.AllowedHosts {
		argv = append(argv, "--allowed-host", h)
	}
	if c.GitURL != "" {
		// The checkout is named as the project too (see ManifestPathOf).
		argv = append(argv, c.GitArgs...)
		argv = append(argv, "--git-dir", InstalledState+"/git/"+project)
		// What the manifest from Git may read: the variables install
		// put into the agent's environment file, and no other.
		for _, name := range c.PassEnv {
			argv = append(argv, "--pass-env", name)
		}
	}
	return argv
}

// unitText is the agent's systemd unit; argv is its command line.
func unitText(project string, argv []string) (string, error) {
	var words []string
	for _, a := range argv {
		q, err := systemdQuote(a)
		if err != nil {
			return "", err
		}
		words = append(words, q)
	}
	return fmt.Sprintf(`[Unit]
Description=corral agent for project %s (corral agent install)
Wants=network-online.target
After=network-online.target

[Service]
EnvironmentFile=%s
ExecStart=%s
Restart=always
RestartSec=5
KillSignal=SIGTERM
TimeoutStopSec=5min

[Install]
WantedBy=multi-user.target
`, strings.ReplaceAll(project, "%", "%%"), InstalledEnvFile, strings.Join(words, " ")), nil
}

// systemdQuote quotes one word of an ExecStart= line: double quotes with
// \ and " escaped, and % and $ doubled, which systemd would otherwise
// take for a specifier or a variable (systemd.service(5), "Command
// lines").
func systemdQuote(s string) (string, error) {
	if strings.ContainsFunc(s, func(r rune) bool { return r < 0x20 || r == 0x7f }) {
		return "", fmt.Errorf("%q: a control character cannot go into the agent's systemd unit", s)
	}
	r := strings.NewReplacer(`\`, `\\`, `"`, `\"`, "%", "%%", "$", "$$")
	return `"` + r.Replace(s) + `"`, nil
}
