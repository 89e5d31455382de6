package main

import (
	"context"

	proxmox "github.com/luthermonson/go-proxmox"
)

// access reads users and roles, one by id as well.
func access(ctx context.Context, c *proxmox.Client) {
	step = "users"
	users, err := c.Users(ctx)
	must(err)
	check(len(users) >= 1, "users %+v", users)
	u, err := c.User(ctx, "root@pam")
	must(err)
	check(bool(u.Enable), "root@pam %+v", u)

	step = "roles"
	roles, err := c.Roles(ctx)
	must(err)
	check(len(roles) > 5, "roles %+v", roles)
	role, err := c.Role(ctx, "PVEAuditor")
	must(err)
	check(bool(role["VM.Audit"]), "PVEAuditor %+v", role)
	_ = proxmox.Permission{}
}
