package manifest_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/corralhq/corral/internal/manifest"
	"github.com/corralhq/corral/internal/testutil/refdata"
)

const debian12 = "local:vztmpl/debian-12-standard_12.12-1_amd64.tar.zst"

// defaultBackup is an app's backup policy when none is written.
var defaultBackup = manifest.BackupPolicy{Storage: "local", Mode: "snapshot"}

// ignorePos leaves positions out of comparisons of Apps.
var ignorePos = cmpopts.IgnoreTypes(manifest.Pos{})

// TestLoad_examples checks that the shipped examples load and say what
// their comments promise.
func TestLoad_examples(t *testing.T) {
	tests := []struct {
		name string
		// ignore lists App fields another test owns: the quickstart's
		// provisioning and health check are what the emulator apply
		// tests run (issue 4), and they change with those tests.
		ignore []string
		want   []manifest.App
	}{
		{"quickstart", []string{"Provision", "Health"}, []manifest.App{{
			Name: "hello", Template: debian12, Unprivileged: true,
			Cores: 1, MemoryMiB: 512, SwapMiB: 512,
			RootFS:   manifest.RootFS{Storage: "local-lvm", Size: 4 * manifest.GiB},
			Features: manifest.Features{Nesting: true},
			Network:  manifest.Network{Bridge: "vmbr0", IP: "dhcp"},
			Backup:   defaultBackup,
			Volumes: []manifest.Volume{{
				Name: "data", Storage: "local-lvm", Size: 1 * manifest.GiB, Mount: "/srv/data",
				Backup: true, Reclaim: manifest.ReclaimRetain,
			}},
		}}},
		// Seeds 000/001: CT 105, unprivileged Debian 12, nesting, 2 cores,
		// 4096 MB, 20G rootfs on local-lvm, DHCP on vmbr0, onboot, and a
		// retained 10G volume at /home/hermes with backup=1.
		{"hermes", nil, []manifest.App{{
			Name: "hermes", VMID: 105, Template: debian12, Unprivileged: true,
			Cores: 2, MemoryMiB: 4096, SwapMiB: 512,
			RootFS:      manifest.RootFS{Storage: "local-lvm", Size: 20 * manifest.GiB},
			Features:    manifest.Features{Nesting: true},
			Network:     manifest.Network{Bridge: "vmbr0", IP: "dhcp"},
			Tags:        []string{"ai", "agent"},
			OnBoot:      true,
			Description: "Hermes Agent (bare-metal install, dashboard on :9119)",
			Volumes: []manifest.Volume{{
				Name: "home", Storage: "local-lvm", Size: 10 * manifest.GiB, Mount: "/home/hermes",
				Backup: true, Reclaim: manifest.ReclaimRetain,
			}},
			// Seeds 000/001 inside the container: user hermes (UID
			// 10000), the baseline packages with Playwright's libraries,
			// install.sh --skip-setup (5-10 minutes), the Web UI build,
			// Hermes' config.yaml (OpenCode Go) and its key in a 0600
			// .env, systemd units, the dashboard on :9119.
			Provision: []manifest.Step{
				{Kind: manifest.StepUser, Name: "user: hermes", Timeout: 10 * time.Minute,
					Account: manifest.Account{Name: "hermes", UID: 10000, Home: "/home/hermes", Shell: "/bin/bash"}},
				{Kind: manifest.StepRun, Name: "baseline packages", Timeout: 20 * time.Minute},
				{Kind: manifest.StepRun, Name: "install hermes", Timeout: 30 * time.Minute},
				{Kind: manifest.StepRun, Name: "web ui", Timeout: 15 * time.Minute},
				{Kind: manifest.StepFile, Name: "file: /home/hermes/.hermes/config.yaml", Timeout: 10 * time.Minute,
					Path: "/home/hermes/.hermes/config.yaml", Mode: 0o644, Owner: "hermes:hermes", Restart: []string{"hermes-gateway.service", "hermes-dashboard.service"}},
				{Kind: manifest.StepEnvFile, Name: "envFile: /home/hermes/.hermes/.env", Timeout: 10 * time.Minute,
					Path: "/home/hermes/.hermes/.env", Mode: 0o600, Owner: "hermes:hermes",
					Env:     []manifest.EnvVar{{Name: "OPENCODE_GO_API_KEY", Value: manifest.NewSecret("${env:OPENCODE_GO_API_KEY}", hermesKey)}},
					Restart: []string{"hermes-gateway.service", "hermes-dashboard.service"}},
				{Kind: manifest.StepFile, Name: "file: /etc/systemd/system/hermes-gateway.service", Timeout: 10 * time.Minute,
					Path: "/etc/systemd/system/hermes-gateway.service", Mode: 0o644, Owner: "root"},
				{Kind: manifest.StepFile, Name: "file: /etc/systemd/system/hermes-dashboard.service", Timeout: 10 * time.Minute,
					Path: "/etc/systemd/system/hermes-dashboard.service", Mode: 0o644, Owner: "root"},
				{Kind: manifest.StepRun, Name: "start services", Timeout: 10 * time.Minute,
					OnChange: []string{"file: /etc/systemd/system/hermes-gateway.service", "file: /etc/systemd/system/hermes-dashboard.service"},
					Restart:  []string{"hermes-gateway.service", "hermes-dashboard.service"}},
			},
			Health: []manifest.Check{{Kind: "http", Name: "dashboard", URL: "http://localhost:9119/", Expect: 200,
				Timeout: 5 * time.Second, Retries: 20, Interval: 3 * time.Second}},
			Backup:               manifest.BackupPolicy{Keep: 7, Storage: "local", Mode: "snapshot"},
			SnapshotBeforeChange: true,
		}}},
		// Issue 34: a VM app with the vm: defaults but a disk and cores.
		{"vm", nil, []manifest.App{{
			Name: "web-vm", Kind: manifest.KindVM, Unprivileged: true, Cores: 2, MemoryMiB: 2048, SwapMiB: 512,
			RootFS:  manifest.RootFS{Storage: "local-lvm", Size: 8 * manifest.GiB},
			Network: manifest.Network{Bridge: "vmbr0", IP: "dhcp"},
			Backup:  defaultBackup,
			Volumes: []manifest.Volume{{Name: "data", Storage: "local-lvm", Size: 4 * manifest.GiB, Backup: true, Reclaim: manifest.ReclaimRetain}},
			VM: &manifest.VM{Image: manifest.DefaultVMImage, DiskStorage: "local-lvm", DiskSize: 8 * manifest.GiB,
				User: "debian", Agent: true, AddressWait: 5 * time.Minute, BIOS: manifest.BIOSSeaBIOS},
		}}},
	}
	root := refdata.RepoRoot(t)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(root, "examples", tt.name, "corral.yaml")
			f, err := manifest.Load(path, exampleOptions)
			if err != nil {
				t.Fatal(err)
			}
			if got, want := f.Path, path; got != want {
				t.Errorf("Path=%q, want %q", got, want)
			}
			// Scripts and file contents are checked below, not spelled out.
			ignoreText := cmpopts.IgnoreFields(manifest.Step{}, "Run", "Content")
			ignoreOwned := cmpopts.IgnoreFields(manifest.App{}, tt.ignore...)
			if diff := cmp.Diff(tt.want, f.Apps, ignorePos, ignoreText, ignoreOwned); diff != "" {
				t.Errorf("apps (-want +got):\n%s", diff)
			}
			var want []string
			for _, st := range tt.want[0].Provision {
				for _, e := range st.Env {
					want = append(want, e.Value.Reveal())
				}
			}
			if diff := cmp.Diff(want, f.Secrets(), cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("Secrets() (-want +got):\n%s", diff)
			}
		})
	}
}

