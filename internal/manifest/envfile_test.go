package manifest_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/compose-spec/compose-go/v2/dotenv"

	"github.com/corralhq/corral/internal/manifest"
	"github.com/corralhq/corral/internal/testenv"
)

// envValues are the values every env-file reader must read back as
// written: shell metacharacters, quotes, escapes, comments, expansions,
// Unicode and ASCII spaces at either end.
var envValues = []string{
	"plain", "sk-or-v1-abc123", "=eq=", "dGVzdA==", "", "a>/path", "x<y", "a|b", "a&b", "a;b", "(x)", "*", "?", "[a]", "~root", "{a,b}", "a!b",
	"with space", " lead", "trail ", "tab\there", "\ttab", `quote"d`, "it's", `'single'`, `back\slash`, `ends\`, `\\double`, `\n`, `\t`, `\0101`, `\x41`,
	"$HOME", "${HOME}", "$$", `\$HOME`, "a$", "`id`", "$(id)", "`", "a`b\\c", "#hash", "a #b", "a# b", "nbsp\u00a0", "\u00a0nbsp", "é ü 日本", "\v", "vt\vx", "ff\f",
	`"`, `""`, `'`, `\"`, `\'`, "a=b", ":colon", "export", "-dash",
	// what corral agent install writes into the agent's env file
	"https://10.0.0.2:8006", "corral-agent-demo@pve!agent=4f1c8e2a-0b6d-4c57-9f3e-1a2b3c4d5e6f", "AB:CD:EF:01:23:45:67:89",
}

// envRefused are values EnvFileValue refuses, and why.
var envRefused = map[string]string{
	"a`b'c":     "holds both a backquote (`) and a single quote (')",
	"`x\\":      "holds a backquote (`) and ends with a backslash",
	"line\nbr":  "holds a line break or NUL",
	"cr\rx":     "holds a line break or NUL",
	"nul\x00":   "holds a line break or NUL",
	"bad\xffut": "is not valid UTF-8",
}

// writeEnv writes NAME=value lines V0..Vn for values and returns the
// file's text.
func writeEnv(t *testing.T, values []string) string {
	t.Helper()
	var b strings.Builder
	for i, v := range values {
		q, err := manifest.EnvFileValue(v)
		if err != nil {
			t.Fatalf("EnvFileValue(%q): %v", v, err)
		}
		fmt.Fprintf(&b, "V%d=%s\n", i, q)
	}
	return b.String()
}

// TestEnvFileValue_compose reads the file with docker compose's own
// env_file reader (compose-go's dotenv package, which docker compose
// links), with no variables in the environment.
func TestEnvFileValue_compose(t *testing.T) {
	text := writeEnv(t, envValues)
	got, err := dotenv.UnmarshalWithLookup(text, func(string) (string, bool) { return "", false })
	if err != nil {
		t.Fatalf("compose dotenv: %v\n%s", err, text)
	}
	for i, v := range envValues {
		if g := got[fmt.Sprintf("V%d", i)]; g != v {
			t.Errorf("V%d=%s read by compose as %q, want %q", i, strings.Split(text, "\n")[i], g, v)
		}
	}
}

