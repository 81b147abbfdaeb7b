// simhash-sqlite's SQLite extension for Node: the path of the library `npm install` compiled, and a
// one-line load into a better-sqlite3 or node:sqlite database (as sqlite-vec's `load(db)`).
//
//     const Database = require("better-sqlite3");
//     const simhash = require("simhash-sqlite");
//     const db = new Database("corpus.db", { readonly: true });
//     simhash.load(db);
//     db.prepare("SELECT key, distance FROM simhash_near(?, 7)").all("some text");
"use strict";
const fs = require("fs");
const path = require("path");

const SUFFIX = { darwin: ".dylib", win32: ".dll" }[process.platform] || ".so";
const ENTRY_POINT = "sqlite3_simhash_init";

function getLoadablePath() {
  const file = path.join(__dirname, "build", "Release", "simhash" + SUFFIX);
  if (!fs.existsSync(file)) {
    throw new Error(`simhash-sqlite: the extension is not built (${file} is missing): ` +
      "reinstall the package where node-gyp can compile C (a C compiler and Python 3)");
  }
  return file;
}

function load(db) {
  const file = getLoadablePath();
  if (typeof db.loadExtension !== "function") {
    throw new TypeError("simhash-sqlite: load(db) takes a better-sqlite3 Database or a node:sqlite DatabaseSync");
  }
  if (db.constructor && db.constructor.name === "DatabaseSync") {
    // node:sqlite: opened with { allowExtension: true }; loading is switched on for this call only
    db.enableLoadExtension(true);
    try {
      db.loadExtension(file, ENTRY_POINT);
    } finally {
      db.enableLoadExtension(false);
    }
    return;
  }
  db.loadExtension(file, ENTRY_POINT);
}

module.exports = { getLoadablePath, load, ENTRY_POINT };
