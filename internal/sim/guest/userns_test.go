package guest_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	client "github.com/corralhq/corral/internal/guest"
	"github.com/corralhq/corral/internal/testenv"
)

// needUserns skips where unprivileged CTs get no user namespace (the
// fallback view, or a host without root's range in /etc/subuid), saying
// why; under CORRAL_REQUIRE_LXC (CI, which sets the range up) it fails.
func (k *kit) needUserns() {
	k.t.Helper()
	k.needIsolation()
	if ok, why := k.m.UserNamespace(); !ok {
		testenv.Lackf(k.t, testenv.LXC, "unprivileged CTs get no user namespace here: %v", why)
	}
}

// rootDir is CT vmid's rootfs directory on the host.
func (k *kit) rootDir(vmid int) string {
	k.t.Helper()
	mounts, err := k.c.GuestMounts(vmid)
	if err != nil {
		k.t.Fatal(err)
	}
	for _, m := range mounts {
		if m.Key == "rootfs" {
			return m.HostDir
		}
	}
	k.t.Fatalf("CT %d has no rootfs", vmid)
	return ""
}

// owner is the host uid:gid of p (not followed).
func owner(t *testing.T, p string) string {
	t.Helper()
	var st unix.Stat_t
	if err := unix.Lstat(p, &st); err != nil {
		t.Fatal(err)
	}
	return strconv.Itoa(int(st.Uid)) + ":" + strconv.Itoa(int(st.Gid))
}

// TestGuest_unprivilegedUserNamespace: an unprivileged CT (PVE 9's
// default) runs in PVE's user namespace, container root = host uid
// 100000: /proc/self/uid_map says so, a file its uid 1000 writes is host
// uid 101000 on disk, the host's directories it sees through overlays
// (tiny template) are its root's and writable, a pty session is container root's, and pkill cannot reach a
// host process. A privileged CT beside it keeps host ids.
func TestGuest_unprivilegedUserNamespace(t *testing.T) {
	t.Parallel()
	k := newKit(t)
	k.needUserns()
	host, arg := hostSleep(t)
	k.create(140, nil)
	k.create(141, map[string]string{"unprivileged": "0", "features": ""})
	byUser := "mkdir -p /srv/u && chown 1000:1000 /srv/u && setpriv --reuid 1000 --regid 1000 --clear-groups sh -c 'echo hi > /srv/u/by-1000' && touch /root/by-root && "
	tests := []struct {
		vmid                   int
		name, script, want     string
		file, wantOnDisk       string // a file in the rootfs and its host owner
		rootOwner, wantRootDir string
	}{
		{vmid: 140, name: "uid_map is PVE's default idmap", script: "awk '{print $1, $2, $3}' /proc/self/uid_map /proc/self/gid_map; id -u",
			want: "stdout: 0 100000 65536\nstdout: 0 100000 65536\nstdout: 0"},
		{vmid: 140, name: "files are shifted on disk", script: byUser + "stat -c '%u:%g' /srv/u/by-1000 /root/by-root",
			want: "stdout: 1000:1000\nstdout: 0:0", file: "srv/u/by-1000", wantOnDisk: "101000:101000"},
		{vmid: 140, name: "root's files too", script: "true", file: "root/by-root", wantOnDisk: "100000:100000"},
		{vmid: 140, name: "the rootfs and /tmp are container root's", script: "stat -c '%u:%g' / /tmp",
			want: "stdout: 0:0\nstdout: 0:0", file: ".", wantOnDisk: "100000:100000"},
		{vmid: 140, name: "the host's /usr (an idmapped overlay) is container root's and works", script: "stat -c '%u:%g' /usr/bin/env && /usr/bin/env true && echo ran",
			want: "stdout: 0:0\nstdout: ran"},
		{vmid: 140, name: "container root writes into the host's directories (copied up into the rootfs)", script: "mkdir -p /usr/local/bin && echo x > /usr/local/bin/mine && stat -c '%u:%g' /usr/local/bin/mine",
			want: "stdout: 0:0", file: "usr/local/bin/mine", wantOnDisk: "100000:100000"},
		{vmid: 140, name: "pkill cannot reach the host", script: "pkill -xf 'sleep " + arg + "'; echo $?; kill -9 " + strconv.Itoa(host.Process.Pid) + " 2>/dev/null; echo $?",
			want: "stdout: 1\nstdout: 1"},
		{vmid: 141, name: "a privileged CT has the host's ids", script: "awk '{print $1, $2, $3}' /proc/self/uid_map",
			want: "stdout: 0 0 4294967295"},
		{vmid: 141, name: "and writes them unshifted", script: byUser + "stat -c '%u:%g' /srv/u/by-1000",
			want: "stdout: 1000:1000", file: "srv/u/by-1000", wantOnDisk: "1000:1000"},
	}
	clients := map[int]*client.Client{}
	for _, vmid := range []int{140, 141} {
		c, err := k.dial(vmid, client.HostKeyPolicy{TrustOnFirstUse: true})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		clients[vmid] = c
	}
	for _, tt := range tests {
		out, err := run(t, clients[tt.vmid], tt.script)
		if err != nil || out != tt.want && tt.want != "" {
			t.Errorf("CT %d: %s: %q: got %q, %v; want %q", tt.vmid, tt.name, tt.script, out, err, tt.want)
		}
		if tt.file != "" {
			if got := owner(t, filepath.Join(k.rootDir(tt.vmid), tt.file)); got != tt.wantOnDisk {
				t.Errorf("CT %d: %s: %s on disk is %s, want %s", tt.vmid, tt.name, tt.file, got, tt.wantOnDisk)
			}
		}
	}
	if data, err := os.ReadFile("/proc/" + strconv.Itoa(host.Process.Pid) + "/stat"); err != nil || strings.Contains(string(data), ") Z ") {
		t.Errorf("the host's sleep %s is gone after pkill inside the CT: %v", arg, err)
	}

	// A terminal session (nsenter, not lxc-attach) is container root's
	// too, on a terminal it owns.
	var stdout bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	err := clients[140].Pipe(ctx, client.Pipe{Script: "id -u; awk '{print $2}' /proc/self/uid_map; stat -c '%u' $(tty); pwd", Stdout: &stdout, TTY: &client.TTY{Size: client.WindowSize{Cols: 80, Rows: 24}}})
	if got := strings.Fields(stdout.String()); err != nil || strings.Join(got, " ") != "0 100000 0 /root" {
		t.Errorf("pty session: got %q, %v; want id 0, map 100000, its tty owned by 0, in /root", stdout.String(), err)
	}
}
