package model

import (
	"crypto/ed25519"
	"crypto/rand"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/crypto/ssh"
)

// ctTestCreate runs CreateCT for vmid on node "pve" and waits for its task.
func ctTestCreate(k *opsKit, auth Auth, params map[string]string) Task {
	k.t.Helper()
	return k.run(k.c.CreateCT(auth, "pve", params))
}

// ctTestLimitedUser adds user id with the operator's privileges minus
// drop, granted on "/", and returns its Auth.
func ctTestLimitedUser(k *opsKit, id string, drop ...string) Auth {
	k.t.Helper()
	k.c.mu.Lock()
	defer k.c.mu.Unlock()
	var privs []string
	for _, p := range OperatorPrivileges {
		if !slices.Contains(drop, p) {
			privs = append(privs, p)
		}
	}
	role := "Limited" + strings.ReplaceAll(strings.ReplaceAll(id, "@", ""), ".", "")
	a := k.c.st.Access
	if err := a.AddRole(role, privs); err != nil {
		k.t.Fatal(err)
	}
	if err := a.AddUser(id, ""); err != nil {
		k.t.Fatal(err)
	}
	if err := a.SetACL("/", []string{role}, []string{id}, nil, nil, true, false); err != nil {
		k.t.Fatal(err)
	}
	k.c.markCore()
	return Auth{UserID: id}
}

// ctTestSSHKey is a fresh authorized_keys line.
func ctTestSSHKey(t *testing.T) string {
	t.Helper()
	pub, _, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	key, err := ssh.NewPublicKey(pub)
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(ssh.MarshalAuthorizedKey(key))) + " hermes@laptop"
}

// ctTestHasLine fails unless the task log holds line exactly.
func ctTestHasLine(t *testing.T, task Task, line string) {
	t.Helper()
	if !slices.Contains(task.Log, line) {
		t.Errorf("task log lacks %q:\n%s", line, strings.Join(task.Log, "\n"))
	}
}

var ctTestMACRE = regexp.MustCompile(`^name=eth0,bridge=vmbr0,hwaddr=BC:24:11:[0-9A-F]{2}:[0-9A-F]{2}:[0-9A-F]{2},ip=dhcp,type=veth$`)

func TestCluster_CreateCT_defaults(t *testing.T) {
	t.Parallel()
	k := newOpsKit(t)
	task := ctTestCreate(k, kitOperator, map[string]string{
		"vmid": "105", "ostemplate": DefaultTemplate, "rootfs": "local-lvm:8",
		"net0": "name=eth0,bridge=vmbr0,ip=dhcp",
	})
	// An unprivileged Debian 12 (systemd 252) CT without nesting.
	if got, want := task.ExitStatus, "WARNINGS: 1"; got != want {
		t.Fatalf("exitstatus = %q, want %q; log:\n%s", got, want, strings.Join(task.Log, "\n"))
	}
	for _, line := range []string{
		`  Logical volume "vm-105-disk-0" created.`,
		"Creating filesystem with 2097152 4k blocks and 524288 inodes",
		"extracting archive '/var/lib/vz/template/cache/debian-12-standard_12.12-1_amd64.tar.zst'",
		"Detected container architecture: amd64",
		"WARN: Systemd 252 detected. You may need to enable nesting.",
		"TASK WARNINGS: 1",
	} {
		ctTestHasLine(t, task, line)
	}
	g := k.guest(105)
	net0 := g.Config["net0"]
	if !ctTestMACRE.MatchString(net0) {
		t.Errorf("net0 = %q, want a generated BC:24:11 hwaddr and type=veth", net0)
	}
	delete(g.Config, "net0")
	want := map[string]string{
		"arch": "amd64", "hostname": "CT105", "memory": "512", "swap": "512", "ostype": "debian",
		"rootfs": "local-lvm:vm-105-disk-0,size=8G", "unprivileged": "1",
	}
	if diff := cmp.Diff(want, g.Config); diff != "" {
		t.Errorf("config (-want +got):\n%s", diff)
	}
	dir, err := k.c.VolumePath("pve", "local-lvm:vm-105-disk-0")
	if err != nil {
		t.Fatal(err)
	}
	for name, body := range map[string]string{"etc/hostname": "CT105\n", "etc/debian_version": "12.12\n"} {
		got, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil || string(got) != body {
			t.Errorf("%s = %q, %v; want %q", name, got, err, body)
		}
	}
	if v := k.volume("pve", "local-lvm:vm-105-disk-0"); v == nil || v.Size != 8*gib {
		t.Errorf("rootfs volume = %+v, want 8 GiB", v)
	}
}

