// Package ui renders corral's results and progress: plans as text or
// JSON, apply events as live progress lines (text) or JSON lines, and the
// phase timing table. The text views are drawn from the same data as the
// JSON views so the two cannot drift.
package ui
