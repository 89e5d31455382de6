package cli

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"strings"

	"github.com/spf13/pflag"

	"github.com/corralhq/corral/internal/agent"
	"github.com/corralhq/corral/internal/manifest"
)

// gitFlags are corral agent's --git flags (and install's, which passes
// them on).
type gitFlags struct {
	url, ref, path, dir string
}

func (g *gitFlags) add(fl *pflag.FlagSet) {
	fl.StringVar(&g.url, "git", "", "take the manifest from this Git repository (URL or path; env "+gitURLEnv+"), pulled when a plan is due; -f is then unused")
	fl.StringVar(&g.ref, "git-ref", "", "--git: branch, tag or commit to follow (default: the remote's HEAD)")
	fl.StringVar(&g.path, "git-path", "corral.yaml", "--git: the manifest's path in the repository")
	fl.StringVar(&g.dir, "git-dir", "", "--git: where the checkout lives (default under $XDG_STATE_HOME/corral/agent-git)")
}

func (g *gitFlags) check() error {
	if g.url == "" {
		return nil
	}
	if p := path.Clean(g.path); g.path == "" || path.IsAbs(g.path) || p == ".." || strings.HasPrefix(p, "../") {
		return fmt.Errorf("--git-path %q: want a relative path inside the repository, e.g. corral.yaml", g.path)
	}
	if strings.HasPrefix(g.ref, "-") || strings.HasPrefix(g.url, "-") {
		return errors.New("--git and --git-ref may not start with '-'")
	}
	if _, err := exec.LookPath("git"); err != nil {
		return fmt.Errorf("--git needs the git program: %w (apt-get install git)", err)
	}
	return nil
}

// gitURLEnv passes --git's URL to the agent install starts (see
// agent.GitURLEnv).
const gitURLEnv = agent.GitURLEnv

// args are the flags for the agent that install starts, all but the URL
// (gitURLEnv carries it).
func (g *gitFlags) args() []string {
	if g.url == "" {
		return nil
	}
	out := []string{"--git-path", g.path}
	if g.ref != "" {
		out = append(out, "--git-ref", g.ref)
	}
	return out
}

// source is the agent's Git source; the checkout defaults to a directory
// named after the URL, ref and path, so that two agents never share one.
func (g *gitFlags) source() *agent.Git {
	if g.url == "" {
		return nil
	}
	dir := g.dir
	if dir == "" {
		sum := sha256.Sum256([]byte(g.url + "\x00" + g.ref + "\x00" + g.path))
		// The checkout is named as the repository, as a clone of it would
		// be: a manifest without project: gets the same default project
		// as in the user's clone.
		name := strings.TrimSuffix(path.Base(strings.TrimRight(filepath.ToSlash(g.url), "/")), ".git")
		if name == "" || name == "." || name == "/" {
			name = "repo"
		}
		dir = filepath.Join(filepath.Dir(defaultSimDir()), "agent-git", hex.EncodeToString(sum[:8]), name)
	}
	return &agent.Git{URL: g.url, Ref: g.ref, Path: g.path, Dir: dir}
}

// gitConfine is the allow-list of a manifest from g (nil without --git):
// the files of its checkout and the variables passEnv names.
func gitConfine(g *agent.Git, passEnv []string) *manifest.Confine {
	if g == nil {
		return nil
	}
	return &manifest.Confine{Root: g.Dir, Env: slices.Clone(passEnv)}
}

// checkPassEnv checks corral agent's --pass-env names.
func checkPassEnv(names []string, git bool) error {
	if len(names) > 0 && !git {
		return errors.New("--pass-env names what a manifest from --git may read; a manifest given with -f is your own and reads any variable but corral's own credentials")
	}
	for _, name := range names {
		if !envNameRe.MatchString(name) {
			return fmt.Errorf("--pass-env %q: want a variable name (letters, digits and _)", name)
		}
		if manifest.CorralCredential(name) {
			return fmt.Errorf("--pass-env %s: that is corral's own credential, which no manifest reads", name)
		}
	}
	return nil
}

// firstPull checks the repository out before the agent starts, so that
// it starts from a manifest (or says at once why it cannot).
func firstPull(ctx context.Context, g *agent.Git) error {
	if _, err := g.Pull(ctx); err != nil {
		return fmt.Errorf("--git: %w", err)
	}
	return nil
}