func TestCluster_CreateCT_options(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		version string
		params  map[string]string
		status  string
		want    map[string]string // config keys to compare
		absent  []string
	}{
		{
			name:   "nesting silences the systemd warning",
			params: map[string]string{"rootfs": "local-lvm:8", "features": "nesting=1", "hostname": "web"},
			status: "OK",
			want:   map[string]string{"features": "nesting=1", "hostname": "web", "unprivileged": "1"},
		},
		{
			name:    "PVE 8 creates privileged CTs by default, without warning",
			version: "8.4",
			params:  map[string]string{"rootfs": "local-lvm:8"},
			status:  "OK",
			absent:  []string{"unprivileged"},
		},
		{
			name:   "plain sizes take the storage parameter",
			params: map[string]string{"rootfs": "3", "storage": "local-lvm", "mp0": "local-lvm:0.5,mp=/data,size=9G,backup=1"},
			status: "WARNINGS: 1",
			want: map[string]string{
				"rootfs": "local-lvm:vm-105-disk-0,size=3G",
				"mp0":    "local-lvm:vm-105-disk-1,mp=/data,backup=1,size=512M",
			},
		},
		{
			name:   "no rootfs means storage:4",
			params: map[string]string{"storage": "local-lvm", "memory": "1024", "swap": "0"},
			status: "WARNINGS: 1",
			want:   map[string]string{"rootfs": "local-lvm:vm-105-disk-0,size=4G", "memory": "1024", "swap": "0"},
		},
		{
			name:   "unusedN is ignored",
			params: map[string]string{"rootfs": "local-lvm:1", "unused0": "local-lvm:vm-100-disk-0", "unprivileged": "0"},
			status: "OK",
			absent: []string{"unused0", "unprivileged"},
		},
		{
			name:   "tags are deduplicated and sorted",
			params: map[string]string{"rootfs": "local-lvm:1", "tags": "web;app,web", "nameserver": "10.0.0.53,1.1.1.1", "features": "nesting=1"},
			status: "OK",
			want:   map[string]string{"tags": "app;web", "nameserver": "10.0.0.53 1.1.1.1"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			k := newOpsKitWith(t, Options{Version: tt.version})
			k.ct("pve", 100, nil)
			params := map[string]string{"vmid": "105", "ostemplate": DefaultTemplate}
			for key, v := range tt.params {
				params[key] = v
			}
			task := ctTestCreate(k, kitRoot, params)
			if task.ExitStatus != tt.status {
				t.Fatalf("exitstatus = %q, want %q; log:\n%s", task.ExitStatus, tt.status, strings.Join(task.Log, "\n"))
			}
			g := k.guest(105)
			got := map[string]string{}
			for key := range tt.want {
				got[key] = g.Config[key]
			}
			if diff := cmp.Diff(tt.want, got); len(tt.want) > 0 && diff != "" {
				t.Errorf("config (-want +got):\n%s", diff)
			}
			for _, key := range tt.absent {
				if v, ok := g.Config[key]; ok {
					t.Errorf("config has %s = %q, want none", key, v)
				}
			}
		})
	}
}

