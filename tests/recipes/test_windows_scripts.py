"""Batch-file rules for the Windows build scripts under recipes/ (none of them has run on Windows here,
so what cmd.exe would trip over is checked by reading them).

cmd.exe reads a parenthesized block (`if ... (`, `for ... do (`, `else (`) as one command; a line that
starts with `:` inside it is a label, and `::` "comments" there can be misread: two in a row make cmd
run the second as a command ("The system cannot find the drive specified"), one before `)` breaks the
block. Comments inside blocks must be `rem`."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

RECIPES = Path(__file__).resolve().parents[2] / "recipes"
BATCH_FILES = sorted(p for pattern in ("*.bat", "*.cmd") for p in RECIPES.rglob(pattern))
_REM = re.compile(r"@?rem(\s|$|[.:/\\])", re.I)


def labels_inside_blocks(text: str) -> list[tuple[int, str]]:
    """(line number, line) of each line starting with `:` (a `::` comment or a label) while a
    parenthesis opened outside quotes is still open. `rem` lines, labels and `::` lines do not
    change the depth (cmd does not parse them for parentheses); `^` escapes the next character and
    `"` toggles quoting within a line."""
    found = []
    depth = 0
    for number, line in enumerate(text.splitlines(), 1):
        stripped = line.strip()
        if stripped.startswith(":"):
            if depth > 0:
                found.append((number, line))
            continue
        if _REM.match(stripped):
            continue
        quoted = False
        escaped = False
        for char in stripped:
            if escaped:
                escaped = False
            elif char == '"':
                quoted = not quoted
            elif quoted:
                continue
            elif char == "^":
                escaped = True
            elif char == "(":
                depth += 1
            elif char == ")":
                depth = max(depth - 1, 0)
    return found


def test_there_are_batch_files_to_check():
    assert RECIPES / "pointops" / "build.bat" in BATCH_FILES


@pytest.mark.parametrize("path", BATCH_FILES, ids=lambda p: str(p.relative_to(RECIPES)))
def test_no_colon_comments_inside_parenthesized_blocks(path):
    bad = labels_inside_blocks(path.read_text())
    assert not bad, f"{path.relative_to(RECIPES)}: use `rem`, not `::`, inside ( ) blocks: " + "; ".join(
        f"line {n}: {line.strip()}" for n, line in bad
    )


# build.bat's CUDA block as it stood before the comments became `rem` (trimmed)
_BEFORE = """\
:: a comment outside any block is fine
if "%POINTOPS_CUDA%"=="1" (
    :: nvcc runs from the build prefix; the static CUDA runtime (cudart_static.lib, from
    :: cuda-cudart-dev's dependencies) is linked from the host prefix.
    set "CUDA_HOME=%BUILD_PREFIX%\\Library"
    :: The arch list from ops-src's arch table (build.sh says why it is set explicitly).
    set /p TORCH_CUDA_ARCH_LIST=<arch_list.txt
)
:: after the block
"""


def test_the_old_cuda_block_is_caught():
    assert [n for n, _ in labels_inside_blocks(_BEFORE)] == [3, 4, 6]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        pytest.param(
            "if a (\n  rem fine (even with parentheses)\n  echo x\n)\n:: after\n", [], id="rem-in-block"
        ),
        pytest.param('echo "(" unbalanced in quotes\n:: not in a block\n', [], id="quoted-paren"),
        pytest.param("echo ^( escaped\n:: not in a block\n", [], id="escaped-paren"),
        pytest.param("rem (an open paren in a comment\n:: not in a block\n", [], id="paren-in-rem"),
        pytest.param("for /d %%D in (*) do (\n  :label\n)\n", [2], id="label-in-for-block"),
        pytest.param("if a (\n  echo x\n) else (\n  :: no\n)\n", [4], id="else-block"),
        pytest.param("if a (\n  if b (\n    echo x\n  )\n  :: still inside\n)\n", [5], id="nested"),
        pytest.param("if a (echo x)\n:: after a one-line block\n", [], id="one-line-block"),
    ],
)
def test_the_scanner(text, expected):
    assert [n for n, _ in labels_inside_blocks(text)] == expected
