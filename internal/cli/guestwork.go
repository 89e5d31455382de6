package cli

import (
	"strings"

	"github.com/corralhq/corral/internal/apply"
	"github.com/corralhq/corral/internal/manifest"
	"github.com/corralhq/corral/internal/plan"
)

// guestWork turns the manifest's provision and health sections into what
// the executor runs, rendering envFile values into the file content (which
// is marked secret and never shown).
// rerun names, by app, the steps to run again although unchanged.
func guestWork(f *manifest.File, rerun map[string][]string) map[string]apply.GuestWork {
	out := map[string]apply.GuestWork{}
	for _, a := range f.Apps {
		if len(a.Provision) == 0 && len(a.Health) == 0 {
			continue
		}
		w := apply.GuestWork{Rerun: rerun[a.Name]}
		for _, s := range a.Provision {
			st := apply.Step{
				Name: s.Name, Kind: string(s.Kind), Timeout: s.Timeout, Script: s.Run,
				Path: s.Path, Content: []byte(s.Content), Mode: s.Mode, Owner: s.Owner, Project: s.Project,
				Sum: plan.StepSum(s), OnChange: s.OnChange, Restart: s.Restart, PullAlways: s.Pull == manifest.PullAlways,
			}
			switch s.Kind {
			case manifest.StepEnvFile:
				var b strings.Builder
				for _, e := range s.Env {
					b.WriteString(e.Name + "=" + envQuote(e.Value.Reveal()) + "\n")
				}
				st.Content, st.Secret = []byte(b.String()), true
			case manifest.StepUser:
				acc := s.Account
				st.Account = &apply.Account{Name: acc.Name, UID: acc.UID, Home: acc.Home, Shell: acc.Shell, Groups: acc.Groups}
			}
			w.Steps = append(w.Steps, st)
		}
		for _, c := range a.Health {
			w.Checks = append(w.Checks, apply.Check{
				Name: c.Name, Kind: c.Kind, URL: c.URL, Expect: c.Expect, Address: c.Address, Command: c.Command,
				Timeout: c.Timeout, Retries: c.Retries + 1, Interval: c.Interval,
			})
		}
		out[a.Name] = w
	}
	return out
}

// envQuote is manifest.EnvFileValue for a value the manifest check
// accepted; a value it would refuse (only reachable by bypassing the
// check) is written empty rather than misread.
func envQuote(v string) string {
	q, err := manifest.EnvFileValue(v)
	if err != nil {
		return `""`
	}
	return q
}
