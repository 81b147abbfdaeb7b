/** The path of the SQLite loadable extension this package compiled at install. */
export declare function getLoadablePath(): string;
/** Load the extension into a better-sqlite3 Database or a node:sqlite DatabaseSync
 * (opened with `{ allowExtension: true }`). */
export declare function load(db: { loadExtension(file: string, entryPoint?: string): unknown }): void;
/** The extension's entry point, `sqlite3_simhash_init`. */
export declare const ENTRY_POINT: string;
