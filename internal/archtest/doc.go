// Package archtest holds guard tests for the project's structure: the
// import rules of the style guide (sim and pve never import each other,
// the planner does no I/O), a doc comment on every package, and that
// internal/cli words no message itself (internal/ui does).
package archtest
