package plan

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"time"

	"github.com/corralhq/corral/internal/manifest"
)

// GuestWork is what corral does inside an app's container once it runs:
// provisioning steps, then health checks. It is built once from the
// manifest (GuestWorkOf) and is the one value behind both sides of
// provisioning: apply runs it, and the digest recorded in the
// description (Digest) and each step's checksum (GuestStep.Sum) are
// hashed from it. A field added here is therefore run and hashed, or
// TestDigestCoversEveryField fails.
type GuestWork struct {
	Steps  []GuestStep
	Checks []Check
	// Rerun names steps run although unchanged (apply --rerun). A
	// request for this apply, not part of what the guest should hold:
	// not hashed.
	Rerun []string
}

// GuestStep is one provisioning step, ready to run. Secret values stay
// in Env (manifest.Secret) until Body renders them for the guest.
type GuestStep struct {
	Name    string
	Kind    string // run | file | envFile | compose | user
	Timeout time.Duration
	Script  string            // run: the shell script
	Path    string            // file, envFile, compose: where the content goes
	Content string            // file, compose: the file's content
	Env     []manifest.EnvVar // envFile: the variables, rendered by Body
	Mode    os.FileMode       // file, envFile, compose
	Owner   string            // file, envFile, compose: user or user:group
	Project string            // compose
	Account *Account          // user

	// OnChange names earlier steps: this one also runs when one of them
	// runs. Restart lists systemd units restarted once, after the last
	// step, when this one ran. PullAlways: a compose step pulls every
	// image before it brings the services up.
	OnChange   []string
	Restart    []string
	PullAlways bool
	// Facts are the facts of other apps the step's strings name
	// (manifest.Step.Facts): while set, Script, Content and the Env
	// values are templates, which WithFacts expands (and clears Facts).
	// Hashed by Digest only (a template's digest is never recorded).
	Facts []string
}

// Account is a user step's account.
type Account struct {
	Name   string
	UID    int // 0: the system picks
	Home   string
	Shell  string
	Groups []string
}

// Check is one health check, run inside the container.
type Check struct {
	Name     string
	Kind     string // http | tcp | command
	URL      string
	Expect   int
	Address  string
	Command  string
	Timeout  time.Duration // per attempt
	Retries  int           // attempts after the first failure
	Interval time.Duration
}

// GuestWorkOf is app's guest work, as its manifest section says.
func GuestWorkOf(m manifest.App) GuestWork {
	var w GuestWork
	for _, s := range m.Provision {
		st := GuestStep{
			Name: s.Name, Kind: string(s.Kind), Timeout: s.Timeout, Script: s.Run,
			Path: s.Path, Content: s.Content, Env: s.Env, Mode: s.Mode, Owner: s.Owner, Project: s.Project,
			OnChange: s.OnChange, Restart: s.Restart, PullAlways: s.Pull == manifest.PullAlways, Facts: s.Facts,
		}
		if s.Kind == manifest.StepUser {
			a := s.Account
			st.Account = &Account{Name: a.Name, UID: a.UID, Home: a.Home, Shell: a.Shell, Groups: a.Groups}
		}
		w.Steps = append(w.Steps, st)
	}
	for _, c := range m.Health {
		w.Checks = append(w.Checks, Check{
			Name: c.Name, Kind: c.Kind, URL: c.URL, Expect: c.Expect, Address: c.Address, Command: c.Command,
			Timeout: c.Timeout, Retries: c.Retries, Interval: c.Interval,
		})
	}
	return w
}

// GuestWorks is GuestWorkOf for every app of f that has guest work;
// rerun names, by app, the steps to run again although unchanged.
func GuestWorks(f *manifest.File, rerun map[string][]string) map[string]GuestWork {
	out := map[string]GuestWork{}
	for _, a := range f.Apps {
		if len(a.Provision) == 0 && len(a.Health) == 0 {
			continue
		}
		w := GuestWorkOf(a)
		w.Rerun = rerun[a.Name]
		out[a.Name] = w
	}
	return out
}

// Secret says that the step's content holds secrets: it is never shown.
func (s GuestStep) Secret() bool { return s.Kind == string(manifest.StepEnvFile) }