// hermesKey is the API key the hermes example reads from the environment.
const hermesKey = "sk-test-hermes-example"

// exampleOptions serve the examples' references: the process environment
// but for the variables the examples read, which tests set themselves.
var exampleOptions = manifest.LoadOptions{
	Getenv: func(name string) (string, bool) {
		if name == "OPENCODE_GO_API_KEY" {
			return hermesKey, true
		}
		return os.LookupEnv(name)
	},
}

// TestLoad_hermesProvision checks what the hermes example runs: seed 000's
// install.sh --skip-setup as the hermes user, and units that start the
// gateway and the dashboard with the .env the envFile step writes.
func TestLoad_hermesProvision(t *testing.T) {
	f, err := manifest.Load(filepath.Join(refdata.RepoRoot(t), "examples", "hermes", "corral.yaml"), exampleOptions)
	if err != nil {
		t.Fatal(err)
	}
	steps := map[string]manifest.Step{}
	for _, st := range f.Apps[0].Provision {
		steps[st.Name] = st
	}
	for name, wants := range map[string][]string{
		"baseline packages":                                  {"apt-get update --error-on=any", "libnss3", "libgbm1", "fonts-liberation"},
		"install hermes":                                     {"runuser -l hermes", "scripts/install.sh", "--skip-setup", "already installed on the retained volume"},
		"file: /home/hermes/.hermes/config.yaml":             {`provider: "opencode-go"`, `backend: "local"`},
		"file: /etc/systemd/system/hermes-gateway.service":   {"User=hermes", "EnvironmentFile=/home/hermes/.hermes/.env", "hermes gateway run"},
		"file: /etc/systemd/system/hermes-dashboard.service": {"User=hermes", "hermes dashboard"},
		"start services":                                     {"systemctl daemon-reload", "hermes-gateway hermes-dashboard"},
	} {
		st, ok := steps[name]
		if !ok {
			t.Errorf("no step %q", name)
			continue
		}
		for _, w := range wants {
			if !strings.Contains(st.Run+st.Content, w) {
				t.Errorf("step %q does not contain %q", name, w)
			}
		}
	}
	if _, err := manifest.Load(filepath.Join(refdata.RepoRoot(t), "examples", "hermes", "corral.yaml"), manifest.LoadOptions{
		Getenv: func(string) (string, bool) { return "", false },
	}); err == nil || !strings.Contains(err.Error(), "environment variable OPENCODE_GO_API_KEY is not set") {
		t.Errorf("without OPENCODE_GO_API_KEY: %v, want it named", err)
	}
}

