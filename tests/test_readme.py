"""The README stays a newcomer's page (issue 44): at most 200 lines, the two commands first, links that resolve."""

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text(encoding="utf-8")


def test_the_readme_is_at_most_200_lines() -> None:
    assert len(README.splitlines()) <= 200, "move detail to docs/*.md (figures to docs/performance.md)"


def test_the_readme_starts_with_the_two_commands() -> None:
    lines = README.splitlines()
    first_block = README.split("```", 2)[1]  # the first code block
    assert lines.index("```sh") < 5, "the two commands come right after the title"
    assert [line.split()[:2] for line in first_block.splitlines()[1:]] == [["make", "demo"], ["make", "test"]]


def test_every_link_of_the_readme_names_a_file_and_heading_that_exist() -> None:
    for target in re.findall(r"\]\(([^)#]+)(#[^)]*)?\)", README):
        path, anchor = target
        page = ROOT / path
        assert page.is_file(), path
        if anchor:
            headings = [h.strip() for h in re.findall(r"^#+ (.*)$", page.read_text(encoding="utf-8"), re.M)]
            slugs = {re.sub(r"[^\w\- ]", "", h.lower()).replace(" ", "-") for h in headings}
            assert anchor[1:] in slugs, f"{path}{anchor}"
