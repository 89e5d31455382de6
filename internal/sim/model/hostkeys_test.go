package model

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/crypto/ssh"
)

// TestCluster_CreateCT_hostKeys: create makes the CT's SSH host keys in
// its /etc/ssh and logs them as pve-container's rewrite_ssh_host_keys
// does, with the hostname's first label in the comment.
func TestCluster_CreateCT_hostKeys(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		hostname string
		comment  string
	}{
		{"short hostname", "web", "root@web"},
		{"domain stripped", "db.example.com", "root@db"},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			k := newOpsKit(t)
			tmpl := DefaultTemplate
			vmid := 110 + i
			task := ctTestCreate(k, kitOperator, map[string]string{
				"vmid": strconv.Itoa(vmid), "ostemplate": tmpl, "rootfs": "local-lvm:1", "hostname": tt.hostname, "features": "nesting=1",
			})
			if !strings.HasPrefix(task.ExitStatus, "OK") {
				t.Fatalf("create: %s\n%s", task.ExitStatus, strings.Join(task.Log, "\n"))
			}
			dir, err := k.c.VolumePath("pve", "local-lvm:vm-"+strconv.Itoa(vmid)+"-disk-0")
			if err != nil {
				t.Fatal(err)
			}
			done := regexp.MustCompile(`^done: (SHA256:[0-9A-Za-z+/]{43}) (.*)$`)
			var logged []string
			for i, line := range task.Log {
				if m := done.FindStringSubmatch(line); m != nil {
					logged = append(logged, m[1])
					if m[2] != tt.comment {
						t.Errorf("comment %q, want %q", m[2], tt.comment)
					}
					if i == 0 || !strings.HasPrefix(task.Log[i-1], "Creating SSH host key 'ssh_host_") || !strings.HasSuffix(task.Log[i-1], "_key' - this may take some time ...") {
						t.Errorf("%q does not follow a Creating SSH host key line", line)
					}
				}
			}
			var onDisk []string
			for _, kt := range HostKeyTypes {
				p := filepath.Join(dir, "etc", "ssh", kt.File)
				priv, err := os.ReadFile(p)
				if err != nil {
					t.Fatal(err)
				}
				signer, err := ssh.ParsePrivateKey(priv)
				if err != nil {
					t.Fatal(err)
				}
				pubLine, err := os.ReadFile(p + ".pub")
				if err != nil {
					t.Fatal(err)
				}
				pub, comment, _, _, err := ssh.ParseAuthorizedKey(pubLine)
				if err != nil || string(pub.Marshal()) != string(signer.PublicKey().Marshal()) || comment != tt.comment {
					t.Errorf("%s.pub = %q (%v), not the private key's public key with comment %q", kt.File, pubLine, err, tt.comment)
				}
				for name, want := range map[string]os.FileMode{p: 0o600, p + ".pub": 0o644} {
					if fi, err := os.Stat(name); err != nil || fi.Mode().Perm() != want {
						t.Errorf("%s: mode %v, want %v", name, fi.Mode().Perm(), want)
					}
				}
				onDisk = append(onDisk, ssh.FingerprintSHA256(signer.PublicKey()))
			}
			if strings.Join(logged, " ") != strings.Join(onDisk, " ") {
				t.Errorf("logged %v, keys on disk %v", logged, onDisk)
			}
		})
	}
}

// TestWriteHostKeys_noSSHDir: a rootfs without /etc/ssh (a template
// without openssh-server) gets no keys and logs nothing, as in PVE.
func TestWriteHostKeys_noSSHDir(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	lines, err := writeHostKeys(dir, "bare")
	if err != nil || len(lines) != 0 {
		t.Fatalf("lines %q, err %v", lines, err)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 0 {
		t.Errorf("wrote %v", ents)
	}
}
