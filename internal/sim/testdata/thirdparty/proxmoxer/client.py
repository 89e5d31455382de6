"""proxmoxer (1.2.0, Debian 12's python3-proxmoxer) against the emulator.

The test (internal/sim/thirdparty_proxmoxer_test.go) sets PVE_HOST,
PVE_PORT, PVE_USER, PVE_TOKEN_ID, PVE_TOKEN_SECRET and PVE_CA (the
emulator's certificate, which is checked). Each step asserts what PVE
answers; the first deviation exits non-zero naming the step.
"""
import os
import sys
import time

from proxmoxer import ProxmoxAPI
from proxmoxer.core import ResourceException

env = os.environ
api = ProxmoxAPI(env["PVE_HOST"], port=int(env["PVE_PORT"]), user=env["PVE_USER"],
                 token_name=env["PVE_TOKEN_ID"], token_value=env["PVE_TOKEN_SECRET"],
                 verify_ssl=env["PVE_CA"])
node = api.nodes(env["PVE_NODE"])
step = "start"


def check(cond, what):
    if not cond:
        sys.exit("step %s: %s" % (step, what))


def refused(call, status, reason):
    """Checks that call fails as PVE answers, as far as proxmoxer 1.2.0
    tells: the status and the message in the reason phrase. (It reads the
    parameter errors from "data", where PVE never puts them, so they are
    always None; internal/sim's own tests check them.)"""
    try:
        call()
    except ResourceException as e:
        got = (e.status_code, e.content)
        check(got == (status, reason), "refused with %r, PVE answers %r" % (got, (status, reason)))
        return
    check(False, "accepted; PVE answers %d %s" % (status, reason))


def wait(upid):
    """Polls the task's status until it stops, as clients do; OK or exit."""
    check(isinstance(upid, str) and upid.startswith("UPID:"), "not a UPID: %r" % (upid,))
    for _ in range(600):
        st = node.tasks(upid).status.get()
        if st["status"] == "stopped":
            check(st.get("exitstatus") == "OK", "task %s ended %r" % (upid, st.get("exitstatus")))
            return st
        time.sleep(0.05)
    check(False, "task %s still running" % upid)


step = "version"
v = api.version.get()
check(v["version"].split(".")[0] in ("8", "9") and "release" in v, v)

step = "nodes"
check([n["node"] for n in api.nodes.get()] == [env["PVE_NODE"]], api.nodes.get())

step = "pools"
check([p["poolid"] for p in api.pools.get()] == ["apps"], api.pools.get())
members = api.pools("apps").get()["members"]
check([m["vmid"] for m in members] == [101] and members[0]["type"] == "lxc", members)

step = "users"
users = {u["userid"]: u for u in api.access.users.get()}
check("root@pam" in users and "groups" not in users["root@pam"], users.get("root@pam"))
full = {u["userid"]: u for u in api.access.users.get(full=1)}
check(any(t["tokenid"] == env["PVE_TOKEN_ID"] for t in full["root@pam"].get("tokens", [])), full["root@pam"])
check(api.access.users("root@pam").get()["enable"] == 1, "root@pam is not enabled")

step = "roles"
check("PVEAuditor" in [r["roleid"] for r in api.access.roles.get()], "no PVEAuditor")
check(api.access.roles("PVEAuditor").get().get("VM.Audit") == 1, api.access.roles("PVEAuditor").get())

step = "firewall options"
fw = node.lxc(101).firewall
fw.options.put(enable=1, policy_in="DROP")
opts = fw.options.get()
check(opts.get("enable") == 1 and opts.get("policy_in") == "DROP", opts)

step = "aliases"
api.cluster.firewall.aliases.post(name="lan", cidr="10.0.0.0/24", comment="the LAN")
fw.aliases.post(name="admin", cidr="10.0.0.5")
check(api.cluster.firewall.aliases("lan").get()["cidr"] == "10.0.0.0/24", "cluster alias lan")
check([a["name"] for a in fw.aliases.get()] == ["admin"], fw.aliases.get())
fw.aliases("admin").put(cidr="10.0.0.6")
check(fw.aliases("admin").get()["cidr"] == "10.0.0.6", fw.aliases("admin").get())

