package cli

import (
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/corralhq/corral/internal/sim/model"
)

const interpManifest = `apps:
  - name: api
    template: local:vztmpl/debian-12-standard_12.12-1_amd64.tar.zst
    description: "db at postgres://app:${env:CORRAL_TEST_DB_PW}@db:5432/app"
    volumes:
      - {name: data, size: 1G, mount: /srv/data}
    provision:
      - envFile:
          path: /srv/data/.env
          env:
            - {name: DATABASE_URL, value: "postgres://app:${env:CORRAL_TEST_DB_PW}@${env:CORRAL_TEST_DB_HOST:-db}:5432/app"}
    health:
      - command: "grep -qF 'postgres://app:${env:CORRAL_TEST_DB_PW}@db:' /srv/data/.env"
`

// TestInterpolation_reachesContainer: references inside strings (a
// database URL around a password) reach the container whole, in an
// envFile and the CT's description, while plan, apply and status show
// them only as written.
func TestInterpolation_reachesContainer(t *testing.T) {
	t.Parallel()
	const pw = "Db-Pa55word-7c1e"
	rig := newSecretRig(t, pw, interpManifest)
	c, m, secrets := rig.c, rig.m, rig.secrets
	run := func(want int, args ...string) string {
		t.Helper()
		return rig.run(t, want, args...)
	}
	run(ExitChanges, "plan", "-f", m)
	run(ExitChanges, "plan", "-f", m, "-o", "json")
	out := run(0, "apply", "-f", m, "--auto-approve", "--verbose")
	if want := "health command: grep -qF 'postgres://app:${env:CORRAL_TEST_DB_PW}@db:' /srv/data/.env"; !strings.Contains(out, want) {
		t.Errorf("apply does not name the check as written (%s):\n%s", want, secretsRedacted(secrets, out))
	}
	st := c.status(m)
	run(0, "status", "-f", m)
	// corral output runs the app's health check too (over SSH) and says so.
	if r := c.runC("output", "api", "-f", m); r.code != 0 || !regexp.MustCompile(`(?m)^  health: +healthy$`).MatchString(r.stdout) {
		t.Errorf("output api: exit %d\n%s", r.code, secretsRedacted(secrets, r.stdout+r.stderr))
	} else {
		secrets.Check(t, "stdout of corral output", r.stdout)
	}

	env, err := os.ReadFile(c.file(st.Apps[0].Volumes[0].VolID, ".env"))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := string(env), "DATABASE_URL=postgres://app:"+pw+"@db:5432/app\n"; got != want {
		t.Errorf(".env in the container holds %d bytes, not the composed URL (%d bytes)", len(got), len(want))
	}
	conf, _, err := c.srv.Cluster().CTConfig(model.Auth{UserID: "root@pam"}, "pve", st.Apps[0].Containers[0].VMID, true, "")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(conf["description"], "db at postgres://app:"+pw+"@db:5432/app") {
		t.Error("the CT's description does not hold the composed URL")
	}

	// A changed description: the plan shows old and new, both as written.
	b, err := os.ReadFile(m)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(m, []byte(strings.Replace(string(b), "db at", "database at", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	out = run(ExitChanges, "plan", "-f", m)
	if want := "→ database at postgres://app:${env:CORRAL_TEST_DB_PW}@db:5432/app"; !strings.Contains(out, want) {
		t.Errorf("plan does not show the new description as written (%s):\n%s", want, secretsRedacted(secrets, out))
	}
}