// validCases are valid manifests and the first app each must give. The
// schema test checks that the JSON Schema accepts them too.
var validCases = func() []validCase {
	base := manifest.App{
		Name: "web", Template: debian12, Unprivileged: true,
		Cores: 1, MemoryMiB: 512, SwapMiB: 512,
		RootFS:  manifest.RootFS{Storage: "local-lvm", Size: 8 * manifest.GiB},
		Network: manifest.Network{Bridge: "vmbr0", IP: "dhcp"},
		Backup:  defaultBackup,
	}
	with := func(change func(a *manifest.App)) manifest.App {
		a := base
		change(&a)
		return a
	}
	return []validCase{
		{"defaults", `
apps:
  - name: web
    template: debian-12-standard_12.12-1_amd64.tar.zst`, base},
		{"template volid kept", `
apps:
  - name: web
    template: nfs:vztmpl/alpine-3.20-default_20240908_amd64.tar.xz`,
			with(func(a *manifest.App) { a.Template = "nfs:vztmpl/alpine-3.20-default_20240908_amd64.tar.xz" })},
		{"everything", `
apps:
  - name: web
    node: pve
    vmid: 0x69
    template: debian-12-standard_12.12-1_amd64.tar.zst
    unprivileged: true
    cores: 4
    memory: 2048
    swap: 0
    rootfs: { storage: fast, size: 1.5T }
    features: { nesting: false }
    network: { bridge: vmbr1, ip: 192.168.1.50/24, gateway: 192.168.1.1, dns: [1.1.1.1, "2606:4700::1111"] }
    tags: [web, prod+eu]
    onboot: true
    description: "costs $${HOME} a month"
    volumes:
      - { name: data, size: 512M, mount: /srv/data, backup: false, reclaim: delete }
      - { name: home, adopt: "local-zfs:subvol-999-disk-0", mount: /home }
      - { name: logs, storage: local-zfs, adopt: "local-zfs:vm-999-disk-3", size: 2G, mount: /var/log/app }`,
			with(func(a *manifest.App) {
				a.Node, a.VMID, a.Cores, a.MemoryMiB, a.SwapMiB = "pve", 105, 4, 2048, 0
				a.RootFS = manifest.RootFS{Storage: "fast", Size: 1536 * manifest.GiB}
				a.Network = manifest.Network{Bridge: "vmbr1", IP: "192.168.1.50/24", Gateway: "192.168.1.1",
					DNS: []string{"1.1.1.1", "2606:4700::1111"}}
				a.Tags = []string{"web", "prod+eu"}
				a.OnBoot = true
				a.Description = "costs ${HOME} a month"
				a.Volumes = []manifest.Volume{
					{Name: "data", Storage: "local-lvm", Size: 512 * manifest.MiB, Mount: "/srv/data", Reclaim: manifest.ReclaimDelete},
					{Name: "home", Storage: "local-zfs", Mount: "/home", Backup: true, Reclaim: manifest.ReclaimRetain,
						Adopt: "local-zfs:subvol-999-disk-0"},
					{Name: "logs", Storage: "local-zfs", Size: 2 * manifest.GiB, Mount: "/var/log/app", Backup: true,
						Reclaim: manifest.ReclaimRetain, Adopt: "local-zfs:vm-999-disk-3"},
				}
			})},
		{"privileged without features", `
apps:
  - name: web
    template: debian-12-standard_12.12-1_amd64.tar.zst
    unprivileged: false
    features: { nesting: false }`,
			with(func(a *manifest.App) { a.Unprivileged = false })},
		{"references", `
apps:
  - name: web
    node: ${env:NODE}
    template: debian-12-standard_12.12-1_amd64.tar.zst
    password: ${file:~/.config/corral/root.pw}
    ssh:
      publicKeys:
        - ${file:~/.ssh/keys.pub}
        - "` + key1 + `"`,
			with(func(a *manifest.App) {
				a.Node = "pve2"
				a.Password = manifest.NewSecret("${file:~/.config/corral/root.pw}", filePW)
				a.SSH.PublicKeys = []string{key1, key2, key1}
			})},
		{"provision defaults", `
apps:
  - name: web
    template: debian-12-standard_12.12-1_amd64.tar.zst
    provision:
      - run: "\n  apt-get update && apt-get install -y --no-install-recommends nginx\nsystemctl enable nginx\n"
      - user: { name: hermes }
      - file: { path: /etc/app.conf, source: files/app.conf }
      - envFile:
          path: /etc/app.env
          env:
            - { name: API_KEY, value: "${env:API_KEY}" }
            - { name: token, value: literal-token }
    health:
      - http: http://localhost:8080/health
      - tcp: "localhost:5432"
      - command: "pg_isready\n-q"
    backup: {}`,
			with(func(a *manifest.App) {
				a.Provision = []manifest.Step{
					{Kind: manifest.StepRun, Name: "run: apt-get update && apt-get install -y --n", Timeout: 10 * time.Minute,
						Run: "\n  apt-get update && apt-get install -y --no-install-recommends nginx\nsystemctl enable nginx\n"},
					{Kind: manifest.StepUser, Name: "user: hermes", Timeout: 10 * time.Minute,
						Account: manifest.Account{Name: "hermes", Home: "/home/hermes", Shell: "/bin/bash"}},
					{Kind: manifest.StepFile, Name: "file: /etc/app.conf", Timeout: 10 * time.Minute,
						Path: "/etc/app.conf", Content: "listen 8080\n", Mode: 0o644, Owner: "root"},
					{Kind: manifest.StepEnvFile, Name: "envFile: /etc/app.env", Timeout: 10 * time.Minute,
						Path: "/etc/app.env", Mode: 0o600, Owner: "root", Env: []manifest.EnvVar{
							{Name: "API_KEY", Value: manifest.NewSecret("${env:API_KEY}", envAPIKey)},
							{Name: "token", Value: manifest.NewSecret("", "literal-token")},
						}},
				}
				a.Health = []manifest.Check{
					{Kind: "http", Name: "http: http://localhost:8080/health", URL: "http://localhost:8080/health", Expect: 200,
						Timeout: 5 * time.Second, Retries: 10, Interval: 3 * time.Second},
					{Kind: "tcp", Name: "tcp: localhost:5432", Address: "localhost:5432",
						Timeout: 5 * time.Second, Retries: 10, Interval: 3 * time.Second},
					{Kind: "command", Name: "command: pg_isready", Command: "pg_isready\n-q",
						Timeout: 5 * time.Second, Retries: 10, Interval: 3 * time.Second},
				}
			})},
		{"provision everything", `
apps:
  - name: web
    vmid: 120
    template: debian-12-standard_12.12-1_amd64.tar.zst
    provision:
      - name: install
        timeout: 1h30m
        run: ${file:~/.config/corral/api.key}
      - user: { name: app_1, uid: 10000, home: /srv/app, shell: /usr/sbin/nologin, groups: [docker, users] }
      - name: config
        timeout: 45s
        file: { path: /srv/app/app.conf, content: "a: 1\n", mode: "0640", owner: "app_1:users" }
      - file: { path: /usr/local/bin/tool, content: "#!/bin/sh\n", mode: 0755, owner: "10000" }
      - file: { path: /srv/shared, content: "", mode: 2775 }
      - envFile: { path: /srv/app/.env, mode: "0o400", owner: app_1, env: [{ name: K, value: "${file:~/.config/corral/api.key}" }] }
      - compose: { source: files/compose.yaml }
      - compose: { path: /srv/app/compose.yml, content: "services: {}\n", project: app-2, mode: "0600" }
    health:
      - { name: web, http: "https://web.example:8443/", expect: 204, timeout: 2s, retries: 0, interval: 500ms }
      - { tcp: "[::1]:80" }
    backup: { keep: 3, storage: pbs, mode: stop, schedule: "@daily" }
    snapshotBeforeChange: true`,
			with(func(a *manifest.App) {
				a.VMID = 120
				a.Features.Nesting = true
				a.NeedsKeyctl = true
				a.Provision = []manifest.Step{
					{Kind: manifest.StepRun, Name: "install", Timeout: 90 * time.Minute, Run: fileAPIKey},
					{Kind: manifest.StepUser, Name: "user: app_1", Timeout: 10 * time.Minute,
						Account: manifest.Account{Name: "app_1", UID: 10000, Home: "/srv/app", Shell: "/usr/sbin/nologin", Groups: []string{"docker", "users"}}},
					{Kind: manifest.StepFile, Name: "config", Timeout: 45 * time.Second,
						Path: "/srv/app/app.conf", Content: "a: 1\n", Mode: 0o640, Owner: "app_1:users"},
					{Kind: manifest.StepFile, Name: "file: /usr/local/bin/tool", Timeout: 10 * time.Minute,
						Path: "/usr/local/bin/tool", Content: "#!/bin/sh\n", Mode: 0o755, Owner: "10000"},
					{Kind: manifest.StepFile, Name: "file: /srv/shared", Timeout: 10 * time.Minute,
						Path: "/srv/shared", Mode: 0o775 | os.ModeSetgid, Owner: "root"},
					{Kind: manifest.StepEnvFile, Name: "envFile: /srv/app/.env", Timeout: 10 * time.Minute,
						Path: "/srv/app/.env", Mode: 0o400, Owner: "app_1", Env: []manifest.EnvVar{
							{Name: "K", Value: manifest.NewSecret("${file:~/.config/corral/api.key}", fileAPIKey)}}},
					{Kind: manifest.StepCompose, Name: "compose: /opt/web/compose.yaml", Timeout: 10 * time.Minute,
						Path: "/opt/web/compose.yaml", Content: "services:\n  web:\n    image: nginx\n", Mode: 0o644, Project: "web", Pull: manifest.PullMissing},
					{Kind: manifest.StepCompose, Name: "compose: /srv/app/compose.yml", Timeout: 10 * time.Minute,
						Path: "/srv/app/compose.yml", Content: "services: {}\n", Mode: 0o600, Project: "app-2", Pull: manifest.PullMissing},
				}
				a.Health = []manifest.Check{
					{Kind: "http", Name: "web", URL: "https://web.example:8443/", Expect: 204,
						Timeout: 2 * time.Second, Retries: 0, Interval: 500 * time.Millisecond},
					{Kind: "tcp", Name: "tcp: [::1]:80", Address: "[::1]:80",
						Timeout: 5 * time.Second, Retries: 10, Interval: 3 * time.Second},
				}
				a.Backup = manifest.BackupPolicy{Keep: 3, Storage: "pbs", Mode: "stop", Schedule: "@daily"}
				a.SnapshotBeforeChange = true
			})},
		{"ha with defaults", `
apps:
  - name: web
    template: debian-12-standard_12.12-1_amd64.tar.zst
    ha: {}`,
			with(func(a *manifest.App) {
				a.HA = &manifest.HA{State: "started", MaxRestart: 1, MaxRelocate: 1}
			})},
		{"ha written", `
apps:
  - name: web
    template: debian-12-standard_12.12-1_amd64.tar.zst
    ha: { state: stopped, rule: on-fast, maxRestart: 3, maxRelocate: 0 }`,
			with(func(a *manifest.App) {
				a.HA = &manifest.HA{State: "stopped", Rule: "on-fast", MaxRestart: 3, MaxRelocate: 0}
			})},
		{"compose with nesting written", `
apps:
  - name: web
    template: debian-12-standard_12.12-1_amd64.tar.zst
    features: { nesting: true }
    provision:
      - compose: { content: "services: {}" }`,
			with(func(a *manifest.App) {
				a.Features.Nesting = true
				a.NeedsKeyctl = true
				a.Provision = []manifest.Step{{Kind: manifest.StepCompose, Name: "compose: /opt/web/compose.yaml", Timeout: 10 * time.Minute,
					Path: "/opt/web/compose.yaml", Content: "services: {}", Mode: 0o644, Project: "web", Pull: manifest.PullMissing}}
			})},
		{"change triggers", `
apps:
  - name: web
    template: debian-12-standard_12.12-1_amd64.tar.zst
    provision:
      - name: env
        envFile: { path: /opt/web/.env, env: [{ name: K, value: v }] }
        restart: [web.service]
      - compose: { content: "services: {}", pull: always }
        onChange: [env]
        restart: [web.service, "getty@tty1.service"]`,
			with(func(a *manifest.App) {
				a.Features.Nesting = true
				a.NeedsKeyctl = true
				a.Provision = []manifest.Step{
					{Kind: manifest.StepEnvFile, Name: "env", Timeout: 10 * time.Minute, Path: "/opt/web/.env", Mode: 0o600, Owner: "root",
						Env: []manifest.EnvVar{{Name: "K", Value: manifest.NewSecret("", "v")}}, Restart: []string{"web.service"}},
					{Kind: manifest.StepCompose, Name: "compose: /opt/web/compose.yaml", Timeout: 10 * time.Minute,
						Path: "/opt/web/compose.yaml", Content: "services: {}", Mode: 0o644, Project: "web", Pull: manifest.PullAlways,
						OnChange: []string{"env"}, Restart: []string{"web.service", "getty@tty1.service"}},
				}
			})},
		{"aliases", `
apps:
  - name: web
    template: &tmpl debian-12-standard_12.12-1_amd64.tar.zst
    tags: &tags [a, b]
  - name: api
    template: *tmpl
    tags: *tags`,
			with(func(a *manifest.App) { a.Tags = []string{"a", "b"} })},
	}
}()

