// Package ui writes everything corral shows people: plans as text (and
// their JSON form), apply events as live progress lines or JSON lines,
// the phase timing table, status, volumes, backups, snapshots, restores,
// corral doctor's report, corral agent status, corral bench's tables,
// and every sentence a command says besides (its notes, warnings,
// questions and outcomes, the error it ends with).
// The commands in internal/cli call a package for the data and a Write…
// function here for the text; the text views are drawn from the same
// values as the JSON views, so the two cannot drift. Tables go through
// Table, sizes through human.Size.
package ui
