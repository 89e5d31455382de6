package ui

import (
	"fmt"
	"io"
	"strconv"
)

// Question is a yes/no question a command asks before it changes
// anything: Text is asked; Review names what to look at before passing
// --auto-approve, where nobody can answer (no terminal).
type Question struct {
	Text, Review string
}

// ApplyQuestion is asked before apply changes the cluster.
func ApplyQuestion() Question {
	return Question{"Apply these changes?", "`corral plan`"}
}

// ApplyMoreQuestion is asked when, the interrupted work finished, the
// manifest has more changes than the plan approved.
func ApplyMoreQuestion() Question {
	return Question{"Apply these changes too?", "`corral plan`"}
}

// DestroyQuestion is asked before destroy removes containers.
func DestroyQuestion() Question {
	return Question{"Destroy these containers?", "the plan above (`corral destroy` prints it and asks)"}
}

// RestoreQuestion is asked before restore carries out its plan.
func RestoreQuestion() Question {
	return Question{"Restore?", "the restore plan above (`corral restore` prints it and asks)"}
}

// RollbackQuestion is asked before app's guest vmid (kind "ct" or "vm")
// is rolled back to snapshot snap, which loses every change since.
func RollbackQuestion(app, kind string, vmid int, snap string) Question {
	return Question{"Roll app " + app + " (" + kind + " " + strconv.Itoa(vmid) + ") back to " + snap + "? Everything changed since is lost.",
		"the snapshot to roll back to (`corral snapshots " + app + "` lists them)"}
}

// FreeQuestion is asked before command (volumes rm, volumes prune) frees
// volumes, whose data is then gone.
func FreeQuestion(command string) Question {
	return Question{"Free these volumes? Their data cannot be recovered.", "the volumes listed above (`corral " + command + "` prints them and asks)"}
}

// WriteConfirm asks q on w (stderr) and says which answer approves; the
// answer is read by the caller.
func WriteConfirm(w io.Writer, q Question) {
	fmt.Fprintf(w, "\n%s Only 'yes' is accepted: ", q.Text)
}
