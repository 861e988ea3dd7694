"""The README runs as written on a fresh clone: every script it runs is shipped or written by an
earlier README line."""
from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"


def readme_shell_lines() -> list[str]:
    """The README's shell lines in reading order, the bodies of here-documents left out (they
    are a file's contents, not commands)."""
    lines, end = [], None
    for block in re.findall(r"```bash\n(.*?)```", README.read_text(), re.S):
        for line in block.splitlines():
            if end is not None:
                end = None if line.strip() == end else end
                continue
            lines.append(line)
            heredoc = re.search(r"<<-?\s*'?(\w+)'?", line)
            end = heredoc.group(1) if heredoc else None
    return lines


def test_every_script_the_readme_runs_is_shipped_or_written_before():
    written, missing = set(), []
    for line in readme_shell_lines():
        code = line.split(" #")[0]
        for script in re.findall(r"\bpython3? (\S+\.py)\b", code):
            if not (ROOT / script).is_file() and script not in written:
                missing.append(script)
        written |= set(re.findall(r"(?<![0-9<])>\s*([\w./-]+)", code))
    assert not missing, f"the README runs {missing}, neither shipped nor written by it before"
