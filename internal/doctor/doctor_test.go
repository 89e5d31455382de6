package doctor_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/corralhq/corral/internal/doctor"
	"github.com/corralhq/corral/internal/manifest"
	"github.com/corralhq/corral/internal/sim/model"
)

const tmpl = "local:vztmpl/debian-12-standard_12.12-1_amd64.tar.zst"

// app is a valid app as the manifest loader would give it, with defaults.
func app(name string, mod func(*manifest.App)) manifest.App {
	a := manifest.App{
		Name: name, Template: tmpl, Unprivileged: true, Cores: 1, MemoryMiB: 512,
		RootFS:   manifest.RootFS{Storage: "local-lvm", Size: 4 * manifest.GiB},
		Features: manifest.Features{Nesting: true},
		Network:  manifest.Network{Bridge: "vmbr0", IP: "dhcp"},
		Backup:   manifest.BackupPolicy{Storage: "local", Mode: "snapshot"},
	}
	if mod != nil {
		mod(&a)
	}
	return a
}

func file(apps ...manifest.App) *manifest.File {
	return &manifest.File{Path: "corral.yaml", Apps: apps}
}

// operator is the emulator's operator role: seed 004's 16 privileges and
// Datastore.AllocateTemplate for template downloads.
var operator = slices.Clone(model.OperatorPrivileges)

func privsOf(reqs []doctor.Requirement) []string {
	var out []string
	for _, r := range reqs {
		if !slices.Contains(out, r.Priv) {
			out = append(out, r.Priv)
		}
	}
	slices.Sort(out)
	return out
}

func pathPrivs(reqs []doctor.Requirement) map[string][]string {
	out := map[string][]string{}
	for _, r := range reqs {
		if !slices.Contains(out[r.Path], r.Priv) {
			out[r.Path] = append(out[r.Path], r.Priv)
		}
	}
	for k := range out {
		slices.Sort(out[k])
	}
	return out
}

