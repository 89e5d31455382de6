// Package manifest owns corral.yaml: it turns the file into the validated
// desired state of every app (File, App, Volume), with defaults applied.
//
// Validation is strict and complete. Unknown keys, wrong types, bad values
// and cross-field conflicts are all collected into one *Diagnostics error
// whose entries read "FILE:LINE:COL: apps[0].volumes[1].size: what is
// wrong (allowed: …)", so a user fixes every problem in one pass.
//
// One table of fields (spec.go) drives both the decoder and the JSON
// Schema for editors (schema.go), so the two cannot drift apart.
//
// Besides the container, an app describes what runs inside it: provision
// steps (run, file, envFile, compose, user), health checks (http, tcp,
// command), its backup policy and snapshotBeforeChange. This package only
// parses and checks them; the executor runs them in the guest.
//
// Any string value may be or hold references, ${env:NAME} or
// ${file:PATH} ("postgres://app:${env:PW}@db/app"), resolved through
// LoadOptions; $${ is a literal ${. A string with a reference inside
// counts as read through it, and shows as written. A value read through a reference is
// treated as sensitive (except SSH public keys), and so is every envFile
// value, even one written literally: it is listed by
// (*File).Secrets, hidden by (*File).Redact, and never quoted in a
// diagnostic. The root password is always sensitive and is held in a
// Secret, which prints its reference, never its value.
package manifest
