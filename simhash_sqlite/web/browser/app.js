// The page of `simq publish`: opens an index file in SQLite compiled to WebAssembly (sqlite-simhash.wasm,
// simhash-sqlite's extension built in: wasm/build.sh) and searches it with simhash_near, as `simq near`.
"use strict";

const PATH = "/index.db";
const COLUMNS = "json_array(key, distance, printf('%!.17g', similarity), CAST(fingerprint AS TEXT), " +
  "CASE WHEN jaccard IS NULL THEN NULL ELSE printf('%!.17g', jaccard) END, checked_by, " +
  "CASE WHEN certainty IS NULL THEN NULL ELSE printf('%!.17g', certainty) END)";
const BY_TEXT = `SELECT json_group_array(${COLUMNS}) FROM simhash_near(?1, ?2, ?3)`;
// By key: the stored text where the index keeps it (so the check reads it), else the fingerprint (judged by
// distance); the key's own document left out, as `simq near --key`.
const KEY_QUERY = "SELECT json_array(text, CAST(fingerprint AS TEXT)) FROM documents WHERE key = ?1";
const BY_FINGERPRINT = `SELECT json_group_array(${COLUMNS}) FROM simhash_near(CAST(?1 AS INTEGER), ?2, ?3)`;
const TEXT_OF = "SELECT json_array(text) FROM documents WHERE key = ?1";

const $ = (id) => document.getElementById(id);
let sqlite = null;

function query(sql, text, k = 0, checked = 0) {
  const pointer = sqlite.ccall("browser_query", "number", ["string", "string", "number", "number"],
    [sql, text, k, checked]);
  const answer = sqlite.UTF8ToString(pointer);
  sqlite.ccall("browser_free", null, ["number"], [pointer]);
  const [status, ...rest] = answer.split("\n");
  const value = rest.join("\n");
  if (status !== "ok") throw new Error(value);
  return value;
}

function say(message, error = false) {
  $("status").textContent = message;
  $("status").className = error ? "error" : "";
}

async function ready() {
  if (!sqlite) sqlite = await SimhashSQLite();
  return sqlite;
}

async function openBytes(bytes, name) {
  await ready();
  try { sqlite.FS.unlink(PATH); } catch (e) { /* none yet */ }
  sqlite.FS.writeFile(PATH, bytes);
  const why = sqlite.ccall("browser_open", "string", ["string"], [PATH]);
  if (why) {
    $("go").disabled = true;
    say(`${name} cannot be opened as an index: ${why}`, true);
    return false;
  }
  const count = Number(query("SELECT count(*) FROM documents", ""));
  $("opened").textContent = `${name}: ${count.toLocaleString()} documents`;
  $("go").disabled = false;
  say("Search by a text or a stored key.");
  document.body.dataset.ready = "1";
  return true;
}

function search(by, text, k, checked) {
  if (by === "text") return { rows: JSON.parse(query(BY_TEXT, text, k, checked) || "[]"), queryText: text };
  const found = query(KEY_QUERY, text);
  if (!found) throw new Error(`no document has the key ${JSON.stringify(text)}`);
  const [stored, fingerprint] = JSON.parse(found);
  const rows = stored !== null
    ? JSON.parse(query(BY_TEXT, stored, k, checked) || "[]")
    : JSON.parse(query(BY_FINGERPRINT, fingerprint, k, checked) || "[]");
  return { rows: rows.filter((row) => row[0] !== text), queryText: stored };
}

function cell(row, value, numeric = false) {
  const td = document.createElement("td");
  td.textContent = value === null ? "" : value;
  if (numeric) td.className = "n";
  row.appendChild(td);
}

function show(rows, queryText) {
  const body = $("results").querySelector("tbody");
  body.replaceChildren();
  const fixed = (v, places) => (v === null ? null : Number(v).toFixed(places));
  for (const r of rows) {
    const [key, distance, similarity, fingerprint, jaccard, checkedBy, certainty] = r;
    const tr = document.createElement("tr");
    tr.className = "row";
    tr.dataset.key = key;
    cell(tr, key);
    cell(tr, distance, true);
    cell(tr, fixed(similarity, 4), true);
    cell(tr, fixed(jaccard, 4), true);
    cell(tr, checkedBy);
    cell(tr, fixed(certainty, 4), true);
    cell(tr, BigInt.asUintN(64, BigInt(fingerprint)).toString(16).padStart(16, "0"));
    tr.addEventListener("click", () => showPair(r, queryText, tr));
    body.appendChild(tr);
  }
  $("results").hidden = false;
}

function showPair(row, queryText, tr) {
  for (const other of document.querySelectorAll("tr.chosen")) other.classList.remove("chosen");
  tr.classList.add("chosen");
  const [key, distance, , , jaccard, checkedBy, certainty] = row;
  const stored = JSON.parse(query(TEXT_OF, key) || "[null]")[0];
  $("pair-key").textContent = key;
  $("pair-query").textContent = queryText === null ? "(the query's text is not stored in this index)" : queryText;
  $("pair-text").textContent = stored === null ? "(this index does not store texts: simq add --store-text)" : stored;
  const judged = checkedBy ? `, checked by ${checkedBy}` + (certainty === null ? "" : ` (certainty ${Number(certainty).toFixed(4)})`) : "";
  $("pair-about").textContent = `distance ${distance}` + (jaccard === null ? "" : `, Jaccard ${Number(jaccard).toFixed(4)}`) + judged;
  $("pair").hidden = false;
}

$("file").addEventListener("change", async (event) => {
  const file = event.target.files[0];
  if (!file) return;
  say(`Reading ${file.name}...`);
  await openBytes(new Uint8Array(await file.arrayBuffer()), file.name);
});

$("search").addEventListener("submit", (event) => {
  event.preventDefault();
  const by = new FormData($("search")).get("by");
  const text = $("query").value;
  const k = Number($("k").value);
  if (!Number.isInteger(k) || k < 0 || k > 64) {
    say("k must be a whole number from 0 to 64", true);
    return;
  }
  const started = performance.now();
  try {
    const { rows, queryText } = search(by, text, k, $("checked").checked ? 1 : 0);
    const ms = performance.now() - started;
    show(rows, queryText);
    $("pair").hidden = true;
    say(`${rows.length} match${rows.length === 1 ? "" : "es"} within ${k} (${ms.toFixed(0)} ms)`);
    document.body.dataset.searchMs = ms.toFixed(1);
  } catch (e) {
    $("results").hidden = true;
    say(`error: ${e.message}`, true);
  }
});

// A published page (simq publish) names its index in index.json beside it: opened at once where the page
// is served over HTTP; from a file:// page, open it with the file button.
(async () => {
  try {
    const about = await (await fetch("index.json")).json();
    const response = await fetch(about.index);
    if (response.ok) await openBytes(new Uint8Array(await response.arrayBuffer()), about.index);
  } catch (e) { /* no published index: the file button */ }
})();
