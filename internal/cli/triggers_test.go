package cli

import (
	"os"
	"strings"
	"testing"

	"github.com/corralhq/corral/internal/sim/model"
	"github.com/corralhq/corral/internal/testenv"
)

// fakeTools is a first step that puts recording stand-ins for systemctl
// and docker into the container (/usr/local/bin comes first on PATH):
// the emulated guest has neither systemd nor Docker, and the tests need
// to see exactly which commands corral ran.
const fakeTools = `      - name: tools
        run: |
          mkdir -p /usr/local/bin /var/log/fake
          printf '#!/bin/sh\necho "$*" >> /var/log/fake/systemctl.log\n' > /usr/local/bin/systemctl
          printf '#!/bin/sh\necho "$*" >> /var/log/fake/docker.log\n' > /usr/local/bin/docker
          chmod 0755 /usr/local/bin/systemctl /usr/local/bin/docker
`

const triggersManifest = `apps:
  - name: trig
    template: local:vztmpl/debian-12-standard_12.12-1_amd64.tar.zst
    description: DESC
    provision:
` + fakeTools + `      - name: env
        envFile:
          path: /opt/trig/.env
          env:
            - {name: KEY, value: "${env:TRIG_KEY}"}
            - {name: OPTIONAL, value: "${env:TRIG_OPTIONAL:-}"}
        restart: [trig.service]
      - file: {path: /etc/trig.conf, content: "CONF\n"}
        restart: [trig.service, other.service]
      - name: reload
        onChange: ["file: /etc/trig.conf"]
        run: echo reloaded >> /var/log/fake/reload.log
EXTRA`

// guestFile reads a file of the app's container's root file system.
func (c *cluster) guestFile(m, path string) string {
	c.t.Helper()
	vmid := c.status(m).Apps[0].Containers[0].VMID
	rootfs := strings.SplitN(c.config(vmid)["rootfs"], ",", 2)[0]
	b, err := os.ReadFile(c.file(rootfs, strings.TrimPrefix(path, "/")))
	if err != nil && !os.IsNotExist(err) {
		c.t.Fatal(err)
	}
	return string(b)
}