func TestCluster_CreateCT_secrets(t *testing.T) {
	t.Parallel()
	k := newOpsKit(t)
	key := ctTestSSHKey(t)
	task := ctTestCreate(k, kitOperator, map[string]string{
		"vmid": "105", "ostemplate": DefaultTemplate, "rootfs": "local-lvm:2", "features": "nesting=1",
		"password": "s3cret-pw", "ssh-public-keys": key,
	})
	if task.ExitStatus != "OK" {
		t.Fatalf("exitstatus = %q; log:\n%s", task.ExitStatus, strings.Join(task.Log, "\n"))
	}
	text, err := k.c.ConfigText(105)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(text, "s3cret-pw") || strings.Contains(text, "ssh-ed25519") || strings.Contains(text, "password") {
		t.Errorf("config holds a secret:\n%s", text)
	}
	extra, ok := k.c.GuestExtra(105)
	if !ok {
		t.Fatal("no GuestExtra for CT 105")
	}
	if extra.SSHPublicKeys != key {
		t.Errorf("SSHPublicKeys = %q, want %q", extra.SSHPublicKeys, key)
	}
	if !extra.CheckRootPassword("s3cret-pw") || extra.CheckRootPassword("wrong") {
		t.Error("CheckRootPassword does not match the creation password only")
	}
	if strings.Contains(extra.RootPasswordHash, "s3cret-pw") {
		t.Error("the password is stored in clear")
	}
	dir, _ := k.c.VolumePath("pve", "local-lvm:vm-105-disk-0")
	got, err := os.ReadFile(filepath.Join(dir, "root", ".ssh", "authorized_keys"))
	if want := "# --- BEGIN PVE ---\n" + key + "\n# --- END PVE ---\n"; err != nil || string(got) != want {
		t.Errorf("authorized_keys = %q, %v; want %q", got, err, want)
	}
	for _, line := range task.Log {
		if strings.Contains(line, "s3cret-pw") {
			t.Errorf("task log holds the password: %q", line)
		}
	}
}

func TestCluster_CreateCT_start(t *testing.T) {
	t.Parallel()
	k := newOpsKit(t)
	task := ctTestCreate(k, kitOperator, map[string]string{
		"vmid": "105", "ostemplate": DefaultTemplate, "rootfs": "local-lvm:2", "features": "nesting=1", "start": "1",
	})
	if task.ExitStatus != "OK" {
		t.Fatalf("exitstatus = %q; log:\n%s", task.ExitStatus, strings.Join(task.Log, "\n"))
	}
	if g := k.guest(105); !g.Running || g.PID == 0 || g.StartedAt == 0 {
		t.Errorf("after create with start=1: running=%v pid=%d started=%d", g.Running, g.PID, g.StartedAt)
	}
}

func TestCluster_CreateCT_lockDuringTask(t *testing.T) {
	t.Parallel()
	k := newOpsKit(t)
	var seen string
	k.c.SetTaskHook(func(typ, id string) error {
		if typ == "vzcreate" {
			conf, _, err := k.c.CTConfig(kitRoot, "pve", 105, true, "")
			if err != nil {
				return err
			}
			seen = conf["lock"]
			if err := k.c.UpdateCTConfig(kitRoot, "pve", 105, map[string]string{"cores": "2"}); err != nil {
				seen += " / " + err.Error()
			}
		}
		return nil
	})
	task := ctTestCreate(k, kitRoot, map[string]string{"vmid": "105", "ostemplate": DefaultTemplate, "rootfs": "local-lvm:1"})
	if task.ExitStatus != "WARNINGS: 1" {
		t.Fatalf("exitstatus = %q", task.ExitStatus)
	}
	if want := "create / CT is locked (create)"; seen != want {
		t.Errorf("during the task: %q, want %q", seen, want)
	}
	if g := k.guest(105); g.Lock() != "" {
		t.Errorf("lock after the task = %q, want none", g.Lock())
	}
}

