package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/corralhq/corral/internal/testenv"
)

// exampleSecrets are stand-ins for the keys the Hermes examples read.
var exampleSecrets = map[string]string{
	"OPENCODE_GO_API_KEY": "sk-test-opencode-7d1e",
	"LITELLM_MASTER_KEY":  "sk-test-litellm-4b2a",
	"OPENROUTER_API_KEY":  "sk-or-test-9c3f",
	"TELEGRAM_BOT_TOKEN":  "123456:test-telegram-5e8d",
}

func exampleEnv() []string {
	var env []string
	for k, v := range exampleSecrets {
		env = append(env, k+"="+v)
	}
	return env
}

// TestHermesExamplesPlanSideBySide: both Hermes examples validate and plan
// against the embedded emulator, side by side in one cluster, with their
// secrets shown only as references.
func TestHermesExamplesPlanSideBySide(t *testing.T) {
	t.Parallel()
	env := append(exampleEnv(), "XDG_STATE_HOME="+t.TempDir(), "PROXMOX_VE_ENDPOINT=", "PROXMOX_VE_API_TOKEN=", "CORRAL_SIM_TIME_SCALE=0")
	for _, ex := range []struct{ file, app string }{
		{"examples/hermes/corral.yaml", "hermes"},
		{"examples/hermes-compose/corral.yaml", "hermes-docker"},
	} {
		mustCorral(t, env, "validate", "-f", ex.file)
		code, out, errs := corral(t, env, "plan", "-f", ex.file)
		if code != 2 || !strings.Contains(out, ex.app) {
			t.Errorf("plan -f %s: exit %d, want 2 naming %s\n%s\n%s", ex.file, code, ex.app, out, errs)
		}
		for _, secret := range exampleSecrets {
			if strings.Contains(out+errs, secret) {
				t.Errorf("plan -f %s printed a secret", ex.file)
			}
		}
	}
}