// TestChangeTriggers: a changed env file restarts the unit it names once,
// a changed file restarts both its units and runs the step that reacts to
// it, the plan says all of it beforehand (without logging in), and a
// restart that a failed apply did not reach is done by the next one.
func TestChangeTriggers(t *testing.T) {
	t.Parallel()
	testenv.NeedRoot(t, "a guest view writable for the fake tools")
	c := newGuestCluster(t)
	const key1, key2 = "sk-trigger-first-1a2b3c", "sk-trigger-second-4d5e6f"
	ownEnv(t, "TRIG_KEY", key1)
	write := func(conf, desc, extra string) string {
		r := strings.NewReplacer("CONF", conf, "DESC", desc, "EXTRA", extra)
		return writeManifest(t, r.Replace(triggersManifest))
	}
	m := write("one", "first words", "")
	r := c.run("apply", "-f", m, "--auto-approve")
	needGuestExec(t, r.stderr)
	if r.code != 0 {
		t.Fatalf("apply: exit %d\n%s", r.code, r.stderr)
	}
	restarts := func() []string {
		return strings.Fields(strings.ReplaceAll(c.guestFile(m, "/var/log/fake/systemctl.log"), "restart --", ""))
	}
	// Two steps name trig.service: it restarts once.
	if got := restarts(); strings.Join(got, " ") != "trig.service other.service" {
		t.Fatalf("restarts after the first apply: %q", got)
	}
	if env := c.guestFile(m, "/opt/trig/.env"); env != "KEY="+key1+"\nOPTIONAL=\"\"\n" {
		t.Errorf(".env = %q", env)
	}
	if r := c.run("plan", "-f", m); r.code != 0 {
		t.Fatalf("plan after apply: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}

	// A new secret: the env step runs, trig.service restarts, nothing
	// else; the plan said so, without the secret or corral's own lines.
	ownEnv(t, "TRIG_KEY", key2)
	m = write("one", "second words", "")
	r = c.run("plan", "-f", m)
	for _, want := range []string{
		"provision: 1 of 4 step(s) run",
		"+ env (changed)",
		"tools (unchanged, skipped)",
		"reload (unchanged, skipped)",
		"restart trig.service because env changed",
		"~ description: first words → second words",
	} {
		if r.code != ExitChanges || !strings.Contains(r.stdout, want) {
			t.Errorf("plan: exit %d, want %q in:\n%s", r.code, want, r.stdout)
		}
	}
	for _, bad := range []string{key1, key2, "corral-", "other.service"} {
		if strings.Contains(r.stdout, bad) {
			t.Errorf("plan shows %q:\n%s", bad, r.stdout)
		}
	}
	r = c.mustRun("apply", "-f", m, "--auto-approve")
	if got := restarts(); strings.Join(got, " ") != "trig.service other.service trig.service" {
		t.Fatalf("restarts after the new key: %q\n%s", got, r.stderr)
	}
	if got := c.guestFile(m, "/var/log/fake/reload.log"); got != "reloaded\n" {
		t.Errorf("reload ran again: %q", got)
	}

	// A changed file: both its units restart and the step that reacts to
	// it runs.
	m = write("two", "second words", "")
	r = c.run("plan", "-f", m)
	for _, want := range []string{
		"+ file: /etc/trig.conf (changed)",
		"+ reload (notified by file: /etc/trig.conf)",
		"restart trig.service because file: /etc/trig.conf changed",
		"restart other.service because file: /etc/trig.conf changed",
	} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("plan: want %q in:\n%s", want, r.stdout)
		}
	}
	r = c.mustRun("apply", "-f", m, "--auto-approve")
	if !strings.Contains(r.stderr, "reload (notified by file: /etc/trig.conf)") {
		t.Errorf("apply does not say why reload runs:\n%s", r.stderr)
	}
	if got := c.guestFile(m, "/var/log/fake/reload.log"); got != "reloaded\nreloaded\n" {
		t.Errorf("reload log: %q", got)
	}
	if got := restarts(); len(got) != 5 {
		t.Fatalf("restarts after the changed file: %q", got)
	}

	// A step after the env file fails: no restart yet, but the next apply
	// (the failing step gone) does it, though the env file is unchanged.
	ownEnv(t, "TRIG_KEY", key1)
	m = write("two", "second words", "      - name: boom\n        run: exit 3\n")
	if r := c.run("apply", "-f", m, "--auto-approve"); r.code != ExitError || !strings.Contains(r.stderr, `step "boom" failed`) {
		t.Fatalf("apply with a failing step: exit %d\n%s", r.code, r.stderr)
	}
	if got := restarts(); len(got) != 5 {
		t.Fatalf("a failed apply restarted: %q", got)
	}
	m = write("two", "second words", "")
	r = c.mustRun("apply", "-f", m, "--auto-approve")
	if got := restarts(); len(got) != 6 || got[5] != "trig.service" {
		t.Fatalf("the pending restart was not done: %q\n%s", got, r.stderr)
	}
	if !strings.Contains(r.stderr, "pending from an apply that stopped before it") {
		t.Errorf("apply does not say why it restarts:\n%s", r.stderr)
	}
	if r := c.run("plan", "-f", m); r.code != 0 {
		t.Fatalf("plan after the pending restart: exit %d\n%s", r.code, r.stdout)
	}
}