func TestCluster_CreateCT_taskFailure(t *testing.T) {
	t.Parallel()
	k := newOpsKit(t)
	task := ctTestCreate(k, kitRoot, map[string]string{
		"vmid": "105", "ostemplate": "local:vztmpl/nope_amd64.tar.zst", "rootfs": "local-lvm:1", "mp0": "local-lvm:1,mp=/data",
	})
	if want := "unable to create CT 105 - can't find file 'local:vztmpl/nope_amd64.tar.zst'"; task.ExitStatus != want {
		t.Fatalf("exitstatus = %q, want %q", task.ExitStatus, want)
	}
	ctTestHasLine(t, task, `  Logical volume "vm-105-disk-1" successfully removed.`)
	for _, volid := range []string{"local-lvm:vm-105-disk-0", "local-lvm:vm-105-disk-1"} {
		if v := k.volume("pve", volid); v != nil {
			t.Errorf("%s survived the failed create", volid)
		}
	}
	if _, _, err := k.c.CTConfig(kitRoot, "pve", 105, false, ""); err == nil {
		t.Error("CT 105 exists after the failed create")
	}
}

func TestCluster_CreateCT_syncErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		version string
		auth    string // root, operator, nobody, nosdn
		params  map[string]string
		status  int
		msg     string
		errs    map[string]string
	}{
		{name: "vmid in use", auth: "root", params: map[string]string{"vmid": "100"},
			status: 500, msg: "CT 100 already exists on node 'pve'\n"},
		{name: "privileged needs Sys.Modify on PVE 9", auth: "operator", params: map[string]string{"unprivileged": "0"},
			status: 403, msg: "Permission check failed (/, Sys.Modify)\n"},
		{name: "no VM.Allocate", auth: "nobody",
			status: 403, msg: "Permission check failed\n"},
		{name: "bind mount", auth: "operator", params: map[string]string{"mp0": "/srv/shared,mp=/shared"},
			status: 403, msg: "Permission check failed (mount point type bind is only allowed for root@pam)\n"},
		{name: "device mount", auth: "operator", params: map[string]string{"mp0": "/dev/sdb1,mp=/disk"},
			status: 403, msg: "Permission check failed (mount point type device is only allowed for root@pam)\n"},
		{name: "features beyond nesting", auth: "operator", params: map[string]string{"features": "nesting=1,keyctl=1"},
			status: 403, msg: "Permission check failed (changing feature flags (except nesting) is only allowed for root@pam)\n"},
		{name: "nesting=0 is not nesting only", auth: "operator", params: map[string]string{"features": "nesting=0"},
			status: 403, msg: "Permission check failed (changing feature flags (except nesting) is only allowed for root@pam)\n"},
		{name: "features on a privileged CT (PVE 8 default)", version: "8.4", auth: "operator", params: map[string]string{"features": "nesting=1"},
			status: 403, msg: "Permission check failed (changing feature flags for privileged container is only allowed for root@pam)\n"},
		{name: "hookscript", auth: "operator", params: map[string]string{"hookscript": "local:snippets/hook.pl"},
			status: 403, msg: "Permission check failed (changing the hookscript is only allowed for root@pam)\n"},
		{name: "device passthrough", auth: "operator", params: map[string]string{"dev0": "/dev/ttyUSB0"},
			status: 403, msg: "Permission check failed (configuring device passthrough is only allowed for root@pam)\n"},
		{name: "bridge without SDN.Use", auth: "nosdn", params: map[string]string{"net0": "name=eth0,bridge=vmbr0,ip=dhcp"},
			status: 403, msg: "Permission check failed (/sdn/zones/localnetwork/vmbr0, SDN.Use)\n"},
		{name: "plain size from a token", auth: "operator", params: map[string]string{"rootfs": "8"},
			status: 500, msg: "Only root can pass arbitrary filesystem paths. at /usr/share/perl5/PVE/Storage.pm line 651.\n"},
		{name: "template of the wrong content type", auth: "root", params: map[string]string{"ostemplate": "local-lvm:vm-100-disk-0"},
			status: 500, msg: "unable to use volume local-lvm:vm-100-disk-0 - content type needs to be 'vztmpl'\n"},
		{name: "mount points without rootfs", auth: "root", params: map[string]string{"rootfs": "", "mp0": "local-lvm:1,mp=/data"},
			status: 500, msg: "mount points configured, but 'rootfs' not set - aborting\n"},
		{name: "storage without container directories", auth: "root", params: map[string]string{"rootfs": "local:8"},
			status: 400, msg: "Parameter verification failed.\n", errs: map[string]string{"storage": "storage 'local' does not support container directories"}},
		{name: "default storage local", auth: "root", params: map[string]string{"rootfs": ""},
			status: 400, msg: "Parameter verification failed.\n", errs: map[string]string{"storage": "storage 'local' does not support container directories"}},
		{name: "unknown storage", auth: "root", params: map[string]string{"rootfs": "tank:8"},
			status: 500, msg: "storage 'tank' does not exist\n"},
		{name: "bad ssh key", auth: "root", params: map[string]string{"ssh-public-keys": "ssh-rsa not-a-key"},
			status: 500, msg: "SSH public key validation error\n"},
		{name: "restore from a template", auth: "root", params: map[string]string{"restore": "1"},
			status: 500, msg: "unable to use volume " + DefaultTemplate + " - content type needs to be 'backup'\n"},
		{name: "MTU larger than the bridge's", auth: "root", params: map[string]string{"net0": "name=eth0,bridge=vmbr0,mtu=9000"},
			status: 500, msg: "net0: MTU size '9000' is bigger than bridge MTU '1500'\n"},
		{name: "MTU on a bridge that does not exist", auth: "root", params: map[string]string{"net0": "name=eth0,bridge=vmbr9,mtu=1400"},
			status: 500, msg: "bridge 'vmbr9' does not exist\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			k := newOpsKitWith(t, Options{Version: tt.version})
			k.ct("pve", 100, nil)
			auth := map[string]Auth{"root": kitRoot, "operator": kitOperator, "nobody": kitNobody}[tt.auth]
			if tt.auth == "nosdn" {
				auth = ctTestLimitedUser(k, "nosdn@pve", "SDN.Use")
			}
			params := map[string]string{"vmid": "105", "ostemplate": DefaultTemplate, "rootfs": "local-lvm:8"}
			for key, v := range tt.params {
				if v == "" {
					delete(params, key)
				} else {
					params[key] = v
				}
			}
			upid, err := k.c.CreateCT(auth, "pve", params)
			if upid != "" {
				t.Fatalf("got UPID %s, want a synchronous error", upid)
			}
			wantError(t, err, tt.status, tt.msg)
			if diff := cmp.Diff(tt.errs, err.(*Error).Params); diff != "" {
				t.Errorf("params (-want +got):\n%s", diff)
			}
			if tt.name != "vmid in use" {
				if _, _, err := k.c.CTConfig(kitRoot, "pve", 105, false, ""); err == nil {
					t.Error("CT 105 exists after a refused create")
				}
			}
		})
	}
}

