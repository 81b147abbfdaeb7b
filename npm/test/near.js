// The Node host of tests/test_hosts.py: `node test/near.js DRIVER INDEX < cases.json` prints, for each case
// ({query: text or {fingerprint: "<signed int64>"}, k, checked}), the rows of simhash_near as JSON, the
// integers that may pass 2^53 as strings. DRIVER: better-sqlite3 (found through NODE_PATH) or node:sqlite.
"use strict";
// SIMHASH_SQLITE_NPM: the package to test (an installed tarball's folder); this checkout's npm/ by default
const simhash = require(process.env.SIMHASH_SQLITE_NPM || "..");

const [driver, index] = process.argv.slice(2);
const cases = JSON.parse(require("fs").readFileSync(0, "utf8"));
const SQL = "SELECT key, distance, similarity, fingerprint, jaccard, checked_by, certainty FROM simhash_near(?, ?, ?)";

function argument(query) {
  return typeof query === "string" ? query : BigInt(query.fingerprint);
}

let rowsOf;
if (driver === "better-sqlite3") {
  const Database = require("better-sqlite3");
  const db = new Database(index, { readonly: true });
  simhash.load(db);
  const near = db.prepare(SQL).raw(true).safeIntegers(true);
  // JS numbers bind as SQL reals: k and checked as BigInt (integers)
  rowsOf = (c) => near.all(argument(c.query), BigInt(c.k), BigInt(c.checked));
} else if (driver === "node:sqlite") {
  const { DatabaseSync } = require("node:sqlite");
  const db = new DatabaseSync(index, { readOnly: true, allowExtension: true });
  simhash.load(db);
  const near = db.prepare(SQL);
  near.setReadBigInts(true);
  rowsOf = (c) => near.all(argument(c.query), BigInt(c.k), BigInt(c.checked)).map((row) => Object.values(row));
} else {
  throw new Error(`unknown driver ${driver}`);
}
const out = cases.map((c) => rowsOf(c).map((row) => row.map((v) => (typeof v === "bigint" ? v.toString() : v))));
process.stdout.write(JSON.stringify(out) + "\n");
