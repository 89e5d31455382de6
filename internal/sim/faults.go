package sim

import (
	"fmt"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/corralhq/corral/internal/sim/model"
)

// FaultSpec is the fault-injection configuration: data, not code (in the
// manner of govmomi's simulator fault rules). It is set with --faults
// ("seed=1,latency=20ms,read5xx=0.05,write5xx=0.02,drop=0.01,taskfail=0.05,
// match=/lxc/") or at run time through POST /_corral/faults as JSON.
type FaultSpec struct {
	Seed     uint64        `json:"seed"`
	Latency  time.Duration `json:"latency"`  // added to every API request
	Read5xx  float64       `json:"read5xx"`  // rate of 500s on GET
	Write5xx float64       `json:"write5xx"` // rate of 500s on POST/PUT/DELETE (before any change)
	Drop     float64       `json:"drop"`     // rate of connections closed without an answer
	TaskFail float64       `json:"taskfail"` // rate of tasks that end with an error
	Match    string        `json:"match"`    // only paths containing this substring ("" = all)
}

// faults applies a FaultSpec deterministically: one seeded source, drawn
// under a mutex in request order.
type faults struct {
	mu   sync.Mutex
	spec FaultSpec
	rng  *rand.Rand
}

func parseFaults(s string) (*faults, error) {
	f := &faults{}
	spec := FaultSpec{Seed: 1}
	if strings.TrimSpace(s) != "" {
		for _, item := range strings.Split(s, ",") {
			k, v, ok := strings.Cut(strings.TrimSpace(item), "=")
			if !ok {
				return nil, fmt.Errorf("%q: want key=value (keys: seed, latency, read5xx, write5xx, drop, taskfail, match)", item)
			}
			var err error
			switch k {
			case "seed":
				spec.Seed, err = strconv.ParseUint(v, 10, 64)
			case "latency":
				spec.Latency, err = time.ParseDuration(v)
			case "read5xx":
				spec.Read5xx, err = parseRate(v)
			case "write5xx":
				spec.Write5xx, err = parseRate(v)
			case "drop":
				spec.Drop, err = parseRate(v)
			case "taskfail":
				spec.TaskFail, err = parseRate(v)
			case "match":
				spec.Match = v
			default:
				return nil, fmt.Errorf("unknown key %q (keys: seed, latency, read5xx, write5xx, drop, taskfail, match)", k)
			}
			if err != nil {
				return nil, fmt.Errorf("%s=%s: %w", k, v, err)
			}
		}
	}
	f.set(spec)
	return f, nil
}

func parseRate(v string) (float64, error) {
	r, err := strconv.ParseFloat(v, 64)
	if err != nil || r < 0 || r > 1 {
		return 0, fmt.Errorf("want a rate between 0 and 1")
	}
	return r, nil
}

func (f *faults) set(spec FaultSpec) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.spec = spec
	f.rng = rand.New(rand.NewPCG(spec.Seed, spec.Seed^0x9e3779b97f4a7c15))
}

func (f *faults) get() FaultSpec {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.spec
}

// faultAction is what before() decided for a request.
type faultAction struct {
	drop    bool
	status  int
	message string
}

// before runs ahead of every API request: it sleeps the latency and may
// decide to drop the connection or answer 5xx without touching state.
func (f *faults) before(method, path string) *faultAction {
	f.mu.Lock()
	spec := f.spec
	if spec.Match != "" && !strings.Contains(path, spec.Match) {
		f.mu.Unlock()
		return nil
	}
	dropDraw, errDraw := f.rng.Float64(), f.rng.Float64()
	f.mu.Unlock()
	if spec.Latency > 0 {
		time.Sleep(spec.Latency)
	}
	if dropDraw < spec.Drop {
		return &faultAction{drop: true, status: 0}
	}
	rate := spec.Write5xx
	if method == http.MethodGet {
		rate = spec.Read5xx
	}
	if errDraw < rate {
		return &faultAction{status: http.StatusInternalServerError, message: "injected fault: service temporarily unavailable\n"}
	}
	return nil
}

// taskHook fails a share of tasks at their start (the task still gets a
// UPID and ends with an error, as a worker that dies does).
func (f *faults) taskHook(typ, id string) error {
	f.mu.Lock()
	spec := f.spec
	draw := f.rng.Float64()
	f.mu.Unlock()
	if spec.TaskFail > 0 && draw < spec.TaskFail {
		return model.Failf("injected fault: task %s %s failed\n", typ, id)
	}
	return nil
}
