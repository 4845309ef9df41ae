"""The ctypes mirrors (ratelimit/_abi.py) against the C layouts: every
struct's size and every member's offset and size as a C program compiled
against include/ratelimit.h reports them (abi_layout.c), and the
constants and error codes the binding copies.  make check builds the
program and names it in RATELIMIT_ABI_LAYOUT; run by hand, the test
compiles it with cc.
"""
import ctypes
import os
import shutil
import subprocess

import pytest

from ratelimit import ErrorCode, _abi

HERE = os.path.dirname(os.path.abspath(__file__))
TOP = os.path.normpath(os.path.join(HERE, "..", "..", ".."))


@pytest.fixture(scope="module")
def layout(tmp_path_factory):
    prog = os.environ.get("RATELIMIT_ABI_LAYOUT")
    if not prog:
        cc = shutil.which(os.environ.get("CC", "cc"))
        if cc is None:
            pytest.skip("no RATELIMIT_ABI_LAYOUT and no C compiler")
        prog = str(tmp_path_factory.mktemp("abi") / "abi_layout")
        subprocess.run([cc, "-std=c11", "-I", os.path.join(TOP, "include"),
                        os.path.join(HERE, "abi_layout.c"), "-o", prog],
                       check=True)
    out = subprocess.run([prog], check=True, capture_output=True,
                         text=True).stdout
    table = {}
    for line in out.splitlines():
        name, *numbers = line.split()
        table[name] = tuple(int(n) for n in numbers)
    return table


def test_every_struct_and_member_matches(layout):
    checked = 0
    for cname, cls in _abi.STRUCTS.items():
        assert (ctypes.sizeof(cls),) == layout[cname], cname
        members = {k.split(".", 1)[1] for k in layout
                   if k.startswith(cname + ".")}
        assert members == {f for f, _ in cls._fields_}, cname
        for field, _ in cls._fields_:
            desc = getattr(cls, field)
            assert (desc.offset, desc.size) == layout[f"{cname}.{field}"], \
                f"{cname}.{field}"
            checked += 1
    assert checked == sum(1 for k in layout if "." in k)


def test_constants_and_codes_match(layout):
    for name in ("RL_HEADERS_MAX", "RL_HEADERS_FORMAT_MAX",
                 "RL_BODY_FORMAT_MAX", "RL_HEADERS_IETF", "RL_HEADERS_DRAFT10",
                 "RL_COST_MAX"):
        assert (getattr(_abi, name),) == layout[name], name
    for code in ErrorCode:
        assert (int(code),) == layout[code.name], code.name
