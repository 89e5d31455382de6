// The npm proxmox-api package (1.1.1) against the emulator.
//
// The test (internal/sim/thirdparty_npm_test.go) installs the package
// (package.json, package-lock.json beside this file) into a cache outside
// the repository, runs this with NODE_PATH there, and sets PVE_HOST,
// PVE_PORT, PVE_USER, PVE_TOKEN_ID, PVE_TOKEN_SECRET, PVE_ROOT_PASSWORD
// and NODE_EXTRA_CA_CERTS (the emulator's certificate, which is checked).
// Each step asserts what PVE answers; the first deviation exits non-zero
// naming the step.
"use strict";
const { proxmoxApi } = require("proxmox-api");

const env = process.env;
let step = "start";

function check(cond, what) {
  if (!cond) {
    console.error(`step ${step}: ${typeof what === "string" ? what : JSON.stringify(what)}`);
    process.exit(1);
  }
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

// wait polls a task's status until it stops, as clients do.
async function wait(node, upid) {
  check(typeof upid === "string" && upid.startsWith("UPID:"), `not a UPID: ${upid}`);
  for (let i = 0; i < 600; i++) {
    const st = await node.tasks.$(upid).status.$get();
    if (st.status === "stopped") {
      check(st.exitstatus === "OK", `task ${upid} ended ${st.exitstatus}`);
      return st;
    }
    await sleep(50);
  }
  check(false, `task ${upid} still running`);
}

async function main() {
  const api = proxmoxApi({ host: env.PVE_HOST, port: Number(env.PVE_PORT),
    tokenID: `${env.PVE_USER}!${env.PVE_TOKEN_ID}`, tokenSecret: env.PVE_TOKEN_SECRET });
  const node = api.nodes.$(env.PVE_NODE);

  step = "version";
  const v = await api.version.$get();
  check(/^[89]\./.test(v.version) && v.release, v);

  step = "nodes";
  const nodes = await api.nodes.$get();
  check(nodes.length === 1 && nodes[0].node === env.PVE_NODE && nodes[0].status === "online", nodes);

  step = "containers";
  const cts = (await node.lxc.$get()).sort((a, b) => a.vmid - b.vmid);
  check(cts.map((c) => `${c.vmid}:${c.name}:${c.status}`).join(" ") === "101:web1:running 102:db1:stopped", cts);
  const conf = await node.lxc.$(101).config.$get();
  check(conf.hostname === "web1" && conf.tags === "prod;web" && conf.memory === 256, conf);

  step = "pools";
  const pool = await api.pools.$("apps").$get();
  check(pool.members.length === 1 && pool.members[0].vmid === 101, pool);

  step = "users and roles";
  const users = await api.access.users.$get();
  check(users.some((u) => u.userid === "root@pam") && users.every((u) => !("groups" in u)), users);
  const full = await api.access.users.$get({ full: true });
  check(full.find((u) => u.userid === "root@pam").tokens.some((t) => t.tokenid === env.PVE_TOKEN_ID), full);
  const role = await api.access.roles.$("PVEVMUser").$get();
  check(role["VM.PowerMgmt"] === 1, role);

  step = "firewall";
  const fw = node.lxc.$(101).firewall;
  await api.cluster.firewall.aliases.$post({ name: "office", cidr: "198.51.100.0/24" });
  await fw.ipset.$post({ name: "web_clients", comment: "who may connect" });
  await fw.ipset.$("web_clients").$post({ cidr: "office" });
  await fw.ipset.$("web_clients").$post({ cidr: "203.0.113.9/32" });
  const set = (await fw.ipset.$("web_clients").$get()).map((e) => e.cidr).sort();
  check(set.join(" ") === "203.0.113.9 office", set);
  // A CIDR in the path: the package escapes its "/" as %2F.
  await fw.ipset.$("web_clients").$post({ cidr: "198.51.100.0/25", nomatch: true });
  const entry = await fw.ipset.$("web_clients").$("198.51.100.0/25").$get();
  check(entry.cidr === "198.51.100.0/25" && entry.nomatch === 1 && entry.digest, entry);
  await fw.ipset.$("web_clients").$("198.51.100.0/25").$put({ comment: "not these", digest: entry.digest });
  check((await fw.ipset.$("web_clients").$("198.51.100.0/25").$get()).comment === "not these", "entry comment");
  await fw.ipset.$("web_clients").$("198.51.100.0/25").$delete();
  await fw.rules.$post({ type: "in", action: "ACCEPT", macro: "HTTP", source: "+web_clients", enable: 1 });
  const rules = await fw.rules.$get();
  check(rules.length === 1 && rules[0].macro === "HTTP" && rules[0].source === "+web_clients", rules);
  const aliases = await api.cluster.firewall.aliases.$get();
  check(aliases.length === 1 && aliases[0].name === "office" && aliases[0].digest, aliases);
  await fw.options.$put({ enable: true });
  check((await fw.options.$get()).enable === 1, "firewall not enabled");

  step = "power";
  await wait(node, await node.lxc.$(102).status.start.$post());
  check((await node.lxc.$(102).status.current.$get()).status === "running", "102 not running");
  await wait(node, await node.lxc.$(102).status.shutdown.$post({ timeout: 10 }));
  check((await node.lxc.$(102).status.current.$get()).status === "stopped", "102 still running");

  step = "clone and template";
  await wait(node, await node.lxc.$(102).clone.$post({ newid: 104, hostname: "db3", full: true, pool: "apps" }));
  await node.lxc.$(104).template.$post();
  for (let i = 0; i < 600 && (await node.lxc.$(104).config.$get()).template !== 1; i++) await sleep(50);
  check((await node.lxc.$(104).config.$get()).template === 1, "104 is not a template");

  step = "cluster resources";
  const res = await api.cluster.resources.$get({ type: "vm" });
  const byID = Object.fromEntries(res.map((r) => [r.vmid, r]));
  check(byID[104] && byID[104].template === 1 && byID[104].pool === "apps" && byID[101].status === "running", res);

  step = "password login";
  // A ticket and its CSRF token, as the package logs in with a password.
  const byPassword = proxmoxApi({ host: env.PVE_HOST, port: Number(env.PVE_PORT),
    username: "root@pam", password: env.PVE_ROOT_PASSWORD });
  await byPassword.pools.$post({ poolid: "by_ticket" });
  check((await byPassword.pools.$get()).some((p) => p.poolid === "by_ticket"), "pool by_ticket missing");

  console.log("ok");
}

main().catch((e) => {
  console.error(`step ${step}: ${e.message}${e.cause ? ` (${e.cause.message || e.cause})` : ""}`);
  process.exit(1);
});