// TestComposeTriggers: a compose step that reacts to its env file
// recreates its services when the env file changed, pulls first with
// pull: always, and only brings services up when nothing it reacts to
// ran.
func TestComposeTriggers(t *testing.T) {
	t.Parallel()
	testenv.NeedRoot(t, "a guest view writable for the fake tools")
	c := newGuestCluster(t)
	ownEnv(t, "COMPOSE_KEY", "sk-compose-first-77aa")
	text := `apps:
  - name: web
    template: local:vztmpl/debian-12-standard_12.12-1_amd64.tar.zst
    provision:
` + fakeTools + `      - name: env
        envFile: {path: /opt/web/.env, env: [{name: KEY, value: "${env:COMPOSE_KEY}"}]}
      - compose:
          content: "services: {app: {image: example/app:latest, env_file: .env}}\n"
          pull: always
        onChange: [env]
`
	m := writeManifest(t, text)
	if r := c.run("apply", "-f", m, "--auto-approve"); r.code != ExitError || !strings.Contains(r.stderr, "keyctl=1") {
		t.Fatalf("apply before keyctl: exit %d\n%s", r.code, r.stderr)
	}
	vmid := c.status(m).Apps[0].Containers[0].VMID
	if err := c.srv.Cluster().UpdateCTConfig(model.Auth{UserID: "root@pam"}, "pve", vmid, map[string]string{"features": "nesting=1,keyctl=1"}); err != nil {
		t.Fatal(err)
	}
	r := c.run("apply", "-f", m, "--auto-approve")
	needGuestExec(t, r.stderr)
	if r.code != 0 {
		t.Fatalf("apply: exit %d\n%s", r.code, r.stderr)
	}
	const project = "-p web -f /opt/web/compose.yaml"
	want := "compose version\n" + "compose " + project + " pull\n" + "compose " + project + " up -d --remove-orphans\n"
	if got := c.guestFile(m, "/var/log/fake/docker.log"); got != want {
		t.Fatalf("docker calls:\n%s\nwant:\n%s", got, want)
	}

	ownEnv(t, "COMPOSE_KEY", "sk-compose-second-88bb")
	r = c.run("plan", "-f", m)
	if r.code != ExitChanges || !strings.Contains(r.stdout, "+ compose: /opt/web/compose.yaml (notified by env; recreates its services)") {
		t.Fatalf("plan: exit %d\n%s", r.code, r.stdout)
	}
	c.mustRun("apply", "-f", m, "--auto-approve")
	want += "compose version\n" + "compose " + project + " pull\n" + "compose " + project + " up -d --remove-orphans --force-recreate\n"
	if got := c.guestFile(m, "/var/log/fake/docker.log"); got != want {
		t.Fatalf("docker calls after the env change:\n%s\nwant:\n%s", got, want)
	}
	// Nothing changed: nothing is pulled or recreated.
	if r := c.run("plan", "-f", m); r.code != 0 {
		t.Fatalf("plan after apply: exit %d\n%s", r.code, r.stdout)
	}
	c.mustRun("apply", "-f", m, "--auto-approve")
	if got := c.guestFile(m, "/var/log/fake/docker.log"); got != want {
		t.Fatalf("an apply without changes called docker:\n%s", got)
	}
	// A new :latest upstream is no change in the manifest: --rerun asks
	// for the pull, and the plan says so.
	const step = "compose: /opt/web/compose.yaml"
	r = c.run("plan", "-f", m, "--rerun", step)
	if r.code != ExitChanges || !strings.Contains(r.stdout, "+ "+step+" (rerun requested)") || !strings.Contains(r.stdout, "env (unchanged, skipped)") {
		t.Fatalf("plan --rerun: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	c.mustRun("apply", "-f", m, "--auto-approve", "--rerun", "web/"+step)
	want += "compose version\n" + "compose " + project + " pull\n" + "compose " + project + " up -d --remove-orphans\n"
	if got := c.guestFile(m, "/var/log/fake/docker.log"); got != want {
		t.Fatalf("docker calls after --rerun:\n%s\nwant:\n%s", got, want)
	}
	if r := c.run("plan", "-f", m, "--rerun", "compose"); r.code != ExitError || !strings.Contains(r.stderr, `no provisioning step has that name (steps: "web/tools", "web/env", "web/compose: /opt/web/compose.yaml")`) {
		t.Errorf("--rerun of an unknown step: exit %d\n%s", r.code, r.stderr)
	}
}
