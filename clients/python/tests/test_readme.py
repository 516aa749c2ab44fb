"""The README's examples run as written, in order, against a real server."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from conftest import Server

README = Path(__file__).resolve().parents[1] / "README.md"


def test_readme_examples(
    own_server: Server, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    blocks = re.findall(r"^```python\n(.*?)^```$", README.read_text(), re.MULTILINE | re.DOTALL)
    assert len(blocks) == 3
    # As the README says: the server's URL and token come from the environment.
    monkeypatch.setenv("SOMNA_SERVER", own_server.url)
    monkeypatch.setenv("SOMNA_API_TOKEN", own_server.token)
    for number, block in enumerate(blocks, 1):
        exec(compile(block, f"README.md python block {number}", "exec"), {"__name__": "readme"})
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("Wren: ") and len(out[0]) > len("Wren: ")
    assert out[1] == "#0 user: I'm Aldric, the miller. My sister Marta wed today."
    assert any(line.startswith("[note, importance ") and "sister" in line for line in out)
    assert any(line.startswith("Wren: ") for line in out[2:])
    assert "% of the context window used" in out[-2]
    assert out[-1].startswith("409 agent_exists ")