func TestRequirements(t *testing.T) {
	vmPrivs := []string{"VM.Allocate", "VM.Audit", "VM.Backup", "VM.Config.CPU", "VM.Config.Disk", "VM.Config.Memory", "VM.Config.Network", "VM.Config.Options", "VM.Migrate", "VM.PowerMgmt", "VM.Snapshot", "VM.Snapshot.Rollback"}
	keeperPrivs := []string{"VM.Allocate", "VM.Audit", "VM.Config.CPU", "VM.Config.Disk", "VM.Config.Memory", "VM.Config.Network", "VM.Config.Options"}
	tests := []struct {
		name    string
		file    *manifest.File
		targets doctor.Targets
		want    map[string][]string
	}{
		{
			name:    "new app without volumes: /vms for the VMID to come",
			file:    file(app("web", nil)),
			targets: doctor.Targets{DefaultNode: "pve"},
			want: map[string][]string{
				"/vms":                          vmPrivs,
				"/storage/local-lvm":            {"Datastore.AllocateSpace"},
				"/storage/local":                {"Datastore.AllocateSpace", "Datastore.AllocateTemplate", "Datastore.Audit"},
				"/nodes/pve":                    {"Sys.Audit"},
				"/sdn/zones/localnetwork/vmbr0": {"SDN.Use"},
			},
		},
		{
			name: "existing app and keeper: exact VMIDs; keep and a missing template",
			file: file(app("web", func(a *manifest.App) {
				a.Backup.Keep = 3
				a.Network.Bridge = "vmbr1"
				a.Volumes = []manifest.Volume{{Name: "data", Storage: "fast", Size: manifest.GiB, Mount: "/data"}}
			})),
			targets: doctor.Targets{
				Apps:             map[string]doctor.Placement{"web": {Node: "pve2", VMID: 105}},
				Keepers:          map[string]int{"pve2": 900},
				MissingTemplates: map[string]bool{"pve2/" + tmpl: true},
			},
			want: map[string][]string{
				"/vms/105":                      vmPrivs,
				"/vms/900":                      {"VM.Audit", "VM.Config.Disk", "VM.Config.Options"},
				"/storage/local-lvm":            {"Datastore.AllocateSpace"},
				"/storage/fast":                 {"Datastore.AllocateSpace", "Datastore.Audit"},
				"/storage/local":                {"Datastore.Allocate", "Datastore.AllocateSpace", "Datastore.AllocateTemplate", "Datastore.Audit"},
				"/nodes/pve2":                   {"Sys.Audit"},
				"/sdn/zones/localnetwork/vmbr1": {"SDN.Use"},
			},
		},
		{
			name: "pinned vmid, volume to adopt, no keeper yet, privileged on PVE 9, node unknown",
			file: file(app("db", func(a *manifest.App) {
				a.VMID = 120
				a.Unprivileged = false
				a.Network.Bridge = ""
				a.Backup.Storage = ""
				a.Volumes = []manifest.Volume{{Name: "pg", Storage: "local-lvm", Mount: "/var/lib/postgresql", Adopt: "local-lvm:vm-77-disk-0"}}
			})),
			targets: doctor.Targets{Version: "9.1"},
			want: map[string][]string{
				"/vms/120":           vmPrivs,
				"/vms":               keeperPrivs,
				"/vms/77":            {"VM.Config.Disk"},
				"/":                  {"Sys.Modify"},
				"/storage/local-lvm": {"Datastore.AllocateSpace", "Datastore.Audit"},
				"/storage/local":     {"Datastore.AllocateTemplate", "Datastore.Audit"},
				"/nodes":             {"Sys.Audit"},
			},
		},
		{
			name: "ha: needs Sys.Audit and Sys.Console on / (issue 33)",
			file: file(app("web", func(a *manifest.App) {
				a.HA = &manifest.HA{State: "started", MaxRestart: 1, MaxRelocate: 1}
			})),
			targets: doctor.Targets{DefaultNode: "pve"},
			want: map[string][]string{
				"/vms":                          vmPrivs,
				"/":                             {"Sys.Audit", "Sys.Console"},
				"/storage/local-lvm":            {"Datastore.AllocateSpace"},
				"/storage/local":                {"Datastore.AllocateSpace", "Datastore.AllocateTemplate", "Datastore.Audit"},
				"/nodes/pve":                    {"Sys.Audit"},
				"/sdn/zones/localnetwork/vmbr0": {"SDN.Use"},
			},
		},
		{
			name: "pool: needs Pool.Allocate and Pool.Audit on its pool; firewall: VM.Audit and VM.Config.Network (issue 33)",
			file: file(app("web", func(a *manifest.App) {
				a.Pool = "team"
				a.Firewall = &manifest.Firewall{}
				a.Backup.Storage = ""
			})),
			targets: doctor.Targets{Apps: map[string]doctor.Placement{"web": {Node: "pve", VMID: 105}}},
			want: map[string][]string{
				"/vms/105":                      vmPrivs,
				"/pool/team":                    {"Pool.Allocate", "Pool.Audit"},
				"/storage/local-lvm":            {"Datastore.AllocateSpace"},
				"/storage/local":                {"Datastore.AllocateTemplate", "Datastore.Audit"},
				"/nodes/pve":                    {"Sys.Audit"},
				"/sdn/zones/localnetwork/vmbr0": {"SDN.Use"},
			},
		},
		{
			name: "privileged on PVE 8 needs no Sys.Modify",
			file: file(app("db", func(a *manifest.App) {
				a.VMID = 120
				a.Unprivileged = false
				a.Network.Bridge = ""
				a.Backup.Storage = ""
			})),
			targets: doctor.Targets{Version: "8.4", DefaultNode: "pve"},
			want: map[string][]string{
				"/vms/120":           vmPrivs,
				"/storage/local-lvm": {"Datastore.AllocateSpace"},
				"/storage/local":     {"Datastore.AllocateTemplate", "Datastore.Audit"},
				"/nodes/pve":         {"Sys.Audit"},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := pathPrivs(doctor.Requirements(tt.file, tt.targets))
			if d := cmp.Diff(tt.want, got); d != "" {
				t.Errorf("Requirements() paths and privileges (-want +got):\n%s", d)
			}
		})
	}
}

// TestRequirements_operatorRole checks the seed's finding from the other
// side: a manifest using everything corral does needs exactly the 16
// operator privileges, no more.
func TestRequirements_operatorRole(t *testing.T) {
	f := file(app("web", func(a *manifest.App) {
		a.Backup.Keep = 2
		a.Pool = "team"
		a.Firewall = &manifest.Firewall{}
		a.Volumes = []manifest.Volume{{Name: "data", Storage: "local-lvm", Size: manifest.GiB, Mount: "/data"}}
	}))
	got := privsOf(doctor.Requirements(f, doctor.Targets{DefaultNode: "pve"}))
	want := slices.Clone(operator)
	slices.Sort(want)
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("privileges (-want +got):\n%s", d)
	}
}