// TestExamplesApplyOffline applies both Hermes examples on an emulator
// whose containers have no network (the emulator runs in a network
// namespace of its own with only loopback, so no step can reach, or
// send anything to, the internet): each runs every step before the first
// one that needs the internet, which then fails and says so; both apps
// run side by side. The compose example first stops for root's keyctl,
// which the test then sets as root@pam would.
func TestExamplesApplyOffline(t *testing.T) {
	t.Parallel()
	testenv.NeedRoot(t, "a network namespace and the emulator's guest view")
	for _, tool := range []string{"unshare", "nsenter", "ip", "curl"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("needs %s (util-linux, iproute2, curl)", tool)
		}
	}
	state := t.TempDir()
	serve := exec.Command("unshare", "--net", "sh", "-c", `ip link set lo up && exec "$0" sim serve --listen 127.0.0.1:0 --state "$1" --time-scale 0 --guest-ssh-port 0`, corralBin, state)
	// The CTs' resolver: the host's cannot be reached from here, and
	// each lookup waited for its timeouts (90 s per failing step); one on
	// the CT's own loopback, where nothing listens, fails at once.
	resolv := filepath.Join(t.TempDir(), "resolv.conf")
	if err := os.WriteFile(resolv, []byte("nameserver 127.0.0.1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	serve.Env = append(os.Environ(), "CORRAL_SIM_HOST_RESOLV_CONF="+resolv) // model.HostResolvConfEnv
	_, simEnv := startServe(t, serve, state)
	netns := fmt.Sprintf("--net=/proc/%d/ns/net", serve.Process.Pid)
	env := append(simEnv, exampleEnv()...)
	// in runs a command in the emulator's network namespace.
	in := func(name string, args ...string) (int, string, string) {
		t.Helper()
		return corralIn(t, env, netns, name, args...)
	}
	noSecrets := func(what, out string) {
		t.Helper()
		for _, secret := range exampleSecrets {
			if strings.Contains(out, secret) {
				t.Errorf("%s printed a secret", what)
			}
		}
	}

	// Bare metal: the user step runs, the baseline packages need the
	// internet.
	code, out, errs := in(corralBin, "apply", "-f", "examples/hermes/corral.yaml", "--auto-approve")
	noSecrets("apply hermes", out+errs)
	if code != 1 || !strings.Contains(errs, "baseline packages") || !strings.Contains(errs, "user: hermes") {
		t.Fatalf("apply examples/hermes: exit %d, want a failure at the baseline packages step after the user step\n%s\n%s", code, out, errs)
	}
	// A re-run skips what is done and retries the failed step.
	code, out, errs = in(corralBin, "apply", "-f", "examples/hermes/corral.yaml", "--auto-approve")
	if code != 1 || !strings.Contains(errs, "user: hermes (unchanged, skipped)") || !strings.Contains(errs, "provision baseline packages") {
		t.Fatalf("apply examples/hermes again: exit %d, want the user step skipped and the packages retried\n%s\n%s", code, out, errs)
	}
	if code, out, errs := in(corralBin, "exec", "hermes", "-f", "examples/hermes/corral.yaml", "--", "id", "-u", "hermes"); code != 0 || strings.TrimSpace(out) != "10000" {
		t.Errorf("user hermes in the container: exit %d %q\n%s", code, out, errs)
	}

	// Compose: root's keyctl first, then everything before Docker's
	// install, which needs the internet.
	code, out, errs = in(corralBin, "apply", "-f", "examples/hermes-compose/corral.yaml", "--auto-approve")
	if code != 1 || !strings.Contains(errs, "pct set 118") || !strings.Contains(errs, "keyctl=1") {
		t.Fatalf("apply examples/hermes-compose: exit %d, want the keyctl stop with root's pct set\n%s\n%s", code, out, errs)
	}
	// root@pam logs in with its password (a token, even root's, may not
	// set keyctl) and sets the feature, as pct set does.
	endpoint := envValue(simEnv, "PROXMOX_VE_ENDPOINT")
	code, out, errs = in("curl", "-fsSk", "-d", "username=root@pam", "--data-urlencode", "password="+envValue(simEnv, "PVE_ROOT_PASSWORD"), endpoint+"/api2/json/access/ticket")
	var ticket struct {
		Data struct {
			Ticket string `json:"ticket"`
			CSRF   string `json:"CSRFPreventionToken"`
		} `json:"data"`
	}
	if err := json.Unmarshal([]byte(out), &ticket); code != 0 || err != nil || ticket.Data.Ticket == "" {
		t.Fatalf("root@pam login: exit %d %v\n%s", code, err, errs)
	}
	if code, out, errs := in("curl", "-fsSk", "-X", "PUT", "-b", "PVEAuthCookie="+ticket.Data.Ticket, "-H", "CSRFPreventionToken: "+ticket.Data.CSRF,
		endpoint+"/api2/json/nodes/pve/lxc/118/config", "--data-urlencode", "features=nesting=1,keyctl=1"); code != 0 {
		t.Fatalf("root's pct set: exit %d\n%s\n%s", code, out, errs)
	}
	code, out, errs = in(corralBin, "apply", "-f", "examples/hermes-compose/corral.yaml", "--auto-approve")
	noSecrets("apply hermes-compose", out+errs)
	if code != 1 || !strings.Contains(errs, "install docker") {
		t.Fatalf("apply examples/hermes-compose after keyctl: exit %d, want a failure at the install docker step\n%s\n%s", code, out, errs)
	}

	// Side by side: both apps have their container, each its volumes.
	for _, ex := range []struct {
		file, app string
		vmid      int
		volumes   int
	}{{"examples/hermes/corral.yaml", "hermes", 105, 1}, {"examples/hermes-compose/corral.yaml", "hermes-docker", 118, 4}} {
		code, out, errs := in(corralBin, "status", "-f", ex.file, "-o", "json")
		var st struct {
			Apps []struct {
				App        string `json:"app"`
				Containers []struct {
					VMID int `json:"vmid"`
				} `json:"containers"`
				Volumes []struct {
					VolID string `json:"volid"`
				} `json:"volumes"`
			} `json:"apps"`
		}
		if err := json.Unmarshal([]byte(out), &st); err != nil || len(st.Apps) != 1 {
			t.Fatalf("status -f %s: exit %d %v\n%s\n%s", ex.file, code, err, out, errs)
		}
		a := st.Apps[0]
		if a.App != ex.app || len(a.Containers) != 1 || a.Containers[0].VMID != ex.vmid || len(a.Volumes) != ex.volumes {
			t.Errorf("status -f %s: %+v", ex.file, a)
		}
	}
}

// corralIn runs name with args in the network namespace netns
// (nsenter's --net=PATH), from the repository root.
func corralIn(t *testing.T, env []string, netns, name string, args ...string) (int, string, string) {
	t.Helper()
	return corralCmd(t, env, exec.Command("nsenter", append([]string{netns, "--", name}, args...)...))
}

func envValue(env []string, key string) string {
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, key+"="); ok {
			return v
		}
	}
	return ""
}
