// Package archtest holds guard tests for the project's structure: the
// import rules of the style guide (sim and pve never import each other,
// the planner does no I/O) and a doc comment on every package.
package archtest