func TestRequirements_operationsAndWhy(t *testing.T) {
	full := app("web", func(a *manifest.App) { a.Pool = "team"; a.Firewall = &manifest.Firewall{} })
	for _, r := range doctor.Requirements(file(app("web", nil), full), doctor.Targets{}) {
		if r.Operation == "" || r.Why == "" || r.Path == "" || r.Priv == "" {
			t.Errorf("requirement %+v lacks path, privilege, operation or why", r)
		}
		if r.Path == "/vms" && !r.Propagate {
			t.Errorf("%s on /vms stands for a VMID to come and must propagate", r.Priv)
		}
	}
}

func perms(m map[string][]string) doctor.Perms {
	out := doctor.Perms{}
	for path, privs := range m {
		out[path] = map[string]int{}
		for _, p := range privs {
			out[path][p] = 1
		}
	}
	return out
}

func without(privs []string, drop ...string) []string {
	return slices.DeleteFunc(slices.Clone(privs), func(p string) bool { return slices.Contains(drop, p) })
}

func TestEvaluate(t *testing.T) {
	reqs := []doctor.Requirement{
		{Path: "/vms", Priv: "VM.Allocate", Propagate: true, Operation: "create web", Why: "w1", App: "web"},
		{Path: "/vms", Priv: "VM.Allocate", Propagate: true, Operation: "create the keeper", Why: "w1"},
		{Path: "/vms", Priv: "VM.Backup", Propagate: true, Operation: "back up web", Why: "w2", App: "web"},
		{Path: "/storage/local", Priv: "Datastore.Audit", Alt: []string{"Datastore.AllocateSpace"}, Operation: "use template", Why: "w3"},
		{Path: "/sdn/zones/localnetwork/vmbr0", Priv: "SDN.Use", Operation: "attach net0", Why: "w4"},
	}
	all := map[string][]string{
		"/vms":                          operator,
		"/storage/local":                operator,
		"/sdn/zones/localnetwork/vmbr0": operator,
	}
	noBackup := map[string][]string{
		"/vms":                          without(operator, "VM.Backup"),
		"/storage/local":                without(operator, "Datastore.Audit"),
		"/sdn/zones/localnetwork/vmbr0": without(operator, "VM.Backup"),
	}
	noSDN := map[string][]string{
		"/vms":                          operator,
		"/storage/local":                operator,
		"/sdn/zones/localnetwork/vmbr0": without(operator, "SDN.Use"),
	}
	tok := "corral@pve!corral"
	type brief struct {
		Kind, Path, Priv, Op string
		Fix                  []string
	}
	tests := []struct {
		name string
		acc  doctor.Access
		want []brief
		msg  string // a finding's message must contain it
	}{
		{
			name: "everything held",
			acc:  doctor.Access{TokenID: tok, Token: perms(all), User: perms(all)},
		},
		{
			name: "held without propagation on /vms",
			acc: doctor.Access{TokenID: tok, Token: doctor.Perms{
				"/vms": {"VM.Allocate": 0, "VM.Backup": 1}, "/storage/local": {"Datastore.Audit": 1}, "/sdn/zones/localnetwork/vmbr0": {"SDN.Use": 0},
			}},
			want: []brief{{"privilege", "/vms", "VM.Allocate", "create web; create the keeper",
				[]string{"pveum acl modify /vms --users corral@pve --tokens 'corral@pve!corral' --roles CorralOperator --propagate 1"}}},
			msg: "without propagation",
		},
		{
			name: "role lacks VM.Backup: the alternative covers the template",
			acc: doctor.Access{TokenID: tok, Token: perms(noBackup), User: perms(noBackup), GrantsKnown: true,
				TokenGrants: []doctor.Grant{{Path: "/", Role: "Narrow", Propagate: true, Privs: without(operator, "VM.Backup", "Datastore.Audit")}}},
			want: []brief{{"privilege", "/vms", "VM.Backup", "back up web", []string{"pveum role modify Narrow --privs VM.Backup --append 1"}}},
			msg:  "does not include VM.Backup",
		},
		{
			name: "built-in role lacks VM.Backup: grant another, not modify it",
			acc: doctor.Access{TokenID: tok, Token: perms(noBackup), User: perms(noBackup), GrantsKnown: true,
				TokenGrants: []doctor.Grant{{Path: "/", Role: "PVEVMUser", Propagate: true, Special: true, Privs: without(operator, "VM.Backup", "Datastore.Audit")}}},
			want: []brief{{"privilege", "/vms", "VM.Backup", "back up web", []string{"pveum acl modify /vms --users corral@pve --tokens 'corral@pve!corral' --roles CorralOperator --propagate 1"}}},
			msg:  "PVEVMUser is built in and cannot be changed",
		},
		{
			name: "privsep user lacks SDN.Use the token's ACL grants",
			acc: doctor.Access{TokenID: tok, Token: perms(noSDN), User: perms(noSDN), GrantsKnown: true,
				TokenGrants: []doctor.Grant{{Path: "/", Role: "CorralOperator", Propagate: true, Privs: operator}}},
			want: []brief{{"intersection", "/sdn/zones/localnetwork/vmbr0", "SDN.Use", "attach net0", []string{"pveum acl modify / --users corral@pve --roles CorralOperator"}}},
			msg:  "but user corral@pve lacks it",
		},
		{
			name: "token's own entry on /vms does not propagate",
			acc: doctor.Access{TokenID: tok, Token: doctor.Perms{
				"/vms": {"VM.Allocate": 0, "VM.Backup": 0}, "/storage/local": {"Datastore.Audit": 1}, "/sdn/zones/localnetwork/vmbr0": {"SDN.Use": 1},
			}, User: perms(all), GrantsKnown: true,
				TokenGrants: []doctor.Grant{{Path: "/vms", Role: "Ops", Privs: operator}, {Path: "/", Role: "Ops", Propagate: true, Privs: without(operator, "VM.Allocate", "VM.Backup")}}},
			want: []brief{
				{"privilege", "/vms", "VM.Allocate", "create web; create the keeper", []string{"pveum acl modify /vms --tokens 'corral@pve!corral' --roles Ops --propagate 1"}},
				{"privilege", "/vms", "VM.Backup", "back up web", []string{"pveum acl modify /vms --tokens 'corral@pve!corral' --roles Ops --propagate 1"}},
			},
			msg: "its ACL entry (role Ops on /vms) does not propagate",
		},
		{
			name: "token has no ACL entry where its user has the privilege",
			acc: doctor.Access{TokenID: tok, Token: perms(noSDN), User: perms(all), GrantsKnown: true,
				TokenGrants: []doctor.Grant{{Path: "/vms", Role: "CorralOperator", Propagate: true, Privs: operator}, {Path: "/storage/local", Role: "CorralOperator", Privs: operator}}},
			want: []brief{{"privilege", "/sdn/zones/localnetwork/vmbr0", "SDN.Use", "attach net0", []string{"pveum acl modify /sdn/zones/localnetwork/vmbr0 --tokens 'corral@pve!corral' --roles CorralOperator"}}},
			msg:  "no ACL entry names the token",
		},
		{
			name: "token with nothing and nothing visible: the intersection rule first",
			acc:  doctor.Access{TokenID: tok, Token: doctor.Perms{"/vms": {}, "/": {}}},
			want: []brief{
				{"intersection", "", "", "", []string{"pveum acl modify / --users corral@pve --roles CorralOperator"}},
				{"privilege", "/vms", "VM.Allocate", "create web; create the keeper", []string{"pveum acl modify /vms --users corral@pve --tokens 'corral@pve!corral' --roles CorralOperator --propagate 1"}},
				{"privilege", "/vms", "VM.Backup", "back up web", []string{"pveum acl modify /vms --users corral@pve --tokens 'corral@pve!corral' --roles CorralOperator --propagate 1"}},
				{"privilege", "/storage/local", "Datastore.Audit", "use template", []string{"pveum acl modify /storage/local --users corral@pve --tokens 'corral@pve!corral' --roles CorralOperator"}},
				{"privilege", "/sdn/zones/localnetwork/vmbr0", "SDN.Use", "attach net0", []string{"pveum acl modify /sdn/zones/localnetwork/vmbr0 --users corral@pve --tokens 'corral@pve!corral' --roles CorralOperator"}},
			},
			msg: "a role granted to the token alone gives it nothing",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fs := doctor.Evaluate(reqs, tt.acc)
			var got []brief
			found := tt.msg == ""
			for _, f := range fs {
				got = append(got, brief{f.Kind, f.Path, f.Privilege, f.Operation, f.Fix})
				if f.Severity != doctor.SevError {
					t.Errorf("finding %q: severity %s, want error", f.Message, f.Severity)
				}
				if tt.msg != "" && strings.Contains(f.Message, tt.msg) {
					found = true
				}
			}
			if d := cmp.Diff(tt.want, got); d != "" {
				t.Errorf("Evaluate() (-want +got):\n%s", d)
			}
			if !found {
				t.Errorf("no finding says %q: %+v", tt.msg, fs)
			}
		})
	}
}