type validCase struct {
	name string
	yaml string
	want manifest.App
}

// TestParse_valid covers defaults and the normalizations Parse performs.
func TestParse_valid(t *testing.T) {
	tests := validCases
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, err := manifest.Parse("corral.yaml", []byte(tt.yaml), testOptions())
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, f.Apps[0], ignorePos); diff != "" {
				t.Errorf("app (-want +got):\n%s", diff)
			}
		})
	}
}

func TestParse_positions(t *testing.T) {
	f, err := manifest.Parse("dir/corral.yaml", []byte("apps:\n  - name: web\n    template: a.tar.gz\n    volumes:\n      - name: data\n        size: 1G\n        mount: /data\n"), testOptions())
	if err != nil {
		t.Fatal(err)
	}
	a := f.Apps[0]
	if got, want := a.Pos.String(), "dir/corral.yaml:2:5"; got != want {
		t.Errorf("app Pos=%s, want %s", got, want)
	}
	if got, want := a.Volumes[0].Pos.String(), "dir/corral.yaml:5:9"; got != want {
		t.Errorf("volume Pos=%s, want %s", got, want)
	}
}

func TestFile_App(t *testing.T) {
	f, err := manifest.Parse("corral.yaml", []byte("apps:\n  - {name: web, template: a.tar.gz}\n  - {name: db, template: b.tar.gz}\n"), testOptions())
	if err != nil {
		t.Fatal(err)
	}
	a, ok := f.App("db")
	if !ok || a.Template != "local:vztmpl/b.tar.gz" {
		t.Fatalf(`App("db")=%+v, %v`, a, ok)
	}
	if got, want := a.Hostname(), "db"; got != want {
		t.Errorf("Hostname()=%q, want %q", got, want)
	}
	if _, ok := f.App("nope"); ok {
		t.Error(`App("nope") found an app`)
	}
}

func TestNetwork_DHCP(t *testing.T) {
	if !(manifest.Network{IP: "dhcp"}).DHCP() {
		t.Error("dhcp is not DHCP")
	}
	if (manifest.Network{IP: "10.0.0.2/24"}).DHCP() {
		t.Error("a static address is DHCP")
	}
}