// TestEnvFileValue_sh sources the file with /bin/sh (set -a; . FILE).
func TestEnvFileValue_sh(t *testing.T) {
	text := writeEnv(t, envValues)
	file := filepath.Join(t.TempDir(), "env")
	if err := os.WriteFile(file, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	for i, v := range envValues {
		out, err := exec.Command("/bin/sh", "-c", fmt.Sprintf(`set -a; . "$1"; printf %%s "$V%d"`, i), "sh", file).CombinedOutput()
		if err != nil || string(out) != v {
			t.Errorf("V%d=%s read by sh as %q (%v), want %q", i, strings.Split(text, "\n")[i], out, err, v)
		}
	}
}

// systemdGenerator is systemd's environment.d generator: it reads
// *.conf files with the parser EnvironmentFile= uses (env-file.c,
// parse_env_file_internal) and prints the result. Unlike EnvironmentFile=
// it then expands $VAR and ${VAR}, so values holding $ are checked
// against systemd's documented rules instead (TestEnvFileValue_systemdRules).
const systemdGenerator = "/usr/lib/systemd/user-environment-generators/30-systemd-environment-d-generator"

// TestEnvFileValue_systemd reads the file with systemd's own parser.
// CI installs systemd (.ci/run); elsewhere the test says it could not run.
func TestEnvFileValue_systemd(t *testing.T) {
	if _, err := os.Stat(systemdGenerator); err != nil {
		testenv.Lackf(t, testenv.Shared, "systemd's environment.d generator is not installed (apt-get install systemd): %v", err)
	}
	var values []string
	for _, v := range envValues {
		// environment.d drops empty assignments (EnvironmentFile= sets
		// them): "" is in the rules table instead.
		if !strings.Contains(v, "$") && v != "" {
			values = append(values, v)
		}
	}
	home := t.TempDir()
	dir := filepath.Join(home, "environment.d")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	text := writeEnv(t, values)
	if err := os.WriteFile(filepath.Join(dir, "50-corral.conf"), []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(systemdGenerator)
	cmd.Env = []string{"HOME=" + home, "XDG_CONFIG_HOME=" + home}
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s: %v", systemdGenerator, err)
	}
	got := map[string]string{}
	for _, line := range strings.Split(strings.TrimSuffix(string(out), "\n"), "\n") {
		k, v, _ := strings.Cut(line, "=")
		got[k] = unquoteSystemd(v)
	}
	for i, v := range values {
		if g, ok := got[fmt.Sprintf("V%d", i)]; !ok || g != v {
			t.Errorf("V%d=%s read by systemd as %q (present %v), want %q", i, strings.Split(text, "\n")[i], g, ok, v)
		}
	}
}

// unquoteSystemd undoes the generator's output quoting (shell_maybe_quote:
// double quotes, \, ", ` and $ escaped, control characters as C escapes).
func unquoteSystemd(s string) string {
	if len(s) < 2 || s[0] != '"' || s[len(s)-1] != '"' {
		return s
	}
	s = s[1 : len(s)-1]
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '\\' || i+1 == len(s) {
			b.WriteByte(s[i])
			continue
		}
		i++
		if r, ok := map[byte]byte{'t': '\t', 'v': '\v', 'f': '\f', 'n': '\n', 'r': '\r', 'a': '\a', 'b': '\b'}[s[i]]; ok {
			b.WriteByte(r)
			continue
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// TestEnvFileValue_systemdRules checks the values holding $ (and "") against
// systemd's rules for EnvironmentFile= (systemd.exec(5), env-file.c):
// no variable expansion; in double quotes a backslash escapes only
// " \ ` $ (and a line break) and is kept before anything else; single
// quotes are literal.
func TestEnvFileValue_systemdRules(t *testing.T) {
	for _, v := range envValues {
		if !strings.Contains(v, "$") && v != "" {
			continue
		}
		q, err := manifest.EnvFileValue(v)
		if err != nil {
			t.Fatal(err)
		}
		if got := systemdValue(q); got != v {
			t.Errorf("%s read by systemd's rules as %q, want %q", q, got, v)
		}
	}
}

// systemdValue reads one value as env-file.c's states do for a value
// without line breaks.
func systemdValue(q string) string {
	var b strings.Builder
	switch {
	case strings.HasPrefix(q, `"`):
		s := q[1:]
		for i := 0; i < len(s); i++ {
			switch {
			case s[i] == '"':
				return b.String()
			case s[i] == '\\' && i+1 < len(s) && strings.IndexByte("\"\\`$", s[i+1]) >= 0:
				i++
				b.WriteByte(s[i])
			default:
				b.WriteByte(s[i])
			}
		}
	case strings.HasPrefix(q, "'"):
		s, _, _ := strings.Cut(q[1:], "'")
		return s
	default:
		for i := 0; i < len(q); i++ {
			if q[i] == '\\' && i+1 < len(q) {
				i++
			}
			b.WriteByte(q[i])
		}
		return strings.TrimRight(b.String(), " \t")
	}
	return b.String()
}

// TestEnvFileValue_refused: what no quoting can make all three read the
// same is refused, saying why without quoting the (secret) value.
func TestEnvFileValue_refused(t *testing.T) {
	for v, want := range envRefused {
		q, err := manifest.EnvFileValue(v)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("EnvFileValue(%q) = %q, %v; want an error saying %q", v, q, err, want)
		} else if strings.Contains(err.Error(), v) {
			t.Errorf("the error quotes the value: %v", err)
		}
	}
}

// TestEnvFile_sh: the file EnvFile renders (what an envFile step writes)
// reads back through /bin/sh as the values, and a value EnvFileValue
// refuses, only reachable by bypassing the manifest check, as empty.
func TestEnvFile_sh(t *testing.T) {
	var env []manifest.EnvVar
	want := map[string]string{}
	for i, v := range envValues {
		n := fmt.Sprintf("V%d", i)
		env = append(env, manifest.EnvVar{Name: n, Value: manifest.NewSecret("", v)})
		want[n] = v
	}
	for v := range envRefused {
		n := fmt.Sprintf("R%d", len(want))
		env = append(env, manifest.EnvVar{Name: n, Value: manifest.NewSecret("", v)})
		want[n] = ""
	}
	file := filepath.Join(t.TempDir(), "env")
	if err := os.WriteFile(file, []byte(manifest.EnvFile(env)), 0o600); err != nil {
		t.Fatal(err)
	}
	for n, v := range want {
		out, err := exec.Command("/bin/sh", "-c", `set -a; . "$1"; eval printf %s "\"\$$2\""`, "sh", file, n).CombinedOutput()
		if err != nil || string(out) != v {
			t.Errorf("%s read by sh as %q (%v), want %q", n, out, err, v)
		}
	}
}
