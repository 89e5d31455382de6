package bench

import (
	"testing"
	"time"

	"github.com/corralhq/corral/internal/sim"
)

// A keeper created before the app's create is on the app's path; one
// created beside it (a first apply under the lock, issue 30) is not, and
// the path is never longer than the tasks' own span. A keeper on another
// node is not on the app's path.
func TestCriticalPath_keeperBeforeOrBeside(t *testing.T) {
	s := func(sec float64) int64 { return int64(sec * float64(time.Second)) }
	task := func(node, id, typ string, began, ended float64) sim.TaskTime {
		return sim.TaskTime{UPID: id + typ, Node: node, ID: id, Type: typ, Status: "stopped", Began: s(began), Ended: s(ended), Busy: time.Duration(s(ended - began))}
	}
	names := map[string]string{"900": "corral-keeper", "901": "corral-keeper", "100": "web"}
	tests := []struct {
		name  string
		tasks []sim.TaskTime
		boot  time.Duration
		want  float64
	}{
		{"keeper first, then the app", []sim.TaskTime{task("pve", "900", "vzcreate", 0, 11), task("pve", "100", "vzcreate", 11, 22), task("pve", "100", "vzstart", 22, 25)}, 0, 25},
		{"keeper beside the app", []sim.TaskTime{task("pve", "900", "vzcreate", 0, 11), task("pve", "100", "vzcreate", 0.1, 11.1), task("pve", "100", "vzstart", 11.2, 14.2)}, 0, 14},
		{"keeper longer than the app beside it", []sim.TaskTime{task("pve", "900", "vzcreate", 0, 20), task("pve", "100", "vzcreate", 0.1, 5.1)}, 0, 20},
		{"keeper beside, the boot after the start counted", []sim.TaskTime{task("pve", "900", "vzcreate", 0, 11), task("pve", "100", "vzcreate", 0.1, 11.1), task("pve", "100", "vzstart", 11.2, 14.2)}, 5 * time.Second, 19},
		{"keeper on another node", []sim.TaskTime{task("pve2", "901", "vzcreate", 0, 11), task("pve", "100", "vzcreate", 11, 22)}, 0, 11},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cp, _, err := criticalPath(tt.tasks, names, tt.boot)
			if err != nil {
				t.Fatal(err)
			}
			if got := cp.Seconds(); got < tt.want-0.001 || got > tt.want+0.001 {
				t.Errorf("critical path %.3f s, want %.3f s", got, tt.want)
			}
		})
	}
}
