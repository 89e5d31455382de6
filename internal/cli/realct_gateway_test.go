package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/corralhq/corral/internal/sim/model"
	"github.com/corralhq/corral/internal/testutil/secretscan"
)

// TestHermesComposeOfflineOverride runs examples/hermes-compose with its
// offline stand-in override for real (issue 31): on a real Debian 12 CT,
// unprivileged, Docker and Compose come from Debian through the
// emulator's package proxy, the gateway stand-in and the client that
// takes Hermes' place run in an image built in the container, and the
// base example's health checks pass unchanged: both containers run, and
// the gateway answers Hermes' key. A new LITELLM_MASTER_KEY rewrites
// both env files, the compose step recreates both services (new
// container IDs), the client is answered under the new key and the
// health checks pass with it. No key appears in any output.
func TestHermesComposeOfflineOverride(t *testing.T) {
	if os.Getenv("CORRAL_TEST_APT_MIRROR") != "1" {
		t.Skip("needs the host's Debian mirror: set CORRAL_TEST_APT_MIRROR=1 to run it")
	}
	t.Parallel()
	const key1, key2 = "sk-offline-first-key-31", "sk-offline-second-key-31"
	ownEnv(t, "LITELLM_MASTER_KEY", key1)
	c := newRealCluster(t)
	var secrets secretscan.Set
	secrets.Add(t, "the first LITELLM_MASTER_KEY", key1)
	secrets.Add(t, "the second LITELLM_MASTER_KEY", key2)
	base, err := filepath.Abs("../../examples/hermes-compose/corral.yaml")
	if err != nil {
		t.Fatal(err)
	}
	over := filepath.Join(filepath.Dir(base), "offline.override.yaml")
	both := func(args ...string) []string { return append(args, "-f", base, "-f", over) }
	run := func(want int, args ...string) string {
		t.Helper()
		return c.runScanned(t, &secrets, want, args...)
	}

	t.Logf("plan:\n%s", run(ExitChanges, both("plan")...))
	// Docker in an unprivileged CT needs keyctl=1: corral stops with
	// root's command, the administrator runs it (as in
	// TestComposeLocalExample).
	out := run(ExitError, both("apply", "--auto-approve")...)
	vmid := statusOf(t, run(0, both("status", "-o", "json", "--no-health")...)).Apps[0].Containers[0].VMID
	if want := "pct set " + strconv.Itoa(vmid) + " -features nesting=1,keyctl=1"; !strings.Contains(out, want) {
		t.Fatalf("first apply: want the stop with %q\n%s", want, out)
	}
	t.Logf("first apply, stopped for keyctl:\n%s", out)
	if err := c.srv.Cluster().UpdateCTConfig(model.Auth{UserID: "root@pam"}, "pve", vmid, map[string]string{"features": "nesting=1,keyctl=1"}); err != nil {
		t.Fatal(err)
	}
	r := c.run(both("apply", "--auto-approve")...)
	needGuestExec(t, r.stderr)
	secrets.Check(t, "apply after keyctl", r.stdout+r.stderr)
	if r.code != 0 || !strings.Contains(r.stderr, "Apply complete") {
		t.Fatalf("apply after keyctl: exit %d\n%s", r.code, secretsRedacted(&secrets, r.stderr))
	}
	t.Logf("apply after keyctl:\n%s\n%s", r.stdout, stepTimes(r.stderr))

	// sh runs script in the app's container and returns its output.
	sh := func(script string) string {
		t.Helper()
		e := c.execIn(base, "hermes-docker", script)
		secrets.Check(t, "exec "+script, e.stdout+e.stderr)
		if e.code != 0 {
			t.Fatalf("exec %q: exit %d\n%s%s", script, e.code, e.stdout, e.stderr)
		}
		return strings.TrimSpace(e.stdout)
	}
	const ids = "docker inspect -f '{{.Id}}' litellm hermes"
	// answered waits for the client's answer in its log (it asks once
	// at start, and retries until the gateway answers).
	const answered = "for i in $(seq 30); do docker logs hermes 2>&1 | grep -F 'the gateway answered: offline stand-in' && exit 0; sleep 1; done; docker logs hermes; exit 1"
	t.Logf("the client's log: %s", sh(answered))
	first := sh(ids)
	if st := statusOf(t, run(0, both("status", "-o", "json", "--exit-code")...)); st.Apps[0].Health != "healthy" {
		t.Errorf("status: health %q, want healthy (%v)", st.Apps[0].Health, st.Apps[0].Reasons)
	}
	run(0, both("plan")...)

	// A new key: both env files change, so both services are recreated
	// and read it; the health checks pass with it.
	ownEnv(t, "LITELLM_MASTER_KEY", key2)
	r = c.run(both("apply", "--auto-approve")...)
	secrets.Check(t, "apply with the new key", r.stdout+r.stderr)
	if r.code != 0 || !strings.Contains(r.stderr, "Apply complete") {
		t.Fatalf("apply with the new key: exit %d\n%s", r.code, secretsRedacted(&secrets, r.stderr))
	}
	t.Logf("apply with the new key:\n%s\n%s", r.stdout, stepTimes(r.stderr))
	if now := sh(ids); now == first || len(strings.Fields(now)) != 2 {
		t.Errorf("container IDs after the key changed: %q, before %q: want both new", now, first)
	}
	t.Logf("the new client's log: %s", sh(answered))
	if st := statusOf(t, run(0, both("status", "-o", "json", "--exit-code")...)); st.Apps[0].Health != "healthy" {
		t.Errorf("status after the new key: health %q, want healthy (%v)", st.Apps[0].Health, st.Apps[0].Reasons)
	}
}

// statusOf decodes the output of corral status -o json (stdout, with
// stderr after it).
func statusOf(t *testing.T, out string) statusJSON {
	t.Helper()
	var s statusJSON
	if err := json.NewDecoder(strings.NewReader(out)).Decode(&s); err != nil || len(s.Apps) != 1 || len(s.Apps[0].Containers) != 1 {
		t.Fatalf("status -o json: %v, %+v\n%s", err, s.Apps, out)
	}
	return s
}
