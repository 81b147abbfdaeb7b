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
import sys
from pathlib import Path

from common import print_machine, read_jsonl

_DROP = re.compile(r"(?is)<(script|style|info|credit)[^>]*>.*?</\1>")
_BLOCK_END = re.compile(r"(?i)<br\s*/?>|</(p|div|h\d|li|pre|tr|td|title|item|section|note|screen)>")
_HAN = re.compile(r"[\u4e00-\u9fff]")


def plain_text(markup: str) -> str:
    text = _BLOCK_END.sub("\n\n", _DROP.sub(" ", markup))
    text = html.unescape(re.sub(r"<[^>]+>", " ", text))
    text = re.sub(r"[ \t]+", " ", text)
    return re.sub(r"\n\s*\n\s*", "\n\n", text).strip()


SAMPLES = {  # --sample: two small files as the packages hold them, and the text each must give
    "lang/intro.html": ("<html><head><title>Intro</title><style>p {color: red}</style></head><body>"
                        "<h1>SQL As Understood By SQLite</h1><script>var x = 1;</script>"
                        "<p>SQLite understands most of the standard SQL language &amp; a few extensions."
                        "<br>It omits some features.</p></body></html>",
                        "Intro\n\nSQL As Understood By SQLite\n\nSQLite understands most of the standard SQL "
                        "language & a few extensions.\n\nIt omits some features."),
    "zh_CN/files.page": ("<page><info><credit>someone</credit></info><title>文件管理</title>"
                         "<p>您可以使用文件管理器浏览和整理计算机上的文件。</p>"
                         "<note><p>提示：按 Ctrl+F 搜索。</p></note></page>",
                         "文件管理\n\n您可以使用文件管理器浏览和整理计算机上的文件。\n\n提示：按 Ctrl+F 搜索。"),
}


def write_samples(folder: Path) -> None:
    for name, (markup, _) in SAMPLES.items():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_text(markup, encoding="utf-8")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("folder", type=Path)
    parser.add_argument("out", type=Path)
    parser.add_argument("--min-chars", type=int, default=200)
    parser.add_argument("--min-han", type=int, default=0)
    parser.add_argument("--sample", action="store_true",
                        help="first write two small sample files into FOLDER, and check the text made of them")
    args = parser.parse_args()
    if args.sample:
        write_samples(args.folder)
    print_machine()
    written = 0
    with open(args.out, "w", encoding="utf-8") as out:
        for path in sorted(p for p in args.folder.rglob("*") if p.suffix in (".html", ".htm", ".page")):
            text = plain_text(path.read_text(encoding="utf-8", errors="replace"))
            if len(text) >= args.min_chars and len(_HAN.findall(text)) >= args.min_han:
                record = {"id": str(path.relative_to(args.folder)), "text": text}
                out.write(json.dumps(record, ensure_ascii=False) + "\n")
                written += 1
    print(f"{args.out}: {written} documents")
    if args.sample:
        made = {record["id"]: record["text"] for record in read_jsonl(args.out)}
        wrong = [name for name, (_, text) in SAMPLES.items() if made.get(name) != text]
        if wrong:
            sys.exit(f"error: wrong text from {', '.join(wrong)}: {[made.get(name) for name in wrong]}")


if __name__ == "__main__":
    main()
