// Package doctor owns corral's preflight: for a manifest and an API
// token it works out which privileges on which ACL paths the manifest's
// operations need (Requirements, pure), compares them with what PVE says
// the token holds (Evaluate, pure), gathers the facts that decide whether
// apply can succeed (Check: version, nodes, storages, templates, free
// VMIDs, free space), and names what only root@pam can do with the exact
// host command. Setup turns the requirements into a pveum script for a
// least-privilege role, user and privilege-separated token.
//
// The privilege rules come from seed 004 §3 and behaviour.md §0, (b), (c):
// a privsep token holds the intersection of its own ACL and its user's,
// and no API token, not even root's, passes a root@pam-only check.
package doctor
