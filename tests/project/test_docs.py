"""The README is a user's guide and docs/ holds the reports: the README stays short, its figures and links are the
recorded ones, the reports' tables are what results.json holds, and no comment points a reader at something they
cannot open."""

import json
import re
from pathlib import Path

import pytest
from huggingface_hub import ModelCard, metadata_load

from explorer.views import experiment
from modeling import ScratchTransformerConfig
from checkpointing.loading import checkpoint_folders
from training.model_card import HUB_ORGANIZATION
from checkpointing.paths import REPO_ROOT, checkpoints_dir

README_MAX_LINES = 160
README = REPO_ROOT / "README.md"
DOCS = REPO_ROOT / "docs"
RESULTS = json.loads((checkpoints_dir() / "results.json").read_text())

# "issue 13", "Issue 12 §2", "issue #4", "(#13)", "DESIGN.md", "DESIGN §6": references a reader of the code cannot
# follow. A section of the paper ("paper §3.4") is one they can.
CITATION = re.compile(r"\bissues?\s*#?\d|(?<![\w\"'#])#\d{1,4}\b|(?-i:\bDESIGN\b)|(?<!paper )§", re.I)


def readme_models_table() -> dict[str, list[str]]:
    """README's models table: model name -> its cells (task, parameters, headline figure, card)."""
    section = README.read_text().split("## The models", 1)[1].split("\n## ", 1)[0]
    rows = [line.strip("|").split("|") for line in section.splitlines() if line.startswith("| `")]
    return {cells[0].strip().strip("`"): [c.strip() for c in cells[1:]] for cells in rows}


def test_readme_is_a_short_guide():
    lines = README.read_text().splitlines()
    assert len(lines) <= README_MAX_LINES, f"README.md has {len(lines)} lines; at most {README_MAX_LINES}"
    headings = [line for line in lines if line.startswith("## ")]
    assert headings == ["## Two commands", "## The app", "## The models", "## The Python API", "## A tour of the code"]


def test_readme_keeps_the_front_matter_the_space_reads():
    front = metadata_load(README)  # the YAML block the Hub reads
    assert front["sdk"] == "gradio" and front["app_file"] == "app.py"
    assert front["models"] == [f"{HUB_ORGANIZATION}/{name}" for name in
                               ["shakespeare-main", "shakespeare-sinusoidal", "shakespeare-learned", "shakespeare-rope",
                                "shakespeare-alibi", "shakespeare-none", "folio-to-modern", "timeline-repeats",
                                "timeline-plain"]]
    assert {f"{HUB_ORGANIZATION}/{folder.name}" for folder in checkpoint_folders()} == set(front["models"])


def test_readme_lists_every_shipped_model_with_its_recorded_figure_size_and_card():
    table = readme_models_table()
    assert set(table) == {folder.name for folder in checkpoint_folders()}
    for name, (task, parameters, figure, card) in table.items():
        recorded = RESULTS["models"][name]
        if "bits_per_char" in recorded:  # the recorded figure, correctly rounded to the digits shown
            shown = re.match(r"(\d\.(\d+)) bits/char(;|$)", figure)  # first; what the figure means may follow
            assert abs(float(shown[1]) - recorded["bits_per_char"]) <= 0.5 * 10 ** -len(shown[2]), name
        else:
            assert figure.startswith(f"CER {recorded['cer']:.4f}") and f"{recorded['identity_cer']:.4f}" in figure
        assert card == f"[card](checkpoints/{name}/README.md)"
        assert f"| parameters | {parameters} |" in ModelCard.load(checkpoints_dir() / name / "README.md").content


def test_every_local_link_in_the_readme_and_docs_opens():
    for page in [README, *sorted(DOCS.glob("*.md"))]:
        for target in re.findall(r"\]\(([^)#]+)\)", page.read_text()):
            if not target.startswith("http"):
                assert (page.parent / target).exists(), f"{page.name} links to {target}, which does not exist"


def test_the_encoding_report_holds_the_recorded_tables():
    """docs/position-encodings.md shows results.json's experiment as explorer.views.experiment writes it (the app's own
    tables), so a figure there cannot drift from the recorded one."""
    report = (DOCS / "position-encodings.md").read_text()
    section = RESULTS["experiment"]
    config = ScratchTransformerConfig.from_pretrained(checkpoints_dir() / "shakespeare-rope")
    assert experiment.seeds_table(section) in report
    assert experiment.separation_lines(section) in report
    assert experiment.published_table(section, RESULTS["published"], experiment.our_setup(config)) in report


@pytest.mark.parametrize("page, figures", [
    ("main-model.md", lambda r: [f"**{r['models']['shakespeare-main']['bits_per_char']:.3f}**",
                                 f"perplexity {r['models']['shakespeare-main']['perplexity']:.1f} per token"]),
    ("folio-to-modern.md", lambda r: [f"| {r['models']['folio-to-modern']['cer']:.4f} |",
                                      f"| {r['models']['folio-to-modern']['identity_cer']:.4f} |"]),
])
def test_the_model_reports_give_the_recorded_figures(page, figures):
    report = (DOCS / page).read_text()
    for figure in figures(RESULTS):
        assert figure in report, (page, figure)


def test_reproduce_holds_a_command_for_every_preset_that_made_a_shipped_model():
    commands = re.search(r"```bash\n(.*?)```", (DOCS / "reproduce.md").read_text(), flags=re.S).group(1)
    for preset in ("shakespeare-rope", "shakespeare-main", "shakespeare-main-distilled", "folio-to-modern",
                   "folio-to-modern-distilled", "timeline-repeats", "timeline-plain"):
        assert f"python -m training.train --preset {preset} " in commands, preset
    assert "python -m training.evaluate" in commands and "python -m training.model_card" in commands


def test_no_comment_or_readme_cites_an_issue_or_an_unpublished_document():
    """Every .py file of the repository but this one (which spells the pattern out), and the README. The model code
    copies in checkpoints/ equal modeling/ (tests/training/test_checkpoint_files.py), so modeling/ covers them."""
    skipped = {"data", "checkpoints", "build"}
    files = [README, *sorted(p for p in REPO_ROOT.rglob("*.py") if p != Path(__file__).resolve()
                             and not any(part in skipped or part.startswith(".") or part.endswith(".egg-info")
                                         for part in p.relative_to(REPO_ROOT).parts))]
    found = [f"{path.relative_to(REPO_ROOT)}:{number}: {line.strip()}"
             for path in files for number, line in enumerate(path.read_text().splitlines(), 1) if CITATION.search(line)]
    assert not found, "\n".join(found)


@pytest.mark.parametrize("line, cites", [
    ("# Teaching views (issue 11): attention", True), ('"""Issue 12 §2, as the probe ran it', True),
    ("(a 20x faster backward pass, DESIGN §6).", True), ("cost 20x here (DESIGN.md §6)", True), ("see #13", True),
    ("E[x] * sqrt(d_model) (paper §3.4)", False), ('color="#333333"', False), ("' the#2'", False),
    ("# 2 heads", False), ("the issue is 3 layers deep", False),
    ("A rewrite repeats its source's words by design.", False)])
def test_the_citation_pattern(line, cites):
    assert bool(CITATION.search(line)) is cites