func TestNeedsOf_RootCommands(t *testing.T) {
	tests := []struct {
		name    string
		app     manifest.App
		needs   *doctor.HostNeeds // instead of NeedsOf(app), for fields the manifest cannot express yet
		current map[string]string // the CT's features now
		vmid    int
		want    []string
	}{
		{name: "plain app", app: app("web", nil), want: nil},
		{name: "docker needs keyctl, ct to come", app: app("web", func(a *manifest.App) { a.NeedsKeyctl = true }),
			want: []string{"pct set <vmid> -features nesting=1,keyctl=1"}},
		{name: "docker needs keyctl, pinned", app: app("web", func(a *manifest.App) { a.NeedsKeyctl = true }), vmid: 120,
			want: []string{"pct set 120 -features nesting=1,keyctl=1"}},
		{name: "keyctl already set by root", app: app("web", func(a *manifest.App) { a.NeedsKeyctl = true }), vmid: 120,
			current: map[string]string{"nesting": "1", "keyctl": "1"}, want: nil},
		{name: "privileged with nesting", app: app("web", func(a *manifest.App) { a.Unprivileged = false }), vmid: 7,
			want: []string{"pct set 7 -features nesting=1"}},
		{name: "bind mount, device, hookscript, fuse, raw lxc", app: app("web", func(a *manifest.App) {
			a.Volumes = []manifest.Volume{{Name: "data"}}
		}), vmid: 130, needs: &doctor.HostNeeds{
			Features:   map[string]string{"fuse": "1", "mount": "nfs;cifs"},
			BindMounts: []doctor.HostMount{{Source: "/srv/media", Path: "/media"}},
			Devices:    []string{"/dev/ttyUSB0"},
			Hookscript: "local:snippets/hook.pl",
			RawLXC:     [][2]string{{"lxc.apparmor.profile", "unconfined"}},
		}, want: []string{
			"pct set 130 -features nesting=1,fuse=1,mount=nfs;cifs",
			"pct set 130 -mp1 /srv/media,mp=/media",
			"pct set 130 -dev0 /dev/ttyUSB0",
			"pct set 130 -hookscript local:snippets/hook.pl",
			"echo 'lxc.apparmor.profile: unconfined' >> /etc/pve/lxc/130.conf",
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := doctor.NeedsOf(tt.app)
			if tt.needs != nil {
				h = *tt.needs
			}
			if tt.current != nil {
				h = h.Missing(tt.current)
			}
			var got []string
			if !h.Empty() {
				got = doctor.RootCommands(tt.vmid, tt.app.Features.Nesting, len(tt.app.Volumes), h)
			}
			if d := cmp.Diff(tt.want, got); d != "" {
				t.Errorf("RootCommands (-want +got):\n%s", d)
			}
		})
	}
}

