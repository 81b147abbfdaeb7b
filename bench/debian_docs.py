"""Plain-text JSONL from the HTML or Mallard (.page) files of an unpacked Debian doc package.

    apt-get download sqlite3-doc gnome-user-docs && dpkg -x sqlite3-doc_*.deb x && dpkg -x gnome-user-docs_*.deb g
    .venv/bin/python bench/debian_docs.py x/usr/share/doc/sqlite3 held_en.jsonl
    .venv/bin/python bench/debian_docs.py g/usr/share/help/zh_CN held_zh.jsonl --min-han 50

One document per file ({"id": path under the folder, "text"}), markup stripped crudely (script and
style dropped, block ends made paragraph breaks, entities decoded): text as noisy as real input is.
Files with under --min-chars characters, or under --min-han Chinese characters, are left out.
"""

from __future__ import annotations

import argparse
import html
import json
import re
from pathlib import Path

_DROP = re.compile(r"(?is)<(script|style|info|credit)[^>]*>.*?</\1>")
_BLOCK_END = re.compile(r"(?i)<br\s*/?>|</(p|div|h\d|li|pre|tr|td|title|item|section|note|screen)>")
_HAN = re.compile(r"[\u4e00-\u9fff]")


def plain_text(markup: str) -> str:
    text = _BLOCK_END.sub("\n\n", _DROP.sub(" ", markup))
    text = html.unescape(re.sub(r"<[^>]+>", " ", text))
    text = re.sub(r"[ \t]+", " ", text)
    return re.sub(r"\n\s*\n\s*", "\n\n", text).strip()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("folder", type=Path)
    parser.add_argument("out", type=Path)
    parser.add_argument("--min-chars", type=int, default=200)
    parser.add_argument("--min-han", type=int, default=0)
    args = parser.parse_args()
    written = 0
    with open(args.out, "w", encoding="utf-8") as out:
        for path in sorted(p for p in args.folder.rglob("*") if p.suffix in (".html", ".htm", ".page")):
            text = plain_text(path.read_text(encoding="utf-8", errors="replace"))
            if len(text) >= args.min_chars and len(_HAN.findall(text)) >= args.min_han:
                record = {"id": str(path.relative_to(args.folder)), "text": text}
                out.write(json.dumps(record, ensure_ascii=False) + "\n")
                written += 1
    print(f"{args.out}: {written} documents")


if __name__ == "__main__":
    main()