func TestCluster_CreateCT_rootMayBind(t *testing.T) {
	t.Parallel()
	k := newOpsKit(t)
	task := ctTestCreate(k, kitRoot, map[string]string{
		"vmid": "105", "ostemplate": DefaultTemplate, "rootfs": "local-lvm:1",
		"mp0": "/srv/shared,mp=/shared", "features": "nesting=1,keyctl=1",
	})
	if task.ExitStatus != "OK" {
		t.Fatalf("exitstatus = %q; log:\n%s", task.ExitStatus, strings.Join(task.Log, "\n"))
	}
	g := k.guest(105)
	if got, want := g.Config["mp0"], "/srv/shared,mp=/shared"; got != want {
		t.Errorf("mp0 = %q, want %q", got, want)
	}
	if got, want := g.Config["features"], "nesting=1,keyctl=1"; got != want {
		t.Errorf("features = %q, want %q", got, want)
	}
	if _, ok := k.c.GuestExtra(105); ok {
		t.Error("GuestExtra recorded without password or keys")
	}
}

// TestCluster_CreateCT_templateDoesNotFit: PVE checks no rootfs size
// against the template; tar runs out of space and the create fails with
// run_command's error, freeing the volume it allocated. A subvol (size 0
// on a dir storage) has no fixed size and takes any template.
func TestCluster_CreateCT_templateDoesNotFit(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, rootfs, want string
		unprivileged       bool
	}{
		{"unprivileged 256M", "local-lvm:0.25", "unable to create CT 105 - command 'lxc-usernsexec -m u:0:100000:65536 -m g:0:100000:65536 -- tar xpf - --zstd --totals --one-file-system -p --sparse --numeric-owner --acls --xattrs '--xattrs-include=user.*' '--xattrs-include=security.capability' '--warning=no-file-ignored' '--warning=no-xattr-write' -C /var/lib/lxc/105/rootfs --skip-old-files --anchored --exclude './dev/*'' failed: exit code 2", true},
		{"privileged 1M", "local-lvm:0.001", "unable to create CT 105 - command 'tar xpf - --zstd --totals --one-file-system -p --sparse --numeric-owner --acls --xattrs '--xattrs-include=user.*' '--xattrs-include=security.capability' '--warning=no-file-ignored' '--warning=no-xattr-write' -C /var/lib/lxc/105/rootfs --skip-old-files --anchored --exclude './dev/*'' failed: exit code 2", false},
		{"512M fits", "local-lvm:0.5", "WARNINGS: 1", true}, // systemd without nesting
	} {
		t.Run(tc.name, func(t *testing.T) {
			k := newOpsKit(t)
			task := ctTestCreate(k, kitRoot, map[string]string{"vmid": "105", "ostemplate": DefaultTemplate, "rootfs": tc.rootfs, "unprivileged": map[bool]string{true: "1", false: "0"}[tc.unprivileged]})
			if task.ExitStatus != tc.want {
				t.Fatalf("exitstatus = %q, want %q; log:\n%s", task.ExitStatus, tc.want, strings.Join(task.Log, "\n"))
			}
			if !strings.HasPrefix(tc.want, "unable") {
				return
			}
			if !slices.Contains(task.Log, "tar: Exiting with failure status due to previous errors") {
				t.Errorf("log lacks tar's failure:\n%s", strings.Join(task.Log, "\n"))
			}
			if _, err := k.c.ConfigText(105); err == nil {
				t.Errorf("CT 105 exists after the failed create")
			}
			for key := range k.c.st.Volumes {
				if strings.Contains(key, "vm-105-") {
					t.Errorf("volume %s left behind", key)
				}
			}
		})
	}
}

