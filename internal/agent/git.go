package agent

import (
	"bytes"
	"context"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// Git keeps a checkout of one ref of a repository for corral agent --git:
// the agent fetches it when a plan is due and, on a new commit, checks it
// out, so that the manifest (Path in the checkout) and every file it
// refers to by a relative path come from that commit.
//
// It runs the git binary rather than a Go implementation: git already
// speaks every transport and reads the user's configuration (SSH keys,
// credential helpers, proxies, insteadOf), and corral gains no large
// dependency; corral agent install provisions git into the agent's
// container when its template lacks it.
type Git struct {
	URL  string
	Ref  string // branch, tag or commit; "" is the remote's HEAD
	Path string // the manifest's path in the repository
	Dir  string // the checkout (made on the first Pull)
}

// ManifestPath is the manifest in the checkout.
func (g *Git) ManifestPath() string { return filepath.Join(g.Dir, filepath.FromSlash(g.Path)) }

// Pull fetches Ref and checks out its commit when it moved; it returns
// the commit checked out.
func (g *Git) Pull(ctx context.Context) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	if _, err := os.Stat(filepath.Join(g.Dir, ".git")); err != nil {
		if err := os.MkdirAll(filepath.Dir(g.Dir), 0o700); err != nil {
			return "", err
		}
		// Never clear a directory that is not ours: the checkout is made
		// only in a missing or empty one. It is an empty repository
		// (git init) that each fetch fills: a clone would keep the URL,
		// and a password in it, in .git/config.
		if entries, err := os.ReadDir(g.Dir); err == nil && len(entries) > 0 {
			return "", fmt.Errorf("git: %s is not empty and not a Git checkout: name another --git-dir", g.Dir)
		}
		if _, err := g.git(ctx, "", "init", "--quiet", "--", g.Dir); err != nil {
			return "", err
		}
	}
	ref := g.Ref
	if ref == "" {
		ref = "HEAD"
	}
	if _, err := g.git(ctx, g.Dir, "fetch", "--quiet", "--force", "--", gitRemote, ref); err != nil {
		return "", err
	}
	commit, err := g.git(ctx, g.Dir, "rev-parse", "--verify", "--quiet", "FETCH_HEAD^{commit}")
	if err != nil {
		return "", fmt.Errorf("git: %s of %s is not a commit: %w", ref, g.SafeURL(), err)
	}
	// Always checked out (a no-op when nothing moved): a clone made with
	// --no-checkout has HEAD at the commit and no files yet.
	if _, err := g.git(ctx, g.Dir, "checkout", "--quiet", "--force", "--detach", commit); err != nil {
		return "", err
	}
	return commit, nil
}

// SafeURL is URL without a password (url.URL.Redacted), for everything
// shown or written where others may read it.
func (g *Git) SafeURL() string {
	if u, err := url.Parse(g.URL); err == nil && u.User != nil {
		return u.Redacted()
	}
	return g.URL
}

// gitRemote is the name git fetches URL under: the URL is given to git
// in its environment (GIT_CONFIG_COUNT, git 2.31 or later), which only
// its own user reads, not on its command line, which every user of the
// machine sees in ps, nor in the checkout's .git/config.
const gitRemote = "corral-agent-source"

func (g *Git) git(ctx context.Context, dir string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, "git", args...)
	cmd.Dir = dir
	// After the settings the user's environment gives git already.
	n, _ := strconv.Atoi(os.Getenv("GIT_CONFIG_COUNT"))
	n = max(n, 0)
	cmd.Env = append(os.Environ(), "GIT_TERMINAL_PROMPT=0", "LC_ALL=C", "GIT_CONFIG_COUNT="+strconv.Itoa(n+1),
		fmt.Sprintf("GIT_CONFIG_KEY_%d=remote.%s.url", n, gitRemote), fmt.Sprintf("GIT_CONFIG_VALUE_%d=%s", n, g.URL))
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		msg := strings.TrimSpace(errb.String())
		if g.URL != g.SafeURL() {
			msg = strings.ReplaceAll(msg, g.URL, g.SafeURL())
		}
		if msg == "" {
			msg = err.Error()
		}
		return "", fmt.Errorf("git %s (%s): %s", args[0], g.SafeURL(), msg)
	}
	return strings.TrimSpace(out.String()), nil
}

// GitView is the Git part of GET /api/v1/apps.
type GitView struct {
	URL  string `json:"url"`
	Ref  string `json:"ref,omitempty"`
	Path string `json:"path"`
	// Commit is the commit whose manifest the agent works from.
	Commit string `json:"commit,omitempty"`
	// Head is the newest commit fetched; it differs from Commit while
	// the manifest at Head is invalid.
	Head     string    `json:"head,omitempty"`
	LastPull time.Time `json:"last_pull,omitzero"`
	Error    string    `json:"error,omitempty"`
}

func short(commit string) string {
	if len(commit) > 12 {
		return commit[:12]
	}
	return commit
}

// pull fetches the manifest's repository. A failure is reported once
// (and a log line at debug every round); the checkout in force stays.
func (a *Agent) pull(ctx context.Context) {
	commit, err := a.cfg.Git.Pull(ctx)
	a.mu.Lock()
	a.gitPull = a.now()
	prevErr, prevHead := a.gitErr, a.gitHead
	if err != nil {
		a.gitErr = err.Error()
	} else {
		a.gitErr, a.gitHead = "", commit
	}
	a.mu.Unlock()
	a.metrics.gitPull(err)
	switch {
	case err != nil && prevErr == err.Error():
		a.cfg.Log.Debug("git pull failed again", "error", err)
	case err != nil:
		a.event(KindGit, "error", "", "git pull failed, keeping commit %s: %v", short(prevHead), err)
	case prevHead != commit:
		a.event(KindGit, "info", "", "git: %s of %s is at commit %s", a.cfg.Git.refName(), a.cfg.Git.SafeURL(), short(commit))
	case prevErr != "":
		a.event(KindGit, "info", "", "git pull works again (commit %s)", short(commit))
	}
}

// gitApplied records the fetched commit as the one in force once its
// manifest loaded (or was the same as the last one).
func (a *Agent) gitApplied() {
	if a.cfg.Git == nil {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if !a.invalid && a.f != nil && a.gitHead != "" {
		a.gitCommit = a.gitHead
	}
}

func (g *Git) refName() string {
	if g.Ref == "" {
		return "HEAD"
	}
	return g.Ref
}

// gitView is Status's Git part (nil without --git); a.mu held.
func (a *Agent) gitView() *GitView {
	g := a.cfg.Git
	if g == nil {
		return nil
	}
	return &GitView{URL: g.SafeURL(), Ref: g.Ref, Path: g.Path, Commit: a.gitCommit, Head: a.gitHead, LastPull: a.gitPull, Error: a.gitErr}
}