// Body is what the step writes to Path: Content, or for an envFile step
// the NAME=value lines (manifest.EnvFile).
func (s GuestStep) Body() []byte {
	if s.Kind == string(manifest.StepEnvFile) {
		return []byte(manifest.EnvFile(s.Env))
	}
	return []byte(s.Content)
}

// Summary is the step as the planner sees it: no content, no values.
func (s GuestStep) Summary() Step {
	return Step{Name: s.Name, Kind: s.Kind, Sum: s.Sum(), OnChange: s.OnChange, Restart: s.Restart}
}

// Sum identifies what a step does: its kind, name, script, target,
// mode, owner, content and (hashed, never stored) secret values. The
// triggers (onChange, restart), the timeout and the pull policy are not
// part of it: changing them changes no file and reruns nothing (they are
// in the app's Digest). The bytes hashed are those of earlier corrals,
// so an upgrade reruns nothing.
func (s GuestStep) Sum() string {
	h := sha256.New()
	fmt.Fprintf(h, "%s\x00%s\x00%s\x00%s\x00%o\x00%s\x00%s\x00%d\x00%s\x00", s.Kind, s.Name, s.Script, s.Path, s.Mode, s.Owner, s.Project, len(s.Content), s.Content)
	for _, e := range s.Env {
		v := e.Value.Reveal()
		fmt.Fprintf(h, "env\x00%s\x00%d\x00%s\x00", e.Name, len(v), v)
	}
	if s.Kind == string(manifest.StepUser) {
		writeAccount(h, s.Account)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// Digest summarises the guest work: any change to a step or a check,
// secret values and triggers included, changes it. Only the hash is
// stored (in the CT description), never a value; "" when there is no
// guest work.
func (w GuestWork) Digest() string {
	if len(w.Steps) == 0 && len(w.Checks) == 0 {
		return ""
	}
	h := sha256.New()
	for _, s := range w.Steps {
		fmt.Fprintf(h, "step\x00%s\x00%s\x00%s\x00%s\x00%s\x00%o\x00%s\x00%s\x00%s\x00",
			s.Kind, s.Name, s.Timeout, s.Script, s.Path, s.Mode, s.Owner, s.Project, s.Content)
		for _, e := range s.Env {
			fmt.Fprintf(h, "env\x00%s\x00%s\x00", e.Name, e.Value.Reveal())
		}
		writeAccount(h, s.Account)
		if len(s.OnChange) > 0 || len(s.Restart) > 0 || s.PullAlways {
			// Only when set, so that manifests without triggers keep
			// their digest.
			pull := ""
			if s.PullAlways {
				pull = string(manifest.PullAlways)
			}
			fmt.Fprintf(h, "triggers\x00%q\x00%q\x00%s\x00", s.OnChange, s.Restart, pull)
		}
		if len(s.Facts) > 0 {
			fmt.Fprintf(h, "facts\x00%q\x00", s.Facts)
		}
	}
	for _, c := range w.Checks {
		fmt.Fprintf(h, "check\x00%s\x00%s\x00%s\x00%d\x00%s\x00%s\x00%s\x00%d\x00%s\x00", c.Kind, c.Name, c.URL, c.Expect, c.Address, c.Command, c.Timeout, c.Retries, c.Interval)
	}
	return hex.EncodeToString(h.Sum(nil))[:16]
}

// writeAccount hashes a user step's account (a zero one for other kinds,
// as earlier corrals did).
func writeAccount(h interface{ Write([]byte) (int, error) }, a *Account) {
	if a == nil {
		a = &Account{}
	}
	fmt.Fprintf(h, "acct\x00%s\x00%d\x00%s\x00%s\x00%q\x00", a.Name, a.UID, a.Home, a.Shell, a.Groups)
}

// StepsOf is the planner's view of w's steps, with their checksums:
// apply records it once it has read the facts a work names.
func StepsOf(w GuestWork) []Step { return stepsOf(w, true) }

// stepsOf is the planner's view of the steps.
func stepsOf(w GuestWork, resolved bool) []Step {
	var out []Step
	for _, s := range w.Steps {
		st := s.Summary()
		if !resolved {
			st.Sum = ""
		}
		out = append(out, st)
	}
	return out
}
