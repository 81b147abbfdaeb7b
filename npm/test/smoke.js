// npm test: the package's library loads into better-sqlite3 (and node:sqlite where this Node has it) and
// gives docs/sql.md's results. tests/test_hosts.py runs the full table of searches against the Python package.
"use strict";
const assert = require("assert");
const simhash = require("..");

const checks = [
  ["SELECT simhash_hex(simhash('hello world')) AS v", "535e078da051fa3c"],
  ["SELECT hamming(-1, 0) AS v", 64],
  ["SELECT count(*) AS v FROM pragma_module_list WHERE name = 'simhash_near'", 1],
];
let hosts = 0;
try {
  const Database = require("better-sqlite3");
  const db = new Database(":memory:");
  simhash.load(db);
  for (const [sql, want] of checks) assert.strictEqual(db.prepare(sql).get().v, want, sql);
  hosts++;
  console.log("better-sqlite3: ok");
} catch (e) {
  if (e.code !== "MODULE_NOT_FOUND") throw e;
  console.log("better-sqlite3: not installed (npm install better-sqlite3@12), skipped");
}
let sqlite;
try {
  sqlite = require("node:sqlite");
} catch (e) {
  console.log(`node:sqlite: not in Node ${process.version}, skipped`);
}
if (sqlite) {
  const db = new sqlite.DatabaseSync(":memory:", { allowExtension: true });
  simhash.load(db);
  for (const [sql, want] of checks) assert.strictEqual(db.prepare(sql).get().v, want, sql);
  hosts++;
  console.log("node:sqlite: ok");
}
console.log(`${simhash.getLoadablePath()}: ${hosts} host(s) checked`);
