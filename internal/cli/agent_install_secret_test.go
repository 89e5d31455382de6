package cli

import (
	"strings"
	"testing"
	"time"

	"github.com/corralhq/corral/internal/agent"
)

// corral agent install --git with a password in the URL: the password
// is in the agent's 0600 environment file only, not in its command
// line, run script, systemd unit or any other file; the agent finds the
// URL there (CORRAL_AGENT_GIT), and its --allowed-host names pass on.
// TestAgent_installGit checks the same of a real install, its -o json
// and the running agent's command line.
func TestAgentInstall_gitURLPasswordNeverWritten(t *testing.T) {
	const secret = "hunter2secret"
	a := &agentInstallArgs{mode: "reconcile", interval: time.Minute, allowedHosts: []string{"agent.lan"},
		git: gitFlags{url: "https://deploy:" + secret + "@git.example/infra.git", ref: "main", path: "corral.yaml"}}
	files, err := a.command().Files(agent.FilesIn{Project: "demo", Endpoint: "https://10.0.0.1:8006", APIToken: "u@pve!agent=tok",
		Listen: "10.0.0.5:9120", URL: "http://10.0.0.5:9120", Key: []byte("KEY"), Manifest: []byte("apps: []\n")})
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, f := range files {
		if !strings.Contains(string(f.Data), secret) {
			continue
		}
		if f.Path != agent.InstalledEnvFile || f.Mode != 0o600 {
			t.Errorf("%s (mode %o) holds the password:\n%s", f.Path, f.Mode, f.Data)
			continue
		}
		found = strings.Contains(string(f.Data), gitURLEnv+"=")
	}
	if !found {
		t.Errorf("the URL is not in %s as %s", agent.InstalledEnvFile, gitURLEnv)
	}
	argv := strings.Join(a.command().Argv(agent.ManifestPathOf("demo"), "10.0.0.5:9120", "demo"), " ")
	if strings.Contains(argv, secret) || strings.Contains(argv, "git.example") || !strings.Contains(argv, "--git-ref main") || !strings.Contains(argv, "--allowed-host agent.lan") {
		t.Errorf("the agent's command line: %s", argv)
	}
	// The agent started with the env file reads the URL from it.
	t.Setenv(gitURLEnv, a.git.url)
	ag := &agentArgs{mode: "observe", interval: time.Minute, listen: "127.0.0.1:9120", git: gitFlags{path: "corral.yaml"}}
	if err := ag.check(); err != nil || ag.git.url != a.git.url {
		t.Errorf("corral agent with %s set: %v, --git %q", gitURLEnv, err, ag.git.url)
	}
}