func TestSetup(t *testing.T) {
	f := file(app("web", func(a *manifest.App) {
		a.Node = "pve"
		a.Volumes = []manifest.Volume{{Name: "data", Storage: "local-lvm", Size: manifest.GiB, Mount: "/data"}}
	}))
	s := doctor.Setup(doctor.Requirements(f, doctor.Targets{}), doctor.SetupOptions{User: "ops@pve", Token: "ci"})
	wantPrivs := without(operator, "Datastore.Allocate", "Pool.Allocate", "Pool.Audit") // keep: 0 prunes nothing; no pool:
	slices.Sort(wantPrivs)
	if d := cmp.Diff(wantPrivs, s.Privileges); d != "" {
		t.Errorf("Privileges (-want +got):\n%s", d)
	}
	wantACLs := []doctor.SetupACL{
		{Path: "/vms", Propagate: true},
		{Path: "/storage/local", Propagate: false},
		{Path: "/storage/local-lvm", Propagate: false},
		{Path: "/nodes/pve", Propagate: false},
		{Path: "/sdn/zones/localnetwork/vmbr0", Propagate: true},
	}
	if d := cmp.Diff(wantACLs, s.ACLs); d != "" {
		t.Errorf("ACLs (-want +got):\n%s", d)
	}
	script := s.Script()
	for _, want := range []string{
		"pveum role add CorralOperator --privs \"" + strings.Join(wantPrivs, ",") + "\"\n",
		"pveum user add ops@pve",
		"pveum user token add ops@pve ci --privsep 1",
		"pveum acl modify /vms --users ops@pve --roles CorralOperator --propagate 1\n",
		"pveum acl modify /vms --tokens 'ops@pve!ci' --roles CorralOperator --propagate 1\n",
		"pveum acl modify /storage/local-lvm --users ops@pve --roles CorralOperator --propagate 0\n",
		"pveum acl modify /storage/local-lvm --tokens 'ops@pve!ci' --roles CorralOperator --propagate 0\n",
	} {
		if !strings.Contains(script, want) {
			t.Errorf("script lacks %q:\n%s", want, script)
		}
	}
}
