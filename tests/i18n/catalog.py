"""A gettext catalogue read without gettext's tools: the .po's entries and the .mo's messages.

Enough of the formats for the completeness test: msgctxt, msgid, msgid_plural, msgstr[n], flags
and obsolete (#~) entries in the .po; the original/translation tables of a GNU .mo file.
"""
import ast
import re
import struct
from dataclasses import dataclass, field
from pathlib import Path

_KEYWORD = re.compile(r"^(msgctxt|msgid_plural|msgid|msgstr(?:\[\d+\])?)\s+(\".*\")$")


@dataclass
class Entry:
    msgid: str = ""
    msgctxt: str | None = None
    msgid_plural: str | None = None
    msgstr: dict[int, str] = field(default_factory=dict)
    flags: set[str] = field(default_factory=set)

    @property
    def key(self) -> str:
        """The .mo's key: context EOT msgid, then NUL and the plural when there is one."""
        key = f"{self.msgctxt}\x04{self.msgid}" if self.msgctxt is not None else self.msgid
        return f"{key}\x00{self.msgid_plural}" if self.msgid_plural is not None else key

    @property
    def translation(self) -> str:
        return "\x00".join(self.msgstr[i] for i in sorted(self.msgstr))


def po_entries(path: Path) -> list[Entry]:
    """The translatable entries of a .po file (the header and obsolete entries left out)."""
    entries, current, last = [], Entry(), None
    for line in path.read_text(encoding="utf-8").splitlines() + [""]:
        line = line.strip()
        if not line:
            if last is not None and current.msgid:
                entries.append(current)
            current, last = Entry(), None
        elif line.startswith("#,"):
            current.flags |= {flag.strip() for flag in line[2:].split(",")}
        elif line.startswith("#"):
            continue
        elif line.startswith('"'):
            _append(current, last, ast.literal_eval(line))
        else:
            match = _KEYWORD.match(line)
            if not match:
                raise ValueError(f"{path}: cannot read {line!r}")
            last = match.group(1)
            _append(current, last, ast.literal_eval(match.group(2)), start=True)
    return entries


def _append(entry: Entry, keyword: str, text: str, *, start: bool = False) -> None:
    if keyword.startswith("msgstr"):
        index = int(keyword[7:-1]) if "[" in keyword else 0
        entry.msgstr[index] = ("" if start else entry.msgstr.get(index, "")) + text
    else:
        attribute = keyword
        setattr(entry, attribute, ("" if start else getattr(entry, attribute) or "") + text)


def mo_messages(path: Path) -> dict[str, str]:
    """{key: translation} of a GNU .mo file (keys as Entry.key), the header ("" key) included."""
    data = path.read_bytes()
    magic = struct.unpack("<I", data[:4])[0]
    order = "<" if magic == 0x950412DE else ">"
    _revision, count, originals, translations = struct.unpack(order + "4I", data[4:20])

    def table(offset: int, index: int) -> str:
        length, start = struct.unpack(order + "2I", data[offset + 8 * index: offset + 8 * index + 8])
        return data[start:start + length].decode("utf-8")

    return {table(originals, i): table(translations, i) for i in range(count)}
