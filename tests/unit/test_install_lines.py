"""Every install line a user can paste works where they stand: from a checkout or from the built wheel.

tablesdk is not published, so a line asking pip for ``tablesdk[extra]`` by name fails; the
library's own hints (a missing extra) name the packages, which is true however it was installed.
"""

from __future__ import annotations

import configparser
import re
from pathlib import Path

from tablesdk._core._extras import EXTRAS, install_hint
from tablesdk._version import __version__

ROOT = Path(__file__).resolve().parents[2]
#: ``tablesdk[cli]`` not preceded by a path or a wheel file name: a package name on an index.
BY_NAME = re.compile(r"""(?<![-/.\w])tablesdk\[""")


def user_facing_files() -> list[Path]:
    return [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")), *sorted((ROOT / "tablesdk").rglob("*.py"))]


def test_no_install_line_asks_an_index_for_tablesdk() -> None:
    found = [
        f"{path.relative_to(ROOT)}:{number}: {line.strip()}"
        for path in user_facing_files()
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if BY_NAME.search(line)
    ]
    assert found == []


def test_the_extras_of_the_hints_are_those_of_setup_cfg() -> None:
    config = configparser.ConfigParser()
    config.read(ROOT / "setup.cfg")
    declared = config["options.extras_require"]
    for extra, packages in EXTRAS.items():
        assert tuple(declared[extra].split()) == packages
        assert set(packages) <= set(declared["dev"].split())  # the dev venv has every extra


def test_the_hint_names_the_packages_the_checkout_and_the_wheel() -> None:
    hint = install_hint("cli")
    assert hint.startswith("pip install 'click>=8.1' 'rich>=13'")
    assert "pip install '.[cli]'" in hint
    assert f"tablesdk-{__version__}-py3-none-any.whl[cli]" in hint


def test_the_documented_wheel_name_is_this_version() -> None:
    wheel = f"tablesdk-{__version__}-py3-none-any.whl"
    for path in (ROOT / "README.md", ROOT / "docs" / "async.md", ROOT / "docs" / "cli.md"):
        names = set(re.findall(r"tablesdk-[\w.]+-py3-none-any\.whl", path.read_text(encoding="utf-8")))
        assert names == {wheel}, path


def test_ci_runs_the_wheel_check_after_the_tests() -> None:
    import subprocess

    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    assert "bash scripts/test.sh" in ci and "bash scripts/wheel-check.sh" in ci
    assert ci.index("scripts/test.sh ||") < ci.index("scripts/wheel-check.sh ||")  # both run, whatever the first gave
    script = ROOT / "scripts" / "wheel-check.sh"
    subprocess.run(["bash", "-n", str(script)], check=True)
    text = script.read_text(encoding="utf-8")
    for step in ("-m build", "twine check", "-m venv", "--help", "samples/microblog.py"):
        assert step in text
    config = configparser.ConfigParser()
    config.read(ROOT / "setup.cfg")
    dev = {requirement.split(">")[0] for requirement in config["options.extras_require"]["dev"].split()}
    assert {"build", "twine"} <= dev
