package ui

import (
	"fmt"
	"io"
	"time"
)

// WriteApplyComplete says on w (stderr) that apply finished every change,
// in total.
func WriteApplyComplete(w io.Writer, total time.Duration) {
	fmt.Fprintf(w, "\nApply complete in %s.\n", total.Round(10*time.Millisecond))
}

// WriteChangedMeanwhile says on w (stderr) that the plan made under the
// lock is empty: another corral made the approved changes.
func WriteChangedMeanwhile(w io.Writer) {
	fmt.Fprintln(w, "Another corral made these changes meanwhile; nothing left to do.")
}

// WriteInterruptedWorkFinished introduces on w (stderr) the plan of the
// manifest's other changes, after apply finished an interrupted run's
// work.
func WriteInterruptedWorkFinished(w io.Writer) {
	fmt.Fprintln(w, "\nThe interrupted work is finished; the manifest's other changes:")
}

// WriteDestroyed says on w (stderr) what corral destroy removed: the
// containers and the volumes freed (the rest stay in the keeper).
func WriteDestroyed(w io.Writer, containers, freed int) {
	fmt.Fprintf(w, "\nDestroyed %d container(s); %d volume(s) freed; every other volume is kept in the keeper.\n", containers, freed)
}

// WriteFreed says on w (stderr) how many volumes corral volumes free
// freed.
func WriteFreed(w io.Writer, n int) {
	fmt.Fprintf(w, "\nFreed %d volume(s).\n", n)
}

// WritePlanSaved says on w (stderr) where corral plan --out saved the
// plan and what applying it does.
func WritePlanSaved(w io.Writer, path string) {
	fmt.Fprintf(w, "\nSaved this plan to %s: `corral apply %s` carries out exactly this plan, or refuses if anything changed meanwhile.\n", path, path)
}

// WriteLockWait writes on w (stderr) whom the lock waits for (msg, as
// apply.LockOptions.OnWait words it).
func WriteLockWait(w io.Writer, msg string) {
	fmt.Fprintln(w, msg)
}

// WriteLockLost says on w (stderr) that corral's lock was lost (err) and
// the command stops.
func WriteLockLost(w io.Writer, err error) {
	fmt.Fprintf(w, "corral's lock was lost (%v): stopping\n", err)
}

// WriteError writes the error a command ended with on w (stderr);
// interrupted says a stop request or a cancelled context ended it.
func WriteError(w io.Writer, err error, interrupted bool) {
	if interrupted {
		fmt.Fprintf(w, "Error: interrupted: %v\n", err)
		return
	}
	fmt.Fprintf(w, "Error: %v\n", err)
}

// WriteFormatted says on w (stderr) that corral fmt rewrote path.
func WriteFormatted(w io.Writer, path string) {
	fmt.Fprintf(w, "formatted %s\n", path)
}

// WriteValid says on w (stdout) that the manifest name is valid and
// declares apps apps.
func WriteValid(w io.Writer, name string, apps int) {
	fmt.Fprintf(w, "%s is valid: %d app(s)\n", name, apps)
}

// WriteNothingLocked says on w (stdout) that corral unlock found no
// node locked.
func WriteNothingLocked(w io.Writer) {
	fmt.Fprintln(w, "no node is locked")
}

// WriteInitWrote says on w (stderr) that corral init wrote the manifest
// at path (file: its base name), with app on template, and what to run
// next.
func WriteInitWrote(w io.Writer, path, file, app, template string) {
	fmt.Fprintf(w, "wrote %s: app %q on %s; edit it, then run corral plan -f %s\n", path, app, template, file)
}

// WriteBenchProgress says on w (stderr) which step corral bench is at.
func WriteBenchProgress(w io.Writer, step string) {
	fmt.Fprintf(w, "bench: %s...\n", step)
}

// WriteCopySkipped says on w (stderr) that corral cp left out path, which
// is no file, directory or symlink.
func WriteCopySkipped(w io.Writer, path string) {
	fmt.Fprintf(w, "corral: cp: skipped %s (not a file, directory or symlink)\n", path)
}

// WriteCopied says on w (stderr) what corral cp copied from src to dst
// (each "APP:PATH" or a local path).
func WriteCopied(w io.Writer, src, dst string) {
	fmt.Fprintf(w, "corral: copied %s to %s\n", src, dst)
}

// WriteInterruptStopping says on w (stderr) that a first Ctrl-C or
// SIGTERM lets the step under way finish, then stops.
func WriteInterruptStopping(w io.Writer) {
	fmt.Fprintln(w, "\ninterrupt: finishing the step under way, then stopping (Ctrl-C again to abort it)")
}

// WriteInterruptAborting says on w (stderr) that a second one aborts the
// step, and what corral still does.
func WriteInterruptAborting(w io.Writer) {
	fmt.Fprintln(w, "\ninterrupt: aborting the step under way; corral still restores keeper protection and releases its lock (Ctrl-C again to exit at once)")
}
