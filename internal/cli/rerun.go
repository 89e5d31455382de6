package cli

import (
	"fmt"
	"strings"

	"github.com/spf13/pflag"

	"github.com/corralhq/corral/internal/manifest"
	"github.com/corralhq/corral/internal/plan"
)

// rerunFlag is --rerun STEP of plan and apply: provisioning steps to run
// although they did not change, because what they fetch did (a compose
// step with pull: always and a moving tag, an install script that takes
// the latest release). Changes are what a plan otherwise reruns on; this
// is the one way to ask for a run that the manifest cannot show.
type rerunFlag []string

func (r *rerunFlag) add(fs *pflag.FlagSet) {
	fs.StringArrayVar((*[]string)(r), "rerun", nil, "run this provisioning step again although it did not change (its name, or APP/NAME when several apps have it); repeatable")
}

// resolve maps each --rerun value to its app and step: a step name that
// one app has, or APP/NAME. An unknown or ambiguous name is an error that
// lists the choices.
func (r rerunFlag) resolve(f *manifest.File) (map[string][]string, error) {
	out := map[string][]string{}
	for _, v := range r {
		var hits []string
		for _, a := range f.Apps {
			for _, s := range a.Provision {
				if s.Name == v || a.Name+"/"+s.Name == v {
					hits = append(hits, a.Name+"/"+s.Name)
					out[a.Name] = append(out[a.Name], s.Name)
				}
			}
		}
		switch {
		case len(hits) == 0:
			var names []string
			for _, a := range f.Apps {
				for _, s := range a.Provision {
					names = append(names, fmt.Sprintf("%q", a.Name+"/"+s.Name))
				}
			}
			return nil, fmt.Errorf("--rerun %q: no provisioning step has that name (steps: %s)", v, orNoneList(names))
		case len(hits) > 1 && !strings.Contains(v, "/"):
			return nil, fmt.Errorf("--rerun %q: several apps have a step of that name; write APP/NAME: %s", v, strings.Join(hits, ", "))
		}
	}
	return out, nil
}

func orNoneList(names []string) string {
	if len(names) == 0 {
		return "none"
	}
	return strings.Join(names, ", ")
}

// withRerun marks the steps to rerun in the planner's apps.
func withRerun(apps []plan.App, rerun map[string][]string) []plan.App {
	for i := range apps {
		apps[i].Rerun = rerun[apps[i].Name]
	}
	return apps
}
