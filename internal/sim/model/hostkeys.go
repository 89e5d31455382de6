package model

import (
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/crypto/ssh"
)

// SSH host keys at create, as pve-container's Setup rewrite_ssh_host_keys
// does in post_create_hook: when the new rootfs has /etc/ssh, a fresh key
// of each type is made (ssh-keygen -t TYPE -C root@<hostname without
// domain>), written to /etc/ssh/ssh_host_TYPE_key (0600) and .pub (0644),
// and the create task logs, per key,
//
//	Creating SSH host key 'ssh_host_ed25519_key' - this may take some time ...
//	done: SHA256:<fingerprint> root@<hostname>
//
// PVE makes rsa, ecdsa and ed25519 keys (in Perl hash order); the
// emulator makes ecdsa (P-256, ssh-keygen's default) and ed25519 only: a
// 3072-bit RSA key costs a quarter second of CPU, and creates are the
// emulator's commonest task. The guest sshd (package sim/guest) serves
// the keys it finds there.

// HostKeyTypes are the host key types the emulator makes at create, in
// the order it logs them, with their file names under /etc/ssh.
var HostKeyTypes = []struct{ Type, File string }{
	{"ecdsa", "ssh_host_ecdsa_key"},
	{"ed25519", "ssh_host_ed25519_key"},
}

// writeHostKeys makes the CT's SSH host keys in rootDir/etc/ssh and
// returns the task log lines. A rootfs without /etc/ssh gets none, as in
// PVE (a template without openssh-server).
//
// The keys are written as the CT's other setup files are: never through
// a link (the rootfs's etc or etc/ssh may be one), owned as etc/ssh (so
// an unprivileged CT's root owns them), a file already there replaced.
func writeHostKeys(rootDir, hostname string) ([]string, error) {
	if ok, err := ctDirs(rootDir, "etc/ssh/x", false, 0); !ok || err != nil {
		return nil, nil
	}
	sshDir := filepath.Join(rootDir, "etc", "ssh")
	if fi, err := os.Lstat(sshDir); err != nil || !fi.IsDir() {
		return nil, nil
	}
	if hostname == "" {
		hostname = "localhost"
	}
	hostname, _, _ = strings.Cut(hostname, ".")
	comment := "root@" + hostname
	var lines []string
	for _, kt := range HostKeyTypes {
		lines = append(lines, fmt.Sprintf("Creating SSH host key '%s' - this may take some time ...", kt.File))
		var priv any
		switch kt.Type {
		case "ecdsa":
			k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
			if err != nil {
				return nil, err
			}
			priv = k
		case "ed25519":
			_, k, err := ed25519.GenerateKey(rand.Reader)
			if err != nil {
				return nil, err
			}
			priv = k
		}
		block, err := ssh.MarshalPrivateKey(priv, comment)
		if err != nil {
			return nil, fmt.Errorf("ssh host key %s: %w", kt.Type, err)
		}
		signer, err := ssh.NewSignerFromKey(priv)
		if err != nil {
			return nil, fmt.Errorf("ssh host key %s: %w", kt.Type, err)
		}
		pub := strings.TrimSpace(string(ssh.MarshalAuthorizedKey(signer.PublicKey()))) + " " + comment + "\n"
		for _, f := range []struct {
			name, data string
			mode       os.FileMode
		}{{kt.File, string(pem.EncodeToMemory(block)), 0o600}, {kt.File + ".pub", pub, 0o644}} {
			// Removed first: an old file's mode (a template's 0644
			// private key) would stay.
			if err := os.Remove(filepath.Join(sshDir, f.name)); err != nil && !errors.Is(err, os.ErrNotExist) {
				return nil, fmt.Errorf("ssh host key %s: %w", kt.Type, err)
			}
			if err := writeCTFile(rootDir, "etc/ssh/"+f.name, f.data, f.mode, 0o755); err != nil {
				return nil, fmt.Errorf("ssh host key %s: %w", kt.Type, err)
			}
		}
		lines = append(lines, "done: "+ssh.FingerprintSHA256(signer.PublicKey())+" "+comment)
	}
	return lines, nil
}