func TestCTUpdateHosts(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, before, hostname, want string
	}{
		{"template lines stay", "127.0.0.1\tlocalhost\n", "web", "127.0.0.1\tlocalhost\n# --- BEGIN PVE ---\n127.0.1.1 web\n# --- END PVE ---\n"},
		{"a domain names both", "", "web.example.com", "# --- BEGIN PVE ---\n127.0.1.1 web.example.com web\n# --- END PVE ---\n"},
		{"the section is replaced", "127.0.0.1 localhost\n# --- BEGIN PVE ---\n127.0.1.1 old\n# --- END PVE ---\n", "new", "127.0.0.1 localhost\n# --- BEGIN PVE ---\n127.0.1.1 new\n# --- END PVE ---\n"},
	}
	for _, tt := range tests {
		root := t.TempDir()
		p := filepath.Join(root, "etc", "hosts")
		os.Mkdir(filepath.Join(root, "etc"), 0o755)
		if tt.before != "" {
			if err := os.WriteFile(p, []byte(tt.before), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		if err := ctUpdateHosts(root, tt.hostname); err != nil {
			t.Fatal(err)
		}
		got, _ := os.ReadFile(p)
		if string(got) != tt.want {
			t.Errorf("%s: got %q, want %q", tt.name, got, tt.want)
		}
	}
}
