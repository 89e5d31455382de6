package ui

import (
	"encoding/json"
	"io"
	"time"

	"github.com/corralhq/corral/internal/apply"
)

// DestroyJSON is corral destroy -o json: its plan, the containers it
// removed and the volumes it freed (empty lists, never null, when it
// changed nothing).
type DestroyJSON struct {
	Destroyed []int    `json:"destroyed"`
	Freed     []string `json:"freed"`
	Plan      PlanJSON `json:"plan"`
}

// DestroyReport writes what corral destroy shows: its plan as text on
// Out before it asks, and its outcome at the end, as one JSON document
// on Out (JSON) or as a line on Err.
type DestroyReport struct {
	Out, Err io.Writer
	JSON     bool
	Plan     PlanJSON
}

// WritePlan shows the plan (text only: the JSON document carries it at
// the end).
func (r DestroyReport) WritePlan() {
	if !r.JSON {
		WritePlanText(r.Out, r.Plan)
	}
}

// WriteUnchanged ends a destroy that changed nothing (refused, or no
// container to remove): the JSON document with empty lists; text has said
// all with the plan.
func (r DestroyReport) WriteUnchanged() error {
	if !r.JSON {
		return nil
	}
	return r.writeJSON(nil, nil)
}

// WriteDone ends a destroy that removed the containers destroyed and
// freed the volumes freed.
func (r DestroyReport) WriteDone(destroyed []int, freed []string) error {
	if r.JSON {
		return r.writeJSON(destroyed, freed)
	}
	WriteDestroyed(r.Err, len(destroyed), len(freed))
	return nil
}

// WriteTimings writes the phase timing table after the destroy's steps
// (text only; total: since the command started).
func (r DestroyReport) WriteTimings(ts []apply.Timing, total time.Duration) {
	if !r.JSON {
		WriteTimings(r.Err, ts, total)
	}
}

func (r DestroyReport) writeJSON(destroyed []int, freed []string) error {
	if destroyed == nil {
		destroyed = []int{}
	}
	if freed == nil {
		freed = []string{}
	}
	enc := json.NewEncoder(r.Out)
	enc.SetIndent("", "  ")
	return enc.Encode(DestroyJSON{Destroyed: destroyed, Freed: freed, Plan: r.Plan})
}