step = "ipset"
api.cluster.firewall.ipset.post(name="blocked", comment="bad")
api.cluster.firewall.ipset("blocked").post(cidr="192.0.2.0/24")
api.cluster.firewall.ipset("blocked").post(cidr="192.0.2.7", nomatch=1)
entries = {e["cidr"]: e for e in api.cluster.firewall.ipset("blocked").get()}
check(set(entries) == {"192.0.2.0/24", "192.0.2.7"} and entries["192.0.2.7"].get("nomatch") == 1, entries)
fw.ipset.post(name="friends")
fw.ipset("friends").post(cidr="lan")
check([e["cidr"] for e in fw.ipset("friends").get()] == ["lan"], fw.ipset("friends").get())
fw.ipset("friends")("lan").delete()
check(fw.ipset("friends").get() == [], fw.ipset("friends").get())

step = "rules"
fw.rules.post(type="in", action="ACCEPT", proto="tcp", dport="22", source="admin", enable=1)
fw.rules.post(type="in", action="DROP", source="+dc/blocked", enable=1, pos=0)
rules = fw.rules.get()
check([(r["pos"], r["action"], r.get("source")) for r in rules] ==
      [(0, "DROP", "+dc/blocked"), (1, "ACCEPT", "admin")], rules)
check(fw.rules(1).get()["dport"] == "22", fw.rules(1).get())
refs = {(r["scope"], r["ref"]) for r in fw.refs.get()}
check(refs == {("dc", "lan"), ("dc", "+blocked"), ("guest", "admin"), ("guest", "+friends")}, refs)

step = "firewall errors"
bad = "Parameter verification failed."
refused(lambda: api.cluster.firewall.aliases.post(name="lan", cidr="10.1.0.0/24"), 400, bad)
refused(lambda: fw.rules.post(type="in", action="ACCEPT", source="nosuch"), 400, bad)
refused(lambda: fw.rules.post(type="in", action="ACCEPT", dest="+nosuch"), 400, bad)
refused(lambda: api.cluster.firewall.ipset("blocked").post(cidr="192.0.2.0/24"), 400, bad)
refused(lambda: api.cluster.firewall.ipset("blocked").delete(), 500, "IPSet 'blocked' is not empty")
refused(lambda: fw.ipset("nosuch").get(), 500, "no such IPSet 'nosuch'")
refused(lambda: fw.aliases("nosuch").get(), 400, bad)
fw.aliases("admin").put(cidr="10.0.0.6", rename="admin2")
check([a["name"] for a in fw.aliases.get()] == ["admin2"], fw.aliases.get())
# Aliases.pm renames the alias only: a rule naming it keeps the old name.
check(fw.rules(1).get()["source"] == "admin", "the rule names %r after the rename" % fw.rules(1).get()["source"])
fw.aliases("admin2").put(cidr="10.0.0.6", rename="admin")

step = "power"
wait(node.lxc(101).status.stop.post())
check(node.lxc(101).status.current.get()["status"] == "stopped", "101 still running")
wait(node.lxc(101).status.start.post())
check(node.lxc(101).status.current.get()["status"] == "running", "101 not running")

step = "clone"
wait(node.lxc(102).clone.post(newid=103, hostname="db2", full=1))
check(node.lxc(103).config.get()["hostname"] == "db2", node.lxc(103).config.get())

step = "template"
node.lxc(103).template.post()
for _ in range(600):
    if node.lxc(103).config.get().get("template") == 1:
        break
    time.sleep(0.05)
check(node.lxc(103).config.get().get("template") == 1, "103 is not a template")

step = "tasks"
types = {t["type"] for t in node.tasks.get(limit=50)}
check({"vzstart", "vzstop", "vzclone"} <= types, types)

step = "cluster resources"
vms = {r["vmid"]: r for r in api.cluster.resources.get(type="vm")}
check(set(vms) == {101, 102, 103} and vms[103]["template"] == 1 and vms[101]["pool"] == "apps", vms)
print("ok")
