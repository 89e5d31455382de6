package model

import (
	"archive/tar"
	"bytes"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/corralhq/corral/internal/testenv"
)

func TestIDMap_translations(t *testing.T) {
	t.Parallel()
	pve := idMap{base: ctIDBase, count: ctIDCount}
	tests := []struct {
		name     string
		m        idMap
		ct       int
		host     int
		hostOK   bool
		hostID   int // a host id
		wantCTID int // what the CT sees of it
	}{
		{"privileged: identity", idMap{}, 1000, 1000, true, 70000, 70000},
		{"root", pve, 0, 100000, true, 100000, 0},
		{"a user", pve, 1000, 101000, true, 101000, 1000},
		{"the last mapped id", pve, 65535, 165535, true, 165535, 65535},
		{"outside the map", pve, 65536, 0, false, 165536, overflowID},
		{"host root is nobody", pve, -1, 0, false, 0, overflowID},
	}
	for _, tt := range tests {
		if h, ok := tt.m.toHost(tt.ct); h != tt.host || ok != tt.hostOK {
			t.Errorf("%s: toHost(%d) = %d, %v; want %d, %v", tt.name, tt.ct, h, ok, tt.host, tt.hostOK)
		}
		if got := tt.m.toCT(tt.hostID); got != tt.wantCTID {
			t.Errorf("%s: toCT(%d) = %d, want %d", tt.name, tt.hostID, got, tt.wantCTID)
		}
	}
}

func TestIDMap_capabilities(t *testing.T) {
	t.Parallel()
	pve := idMap{base: ctIDBase, count: ctIDCount}
	v2 := make([]byte, vfsCapV2Size)
	binary.LittleEndian.PutUint32(v2, vfsCapRevision2|1) // effective
	binary.LittleEndian.PutUint32(v2[4:], 1<<13)         // cap_net_raw permitted
	v3 := func(root uint32) []byte {
		b := make([]byte, vfsCapV3Size)
		copy(b, v2)
		binary.LittleEndian.PutUint32(b, vfsCapRevision3|1)
		binary.LittleEndian.PutUint32(b[20:], root)
		return b
	}
	tests := []struct {
		name     string
		in, want []byte
		fn       func([]byte, idMap) []byte
		m        idMap
	}{
		{"set from inside: v2 becomes v3 of the CT's root", v2, v3(100000), capToHost, pve},
		{"privileged: v2 stays", v2, v2, capToHost, idMap{}},
		{"set from inside: v3 of a nested namespace's root is shifted into the map", v3(1000), v3(101000), capToHost, pve},
		{"set from inside: v3 of the CT's root", v3(0), v3(100000), capToHost, pve},
		{"set from inside: v3 of the last mapped uid", v3(65535), v3(165535), capToHost, pve},
		{"set from inside: v3 whose root the map does not cover cannot be set", v3(65536), nil, capToHost, pve},
		{"set from inside: v3 naming a host uid cannot be set", v3(100000), nil, capToHost, pve},
		{"privileged: v3 stays", v3(1000), v3(1000), capToHost, idMap{}},
		{"round trip: v3 set inside reads back inside as it was", capToHost(v3(1000), pve), v3(1000), capToCT, pve},
		{"read inside: v3 of the CT's root is v2", v3(100000), v2, capToCT, pve},
		{"read inside: v3 of a nested namespace's root keeps v3", v3(101000), v3(1000), capToCT, pve},
		{"read inside: v3 of another namespace cannot be read", v3(200000), nil, capToCT, pve},
		{"read inside: the host's v2 as it is", v2, v2, capToCT, pve},
	}
	for _, tt := range tests {
		if got := tt.fn(tt.in, tt.m); !bytes.Equal(got, tt.want) {
			t.Errorf("%s: got %x, want %x", tt.name, got, tt.want)
		}
	}
}

func TestIDMap_ACL(t *testing.T) {
	t.Parallel()
	pve := idMap{base: ctIDBase, count: ctIDCount}
	acl, err := aclFromText("user::rw-,user:1000:r--,group::r--,group:50:rw-,mask::rw-,other::---")
	if err != nil {
		t.Fatal(err)
	}
	host, ok := shiftACL(acl, pve.toHost)
	if text, _ := aclToText(host); !ok || text != "user::rw-,user:101000:r--,group::r--,group:100050:rw-,mask::rw-,other::---" {
		t.Errorf("shifted: %q, %v", text, ok)
	}
	if back := unshiftXattrs(map[string][]byte{aclXattrAccess: host}, pve)[aclXattrAccess]; !bytes.Equal(back, acl) {
		t.Errorf("read back inside: %x, want %x", back, acl)
	}
	outside, _ := aclFromText("user::rw-,user:70000:r--,group::r--,mask::r--,other::---")
	if _, ok := shiftACL(outside, pve.toHost); ok {
		t.Error("an ACL naming uid 70000 was shifted into a 65536-id map")
	}
	fromHost, _ := aclFromText("user::rw-,user:0:r--,group::r--,mask::r--,other::---")
	if text, _ := aclToText(unshiftXattrs(map[string][]byte{aclXattrAccess: fromHost}, pve)[aclXattrAccess]); text != "user::rw-,user:4294967295:r--,group::r--,mask::r--,other::---" {
		t.Errorf("host root in an ACL, read inside: %q", text)
	}
}

