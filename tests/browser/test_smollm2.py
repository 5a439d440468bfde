"""The article on SmolLM2-135M-Instruct in Chromium: a run draws every section, as on the bundled model."""
from tests.browser import test_article


def test_every_section_draws_on_smollm2(page, smollm2_url):
    """The same checks as the bundled model's run (every diagram against the frames it received)."""
    test_article.test_every_section_draws_this_run(page, smollm2_url)
    assert "SmolLM2-135M-Instruct" in page.locator("#model").inner_text()
    assert "Q4_1" in page.locator("#model").inner_text()
