"""manjson.py -- every JSON example a man page shows parses, as a reader
sees it: the page rendered by `mandoc -T utf8`, not its source.

    python3 tests/manjson.py MANDOC PAGE...

A mdoc macro line swallows or moves a `"` that is not escaped (\\(dq), so
a page can print {"version":N,"deleted":"id} from a source that looks
right.  This reads the rendered text (overstrikes decoded: bold, and
underlined, which is how an argument placeholder (Ar) renders), finds
each JSON object shown (a `{` followed by `"` or `}`, with its nested
brackets, across lines in a literal display) and parses it with the
standard json module after reading the notation the pages use:

  - a placeholder (underlined, outside a string) stands for a value;
  - `...` elides members or items: [...] is a list, {...} an object;
  - "a"|"b" lists alternatives: the first is taken.

A C initializer ({"name", value}: a string then a comma) is no JSON.

Prints PASS/FAIL per example and page; exit 0 when all parsed, 1 when
one did not, 77 when no page shows any JSON (nothing was checked).
"""
import json
import re
import subprocess
import sys


def render(mandoc, page):
    """The page's text and, per character, whether it is underlined."""
    out = subprocess.run([mandoc, "-T", "utf8", page], capture_output=True,
                         check=True).stdout.decode("utf-8")
    text, under = [], []
    i = 0
    while i < len(out):
        # "_\bX": X underlined; "X\bX": X bold
        if i + 2 < len(out) and out[i + 1] == "\b":
            text.append(out[i + 2])
            under.append(out[i] == "_" and out[i + 2] != "_")
            i += 3
            continue
        text.append(out[i])
        under.append(False)
        i += 1
    return "".join(text), under


def extent(text, start):
    """The end (exclusive) of the bracketed value starting at start, or
    None when its brackets do not close before the text ends."""
    depth, in_str, i = 0, False, start
    while i < len(text):
        c = text[i]
        if in_str:
            if c == "\\":
                i += 1
            elif c == '"':
                in_str = False
        elif c == '"':
            in_str = True
        elif c in "{[":
            depth += 1
        elif c in "}]":
            depth -= 1
            if depth == 0:
                return i + 1
        i += 1
    return None


def normalize(text, under, start, end):
    """The example between start and end in plain JSON: placeholders
    become 0, elisions and alternatives go, lines are joined."""
    out, in_str, i = [], False, start
    while i < end:
        c = text[i]
        if in_str:
            if c == "\\":
                out.append(text[i:i + 2])
                i += 2
                continue
            if c == '"':
                in_str = False
            out.append(c)
        elif under[i] and c.strip():
            while i + 1 < end and under[i + 1]:
                i += 1
            out.append("0")
        elif text.startswith("...", i):
            i += 3
            continue
        elif c == "|":
            # an alternative: skip the next value (a string or a word)
            i += 1
            if i < end and text[i] == '"':
                i = text.index('"', i + 1)
            else:
                while i + 1 < end and re.match(r"[\w.-]", text[i + 1]):
                    i += 1
        else:
            if c == '"':
                in_str = True
            out.append(" " if c == "\n" else c)
        i += 1
    plain = "".join(out)
    return re.sub(r",\s*([\]}])", r"\1", plain)


def examples(text, under):
    """(line number, shown text, JSON text or None when unbalanced); an
    object inside one already given is part of it."""
    done = 0
    for m in re.finditer(r'\{\s*["}]', text):
        start = m.start()
        if start < done:
            continue
        if start > 0 and text[start - 1] in "\\\"":  # inside a C string
            continue
        end = extent(text, start)
        done = end or start + 1
        if re.match(r'\{\s*"[^"]*"\s*,', text[start:]):
            continue  # a C initializer, {"name", value}
        line = text.count("\n", 0, start) + 1
        shown = text[start:end or start + 60].replace("\n", " ")
        yield line, re.sub(r"\s+", " ", shown), (
            normalize(text, under, start, end) if end else None)


def main():
    mandoc, pages = sys.argv[1], sys.argv[2:]
    failed = checked = 0
    for page in pages:
        text, under = render(mandoc, page)
        for line, shown, plain in examples(text, under):
            checked += 1
            try:
                if plain is None:
                    raise ValueError("its brackets never close")
                json.loads(plain)
                print(f"PASS: {page}:{line}: {shown}")
            except ValueError as e:
                failed += 1
                print(f"FAIL: {page}:{line}: {shown}\n    not JSON: {e}")
    if checked == 0:
        print("SKIP: no JSON example in the pages given")
        return 77
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
