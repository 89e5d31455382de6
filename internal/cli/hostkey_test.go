package cli

import (
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/pem"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/crypto/ssh"

	"github.com/corralhq/corral/internal/plan"
	"github.com/corralhq/corral/internal/sim/model"
	"github.com/corralhq/corral/internal/testenv"
)

// TestApplyPinsTheHostKeyFromTheCreateLog: apply logs into a container
// it created only if the key it presents is one the create task logged,
// pins that key, and afterwards refuses a changed host key.
func TestApplyPinsTheHostKeyFromTheCreateLog(t *testing.T) {
	t.Parallel()
	testenv.NeedRoot(t, "guest exec")
	c := newGuestCluster(t)
	m := writeManifest(t, sideBySideManifest)
	r := c.run("apply", "-f", m, "--auto-approve")
	if r.code != 0 {
		needGuestExec(t, r.stderr)
		t.Fatalf("apply: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	vmid := c.vmidOf(m, "web")
	conf, _, err := c.srv.Cluster().CTConfig(model.Auth{UserID: "root@pam"}, "pve", vmid, true, "")
	if err != nil {
		t.Fatal(err)
	}
	pinned := plan.ParseMarker(conf["description"]).HostKey
	key, _, _, _, err := ssh.ParseAuthorizedKey([]byte(pinned))
	if err != nil {
		t.Fatalf("pinned host key %q: %v", pinned, err)
	}

	// The create task's log, as PVE's: "done: SHA256:… root@web".
	var logged []string
	done := regexp.MustCompile(`^done: (SHA256:\S+) root@web$`)
	for _, tk := range c.srv.Cluster().Tasks("pve") {
		if tk.Type != "vzcreate" || tk.ID != strconv.Itoa(vmid) {
			continue
		}
		full, err := c.srv.Cluster().Task("pve", tk.UPID)
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range full.Log {
			if m := done.FindStringSubmatch(line); m != nil {
				logged = append(logged, m[1])
			}
		}
	}
	if len(logged) == 0 {
		t.Fatal("the create task logged no SSH host key")
	}
	if fp := ssh.FingerprintSHA256(key); !slices.Contains(logged, fp) {
		t.Errorf("pinned %s, not one of the create log's %v", fp, logged)
	}

	// The container's host keys change behind corral's back: exec refuses.
	rootfs := strings.SplitN(c.config(vmid)["rootfs"], ",", 2)[0]
	sshDir := c.file(rootfs, "etc/ssh")
	old, _ := filepath.Glob(filepath.Join(sshDir, "ssh_host_*"))
	for _, p := range old {
		os.Remove(p)
	}
	ec, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	_, ed, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	for file, priv := range map[string]any{"ssh_host_ecdsa_key": ec, "ssh_host_ed25519_key": ed} {
		block, err := ssh.MarshalPrivateKey(priv, "root@impostor")
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(sshDir, file), pem.EncodeToMemory(block), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	c.mustC("restart", "web", "-f", m) // the sshd reads its keys at boot
	r = c.run(append([]string{"exec", "web", "-f", m}, append(c.connArgs(), "--", "true")...)...)
	if r.code == 0 || !strings.Contains(r.stderr, "host key changed since corral pinned it") {
		t.Errorf("exec with a changed host key: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
}