// TestShiftEntry_capabilityV3: a restored entry's v3 file capability (a
// backup of a file a nested namespace's root set up) lands with its
// rootid shifted into the CT's range, and one the map cannot hold is left
// out rather than kept with a host rootid.
func TestShiftEntry_capabilityV3(t *testing.T) {
	t.Parallel()
	pve := idMap{base: ctIDBase, count: ctIDCount}
	v3 := func(root uint32) []byte {
		b := make([]byte, vfsCapV3Size)
		binary.LittleEndian.PutUint32(b, vfsCapRevision3|1)
		binary.LittleEndian.PutUint32(b[4:], 1<<13)
		binary.LittleEndian.PutUint32(b[20:], root)
		return b
	}
	tests := []struct {
		name string
		root uint32
		want []byte // nil: left out
	}{
		{"nested root", 1000, v3(101000)},
		{"outside the map", 70000, nil},
	}
	for _, tt := range tests {
		h := &tar.Header{Name: "./usr/bin/ping", Typeflag: tar.TypeReg}
		_, x, refused := shiftEntry(h, fileMeta{}, map[string][]byte{"security.capability": v3(tt.root)}, pve)
		got, ok := x["security.capability"]
		if refused != "" || (tt.want == nil) == ok || !bytes.Equal(got, tt.want) {
			t.Errorf("%s: capability %x (present %v), refused %q; want %x", tt.name, got, ok, refused, tt.want)
		}
	}
}

// TestCreateCT_unprivilegedSetupOwnsOnlyItsFiles: with the id shift on,
// an unprivileged create gives container root (host 100000) what the
// create wrote: the rootfs's top directory, the tiny tree, hostname,
// hosts, root's authorized_keys, the host keys and the network files.
// It no longer walks the whole rootfs: a file that was on the volume
// before (here a host-root file on an existing volume) keeps its owner
// and its setuid bit.
func TestCreateCT_unprivilegedSetupOwnsOnlyItsFiles(t *testing.T) {
	t.Parallel()
	testenv.NeedRoot(t, "giving files owners other than the test's own")
	k := newOpsKit(t)
	k.c.SetIDShift(true)
	volid := k.vol("pve", 310, 1*gib)
	sid, name, _ := ParseVolID(volid)
	dir := k.c.storage.volumePath("pve", sid, name)
	keep := filepath.Join(dir, "srv", "keep")
	if err := os.MkdirAll(filepath.Dir(keep), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keep, []byte("x"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(keep, os.ModeSetuid|0o755); err != nil {
		t.Fatal(err)
	}
	task := ctTestCreate(k, kitRoot, map[string]string{
		"vmid": "310", "ostemplate": DefaultTemplate, "rootfs": volid, "unprivileged": "1", "hostname": "web",
		"net0": "name=eth0,bridge=vmbr0,ip=dhcp", "ssh-public-keys": ctTestSSHKey(t), "features": "nesting=1",
	})
	if task.ExitStatus != "OK" {
		t.Fatalf("create: %s\n%s", task.ExitStatus, strings.Join(task.Log, "\n"))
	}
	owner := func(rel string) (string, os.FileMode) {
		fi, err := os.Lstat(filepath.Join(dir, rel))
		if err != nil {
			return err.Error(), 0
		}
		st := fi.Sys().(*syscall.Stat_t)
		return fmt.Sprintf("%d:%d", st.Uid, st.Gid), fi.Mode()
	}
	for _, rel := range []string{".", "etc", "etc/os-release", "etc/hostname", "etc/hosts", "root", "root/.ssh", "root/.ssh/authorized_keys",
		"etc/ssh/ssh_host_ed25519_key", "etc/ssh/ssh_host_ed25519_key.pub", "etc/network/interfaces", "etc/resolv.conf"} {
		if got, _ := owner(rel); got != "100000:100000" {
			t.Errorf("%s: owner %s, want container root's 100000:100000", rel, got)
		}
	}
	if _, mode := owner("etc/ssh/ssh_host_ed25519_key"); mode.Perm() != 0o600 {
		t.Errorf("host key mode %v, want 0600", mode)
	}
	if got, mode := owner("srv/keep"); got != "0:0" || mode&os.ModeSetuid == 0 {
		t.Errorf("srv/keep, not the create's: %s %v, want 0:0 with setuid kept", got, mode)
	}
}
