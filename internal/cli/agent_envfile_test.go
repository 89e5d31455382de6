package cli

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// agentEnvValues are values the agent's env file holds: endpoints, API
// tokens, fingerprints, and what --pass-env may bring.
var agentEnvValues = []string{
	"https://10.0.0.2:8006",
	"corral-agent-demo@pve!agent=4f1c8e2a-0b6d-4c57-9f3e-1a2b3c4d5e6f",
	"AB:CD:EF:01:23:45:67:89:AB:CD:EF:01:23:45:67:89:AB:CD:EF:01:23:45:67:89:AB:CD:EF:01:23:45:67:89",
	`back\slash and "double" quotes`,
	"spaces  and\ttab # not a comment; not a command & not | a pipe",
	"`not run` and * not a glob ~",
	"$HOME is not expanded by either",
	"",
}

// The agent's env file is read by systemd (EnvironmentFile=) under
// systemd and by sh (`set -a; . file`) when the agent runs detached:
// both read every value as written. A value neither can hold is refused.
func TestAgentEnvQuote_shAndSystemd(t *testing.T) {
	var text strings.Builder
	for i, v := range agentEnvValues {
		q, err := agentEnvQuote("V", v)
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&text, "V%d=%s\n", i, q)
	}
	dir := t.TempDir()
	file := filepath.Join(dir, "agent.env")
	if err := os.WriteFile(file, []byte(text.String()), 0o600); err != nil {
		t.Fatal(err)
	}

	// sh, as the detached agent's run script reads it.
	script := "set -a; . " + file + "; set +a"
	for i := range agentEnvValues {
		script += fmt.Sprintf("; printf '%%s\\0' \"$V%d\"", i)
	}
	out, err := exec.Command("sh", "-c", script).Output()
	if err != nil {
		t.Fatalf("sh: %v", err)
	}
	got := strings.Split(strings.TrimSuffix(string(out), "\x00"), "\x00")
	for i, v := range agentEnvValues {
		if i >= len(got) || got[i] != v {
			t.Errorf("sh reads V%d as %q, want %q", i, got[min(i, len(got)-1)], v)
		}
	}

	// systemd's parser (the environment.d generator reads with the
	// EnvironmentFile= parser, then expands $: values with $ and empty
	// ones, which it drops, are left out here; single quotes are literal
	// in both).
	if _, err := os.Stat(systemdEnvGenerator); err != nil {
		if os.Getenv("CORRAL_REQUIRE_SHARED") != "" {
			t.Fatalf("systemd's environment.d generator is missing (apt-get install systemd): %v", err)
		}
		t.Skipf("systemd's environment.d generator is not installed: %v", err)
	}
	confDir := filepath.Join(dir, "environment.d")
	os.MkdirAll(confDir, 0o755)
	var conf strings.Builder
	for i, v := range agentEnvValues {
		if !strings.Contains(v, "$") && v != "" {
			q, _ := agentEnvQuote("V", v)
			fmt.Fprintf(&conf, "V%d=%s\n", i, q)
		}
	}
	if err := os.WriteFile(filepath.Join(confDir, "50-agent.conf"), []byte(conf.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(systemdEnvGenerator)
	cmd.Env = []string{"HOME=" + dir, "XDG_CONFIG_HOME=" + dir}
	gen, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s: %v", systemdEnvGenerator, err)
	}
	vals := map[string]string{}
	for _, line := range strings.Split(strings.TrimSuffix(string(gen), "\n"), "\n") {
		k, v, _ := strings.Cut(line, "=")
		vals[k] = unquoteGenerator(v)
	}
	for i, v := range agentEnvValues {
		if strings.Contains(v, "$") || v == "" {
			continue
		}
		if g := vals[fmt.Sprintf("V%d", i)]; g != v {
			t.Errorf("systemd reads V%d as %q, want %q", i, g, v)
		}
	}

	for _, bad := range []string{"it's", "two\nlines", "nul\x00"} {
		if _, err := agentEnvQuote("X", bad); err == nil {
			t.Errorf("agentEnvQuote(%q) accepted", bad)
		}
	}
}

const systemdEnvGenerator = "/usr/lib/systemd/user-environment-generators/30-systemd-environment-d-generator"

// unquoteGenerator undoes the generator's output quoting (double quotes
// with \ " ` $ escaped) when it quoted a value.
func unquoteGenerator(s string) string {
	if len(s) < 2 || s[0] != '"' || s[len(s)-1] != '"' {
		return s
	}
	s = s[1 : len(s)-1]
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+1 < len(s) {
			i++
			if s[i] == 't' {
				b.WriteByte('\t')
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// The agent's unit passes systemd's own check (systemd-analyze verify,
// which reports what it cannot parse), also with words systemd would
// otherwise expand or split (% specifiers, $ variables, quotes,
// backslashes, spaces).
func TestAgentUnit_systemdVerify(t *testing.T) {
	analyze, err := exec.LookPath("systemd-analyze")
	if err != nil {
		if os.Getenv("CORRAL_REQUIRE_SHARED") != "" {
			t.Fatalf("systemd-analyze is missing (apt-get install systemd): %v", err)
		}
		t.Skipf("systemd-analyze is not installed: %v", err)
	}
	truth, err := exec.LookPath("true")
	if err != nil {
		t.Fatal(err)
	}
	argv := []string{truth, "agent", "-f", agentManifestPath("demo"), "--listen", "127.1.0.102:9120",
		"--git", `https://git.example/a%20b/it's "x" $HOME\path.git`, "--git-ref", "${ref} %h"}
	unit, err := agentUnitText("demo", argv)
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), "corral-agent.service")
	if err := os.WriteFile(p, []byte(unit), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(analyze, "verify", p).CombinedOutput()
	if err != nil || len(out) > 0 {
		t.Errorf("systemd-analyze verify: %v\n%s\n%s", err, out, unit)
	}
	if !strings.Contains(unit, `"https://git.example/a%%20b/it's \"x\" $$HOME\\path.git"`) || !strings.Contains(unit, `"$${ref} %%h"`) {
		t.Errorf("ExecStart words not quoted for systemd:\n%s", unit)
	}
	if _, err := agentUnitText("demo", []string{truth, "a\nb"}); err == nil {
		t.Errorf("a newline in a word was accepted")
	}
}
