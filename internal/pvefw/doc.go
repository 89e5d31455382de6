// Package pvefw is pve-firewall's rule syntax (PVE/Firewall.pm): port
// lists, address lists, protocols, ICMP types, macros and the names of
// security groups, IP sets and aliases, with PVE's own error messages.
//
// One implementation serves three sides: the emulator's schema formats
// (pve-fw-dport-spec…), its model's verify_rule, and the manifest's
// validation of `firewall:` rules, so a rule corral accepts is one PVE
// accepts and the emulator cannot drift from the client. It is a shared
// leaf: it imports nothing of corral's.
package pvefw
